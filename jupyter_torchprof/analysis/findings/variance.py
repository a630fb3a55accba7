"""Rule 7: read the trace, not the mean.

Kernel variance: calls of one kernel with the same launch configuration
(grid and block) do the same amount of work, so a max far above their median
is time lost to something else (contention with another stream, throttling,
a cold cache), and the mean hides it.

Cold start: the first profiled step far slower than the others still pays
for warming up (lazy init, autotuning, allocator growth, compilation).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...format import fmt_time
from ...trace import categories as K
from ..names import describe_kernel
from .model import INFO, MEDIUM, Finding, Inputs, limit_rows
from .thresholds import Thresholds


def find_kernel_variance(inp: Inputs, th: Thresholds) -> list[Finding]:
    """Kernels whose slowest call is far above the median of identical launches."""
    if not inp.device_traced:
        return []
    rows = _kernel_rows(inp)
    if len(rows) < th.variance_min_calls:
        return []
    ev = inp.events
    has_grid = bool(ev["grid"].iloc[rows].notna().any()) if "grid" in ev else False
    grid, grid_labels = _launch_codes(ev, "grid", rows, has_grid)
    block, block_labels = _launch_codes(ev, "block", rows, has_grid)
    dur = inp.dur[rows]
    if np.isnan(dur).any():  # as the frame's fillna("") did (the median then fails: "not checked")
        dur = np.where(np.isnan(dur), "", dur.astype(object))
    # Grouped by integer codes (a bijection with the labels, so the same
    # groups in the same order), not by strings made for every kernel row.
    frame = pd.DataFrame(
        {"row": rows, "name": inp.name_codes[rows], "grid": grid, "block": block, "dur": dur}
    )
    stats = _spread_launches(frame, th)
    if stats.empty:
        return []
    return [
        _variance_finding(inp, th, frame, has_grid, (code, g, b), r, (grid_labels[g], block_labels[b]))
        for (code, g, b), r in stats.head(th.variance_reported).iterrows()
    ]


def _launch_codes(
    ev: pd.DataFrame, col: str, rows: np.ndarray, has_grid: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(code per row, label per code) of the ``grid`` or ``block`` of ``rows``; a missing value reads "".

    Without launch sizes every row has code 0, label "".
    """
    if not has_grid:
        return np.zeros(len(rows), dtype=np.int64), np.array([""], dtype=object)
    values = ev[col]
    if isinstance(values.dtype, pd.CategoricalDtype):
        codes = values.cat.codes.to_numpy()[rows].astype(np.int64)
        labels = values.cat.categories.to_numpy(dtype=object)
    else:
        codes, labels = pd.factorize(values.iloc[rows].astype(object))
        codes, labels = codes.astype(np.int64), np.asarray(labels, dtype=object)
    # Missing and "" were one value after fillna(""): give them one code.
    empty = np.flatnonzero(labels == "")
    codes[codes < 0] = int(empty[0]) if len(empty) else len(labels)
    return codes, np.append(labels, np.array([""], dtype=object))


def _kernel_rows(inp: Inputs) -> np.ndarray:
    """The kernels the steps launched, collectives left out.

    A collective's time is mostly waiting for the other ranks, so its spread
    says nothing about the kernel; rule 9 looks at it instead.
    """
    rows = np.flatnonzero(inp.is_kind(K.KERNEL))
    if inp.has_steps and len(rows):
        rows = rows[inp.launched_in_steps(rows)]
    return rows[~inp.name_flags(rows, lambda name: describe_kernel(name).family == "communication")]


def _spread_launches(frame: pd.DataFrame, th: Thresholds) -> pd.DataFrame:
    """Per (kernel, grid, block) with a max far above its median: ``size, median, max, excess``.

    ``excess`` is the time the calls spent above the median, most first.
    """
    g = frame.groupby(["name", "grid", "block"], sort=False)["dur"]
    stats = g.agg(["size", "median", "max"])
    stats = stats[
        (stats["size"] >= th.variance_min_calls)
        & (stats["max"] >= th.variance_max_over_median * stats["median"])
        & (stats["max"] - stats["median"] >= th.variance_min_spread_us)
    ]
    if stats.empty:
        return stats
    over = frame.assign(excess=np.maximum(frame["dur"] - g.transform("median"), 0.0))
    excess = over.groupby(["name", "grid", "block"], sort=False)["excess"].sum()
    return stats.assign(excess=excess.reindex(stats.index)).sort_values("excess", ascending=False)


