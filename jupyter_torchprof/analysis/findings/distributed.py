"""Rule 9: communication that compute does not hide, and straggling ranks.

Exposed communication is the time some collective kernel (NCCL, RCCL ...)
ran on a device while no compute kernel did: the union of communication
intervals minus its intersection with the union of compute intervals, per
device, for the collectives the counted steps launched (the work the steps
and kernel tables count; work queued before the trace is in no step).
Part of a collective's time is waiting for the slowest rank, which is why
stragglers are checked across ranks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...format import fmt_time
from ...trace import categories as K
from ..names import family_of
from .intervals import merge, overlap_with
from .model import HIGH, MEDIUM, NOT_CHECKED, Finding, Inputs, limit_rows
from .thresholds import Thresholds


def is_communication(name: str) -> bool:
    """Whether a kernel is a collective / point-to-point communication kernel."""
    return family_of(name) == "communication"


def find_exposed_communication(inp: Inputs, th: Thresholds) -> list[Finding]:
    """Communication kernels running while no compute kernel runs, per device."""
    if not inp.device_traced:
        return []
    kern = np.flatnonzero(inp.is_kind(K.KERNEL))
    if not len(kern):
        return []
    is_comm = inp.name_flags(kern, is_communication)
    if not is_comm.any():
        return []
    dev = inp.column("device")[kern]
    # The same work as the steps and kernel tables: the collectives the
    # counted steps launched, wherever they ran (not cut to the host ranges).
    mine = inp.launched_in_steps(kern)
    out = []
    for d in sorted(set(dev[is_comm & mine].tolist())):
        comm = kern[is_comm & mine & (dev == d)]
        c_ts, c_end = inp.ts[comm], inp.end[comm]
        bs, be = merge(c_ts, c_end)
        comm_union = float((be - bs).sum())
        per = inp.n_steps
        wall = inp.wall_per_step
        # Any compute on the device hides a collective, whoever launched it.
        compute = kern[~is_comm & (dev == d)]
        k_ts, k_end = inp.ts[compute], inp.end[compute]
        if _exposed_pct(comm_union, per, wall) < th.comm_exposed_min_pct and _bounded(bs, be, k_ts, k_end):
            # Exposed time is then at most the union (each overlap subtracted
            # is >= 0, and rounding is monotone): under the threshold whatever
            # compute hides, so the merge of every compute kernel is skipped.
            continue
        ks, ke = merge(k_ts, k_end)
        exposed = comm_union - float(overlap_with(ks, ke, bs, be).sum())
        exposed_per_kernel = (c_end - c_ts) - overlap_with(ks, ke, c_ts, c_end)
        comm_sum = float((c_end - c_ts).sum())
        exp_step = exposed / per
        pct = _exposed_pct(exposed, per, wall)
        if pct < th.comm_exposed_min_pct:
            continue
        hidden = 100 * (1 - exposed / comm_union) if comm_union > 0 else 0.0
        top = comm[np.argsort(-exposed_per_kernel, kind="stable")]
        kernels = list(inp.count_names(comm))
        out.append(
            Finding(
                rule="communication",
                severity=HIGH if pct >= th.comm_exposed_high_pct else MEDIUM,
                title=(
                    f"Communication not overlapped on device {d}: {fmt_time(exp_step)}{inp.per} exposed "
                    f"({pct:.0f}% of the {inp.unit}); {hidden:.0f}% of it hidden behind compute"
                ),
                detail=(
                    "Collectives ran while no compute kernel did, so the device waited on the "
                    "network or on other ranks. Overlap them with compute: DDP gradient bucketing "
                    "(bucket_cap_mb), FSDP prefetching (backward_prefetch, forward_prefetch), "
                    "async collectives waited on late. Part of this time can be waiting for a "
                    "slower rank: load all ranks' traces to check for stragglers."
                ),
                evidence={
                    "device": d,
                    # Summed per kernel, as the steps table's comm_us.
                    "comm_per_step_us": comm_sum / per,
                    "exposed_per_step_us": exp_step,
                    "exposed_step_pct": pct,
                    "hidden_pct": hidden,
                    "comm_kernels": int(len(comm)),
                },
                impact_us=exp_step,
                event_rows=limit_rows(top[: min(len(top), 200)], th.max_event_rows),
                kernels=kernels,
            )
        )
    return out


def _bounded(bs: np.ndarray, be: np.ndarray, k_ts: np.ndarray, k_end: np.ndarray) -> bool:
    """Whether every overlap `overlap_with` gives is >= 0: finite compute, no interval or block ending before it starts."""
    return bool(
        (be >= bs).all() and np.isfinite(k_ts).all() and np.isfinite(k_end).all() and (k_end >= k_ts).all()
    )


def _exposed_pct(exposed: float, steps: int, wall: float) -> float:
    """Exposed time per step as a share of the step's wall time (0 without a wall time)."""
    return 100 * (exposed / steps) / wall if wall > 0 else 0.0


