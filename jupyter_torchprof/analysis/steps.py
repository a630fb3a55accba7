"""Per-step breakdown and the headline numbers of a profile.

Device work belongs to the step that **launched** it, as in Holistic Trace
Analysis: a kernel, copy or memset is linked to its runtime call (the
correlation id, see `links`), and the ``ProfilerStep`` range on the host that
encloses that call's start owns it, even when the work runs after the host
range has ended (DDP, asynchronous copies). Time-window figures (device time
inside the host range) are kept in columns named ``..._in_window_us``.

Some recorded steps are left out of the per-step statistics, and said so:
*empty* trailing ones (no op started in them and they launched no device
work, after the last step that did: the range torch opens after the last
``prof.step()``), *truncated* ones (the step an exception interrupted in a
partial run) and *suspicious* ones (a range on a thread where no op runs,
while other threads run ops, that lies mostly outside every other recorded
event, as some exporters write).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..trace import categories as K
from ..trace.parser import TraceMeta
from .kernels import (
    activity_rows,
    clip_intervals,
    merge_intervals,
    order_of_subset,
    overlap_per_window,
    union_length,
)
from .names import family_of
from .tree import pair_groups

#: At most 18 digits: every such number fits in int64 (a longer one is a name, not a step).
_STEP = re.compile(r"^ProfilerStep#(\d{1,18})$")
#: Host-side collective communication (``gloo:all_reduce``, ``c10d::allreduce_``,
#: ``nccl:all_reduce`` ...): time a rank spends waiting for the others.
_COLLECTIVE = re.compile(
    r"^(?:gloo|nccl|rccl|mpi|ucc|xccl|hccl|c10d)[:_]|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|"
    r"broadcast|barrier",
    re.IGNORECASE,
)


def collective_rows(events: pd.DataFrame) -> np.ndarray:
    """Row positions of host ops and annotations that are collective communication."""
    cats = events["name"].cat.categories
    hit = np.array([bool(_COLLECTIVE.search(c)) if isinstance(c, str) else False for c in cats] + [False])
    is_coll = hit[events["name"].cat.codes.to_numpy()]
    return np.flatnonzero(is_coll & K.kind_mask(events, (K.CPU_OP, K.USER_ANNOTATION)))


def step_rows(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Row positions of the ``ProfilerStep#k`` ranges and their step numbers.

    The name pattern is matched once per distinct name, not per row.
    """
    names = events["name"]
    cats = names.cat.categories
    numbers = np.full(len(cats) + 1, -1, dtype=np.int64)  # last slot: missing name
    for i, c in enumerate(cats):
        m = _STEP.match(c) if isinstance(c, str) else None
        if m:
            numbers[i] = int(m.group(1))
    step_no = numbers[names.cat.codes.to_numpy()]
    rows = np.flatnonzero((step_no >= 0) & K.kind_mask(events, K.USER_ANNOTATION))
    return rows, step_no[rows]


@dataclass(frozen=True)
class StepRanges:
    """The ``ProfilerStep#k`` ranges in `step_table` order (step number, then start).

    Attributes
    ----------
    rows
        Positions of the ranges in the events frame.
    number
        Step numbers.
    lo, hi
        Start and end of each range (µs).
    lane
        Thread of each range, as `event_lanes` numbers (pid, tid) over the
        whole frame, so it compares with `lanes` of other rows; or, where
        ``pairs`` is given, its position among those threads.
    pairs
        (pid, tid) of each lane number where the lanes are numbered among
        the ranges' own threads (`step_ranges` without ``lanes``; other rows
        get comparable numbers from `lanes_at`); None for `event_lanes` numbers.
    """

    rows: np.ndarray
    number: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    lane: np.ndarray
    pairs: tuple[np.ndarray, np.ndarray] | None = None


def event_lanes(events: pd.DataFrame) -> np.ndarray:
    """One integer per distinct (pid, tid), for every event; lanes are only compared with each other (`tree.pair_groups`)."""
    return pair_groups(events["pid"].to_numpy(), events["tid"].to_numpy())


#: Threads the step ranges may run on for their lanes to be numbered among
#: them (`step_ranges` without ``lanes``); more: `event_lanes` of every event.
LOCAL_LANES_MAX = 4