def _variance_finding(
    inp: Inputs,
    th: Thresholds,
    frame: pd.DataFrame,
    has_grid: bool,
    key: tuple[Any, ...],
    r: pd.Series,
    sizes: tuple[str, str],
) -> Finding:
    """The finding of one (kernel, grid, block) launch whose `_spread_launches` row is ``r`` (``sizes``: its grid and block)."""
    code, grid_code, block_code = key
    members = frame[(frame["name"] == code) & (frame["grid"] == grid_code) & (frame["block"] == block_code)]
    grid, block = sizes
    name = inp.name_of_code(int(code))
    slow = members.sort_values("dur", ascending=False)
    excess_step = float(r["excess"]) / inp.n_steps
    dev_busy = float(inp.summary.get("device_busy_per_step_us") or 0.0)
    share = 100 * excess_step / dev_busy if dev_busy > 0 else 0.0
    same = "same grid and block" if has_grid else "launch sizes not recorded, so calls may differ in size"
    short = describe_kernel(name, max_len=60).short
    return Finding(
        rule="variance",
        severity=MEDIUM if share >= th.variance_medium_pct else INFO,
        title=(
            f"Kernel time varies: {short} median {fmt_time(r['median'])}, max "
            f"{fmt_time(r['max'])} ({r['max'] / r['median']:.1f}×) over {int(r['size'])} calls"
        ),
        detail=(
            f"Read the trace, not the mean ({same}): the slowest calls cost "
            f"{fmt_time(excess_step)}{inp.per} above the median. Look at what ran beside them "
            "in the timeline: another stream (communication, copies) competing for the "
            "device, clock throttling, or a cold cache after a long gap."
        ),
        evidence={
            "kernel": name,
            "grid": grid or None,
            "block": block or None,
            "calls": int(r["size"]),
            "median_us": float(r["median"]),
            "max_us": float(r["max"]),
            "max_over_median": float(r["max"] / r["median"]) if r["median"] > 0 else float("inf"),
            "excess_per_step_us": excess_step,
            "slowest_us": slow["dur"].head(5).tolist(),
        },
        impact_us=excess_step,
        event_rows=limit_rows(slow["row"].head(50), th.max_event_rows),
        kernels=[name],
    )


def find_cold_start(inp: Inputs, th: Thresholds) -> list[Finding]:
    """The first profiled step much slower than the median of the others."""
    steps = inp.steps
    if len(steps) < 2:
        return []
    walls = steps["wall_us"].to_numpy(np.float64)
    first, rest = float(walls[0]), float(np.median(walls[1:]))
    if rest <= 0 or first < th.cold_start_ratio * rest or first - rest < th.cold_start_min_excess_us:
        return []
    ratio = first / rest
    step_rows = np.flatnonzero(inp.is_step_range)
    first_rows = step_rows[inp.names[step_rows].astype(str) == f"ProfilerStep#{int(steps['step'].iloc[0])}"]
    return [
        Finding(
            rule="cold_start",
            severity=MEDIUM,
            title=(
                f"First step {ratio:.1f}× slower than the rest ({fmt_time(first)} vs median {fmt_time(rest)})"
            ),
            detail=(
                "Something still warmed up in the first profiled step: lazy initialisation, "
                "cuDNN/Inductor autotuning, allocator growth or compilation. It is not what the loop "
                "costs: raise --warmup, and read the later steps."
            ),
            evidence={
                "first_step": int(steps["step"].iloc[0]),
                "first_wall_us": first,
                "rest_median_wall_us": rest,
                "ratio": ratio,
                "steps": len(steps),
            },
            impact_us=(first - rest) / len(steps),
            event_rows=limit_rows(first_rows, th.max_event_rows),
        )
    ]
