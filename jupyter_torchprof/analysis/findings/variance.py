"""Rule 7: read the trace, not the mean.

Kernel variance: calls of one kernel with the same launch configuration
(grid and block) do the same amount of work, so a max far above their median
is time lost to something else (contention with another stream, throttling,
a cold cache), and the mean hides it.

Cold start: the first profiled step far slower than the others still pays
for warming up (lazy init, autotuning, allocator growth, compilation).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...format import fmt_time
from ...trace import categories as K
from ..kernels import order_by_group
from ..names import describe_kernel, family_of
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
    if np.isnan(dur).any():
        # A kernel without a duration: the median of the old frame (its NaN
        # filled with "") failed, and the rule reads "not checked" with that error.
        pd.Series(np.where(np.isnan(dur), "", dur.astype(object))).groupby(np.zeros(len(dur))).median()
    spread = _spread_launches(inp.name_codes[rows], grid, block, dur, th)
    if spread is None:
        return []
    inv, keys, stats = spread
    found = []
    for _, r in stats.head(th.variance_reported).iterrows():
        gid = int(r["group"])
        code, g, b = keys[gid]
        at = np.flatnonzero(inv == gid)
        launch = (int(code), grid_labels[g], block_labels[b])
        found.append(_variance_finding(inp, th, (rows[at], dur[at]), has_grid, r, launch))
    return found


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
    return rows[~inp.name_flags(rows, lambda name: family_of(name) == "communication")]


def _spread_launches(
    names: np.ndarray, grid: np.ndarray, block: np.ndarray, dur: np.ndarray, th: Thresholds
) -> tuple[np.ndarray, np.ndarray, pd.DataFrame] | None:
    """The (kernel, grid, block) launches whose max is far above their median, or None.

    Returns the group of each row (numbered by first appearance, as
    ``groupby(sort=False)``), each group's (name code, grid code, block code),
    and per group kept ``group, size, median, max, excess``: ``excess`` is the
    time the calls spent above the median, most first.
    """
    # One integer key per row (the codes are a bijection with the labels),
    # numbered by first appearance: a pandas groupby over three keys cost
    # milliseconds of fixed work on every trace.
    ng, nb = int(grid.max()) + 1, int(block.max()) + 1
    key = ((names.astype(np.int64) + 1) * ng + grid) * nb + block
    inv, uniq = pd.factorize(key, sort=False)
    g = len(uniq)
    keys = np.stack([uniq // (ng * nb) - 1, uniq // nb % ng, uniq % nb], axis=1).tolist()
    size = np.bincount(inv, minlength=g)
    # Median and max from one sort by group, then duration; the median of an
    # even count is the mean of the two middle values, as pandas computes it.
    order = order_by_group(inv, dur)
    ordered = dur[order]
    first = np.searchsorted(inv[order], np.arange(g), side="left")
    median = (ordered[first + (size - 1) // 2] + ordered[first + size // 2]) / 2
    top = ordered[first + size - 1]
    kept = np.flatnonzero(
        (size >= th.variance_min_calls)
        & (top >= th.variance_max_over_median * median)
        & (top - median >= th.variance_min_spread_us)
    )
    if not len(kept):
        return None
    # pandas' grouped sum of every row, as before: it sums with compensation,
    # or with np.add.reduceat where the groups lie in order, so only the same
    # group numbers over the same rows give the same bits.
    excess = pd.Series(np.maximum(dur - median[inv], 0.0)).groupby(inv, sort=False).sum()
    stats = pd.DataFrame(
        {"group": kept, "size": size[kept], "median": median[kept], "max": top[kept],
         "excess": excess.reindex(kept).to_numpy()}
    )  # fmt: skip
    return inv, keys, stats.sort_values("excess", ascending=False)


def _variance_finding(
    inp: Inputs,
    th: Thresholds,
    members: tuple[np.ndarray, np.ndarray],
    has_grid: bool,
    r: pd.Series,
    launch: tuple[int, str, str],
) -> Finding:
    """The finding of one (kernel, grid, block) launch: its ``members`` (rows, durations), its `_spread_launches` row ``r``; ``launch``: name code, grid, block."""
    code, grid, block = launch
    rows, durs = members
    name = inp.name_of_code(code)
    # The frame's sort_values (the same quicksort, so ties keep the same order).
    slow = pd.Series(durs).sort_values(ascending=False).index.to_numpy()
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
            "slowest_us": durs[slow[:5]].tolist(),
        },
        impact_us=excess_step,
        event_rows=limit_rows(rows[slow[:50]], th.max_event_rows),
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