def find_unchecked_ranks(inp: Inputs, th: Thresholds) -> list[Finding]:
    """One rank of a multi-rank job: stragglers cannot be checked from it alone."""
    if not inp.world_size or inp.world_size <= 1:
        return []
    return [
        Finding(
            rule="stragglers",
            severity=NOT_CHECKED,
            title=f"Stragglers not checked: only rank {inp.rank} of {inp.world_size} loaded",
            detail=(
                "Load the folder holding every rank's trace (jupyter_torchprof.load(folder)) to "
                "compare step times across ranks."
            ),
            evidence={"rank": inp.rank, "world_size": inp.world_size},
        )
    ]


def find_stragglers(table: pd.DataFrame, th: Thresholds) -> list[Finding]:
    """Ranks that hold the others back: a longer step, or more work per step.

    ``table`` is `ranks.cross_rank_table` (``rank``, ``wall_per_step_us``,
    ``comm_per_step_us``, ``vs_median``, and ``work_per_step_us`` /
    ``work_vs_median`` when known). Collectives make every rank's step about
    as long as the slowest one's, so the straggler often shows only in its
    *work* (step time minus communication): the others wait inside their
    communication kernels instead.
    """
    if table.empty or len(table) < 2:
        return []
    median = float(np.median(table["wall_per_step_us"]))
    has_work = "work_vs_median" in table.columns
    work_median = float(np.median(table["work_per_step_us"])) if has_work else float("nan")
    out = []
    for r in table.itertuples(index=False):
        ratio = float(r.vs_median)
        work_ratio = float(r.work_vs_median) if has_work else float("nan")
        by_wall = np.isfinite(ratio) and ratio > th.straggler_ratio
        by_work = np.isfinite(work_ratio) and work_ratio > th.straggler_ratio
        if not (by_wall or by_work):
            continue
        others = table[table["rank"] != r.rank]
        evidence: dict[str, Any] = {
            "rank": int(r.rank),
            "wall_per_step_us": float(r.wall_per_step_us),
            "median_wall_per_step_us": median,
            "vs_median": ratio,
            "comm_per_step_us": float(r.comm_per_step_us),
            "others_comm_per_step_us": float(others["comm_per_step_us"].median()),
        }
        if has_work:
            evidence.update(
                work_per_step_us=float(r.work_per_step_us),
                median_work_per_step_us=work_median,
                work_vs_median=work_ratio,
            )
        worst = max(ratio if by_wall else 0.0, work_ratio if by_work else 0.0)
        if by_wall:
            title = (
                f"Rank {r.rank} is a straggler: {fmt_time(r.wall_per_step_us)}/step, "
                f"{ratio:.2f}× the median rank ({fmt_time(median)})"
            )
            impact = float(r.wall_per_step_us) - median
        else:
            title = (
                f"Rank {r.rank} is a straggler: {fmt_time(r.work_per_step_us)} of work per step, "
                f"{work_ratio:.2f}× the median rank ({fmt_time(work_median)}); the others wait for it"
            )
            impact = float(r.work_per_step_us) - work_median
        out.append(
            Finding(
                rule="stragglers",
                severity=HIGH if worst >= th.straggler_high_ratio else MEDIUM,
                title=title,
                detail=(
                    "Every collective waits for the slowest rank, so the others idle inside their "
                    "communication kernels for the difference. Compare this rank's tables with a "
                    "fast rank's (ranks[a].diff(ranks[b])): uneven inputs (sequence lengths, "
                    "embedding lookups), a slower GPU or host, or extra work on this rank "
                    "(logging, checkpointing)."
                ),
                evidence=evidence,
                impact_us=impact,
            )
        )
    return out
