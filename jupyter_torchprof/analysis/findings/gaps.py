"""Rule 2: the largest stretches where a device did nothing inside a step.

A gap counts when no stream of the device is busy (a side stream idling
while the main stream computes is normal). For each large gap the rule says
what the host was doing meanwhile: the deepest host event covering most of
the gap (an op, a sync call, a Python frame), or that no profiled op ran.
The largest idle stretch of every stream is kept in the evidence.

A stall that repeats, the same size (`Thresholds.gap_merge_max_ratio`) behind
the same host call chain in several steps, is one finding ("Device 0 idle
~15.5 ms in each of steps 4–6"); its evidence keeps every step's gap and the
spread, and the largest gap's own figures (``gap_us``, ``step`` ...).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...format import fmt_time
from ...trace import categories as K
from .intervals import idle_lengths, idle_segments, merge
from .model import HIGH, INFO, MEDIUM, SEVERITIES, Finding, Inputs, limit_rows
from .sync import is_blocking_call
from .thresholds import Thresholds


def find_idle_gaps(inp: Inputs, th: Thresholds) -> list[Finding]:
    """The ``gaps_reported`` largest device-wide idle gaps per device, repeats merged (`merge_repeats`)."""
    if not inp.device_traced:
        return []
    act = inp.activity_rows
    # Sorted by start once (stably, so equal starts keep row order): every
    # lane below is a subset in that order, which `_gaps`' stable sort then
    # finds already sorted, instead of sorting each lane from scratch. The
    # profile's order where it has one (the steps and summary sorted them too).
    order = inp.activity_order
    if order is None or len(order) != len(act):
        order = np.argsort(inp.ts[act], kind="stable")
    act = act[order]
    dev = inp.column("device")[act]
    stream = inp.column("stream")[act]
    walls = np.array([hi - lo for lo, hi in inp.windows])
    min_gap = max(th.gap_min_us, th.gap_min_step_pct / 100 * float(np.median(walls)))
    host = _host_rows(inp)
    out: list[Finding] = []
    for d in inp.devices_used:
        on_d = dev == d
        gaps = _gaps(inp, act[on_d], min_gap)
        order = np.arange(min(len(gaps["start"]), th.gaps_reported))
        # Each stream's largest gap goes into the findings' evidence only:
        # not looked for on a device without a gap to report (three lanes
        # of 600k kernels were 50 ms of a 9M-event trace's findings).
        per_stream = (
            {
                str(st): _largest_gap(inp, act[on_d & (stream == st)])
                for st in sorted(pd.unique(stream[on_d]).tolist())
            }
            if len(order)
            else {}
        )
        found = [_finding(inp, th, d, gaps, i, host, per_stream) for i in order.tolist()]
        out.extend(merge_repeats(inp, th, found))
    return out


def merge_repeats(inp: Inputs, th: Thresholds, found: list[Finding]) -> list[Finding]:
    """One device's gap findings, those repeating in several steps merged into one.

    Gaps repeat when they have the same host call chain, lie in different
    steps and their sizes are within ``gap_merge_max_ratio`` of each other
    (`_similar`); a trace without steps has nothing to merge.
    """
    groups: dict[tuple[str, ...], list[Finding]] = {}
    for f in found:
        groups.setdefault(tuple(f.evidence["host_chain"]), []).append(f)
    out: list[Finding] = []
    for group in groups.values():
        for cluster in _similar(group, th.gap_merge_max_ratio):
            out.extend([_merged(inp, th, cluster)] if len(cluster) > 1 else cluster)
    return out


def _similar(group: list[Finding], ratio: float) -> list[list[Finding]]:
    """``group`` cut into clusters of gaps in distinct steps whose sizes lie within ``ratio``.

    Largest first: a gap joins the open cluster while the cluster's largest
    is at most ``ratio`` times it and its step is not in the cluster yet.
    """
    clusters: list[list[Finding]] = []
    for f in sorted(group, key=lambda f: -f.evidence["gap_us"]):
        step = f.evidence["step"]
        for c in clusters:
            top = c[0].evidence["gap_us"]
            if (
                step is not None
                and top <= ratio * f.evidence["gap_us"]
                and step not in {g.evidence["step"] for g in c}
            ):
                c.append(f)
                break
        else:
            clusters.append([f])
    return clusters


def _merged(inp: Inputs, th: Thresholds, group: list[Finding]) -> Finding:
    """The finding of one stall repeating in several steps (``group``: one finding per step)."""
    group = sorted(group, key=lambda f: f.evidence["step"])
    largest = max(group, key=lambda f: f.evidence["gap_us"])
    sizes = np.array([f.evidence["gap_us"] for f in group])
    pcts = np.array([f.evidence["step_pct"] for f in group])
    steps = [int(f.evidence["step"]) for f in group]
    median = float(np.median(sizes))
    per_step = [
        {k: f.evidence[k] for k in ("step", "gap_us", "start_us", "end_us", "step_pct", "host_covered_pct")}
        for f in group
    ]
    ev = dict(largest.evidence)
    ev.update(
        steps=steps,
        per_step=per_step,
        gap_us_median=median,
        gap_us_min=float(sizes.min()),
        gap_us_max=float(sizes.max()),
        spread_pct=100 * float(sizes.max() - sizes.min()) / median if median > 0 else 0.0,
    )
    figures = ", ".join(f"step {s}: {fmt_time(g)}" for s, g in zip(steps, sizes.tolist(), strict=True))
    return Finding(
        rule="idle_gaps",
        severity=min((f.severity for f in group), key=SEVERITIES.index),
        title=(
            f"Device {ev['device']} idle ~{fmt_time(median)} in each of steps {_step_list(steps)} "
            f"(~{float(np.median(pcts)):.0f}% of the step): {ev['doing']}"
        ),
        detail=f"{largest.detail} The same stall in {len(group)} steps ({figures}; spread "
        f"{ev['spread_pct']:.1f}% of the median).",
        evidence=ev,
        impact_us=float(sum(f.impact_us for f in group)),
        event_rows=limit_rows([r for f in group for r in f.event_rows], th.max_event_rows),
        ops=sorted({o for f in group for o in f.ops}),
        kernels=list(dict.fromkeys(k for f in group for k in f.kernels)),
    )


def _step_list(steps: list[int]) -> str:
    """``4–6`` for consecutive steps, else ``2, 5, 9``."""
    if steps == list(range(steps[0], steps[0] + len(steps))):
        return f"{steps[0]}–{steps[-1]}"
    return ", ".join(str(s) for s in steps)


def _gaps(inp: Inputs, rows: np.ndarray, min_size: float = -np.inf) -> dict[str, np.ndarray]:
    """Idle stretches of ``rows``' lane in every step of at least ``min_size``, largest first.

    Gaps under ``min_size`` are dropped before the sort (a stable sort keeps
    the others in the same order): a lane idles between most of its
    kernels, and only the few large gaps are reported.
    """
    parts: dict[str, list[np.ndarray]] = {"start": [], "end": [], "before": [], "after": [], "step": []}
    # Sorted by start once: each step window then looks only at the rows that
    # can reach into it, not at the whole lane (steps x rows otherwise).
    rows = rows[np.argsort(inp.ts[rows], kind="stable")]
    s, e = inp.ts[rows], inp.end[rows]
    reach = float((e - s).max(initial=0.0))
    for k, (lo, hi) in enumerate(inp.windows):
        first = int(np.searchsorted(s, lo - reach))
        last = int(np.searchsorted(s, hi))
        gs, ge, b, a = idle_segments(s[first:last], e[first:last], lo, hi)
        big = ge - gs >= min_size
        parts["start"].append(gs[big])
        parts["end"].append(ge[big])
        parts["before"].append(np.where(b >= 0, rows[first + np.maximum(b, 0)], -1)[big])
        parts["after"].append(np.where(a >= 0, rows[first + np.maximum(a, 0)], -1)[big])
        parts["step"].append(np.full(int(big.sum()), k, dtype=np.int64))
    out = {k: np.concatenate(v) if v else np.array([]) for k, v in parts.items()}
    order = np.argsort(-(out["end"] - out["start"]), kind="stable")
    return {k: v[order] for k, v in out.items()}


def _largest_gap(inp: Inputs, rows: np.ndarray) -> float:
    """The largest idle stretch of ``rows``' lane in any step (0 when it never idles).

    The first of `_gaps`' order (largest first; a NaN size is no gap there),
    without making and sorting every gap of the lane.
    """
    rows = rows[np.argsort(inp.ts[rows], kind="stable")]
    s, e = inp.ts[rows], inp.end[rows]
    reach = float((e - s).max(initial=0.0))
    sizes = []
    for lo, hi in inp.windows:
        first, last = int(np.searchsorted(s, lo - reach)), int(np.searchsorted(s, hi))
        sizes.append(idle_lengths(s[first:last], e[first:last], lo, hi))
    size = np.concatenate(sizes) if sizes else np.array([])
    known = size[~np.isnan(size)]
    return float(known.max()) if len(known) else 0.0


def _host_rows(inp: Inputs) -> np.ndarray:
    # One pass over the two masks, not a gather of the step flags at every
    # host row (0.13 s on a 14M-event trace).
    return np.flatnonzero(inp.is_kind(*K.HOST_KINDS) & ~inp.is_step_range)


def describe_host(inp: Inputs, host: np.ndarray, lo: float, hi: float, th: Thresholds) -> dict[str, Any]:
    """What the host did during ``[lo, hi]``: coverage and the deepest explaining event."""
    length = hi - lo
    ov = np.minimum(inp.end[host], hi) - np.maximum(inp.ts[host], lo)
    m = ov > 0
    rows, ov = host[m], ov[m]
    if not len(rows) or length <= 0:
        return {"covered_pct": 0.0, "explained_by": -1, "overlapping": []}
    bs, be = merge(np.maximum(inp.ts[rows], lo), np.minimum(inp.end[rows], hi))
    covered = 100 * float((be - bs).sum()) / length
    explains = rows[ov >= th.gap_explained_pct / 100 * length]
    best = -1
    if len(explains):
        depth = inp.column("depth")[explains]
        best = int(explains[np.argmax(depth)])
    top = rows[np.argsort(-ov, kind="stable")[:10]]
    return {"covered_pct": covered, "explained_by": best, "overlapping": top.tolist()}


def _finding(
    inp: Inputs,
    th: Thresholds,
    device: int,
    gaps: dict[str, np.ndarray],
    i: int,
    host: np.ndarray,
    per_stream: dict[str, float],
) -> Finding:
    lo, hi = float(gaps["start"][i]), float(gaps["end"][i])
    size = hi - lo
    k = int(gaps["step"][i])
    w_lo, w_hi = inp.windows[k]
    step_pct = 100 * size / (w_hi - w_lo) if w_hi > w_lo else 100.0
    step_no = int(inp.steps["step"].iloc[k]) if inp.has_steps else None
    before, after = int(gaps["before"][i]), int(gaps["after"][i])
    what = describe_host(inp, host, lo, hi, th)
    best = what["explained_by"]
    chain = [r for r in inp.chain(best) if not inp.is_step_range[r]] if best >= 0 else []
    chain_names = [str(inp.names[r]) for r in chain]
    if chain:
        short = " › ".join(chain_names[-2:])
        doing = f"host in {short}"
        if inp.kind_of(best) == K.RUNTIME and is_blocking_call(str(inp.names[best])):
            hint = (
                "The host was waiting for the device in a sync, and the device then waited for the "
                "host to launch again; see the synchronisation findings."
            )
        else:
            hint = "The host was busy and the device ran out of queued work."
    else:
        doing = f"no single op (host ops cover {what['covered_pct']:.0f}%)"
        hint = (
            "No profiled op explains the gap: Python between ops, data loading, another thread or "
            "process. Profile with --stack to see the Python side."
        )
    where = f" in step {step_no}" if step_no is not None else ""
    title = f"Device {device} idle {fmt_time(size)}{where} ({step_pct:.0f}% of the {inp.unit}): {doing}"
    detail = hint
    if chain_names:
        detail += " Host call chain: " + " › ".join(chain_names) + "."
    if before >= 0 or after >= 0:
        detail += f" Between {_short(inp, before) or 'step start'} and {_short(inp, after) or 'step end'}."
    severity = (
        HIGH if step_pct >= th.gap_high_step_pct else MEDIUM if step_pct >= th.gap_medium_step_pct else INFO
    )
    stream_col = inp.column("stream")
    evidence: dict[str, Any] = {
        "device": device,
        "step": step_no,
        "start_us": lo,
        "end_us": hi,
        "gap_us": size,
        "step_pct": step_pct,
        "stream_before": int(stream_col[before]) if before >= 0 else None,
        "kernel_before": str(inp.names[before]) if before >= 0 else None,
        "kernel_after": str(inp.names[after]) if after >= 0 else None,
        "host_chain": chain_names,
        "doing": doing,
        "host_covered_pct": what["covered_pct"],
        "largest_gap_per_stream_us": per_stream,
    }
    ops = sorted({str(inp.names[r]) for r in chain if inp.kind_of(r) in (K.CPU_OP, K.USER_ANNOTATION)})
    return Finding(
        rule="idle_gaps",
        severity=severity,
        title=title,
        detail=detail,
        evidence=evidence,
        impact_us=size / inp.n_steps,
        event_rows=limit_rows([before, after, *chain, *what["overlapping"]], th.max_event_rows),
        ops=ops,
        kernels=[str(inp.names[r]) for r in (before, after) if r >= 0],
    )


def _short(inp: Inputs, row: int) -> str:
    if row < 0:
        return ""
    from ..names import describe_kernel

    return describe_kernel(str(inp.names[row]), max_len=60).short
