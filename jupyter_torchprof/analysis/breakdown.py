"""Where each step's device time goes: busy time per kernel family, idle time per cause.

Two tables, one row per step (as `steps.step_table`; where no step is
counted, one more row for the whole recording, which the per-step figures
then use as one step):

* `kernel_families`: the step's device busy time (``steps.device_busy_us``,
  the union over time of the work it launched, every stream together) split
  into families (`categories.kernel_family` for kernels; copies and memsets
  by their kind). Where activities overlap in time (several streams), each
  moment of busy time is shared **equally among the activities running at
  that moment**: two kernels side by side get half each, so a family's time
  is what it would have cost had the device run them one after the other at
  the same total rate, and the families sum to the busy time exactly.

* `idle_breakdown`: the step's device idle time (``steps.device_idle_us``,
  its span minus its busy time) split by the causes Holistic Trace Analysis
  names (``hta/analyzers/breakdown_analysis.py``,
  ``BreakdownAnalysis._analyze_idle_time_for_stream``). HTA looks at the gap
  before each kernel on a stream: *host wait* when the kernel's runtime
  launch started after the previous kernel ended (the host was late to
  enqueue it), else *kernel wait* when the gap is below
  ``consecutive_kernel_delay`` (default 30 in the trace's time unit, µs for
  Kineto JSON: the overhead of launching back-to-back kernels), else
  *other* (the stream waited on something else, an event, another stream).
  Here the same test is applied to the gaps of the step's busy time over
  every stream together, with the activity that ends each gap (the first to
  start after it), so the causes sum to the step's device idle time.

`idle_by_stream` is HTA's own per-stream breakdown, gap by gap as HTA does
it (the gap before an activity counts in the step that launched the
activity); over a whole trace it equals ``get_idle_time_breakdown``.

Pure: frames in, frames out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import categories as C
from .kernels import activity_rows, merge_intervals
from .steps import counted_steps

#: Device work families, in the order the chart stacks them (that of `categories.CATEGORIES`).
FAMILIES: tuple[str, ...] = (
    C.GEMM,
    C.ATTENTION,
    C.CONV,
    C.NORM,
    C.REDUCTION,
    C.ELEMENTWISE,
    C.TRITON,
    C.OTHER_KERNEL,
    C.COMMUNICATION,
    C.MEMCPY,
    C.MEMSET,
)
#: Column of each family in `kernel_families` (µs).
FAMILY_COLUMNS: dict[str, str] = {f: f.lower().replace(" ", "_") + "_us" for f in FAMILIES}
#: HTA's idle causes and their columns in `idle_breakdown` (µs).
IDLE_CAUSES: dict[str, str] = {
    "host wait": "host_wait_us",
    "kernel wait": "kernel_wait_us",
    "other": "other_idle_us",
}
#: HTA's default ``consecutive_kernel_delay`` (trace_analysis.py, get_idle_time_breakdown):
#: a gap shorter than this, with the kernel already enqueued, is launch overhead.
KERNEL_WAIT_US = 30.0
#: Step number of the row that stands for the whole recording (no counted step).
WHOLE_TRACE = -1


def busy_shares(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each interval's share of the union's length: every moment split equally among those running.

    The shares sum to the length of the union (overlaps counted once).
    """
    if not len(start):
        return np.zeros(0)
    t = np.unique(np.concatenate([start, end]))
    i_s = np.searchsorted(t, start)
    i_e = np.searchsorted(t, end)
    delta = np.zeros(len(t) + 1)
    np.add.at(delta, i_s, 1.0)
    np.add.at(delta, i_e, -1.0)
    running = np.cumsum(delta)[: len(t) - 1]  # intervals covering [t[k], t[k+1])
    seg = np.diff(t)
    rate = np.divide(seg, running, out=np.zeros_like(seg), where=running > 0.5)
    acc = np.concatenate([[0.0], np.cumsum(rate)])
    return acc[i_e] - acc[i_s]