def step_ranges(events: pd.DataFrame, lanes: np.ndarray | None = None) -> StepRanges:
    """The step ranges of a trace, ordered as `step_table` rows.

    Without ``lanes``, where the ranges run on at most `LOCAL_LANES_MAX`
    threads, their lanes are numbered among those threads (``pairs``):
    numbering every event's thread (`event_lanes`) was 0.11 s of the steps
    of a 9M-event trace, for comparisons that only ever involve the ranges' threads.
    """
    rows, numbers = step_rows(events)
    ts = events["ts"].to_numpy()
    dur = events["dur"].to_numpy()
    order = np.lexsort((ts[rows], numbers))
    rows, numbers = rows[order], numbers[order]
    pairs = None
    if lanes is None:
        pid, tid = events["pid"].to_numpy()[rows], events["tid"].to_numpy()[rows]
        distinct = sorted(set(zip(pid.tolist(), tid.tolist(), strict=True)))
        integers = pid.dtype.kind in "iu" and tid.dtype.kind in "iu"
        if integers and len(distinct) <= LOCAL_LANES_MAX:
            number = {pair: i for i, pair in enumerate(distinct)}
            lane = np.array(
                [number[pair] for pair in zip(pid.tolist(), tid.tolist(), strict=True)], dtype=np.int64
            )
            pairs = (
                np.array([p for p, _ in distinct], dtype=np.int64),
                np.array([t for _, t in distinct], dtype=np.int64),
            )
        else:
            lane = event_lanes(events)[rows]
    else:
        lane = lanes[rows]
    return StepRanges(
        rows,
        numbers,
        ts[rows].astype(np.float64, copy=False),
        (ts[rows] + dur[rows]).astype(np.float64, copy=False),
        lane,
        pairs,
    )


def lanes_at(
    events: pd.DataFrame, ranges: StepRanges, rows: np.ndarray, lanes: np.ndarray | None = None
) -> np.ndarray:
    """The lanes of ``rows`` in the numbering of ``ranges.lane`` (-1 for a thread no range runs on, there).

    ``lanes``: `event_lanes`, where the ranges use its numbers and the caller has them.
    """
    if ranges.pairs is None:
        return (event_lanes(events) if lanes is None else lanes)[rows]
    pid, tid = events["pid"].to_numpy()[rows], events["tid"].to_numpy()[rows]
    out = np.full(len(rows), -1, dtype=np.int64)
    for i, (p, t) in enumerate(zip(*ranges.pairs, strict=True)):
        out[(pid == p) & (tid == t)] = i
    return out


def launch_sources(events: pd.DataFrame, links: pd.DataFrame, act: np.ndarray) -> np.ndarray:
    """For each device activity, the host row that launched it (-1: unknown).

    The runtime call found by correlation id (or flow); where only the
    ``External id`` links it, the op that made the call, whose start lies in
    the same step as the call.
    """
    launch = links["launch"].to_numpy()[act]
    op = links["op"].to_numpy()[act]
    return np.where(launch >= 0, launch, op)