def activity_families(events: pd.DataFrame, act: np.ndarray) -> np.ndarray:
    """Position in `FAMILIES` of each device activity (kernel by name, copy and memset by kind)."""
    cats = C.event_categories(events.iloc[act]) if len(act) else np.zeros(0, dtype=np.int8)
    to_family = np.full(len(C.CATEGORIES), FAMILIES.index(C.OTHER_KERNEL), dtype=np.int64)
    for i, f in enumerate(FAMILIES):
        to_family[C.CATEGORY_INDEX[f]] = i
    return to_family[cats]


def _gap_causes(gap_start: np.ndarray, gap_len: np.ndarray, launch_ts: np.ndarray) -> np.ndarray:
    """HTA's cause of each gap (index into `IDLE_CAUSES`) from the launch of the work that ends it.

    A launch not known (NaN) is not a host wait, as in HTA, where the missing
    runtime start compares false.
    """
    host = launch_ts > gap_start
    return np.where(host, 0, np.where(gap_len < KERNEL_WAIT_US, 1, 2))


def _device_idle_causes(s: np.ndarray, e: np.ndarray, launch_ts: np.ndarray) -> np.ndarray:
    """Idle µs per cause between the busy blocks of one step's activities (every stream together)."""
    out = np.zeros(len(IDLE_CAUSES))
    blocks_s, blocks_e = merge_intervals(s, e)
    if len(blocks_s) < 2:
        return out
    # The activity that opens each block: the first to start there (ties: the earliest launched).
    order = np.lexsort((np.nan_to_num(launch_ts, nan=np.inf), s))
    first = order[np.searchsorted(s[order], blocks_s[1:], side="left")]
    gap_start, gap_len = blocks_e[:-1], blocks_s[1:] - blocks_e[:-1]
    causes = _gap_causes(gap_start, gap_len, launch_ts[first])
    return np.bincount(causes, weights=gap_len, minlength=len(IDLE_CAUSES))


def _groups(steps: pd.DataFrame, owner: np.ndarray) -> list[tuple[int, bool, str, np.ndarray]]:
    """(step, counted, label, activity positions) of each row: the steps, and the recording when none counts.

    Positions come from one sort of ``owner``, so the cost follows the
    number of activities, not steps times activities.
    """
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(len(steps) + 1))
    rows = [
        (int(s), bool(c), f"ProfilerStep#{int(s)}", order[bounds[i] : bounds[i + 1]])
        for i, (s, c) in enumerate(zip(steps["step"], steps["counted"], strict=True))
    ]
    if counted_steps(steps).empty:
        rows.append((WHOLE_TRACE, True, "whole trace", np.arange(len(owner))))
    return rows


def kernel_families(events: pd.DataFrame, steps: pd.DataFrame, owner: np.ndarray) -> pd.DataFrame:
    """Device busy time per family, per step (see the module doc); ``busy_us`` is their sum.

    ``owner`` is `steps.device_steps` (one step position per `kernels.activity_rows` row).
    """
    act = activity_rows(events)
    start = events["ts"].to_numpy()[act].astype(np.float64, copy=False)
    end = start + events["dur"].to_numpy()[act]
    fam = activity_families(events, act)
    out = []
    for step, counted, label, mine in _groups(steps, owner):
        share = busy_shares(start[mine], end[mine])
        per = np.bincount(fam[mine], weights=share, minlength=len(FAMILIES))
        out.append((step, counted, label, *per.tolist(), float(per.sum())))
    cols = ["step", "counted", "label", *FAMILY_COLUMNS.values(), "busy_us"]
    return _typed(pd.DataFrame(out, columns=cols))


def launch_starts(events: pd.DataFrame, links: pd.DataFrame, act: np.ndarray) -> np.ndarray:
    """Start of the runtime call that launched each activity (NaN: none recorded)."""
    launch = links["launch"].to_numpy()[act]
    out = np.full(len(act), np.nan)
    ok = launch >= 0
    out[ok] = events["ts"].to_numpy()[launch[ok]]
    return out