def assign_to_steps(
    t: np.ndarray, lane: Any, ranges: StepRanges, keep: np.ndarray | None = None
) -> np.ndarray:
    """Position (in ``ranges``) of the range enclosing each time ``t`` (-1: none; NaN never matches).

    A range holds ``[lo, hi)``. Where ranges overlap (several threads stepping),
    the range on the time's own thread wins, else the first in order.
    ``keep`` (one bool per range) leaves the other ranges out. ``lane``: the
    lane of each time, or a function giving them (called only where ranges overlap).
    """
    out = np.full(len(t), -1, dtype=np.int64)
    lo, hi = ranges.lo, ranges.hi
    use = np.ones(len(lo), dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    idx = np.flatnonzero(use)
    if not len(idx) or not len(t):
        return out
    slo, shi = lo[idx], hi[idx]
    if np.all(np.diff(slo) >= 0) and np.all(slo[1:] >= shi[:-1]):
        # Sorted, disjoint ranges: one search.
        k = np.searchsorted(slo, t, side="right") - 1
        kk = np.clip(k, 0, len(idx) - 1)
        ok = (k >= 0) & (t < shi[kk])
        out[ok] = idx[kk[ok]]
        return out
    if callable(lane):
        lane = lane()
    for k in idx.tolist():
        inside = (t >= lo[k]) & (t < hi[k])
        take = inside & ((out < 0) | ((lane == ranges.lane[k]) & (lane != ranges.lane[np.maximum(out, 0)])))
        out[take] = k
    return out


def queued_before_trace(
    events: pd.DataFrame, links: pd.DataFrame, act: np.ndarray, sources: np.ndarray | None = None
) -> np.ndarray:
    """Which device activities (of ``act``) were queued before the trace started.

    Such work has no recorded launch and a correlation id below that of the
    first runtime launch in the trace: the profiler was not yet recording
    when it was launched (HTA gives it iteration -1). Work without any
    correlation id (XPlane ops, Neuron executions, MTIA ccp events), or in a
    trace with no runtime launch to compare with, is not called queued.
    ``sources``: `launch_sources` of ``act``, where the caller has them.
    """
    out = np.zeros(len(act), dtype=bool)
    corr = events["correlation"].to_numpy()
    rt = K.kind_mask(events, K.RUNTIME) & (corr >= 0)
    if not len(act) or not rt.any():
        return out
    first = corr[rt].min()
    c = corr[act]
    if sources is None:
        sources = launch_sources(events, links, act)
    return (sources < 0) & (c >= 0) & (c < first)


def device_steps(
    events: pd.DataFrame,
    links: pd.DataFrame,
    ranges: StepRanges | None = None,
    lanes: np.ndarray | None = None,
) -> np.ndarray:
    """For each device activity (`kernels.activity_rows` order), the step that launched it.

    The value is a position in `step_table` (and ``ranges``) order; -1 where the
    launch lies in no step. Work queued before the trace started (see
    `queued_before_trace`) belongs to no step, even where it runs inside the
    first one: it was launched before any profiled step began. Other work with
    no recorded launch (see `launch_sources`: TPU ops read from an XPlane
    without correlation ids, Neuron executions, a copy whose runtime call was
    lost) falls back to the step whose host time window it starts in: counting
    it in no step would report an idle device.
    """
    if ranges is None:
        ranges = step_ranges(events, lanes)
    act = activity_rows(events)
    src = launch_sources(events, links, act)
    ok = src >= 0
    t = np.full(len(act), np.nan)
    t[ok] = events["ts"].to_numpy()[src[ok]]

    def lane() -> np.ndarray:
        # Only where ranges overlap: the launch's thread picks among them.
        out = np.full(len(act), -1, dtype=np.int64)
        out[ok] = lanes_at(events, ranges, src[ok], lanes)
        return out

    t[~ok] = events["ts"].to_numpy()[act[~ok]]
    # NaN matches no range: queued work stays out of every step.
    t[queued_before_trace(events, links, act, src)] = np.nan
    return assign_to_steps(t, lane, ranges)


def counted_work(steps: pd.DataFrame, owner: np.ndarray) -> np.ndarray | None:
    """Which device activities the kernel table counts: those the counted steps launched.

    ``owner`` is `device_steps`. None (all of them) when no step is counted:
    the per-step figures are then over the recording window, as one step, and
    hold every activity too. So the kernel table, the steps table and the
    findings always count the same work.
    """
    if steps.empty or "counted" not in steps or not steps["counted"].any():
        return None
    return launched_by_counted(steps, owner)


def launched_by_counted(steps: pd.DataFrame, owner: np.ndarray) -> np.ndarray:
    """Whether a counted step launched each activity (``owner``: `device_steps`, a position in ``steps`` or -1).

    ``np.isin(owner, counted positions)`` as one lookup per activity (isin
    sorted both sides: ~15 ms on two million activities, asked five times).
    """
    counted = steps["counted"].to_numpy(bool) if "counted" in steps else np.zeros(len(steps), dtype=bool)
    owner = np.asarray(owner)
    if not len(owner):
        return np.zeros(0, dtype=bool)
    if owner.dtype.kind not in "iu" or int(owner.min()) < -1 or int(owner.max()) >= len(counted):
        return np.isin(owner, np.flatnonzero(counted))
    # Position -1 reads the False appended last.
    return np.append(counted, False)[owner]


def recording_window(events: pd.DataFrame, exclude: np.ndarray | None = None) -> tuple[float, float]:
    """(first start, last end) of the complete events, leaving out the rows ``exclude``."""
    ts = events["ts"].to_numpy()
    dur = events["dur"].to_numpy()
    mask = np.ones(len(events), dtype=bool)
    if exclude is not None and len(exclude):
        mask[exclude] = False
    if not mask.any():
        return 0.0, 0.0
    # Reduced where the mask holds, the ends made a block at a time: the
    # kept starts and all ends were three arrays of every event (10M: 30 ms).
    first = np.min(ts, where=mask, initial=np.inf)
    block = 1 << 16
    last = [
        np.max(ts[a : a + block] + dur[a : a + block], where=mask[a : a + block], initial=-np.inf)
        for a in range(0, len(ts), block)
    ]
    # (np.max of the blocks' maxima: a NaN end anywhere stays NaN, as before.)
    return float(first), float(np.max(last))


def union_per_group(
    group: np.ndarray, start: np.ndarray, end: np.ndarray, groups: int, order: np.ndarray | None = None
) -> np.ndarray:
    """Length of the union of the intervals of each group (overlaps counted once).

    ``order``: ``np.argsort(start, kind="stable")``, where the caller has it.
    """
    out = np.zeros(groups, dtype=np.float64)
    ok = group >= 0
    if not ok.any():
        return out
    g, s, e = group[ok], start[ok].astype(np.float64, copy=False), end[ok].astype(np.float64, copy=False)
    # np.lexsort((s, g)) as two stable sorts: by start, then by group (the
    # steps come in time order, so the second sort meets long runs).
    order = np.argsort(s, kind="stable") if order is None else order_of_subset(order, ok)
    order = order[np.argsort(g[order], kind="stable")]
    g, s, e = g[order], s[order], e[order]
    reach = _group_cummax(g, e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (s[1:] > reach[:-1])
    first = np.flatnonzero(new)
    block_end = np.maximum.reduceat(e, first)
    np.add.at(out, g[first], block_end - s[first])
    return out


def _group_cummax(g: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Running maximum of ``e`` inside each run of equal ``g`` (pandas' grouped ``cummax``)."""
    heads = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    if len(heads) > 64 or np.isnan(e).any():
        # Many groups, or NaN (which pandas skips): pandas' grouped pass.
        return pd.Series(e).groupby(g).cummax().to_numpy()
    # A maximum is exact, so one accumulate per step gives the same figures.
    reach = np.empty_like(e)
    for a, b in zip(heads, np.append(heads[1:], len(e)), strict=True):
        np.maximum.accumulate(e[a:b], out=reach[a:b])
    return reach


_COLUMNS = [
    "step", "start_us", "wall_us", "cpu_busy_us",
    "device_busy_us", "device_activities", "kernel_us", "comm_us", "memcpy_us", "memset_us",
    "device_start_us", "device_end_us", "device_span_us", "device_idle_us",
    "device_busy_in_window_us", "device_idle_in_window_us",
    "host_comm_us", "empty", "truncated", "suspicious", "counted",
]  # fmt: skip


def step_table(
    events: pd.DataFrame,
    links: pd.DataFrame,
    completed: int | None = None,
    owner: np.ndarray | None = None,
    lanes: np.ndarray | None = None,
    ranges: StepRanges | None = None,
    parent: np.ndarray | None = None,
    start_order: np.ndarray | None = None,
) -> pd.DataFrame:
    """One row per ``ProfilerStep#k`` range, in step order.

    Host side (time window of the range): ``step``, ``start_us``, ``wall_us``
    (the range's duration), ``cpu_busy_us`` (time inside ops or runtime calls
    during the range, over all threads, overlaps counted once),
    ``host_comm_us`` (time inside host-side collectives such as
    ``gloo:all_reduce``, overlaps counted once).

    Device side, for the work the step **launched** (see `device_steps`),
    wherever on the timeline it ran: ``device_busy_us`` (union over time of
    that work, overlaps counted once), ``device_activities`` (its kernels,
    copies and memsets), the summed durations of each kind (overlaps counted
    per activity): ``kernel_us``, ``comm_us`` (the communication kernels
    among them, e.g. NCCL collectives), ``memcpy_us``, ``memset_us``;
    ``device_start_us`` / ``device_end_us`` (first start, last end of that
    work, NaN without any), ``device_span_us`` (their difference) and
    ``device_idle_us`` (span minus busy: the gaps inside the step's own device
    work, HTA's temporal-breakdown idle time).

    Time window of the host range, whoever launched the work:
    ``device_busy_in_window_us`` (time some device was busy inside the range)
    and ``device_idle_in_window_us`` (``wall_us`` minus that, 0 without device
    work in the trace).

    Flags: ``empty`` (no host event starts in the range, it launched no device
    work, and so does every later range, while an earlier one did: the range
    torch opens after the last step), ``truncated`` (position ``>= completed`` in a partial run:
    the step the error interrupted), ``suspicious`` (a range on a thread where
    no op runs, while other threads run ops, lying more outside the other
    recorded events than inside them), and ``counted`` (none of these: the steps per-step statistics use).

    Parameters
    ----------
    events
        The events frame.
    links
        `links.link_device_events` of ``events``.
    completed
        Steps that completed in a partial run (None: all).
    owner, lanes, ranges, parent
        `device_steps`, `event_lanes`, `step_ranges` and the host tree's
        parents, where known (host time then skips events inside their parent).
    start_order
        `kernels.start_order` of the device activities, where known.
    """
    if ranges is None:
        ranges = step_ranges(events, lanes)
    if not len(ranges.rows):
        return _empty_frame()
    if owner is None:
        owner = device_steps(events, links, ranges, lanes)
    lo, hi = ranges.lo, ranges.hi
    act = activity_rows(events)
    launched = _launched_figures(events, act, owner, len(lo), start_order)
    cpu_busy, busy_window, host_comm = _window_figures(events, act, lo, hi, parent, start_order)
    flags = _flags(events, lanes, ranges, launched["device_activities"], completed)
    table = pd.DataFrame(
        {
            "step": ranges.number,
            "start_us": lo,
            "wall_us": hi - lo,
            "cpu_busy_us": cpu_busy,
            **launched,
            "device_busy_in_window_us": busy_window,
            "device_idle_in_window_us": np.where(len(act) > 0, np.maximum(hi - lo - busy_window, 0.0), 0.0),
            "host_comm_us": host_comm,
            **flags,
        }
    )
    return table[_COLUMNS]


def _launched_figures(
    events: pd.DataFrame, act: np.ndarray, owner: np.ndarray, n: int, start_order: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Per step, the device columns of the work it launched (see `step_table`)."""
    d_s = events["ts"].to_numpy()[act].astype(np.float64, copy=False)
    d_e = d_s + events["dur"].to_numpy()[act]
    mine = owner >= 0
    first = np.full(n, np.inf)
    last = np.full(n, -np.inf)
    np.minimum.at(first, owner[mine], d_s[mine])
    np.maximum.at(last, owner[mine], d_e[mine])
    count = np.bincount(owner[mine], minlength=n)
    busy = union_per_group(owner, d_s, d_e, n, start_order)
    has = count > 0
    start = np.where(has, first, np.nan)
    end = np.where(has, last, np.nan)
    # The owners and durations of the launched work gathered once for the four kinds.
    own, took = owner[mine], (d_e - d_s)[mine]
    by_kind = {
        col: np.bincount(own, weights=took * w[mine], minlength=n)
        for col, w in _kind_weights(events, act).items()
    }
    return {
        "device_busy_us": busy,
        "device_activities": count,
        **by_kind,
        "device_start_us": start,
        "device_end_us": end,
        "device_span_us": np.where(has, end - start, 0.0),
        "device_idle_us": np.where(has, np.maximum(end - start - busy, 0.0), 0.0),
    }


def _empty_frame() -> pd.DataFrame:
    flags = ("empty", "truncated", "suspicious", "counted")
    return pd.DataFrame(
        {
            c: pd.Series(
                dtype=bool if c in flags else np.int64 if c in ("step", "device_activities") else float
            )
            for c in _COLUMNS
        }
    )


def _window_figures(
    events: pd.DataFrame,
    act: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    parent: np.ndarray | None = None,
    start_order: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Host busy, device busy and host collective time inside each range (overlaps once)."""
    ts = events["ts"].to_numpy()
    dur = events["dur"].to_numpy()
    host = _outermost_host(events, parent) if parent is not None else None
    if host is None:
        is_host = K.kind_mask(events, (K.CPU_OP, K.RUNTIME))
        host = np.flatnonzero(is_host)
        if parent is not None:
            host = _outermost(host, is_host, parent[host], ts, ts + dur)
    coll = collective_rows(events)
    sets = [(ts[r], ts[r] + dur[r]) for r in (host, act, coll)]
    disjoint = np.all(np.diff(lo) >= 0) and np.all(lo[1:] >= hi[:-1])
    out = []
    for i, (s, e) in enumerate(sets):
        if disjoint:
            # The device activities' start order, where known (set 1: ``act``).
            vals = overlap_per_window(*merge_intervals(s, e, start_order if i == 1 else None), lo, hi)
        else:
            # Overlapping ranges (several threads stepping): each on its own.
            vals = np.array([union_length(*clip_intervals(s, e, a, b)) for a, b in zip(lo, hi, strict=True)])
        out.append(vals)
    return out[0], out[1], out[2]


#: Events from which `_outermost_host` runs in C: below, the call and its checks cost more than numpy.
NATIVE_FROM_ROWS = 16_384


def _outermost_host(events: pd.DataFrame, parent: np.ndarray) -> np.ndarray | None:
    """The ops and runtime calls less those inside such a parent (`_outermost`), in one C pass; None for numpy's way.

    numpy's way (large events frames only, with the native library and the
    parser's kind categories) made a dozen arrays of every host event: 0.17 s
    of the steps of a 9M-event trace.
    """
    from ..trace import native

    col = events["kind"]
    if len(events) < NATIVE_FROM_ROWS or not isinstance(col.dtype, pd.CategoricalDtype):
        return None
    if tuple(col.dtype.categories.tolist()) != K.KINDS or native.library() is None:
        return None
    member = np.zeros(256, dtype=np.uint8)
    member[[K.KIND_INDEX[K.CPU_OP], K.KIND_INDEX[K.RUNTIME]]] = 1
    codes = col.array.codes
    return native.outermost(codes, member, parent, events["ts"].to_numpy(), events["dur"].to_numpy())


def _outermost(
    rows: np.ndarray, is_member: np.ndarray, up: np.ndarray, start: np.ndarray, end: np.ndarray
) -> np.ndarray:
    """``rows`` less those lying inside their parent ``up`` where the parent is a member too.

    An interval inside another of the set changes neither the union's blocks
    nor their bounds (both come from the enclosing one), so the merge of
    the rest gives the same figures; most ops sit inside their parent op.
    """
    has = up >= 0
    p = np.where(has, up, 0)
    inside = has & is_member[p] & (start[rows] >= start[p]) & (end[rows] <= end[p])
    return rows[~inside]


def _flags(
    events: pd.DataFrame,
    lanes: np.ndarray | None,
    ranges: StepRanges,
    launched: np.ndarray,
    completed: int | None,
) -> dict[str, np.ndarray]:
    """``empty``, ``truncated``, ``suspicious`` and ``counted`` per range."""
    n = len(ranges.lo)
    ts = events["ts"].to_numpy()
    # The ranges' own rows cleared in the mask (np.isin sorted every host row).
    is_host = K.kind_mask(events, K.HOST_KINDS)
    is_host[np.asarray(ranges.rows, dtype=np.int64)] = False
    host = np.flatnonzero(is_host)
    started = _starts_inside(ts[host], ranges.lo, ranges.hi)
    idle = (started == 0) & (launched == 0)
    # Only trailing ones: the range torch opens after the last step, cut by
    # stop(). A run whose every step is idle (a cell of pure Python) is a run
    # of real steps whose work the profiler does not see.
    order = np.argsort(ranges.lo, kind="stable")
    busy_pos = np.flatnonzero(~idle[order])
    empty = np.zeros(n, dtype=bool)
    if len(busy_pos):
        empty[order[busy_pos[-1] + 1 :]] = True
    truncated = np.zeros(n, dtype=bool)
    if completed is not None:
        truncated[max(int(completed), 0) :] = True
    # A range lying mostly outside everything else recorded, on a thread
    # without ops: the exporter's clock or thread, not a step of the program.
    rec_lo, rec_hi = recording_window(events, ranges.rows)
    inside = np.maximum(np.minimum(ranges.hi, rec_hi) - np.maximum(ranges.lo, rec_lo), 0.0)
    outside = (ranges.hi - ranges.lo) - inside
    # (A trace without any op, a cell of pure Python, has nothing to compare with.)
    no_ops = ~_range_lanes_with_ops(events, ranges, lanes)
    suspicious = no_ops & (outside > inside)
    return {
        "empty": empty,
        "truncated": truncated,
        "suspicious": suspicious,
        "counted": ~(empty | truncated | suspicious),
    }


def _starts_inside(starts: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """How many of ``starts`` lie in each ``[lo, hi)`` (NaN in none)."""
    if len(lo) <= 16:
        # A few ranges (the usual handful of steps): a comparison pass each
        # is cheaper than sorting every host event's start.
        return np.array([np.count_nonzero((starts >= a) & (starts < b)) for a, b in zip(lo, hi, strict=True)])
    ordered = np.sort(starts)
    return np.searchsorted(ordered, hi, side="left") - np.searchsorted(ordered, lo, side="left")


def _range_lanes_with_ops(events: pd.DataFrame, ranges: StepRanges, lanes: np.ndarray | None) -> np.ndarray:
    """For each range, whether an op runs on its thread; all True in a trace without ops."""
    is_op = K.kind_mask(events, K.CPU_OP)
    if ranges.pairs is None:
        return _lanes_present((event_lanes(events) if lanes is None else lanes)[is_op], ranges.lane)
    if not is_op.any():
        return np.ones(len(ranges.lane), dtype=bool)
    pid, tid = events["pid"].to_numpy(), events["tid"].to_numpy()
    # One pass per thread of the ranges (at most LOCAL_LANES_MAX).
    has = np.array(
        [bool(np.any(is_op & (pid == p) & (tid == t))) for p, t in zip(*ranges.pairs, strict=True)],
        dtype=bool,
    )
    return has[ranges.lane]


def _lanes_present(op_lanes: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each of ``wanted``, whether it is among ``op_lanes``; all True when ``op_lanes`` is empty."""
    if not len(op_lanes):
        return np.ones(len(wanted), dtype=bool)
    top = int(op_lanes.max())
    if op_lanes.min() >= 0 and top <= 4 * len(op_lanes):
        # Lanes are small integers (`event_lanes`): a table of those present
        # instead of sorting every op's lane.
        present = np.zeros(top + 1, dtype=bool)
        present[op_lanes] = True
        inside = (wanted >= 0) & (wanted <= top)
        out = np.zeros(len(wanted), dtype=bool)
        out[inside] = present[wanted[inside]]
        return out
    return np.isin(wanted, np.unique(op_lanes))


_KIND_COLUMNS = ("kernel_us", "comm_us", "memcpy_us", "memset_us")


def _kind_weights(events: pd.DataFrame, act: np.ndarray) -> dict[str, np.ndarray]:
    """0/1 weights selecting each kind of device work among ``act``."""
    kind = events["kind"].cat.codes.to_numpy()[act]
    names = events["name"].cat.codes.to_numpy()[act]
    cats = events["name"].cat.categories
    used = np.unique(names)
    comm = np.zeros(len(cats) + 1, dtype=bool)
    comm[used] = [used_code >= 0 and family_of(str(cats[used_code])) == "communication" for used_code in used]
    is_comm = comm[names]
    is_kernel = kind == K.KIND_INDEX[K.KERNEL]
    return {
        "kernel_us": is_kernel.astype(np.float64),
        "comm_us": (is_kernel & is_comm).astype(np.float64),
        "memcpy_us": (kind == K.KIND_INDEX[K.MEMCPY]).astype(np.float64),
        "memset_us": (kind == K.KIND_INDEX[K.MEMSET]).astype(np.float64),
    }


def counted_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps per-step statistics use (``counted``), renumbered from 0."""
    if steps.empty or "counted" not in steps:
        return steps
    return steps[steps["counted"].to_numpy(bool)].reset_index(drop=True)


def step_window(steps: pd.DataFrame) -> tuple[float, float] | None:
    """(start, end) of the counted steps' host ranges, or None without any."""
    steps = counted_steps(steps)
    if steps.empty:
        return None
    return float(steps["start_us"].min()), float((steps["start_us"] + steps["wall_us"]).max())


def device_window(steps: pd.DataFrame) -> tuple[float, float] | None:
    """(start, end) from the first counted step's start until the last of its work ended."""
    steps = counted_steps(steps)
    if steps.empty:
        return None
    end = np.fmax(steps["start_us"] + steps["wall_us"], steps["device_end_us"])
    return float(steps["start_us"].min()), float(end.max())


def device_label(meta: TraceMeta, events: pd.DataFrame, act: np.ndarray | None = None) -> str:
    """Human name of the device(s) the trace ran on (``act``: `kernels.activity_rows`, where known)."""
    names = [str(p.get("name")) for p in meta.device_properties if p.get("name")]
    if act is None:
        act = activity_rows(events)
    if names:
        used = _distinct(events["device"].to_numpy()[act])
        if used and all(0 <= d < len(meta.device_properties) for d in used):
            names = [str(meta.device_properties[d].get("name", f"device {d}")) for d in used]
        distinct = sorted(set(names))
        label = distinct[0] if len(distinct) == 1 else ", ".join(distinct)
        return f"{label} ×{len(names)}" if len(names) > 1 and len(distinct) == 1 else label
    if len(act):
        return "device"
    return "CPU"


def _distinct(values: np.ndarray) -> list[int]:
    """``sorted(set(values.tolist()))`` of integers: a table of the small ones present, else np.unique.

    (A Python int per device activity made and hashed: 40 ms on two million.)
    """
    if not len(values):
        return []
    if values.dtype.kind in "iu":
        lo, hi = int(values.min()), int(values.max())
        if lo >= 0 and hi <= 4 * len(values) + 1024:
            return np.flatnonzero(np.bincount(values, minlength=hi + 1)).tolist()
        return np.unique(values).tolist()
    return sorted(set(values.tolist()))


def summarize(
    meta: TraceMeta,
    events: pd.DataFrame,
    steps: pd.DataFrame,
    owner: np.ndarray,
    links: pd.DataFrame,
    start_order: np.ndarray | None = None,
) -> dict[str, Any]:
    """Headline numbers: device, steps, wall, CPU and device time per step.

    Per-step figures are means over the *counted* steps (see `step_table`);
    device busy is the union over time of the work each step launched. With
    no counted step (a trace captured without a schedule, or only left-out
    steps) the recording window, from the first event's start to the last
    one's end (a suspicious step range left out), counts as one step.

    ``device_busy_pct`` is the device's busy time (overlaps once) over the
    time from the first counted step's start until the last of the counted
    steps' work ended (host range or device work, whichever ends later), so
    it stays at or below 100 when the device lags behind the host.
    ``window_start_us`` / ``window_end_us`` give that time span (with no
    counted step: the recording window).

    Where the trace has steps, the device work is accounted for in full:
    ``device_activities_in_steps`` / ``device_us_in_steps`` (launched in the
    counted steps), ``..._left_out`` (launched in a left-out step),
    ``..._outside_steps`` (launched before, between or after the steps),
    ``..._queued`` (queued before the trace started, see
    `queued_before_trace`) and ``..._unlinked`` (no launch recorded, in no
    step's window): together every device activity of the trace. The kernel
    table holds the first part only (see `counted_work`).
    """
    act = activity_rows(events)
    has_device = bool(len(act))
    ts = events["ts"].to_numpy()
    dur = events["dur"].to_numpy()
    d_s = ts[act].astype(np.float64, copy=False)
    d_e = d_s + dur[act]
    counted = counted_steps(steps)
    out: dict[str, Any] = {"device": device_label(meta, events, act), "device_traced": has_device}
    if counted.empty:
        lo, hi = recording_window(events, _suspicious_rows(events, steps))
        host = np.flatnonzero(K.kind_mask(events, (K.CPU_OP, K.RUNTIME)))
        wall = hi - lo
        cpu_busy = union_length(*clip_intervals(ts[host], ts[host] + dur[host], lo, hi))
        dev_busy = union_busy = union_length(d_s, d_e, start_order) if has_device else 0.0
        window, n_steps, per = wall, 0, 1
    else:
        lo, hi = device_window(steps) or (0.0, 0.0)
        n_steps = per = len(counted)
        wall = float(counted["wall_us"].sum())
        cpu_busy = float(counted["cpu_busy_us"].sum())
        dev_busy = float(counted["device_busy_us"].sum())
        window, union_busy = _counted_spans(counted, launched_by_counted(steps, owner), d_s, d_e, start_order)
    out.update(
        {
            "steps": n_steps,
            "steps_recorded": len(steps),
            "steps_empty": int(steps["empty"].sum()) if len(steps) else 0,
            "steps_truncated": int(steps["truncated"].sum()) if len(steps) else 0,
            "steps_suspicious": int(steps["suspicious"].sum()) if len(steps) else 0,
            "window_start_us": float(lo),
            "window_end_us": float(hi),
            "wall_per_step_us": wall / per,
            "cpu_busy_per_step_us": cpu_busy / per,
            "device_busy_per_step_us": dev_busy / per if has_device else np.nan,
            "device_busy_pct": 100 * union_busy / window if has_device and window > 0 else np.nan,
            "events": len(events),
            "kernels": int(K.kind_mask(events, K.KERNEL).sum()),
            "span_us": float(meta.span_us),
            "rank": meta.rank,
            "world_size": meta.world_size,
        }
    )
    if len(steps):
        out.update(_device_accounting(events, steps, owner, links, d_e - d_s, act))
    if n_steps > 1:
        out["first_step_wall_us"] = float(counted["wall_us"].iloc[0])
        out["rest_wall_per_step_us"] = float(counted["wall_us"].iloc[1:].mean())
    return out


def _counted_spans(
    counted: pd.DataFrame, mine: np.ndarray, d_s: np.ndarray, d_e: np.ndarray, start_order: np.ndarray | None
) -> tuple[float, float]:
    """(Time from the counted steps' first start until their work ended, union of the work they launched).

    Overlaps count once. ``mine``: which of the activities ``d_s``, ``d_e``
    they launched; ``start_order``: the activities' `kernels.start_order`, where known.
    """
    ends = np.fmax(counted["start_us"] + counted["wall_us"], counted["device_end_us"]).to_numpy()
    window = union_length(counted["start_us"].to_numpy(np.float64), ends)
    sub = None if start_order is None else order_of_subset(start_order, mine)
    return window, union_length(d_s[mine], d_e[mine], sub)


def _suspicious_rows(events: pd.DataFrame, steps: pd.DataFrame) -> np.ndarray:
    if steps.empty:
        return np.array([], dtype=np.int64)
    rows, numbers = step_rows(events)
    rows = rows[np.lexsort((events["ts"].to_numpy()[rows], numbers))]
    return rows[steps["suspicious"].to_numpy(bool)]


def _device_accounting(
    events: pd.DataFrame,
    steps: pd.DataFrame,
    owner: np.ndarray,
    links: pd.DataFrame,
    dur: np.ndarray,
    act: np.ndarray | None = None,
) -> dict[str, Any]:
    """Where every device activity went: counted steps, left-out steps, outside, queued, unlinked.

    ``act``: `kernels.activity_rows`, where the caller has them.
    """
    if act is None:
        act = activity_rows(events)
    sources = launch_sources(events, links, act)
    unlinked = sources < 0
    queued = queued_before_trace(events, links, act, sources)
    in_counted = launched_by_counted(steps, owner)
    parts = {
        "in_steps": in_counted,
        "left_out": (owner >= 0) & ~in_counted,
        "outside_steps": (owner < 0) & ~unlinked,
        "queued": queued,
        "unlinked": (owner < 0) & unlinked & ~queued,
        # Not a fifth part: the unlinked work the steps got by time window.
        "by_window": (owner >= 0) & unlinked,
    }
    out: dict[str, Any] = {}
    for key, m in parts.items():
        out[f"device_activities_{key}"] = int(m.sum())
        out[f"device_us_{key}"] = float(dur[m].sum())
    return out


def step_notes(steps: pd.DataFrame, summary: dict[str, Any]) -> list[str]:
    """What the reader must know about the steps: those left out, device work not in them."""
    from ..format import fmt_time

    notes = []
    if steps.empty:
        return notes
    names = [f"ProfilerStep#{int(s)}" for s in steps["step"]]
    for flag, why in (
        ("empty", "empty (no op started in it and it launched no device work)"),
        ("truncated", "cut short by the error that interrupted the run"),
    ):
        hit = [n for n, f in zip(names, steps[flag].to_numpy(bool), strict=True) if f]
        if hit:
            notes.append(
                f"{', '.join(hit)} {'is' if len(hit) == 1 else 'are'} {why}: left out of the per-step figures"
            )
    lo, hi = summary.get("window_start_us", 0.0), summary.get("window_end_us", 0.0)
    for n, row in zip(names, steps.itertuples(index=False), strict=True):
        if row.suspicious:
            notes.append(
                f"{n} lasts {fmt_time(row.wall_us)} on a thread where no op runs, but the other recorded "
                f"events span {fmt_time(hi - lo)}: the range looks wrong and is left out of the per-step figures"
            )
    counted = int(summary.get("steps") or 0)
    kept = counted_steps(steps)
    if counted and not kept.empty:
        host_end = float((kept["start_us"] + kept["wall_us"]).max())
        lag = float(summary.get("window_end_us", host_end)) - host_end
        if lag > 0.01 * float(kept["wall_us"].sum()):
            notes.append(
                f"the device ran behind the host: the steps' device work ended {fmt_time(lag)} after the "
                "last host step; device busy % is over the time until it ended"
            )
    if counted == 0 and len(steps):
        notes.append("no step is left to count: figures are over the recording window, as one step")
    outside = ": left out of the kernel table and the per-step figures"
    for key, what in (
        (
            "outside_steps",
            "were launched outside the profiled steps (before, between or after them)" + outside,
        ),
        (
            "queued",
            "were queued before the trace started (correlation id below the first recorded launch)" + outside,
        ),
        ("left_out", "were launched in left-out steps" + outside),
        ("unlinked", "have no recorded launch and start in no step" + outside),
        ("by_window", "have no recorded launch: each counts in the step whose host time window it starts in"),
    ):
        k = int(summary.get(f"device_activities_{key}") or 0)
        if k and counted:
            us = float(summary.get(f"device_us_{key}") or 0.0)
            notes.append(f"{k:,} device activities ({fmt_time(us)} of device time) {what}")
    return notes