def idle_breakdown(
    events: pd.DataFrame, links: pd.DataFrame, steps: pd.DataFrame, owner: np.ndarray
) -> pd.DataFrame:
    """Device idle time per HTA cause, per step (see the module doc); ``idle_us`` is their sum."""
    act = activity_rows(events)
    start = events["ts"].to_numpy()[act].astype(np.float64, copy=False)
    end = start + events["dur"].to_numpy()[act]
    launch_ts = launch_starts(events, links, act)
    out = []
    for step, counted, label, mine in _groups(steps, owner):
        per = _device_idle_causes(start[mine], end[mine], launch_ts[mine])
        out.append((step, counted, label, *per.tolist(), float(per.sum())))
    cols = ["step", "counted", "label", *IDLE_CAUSES.values(), "idle_us"]
    return _typed(pd.DataFrame(out, columns=cols))


@dataclass(frozen=True)
class StreamGaps:
    """The gap before each activity on its stream, HTA's way (one entry per activity of ``rows``).

    Attributes
    ----------
    device, stream
        Where the activity ran.
    gap
        Its start minus the end of the activity before it on the stream (in
        start order; negative where the trace shows an overlap, as in HTA).
    has_gap
        False for the first activity of a stream (no gap before it).
    cause
        HTA's cause of the gap (index into `IDLE_CAUSES`).
    """

    device: np.ndarray
    stream: np.ndarray
    gap: np.ndarray
    has_gap: np.ndarray
    cause: np.ndarray


def stream_gaps(events: pd.DataFrame, links: pd.DataFrame, rows: np.ndarray) -> StreamGaps:
    """HTA's gaps and causes for the device activities ``rows`` (positions in ``events``)."""
    start = events["ts"].to_numpy()[rows].astype(np.float64, copy=False)
    end = start + events["dur"].to_numpy()[rows]
    device = events["device"].to_numpy()[rows].astype(np.int64)
    stream = events["stream"].to_numpy()[rows].astype(np.int64)
    order = np.lexsort((start, stream, device))
    same = np.zeros(len(order), dtype=bool)
    same[1:] = (device[order][1:] == device[order][:-1]) & (stream[order][1:] == stream[order][:-1])
    before = np.full(len(rows), np.nan)
    before[order[1:]] = end[order][:-1]
    has_gap = np.zeros(len(rows), dtype=bool)
    has_gap[order] = same
    gap = np.where(has_gap, start - np.nan_to_num(before), 0.0)
    cause = _gap_causes(before, gap, launch_starts(events, links, rows))
    return StreamGaps(device, stream, gap, has_gap, cause)


def stream_idle(gaps: StreamGaps, mine: np.ndarray | None = None) -> list[tuple]:
    """(device, stream, µs per cause ..., total) of each stream among the activities ``mine`` (positions)."""
    if mine is None:
        mine = np.arange(len(gaps.gap))
    if not len(mine):
        return []
    pairs, inv = np.unique(
        np.stack([gaps.device[mine], gaps.stream[mine]], axis=1), axis=0, return_inverse=True
    )
    inv = inv.reshape(-1)
    keep = gaps.has_gap[mine]
    per = np.zeros((len(pairs), len(IDLE_CAUSES)))
    np.add.at(per, (inv[keep], gaps.cause[mine][keep]), gaps.gap[mine][keep])
    return [(int(d), int(s), *p.tolist(), float(p.sum())) for (d, s), p in zip(pairs, per, strict=True)]


def idle_by_stream(
    events: pd.DataFrame, links: pd.DataFrame, steps: pd.DataFrame, owner: np.ndarray
) -> pd.DataFrame:
    """HTA's idle time breakdown per step and stream: the gap before each activity on its stream.

    Activities of a stream are taken in start order over the whole trace
    (`stream_gaps`); the gap before one counts in the row of the step that
    launched it, with HTA's cause (see the module doc).
    """
    gaps = stream_gaps(events, links, activity_rows(events))
    out = [
        (step, counted, label, *row)
        for step, counted, label, mine in _groups(steps, owner)
        for row in stream_idle(gaps, mine)
    ]
    cols = ["step", "counted", "label", "device", "stream", *IDLE_CAUSES.values(), "idle_us"]
    return _typed(pd.DataFrame(out, columns=cols))


def _typed(table: pd.DataFrame) -> pd.DataFrame:
    """Integer steps and boolean flags, also when the table is empty."""
    return table.astype({"step": np.int64, "counted": bool, "label": object})
