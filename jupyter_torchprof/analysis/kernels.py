"""Device-side tables: kernels, copies, streams and busy time.

Everything here groups by the integer codes of the categorical columns and
aggregates with numpy (``bincount``, one sort for the order statistics), so a
million kernels cost a few array passes and the string work is done once per
distinct kernel name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import categories as K
from .names import describe_kernel
from .occupancy import not_estimated
from .tree import unique_inverse


def device_activity(events: pd.DataFrame) -> pd.DataFrame:
    """The events that occupied a device: kernels, memcpys and memsets."""
    return events.loc[K.kind_mask(events, K.DEVICE_ACTIVITY)]


def activity_rows(events: pd.DataFrame) -> np.ndarray:
    """Row positions of the device activity (kernels, memcpys, memsets)."""
    return np.flatnonzero(K.kind_mask(events, K.DEVICE_ACTIVITY))


def order_by_group(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.lexsort((values, group))``: by group, then value (NaN last), ties by position.

    Two stable sorts, the value's and then the group's, give the same order;
    groups numbered below 2**15 sort by radix as ``int16``, where the
    lexsort merge-sorted both keys.
    """
    small = len(group) and group.min() >= 0 and group.max() < 2**15
    if small and len(group) >= SEGMENT_SORT_FROM:
        order = _by_group_then_value(group.astype(np.int16), values)
        if order is not None:
            return order
    order = np.argsort(values, kind="stable")
    key = group[order]
    if small:
        key = key.astype(np.int16)
    return order[np.argsort(key, kind="stable")]


#: Rows from which `order_by_group` sorts each group's values apart.
SEGMENT_SORT_FROM = 1 << 14
#: Groups up to which it does (one sort call each).
SEGMENT_SORT_GROUPS = 4096


def _by_group_then_value(key: np.ndarray, values: np.ndarray) -> np.ndarray | None:
    """The same order, by group first (radix) and then each group's values: None for too many groups.

    Sorting each group apart compares less (n log(n/g)) and in cache:
    1.9M kernels of 92 names 0.14 vs 0.19 s.
    """
    by_group = np.argsort(key, kind="stable")
    ordered = key[by_group]
    heads = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    if len(heads) > SEGMENT_SORT_GROUPS:
        return None
    ends = np.append(heads[1:], len(ordered))
    at = values[by_group]
    out = np.empty_like(by_group)
    for a, b in zip(heads.tolist(), ends.tolist(), strict=True):
        # Stable within the group: equal values keep their row order, NaN last.
        out[a:b] = by_group[a:b][np.argsort(at[a:b], kind="stable")]
    return out


def merge_intervals(
    start: np.ndarray, end: np.ndarray, order: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as disjoint, sorted blocks ``(starts, ends)``.

    Intervals that touch (one ends where the next starts) are merged.
    ``order``: ``np.argsort(start, kind="stable")``, where the caller has it.
    """
    if len(start) == 0:
        return np.array([], dtype=np.float64), np.array([], dtype=np.float64)
    if order is None:
        order = np.argsort(start, kind="stable")
    s = start[order]
    e = np.maximum.accumulate(end[order])
    # A new block starts where an interval begins after everything before ended.
    new_block = np.empty(len(s), dtype=bool)
    new_block[0] = True
    new_block[1:] = s[1:] > e[:-1]
    first = np.flatnonzero(new_block)
    last = np.append(first[1:], len(s)) - 1
    return s[first], e[last]


def union_length(start: np.ndarray, end: np.ndarray, order: np.ndarray | None = None) -> float:
    """Total length covered by a set of intervals (overlaps counted once; ``order`` as `merge_intervals`)."""
    bs, be = merge_intervals(start, end, order)
    return float((be - bs).sum())


def start_order(events: pd.DataFrame, act: np.ndarray | None = None) -> np.ndarray:
    """The device activities (`activity_rows`, or ``act``) by start, ties in row order: positions among them.

    One sort shared by the steps table, the summary and the findings, each
    of which sorted the same starts (two million activities: ~40 ms each).
    """
    if act is None:
        act = activity_rows(events)
    return np.argsort(events["ts"].to_numpy()[act], kind="stable")


def order_of_subset(order: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``np.argsort(values[mask], kind="stable")`` from ``order = np.argsort(values, kind="stable")``.

    A stable order keeps its ties in position order, so the subset's order
    is the whole order less the rows outside, renumbered among the subset.
    """
    kept = order[mask[order]]
    rank = np.cumsum(mask) - 1
    return rank[kept]


def clip_intervals(start: np.ndarray, end: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Intervals cut to the window [lo, hi] (those outside become empty)."""
    s = np.clip(start, lo, hi)
    e = np.clip(end, lo, hi)
    return s, e


def overlap_per_window(
    start: np.ndarray, end: np.ndarray, lo: np.ndarray, hi: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """For each window ``[lo[k], hi[k])``, the summed overlap of the intervals with it.

    Windows must be sorted and must not overlap (profiler steps); each
    interval is charged to every window it overlaps. With ``weights`` the
    overlaps are multiplied by them.
    """
    out = np.zeros(len(lo), dtype=np.float64)
    if not len(start) or not len(lo):
        return out
    # First window that ends after the interval starts.
    k = np.searchsorted(hi, start, side="right")
    idx = np.arange(len(start))
    while len(idx):
        inside = k < len(lo)
        idx, k = idx[inside], k[inside]
        if not len(idx):
            break
        s, e = start[idx], end[idx]
        ov = np.minimum(e, hi[k]) - np.maximum(s, lo[k])
        pos = ov > 0
        w = ov[pos] if weights is None else ov[pos] * weights[idx[pos]]
        out += np.bincount(k[pos], weights=w, minlength=len(lo))
        # Intervals reaching past this window continue into the next.
        more = e > hi[k]
        idx, k = idx[more], k[more] + 1
    return out


def _group_mean(inv: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Mean of the non-NaN ``values`` per group (NaN where a group has none)."""
    ok = ~np.isnan(values)
    n = np.bincount(inv[ok], minlength=groups)
    s = np.bincount(inv[ok], weights=values[ok], minlength=groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / np.maximum(n, 1), np.nan)


def _group_mode(inv: np.ndarray, codes: np.ndarray, categories: pd.Index, groups: int) -> np.ndarray:
    """The most frequent non-missing category per group (None where none)."""
    out = np.full(groups, None, dtype=object)
    ok = codes >= 0
    if not ok.any():
        return out
    pair = inv[ok].astype(np.int64) * (len(categories) + 1) + codes[ok]
    u, counts = np.unique(pair, return_counts=True)
    g, c = u // (len(categories) + 1), u % (len(categories) + 1)
    # Highest count first; the first row per group wins.
    order = np.lexsort((-counts, g))
    first = order[np.r_[True, g[order][1:] != g[order][:-1]]]
    out[g[first]] = np.asarray(categories, dtype=object)[c[first]]
    return out


def _join_per_group(inv: np.ndarray, values: np.ndarray, groups: int) -> list[str]:
    """Comma-joined distinct ``values`` per group (in increasing order)."""
    vals, vinv = unique_inverse(values)
    pair, _ = unique_inverse(inv.astype(np.int64) * len(vals) + vinv)
    out: list[list[str]] = [[] for _ in range(groups)]
    for g, v in zip((pair // len(vals)).tolist(), vals[pair % len(vals)].tolist(), strict=True):
        out[g].append(str(v))
    return [",".join(x) for x in out]


_KERNEL_COLUMNS = [
    "name", "short_name", "kind", "family", "calls", "total_us", "mean_us", "min_us",
    "median_us", "max_us", "pct", "devices", "streams",
]  # fmt: skip
_OPTIONAL_COLUMNS = [
    "op", "precision", "tile", "layout", "tensor_cores", "fused_ops",
    "grid", "block", "registers", "shared_memory", "blocks_per_sm", "warps_per_sm", "occupancy",
    "bytes", "bandwidth_gbps",
]  # fmt: skip


def kernel_table(
    events: pd.DataFrame, links: pd.DataFrame | None = None, keep: np.ndarray | None = None
) -> pd.DataFrame:
    """One row per device kernel (or copy, or memset) name.

    Columns: ``name`` (full), ``short_name`` (readable, see `names`),
    ``kind`` (kernel, memcpy, memset), ``family`` (gemm, communication,
    triton pointwise ...), ``calls, total_us, mean_us, min_us, median_us,
    max_us``, ``pct`` (share of all device activity time, so rows sum to 100),
    ``devices``, ``streams``; where the trace has them the launch arguments:
    the most common ``grid`` and ``block``, mean ``registers`` (per thread),
    ``shared_memory`` (bytes), ``blocks_per_sm``, ``warps_per_sm`` and
    ``occupancy`` (estimated achieved, %; NaN where Kineto's 0 only means
    it could not estimate, see `occupancy`); ``bytes`` (total) and
    ``bandwidth_gbps`` for copies and memsets; what the name tells (see
    `names.KernelName`): ``op`` for library kernels that name theirs,
    ``precision``, ``tile`` and ``layout`` for GEMMs and convolutions,
    ``tensor_cores`` (``yes``/``no``/"" where the name does not tell, see
    `tensor_cores`),
    ``fused_ops`` for generated kernels; mean and max ``launch_delay_us``
    (launch start to kernel start) where launches are linked. Optional
    columns appear only when some row has a value.

    ``keep`` (one bool per device activity, `activity_rows` order) selects the
    activities counted, e.g. `steps.counted_work`: the work the counted steps
    launched, so the table sums to the steps table. None counts them all.
    """
    rows = activity_rows(events)
    if keep is not None:
        rows = rows[np.asarray(keep, dtype=bool)]
    if not len(rows):
        return _empty_kernel_table()
    uniq, inv = unique_inverse(events["name"].cat.codes.to_numpy()[rows])
    g = len(uniq)
    # Every column is made as an array into one dict and the frame built
    # once: some thirty column insertions were a fixed cost on every trace.
    cols = _duration_columns(events, rows, uniq, inv)
    cols["devices"] = _join_per_group(inv, events["device"].to_numpy()[rows], g)
    cols["streams"] = _join_per_group(inv, events["stream"].to_numpy()[rows], g)
    _add_launch_arguments(cols, events, rows, inv)
    _add_bytes(cols, events, rows, inv)
    _add_name_parts(cols)
    if links is not None:
        _add_launch_delay(cols, links["launch_delay_us"].to_numpy()[rows], inv)
    # Launch-argument columns only when the trace recorded any.
    keep_optional = [c for c in _OPTIONAL_COLUMNS if c in cols and _has_value(cols[c])]
    order_cols = [*_KERNEL_COLUMNS, *keep_optional]
    if "launch_delay_us" in cols:
        order_cols += ["launch_delay_us", "launch_delay_max_us"]
    # The order of sort_values("total_us", ascending=False, kind="stable").
    order = pd.Series(cols["total_us"]).sort_values(ascending=False, kind="stable").index.to_numpy()
    # Lists of names stay objects (a fixed-width string array would pad each to the longest).
    return pd.DataFrame({c: np.asarray(cols[c], dtype=_dtype_of(cols[c]))[order] for c in order_cols})


def _dtype_of(values: list | np.ndarray) -> type | np.dtype:
    return object if isinstance(values, list) else values.dtype


def _has_value(values: np.ndarray) -> bool:
    """Whether any cell is neither missing nor "" (``col.replace("", nan).notna().any()``)."""
    values = np.asarray(values, dtype=object)
    return bool((~pd.isna(values) & (values != "")).any())


def _empty_kernel_table() -> pd.DataFrame:
    """The kernel table of a trace without device activity: the columns, typed, no rows."""
    return pd.DataFrame(
        {
            c: pd.Series(
                dtype=object if c in ("name", "short_name", "kind", "family", "devices", "streams") else float
            )
            for c in _KERNEL_COLUMNS
        }
    )


def _duration_columns(
    events: pd.DataFrame, rows: np.ndarray, uniq: np.ndarray, inv: np.ndarray
) -> dict[str, np.ndarray]:
    """``name, kind, calls`` and the duration statistics, one row per name code in ``uniq``."""
    g = len(uniq)
    name = events["name"]
    dur = events["dur"].to_numpy()[rows]
    calls = np.bincount(inv, minlength=g)
    total = np.bincount(inv, weights=dur, minlength=g)
    # Order statistics from one sort: by group, then by duration.
    order = order_by_group(inv, dur)
    sorted_dur = dur[order]
    first = np.searchsorted(inv[order], np.arange(g), side="left")
    last = first + calls - 1
    mid_lo = first + (calls - 1) // 2
    mid_hi = first + calls // 2
    kind_codes = events["kind"].cat.codes.to_numpy()[rows]
    grand = total.sum()
    return {
        "name": name.cat.categories.to_numpy(dtype=object)[uniq],
        "kind": np.asarray(K.KINDS, dtype=object)[kind_codes[order[first]]],
        "calls": calls,
        "total_us": total,
        "mean_us": total / calls,
        "min_us": sorted_dur[first],
        "median_us": (sorted_dur[mid_lo] + sorted_dur[mid_hi]) / 2,
        "max_us": sorted_dur[last],
        "pct": 100 * total / grand if grand > 0 else np.zeros(g),
    }


def _add_launch_arguments(
    cols: dict[str, np.ndarray], events: pd.DataFrame, rows: np.ndarray, inv: np.ndarray
) -> None:
    """The most common ``grid`` and ``block``, and the mean occupancy figures, per group."""
    g = len(cols["name"])
    for col in ("grid", "block"):
        cat = events[col]
        cols[col] = _group_mode(inv, cat.cat.codes.to_numpy()[rows], cat.cat.categories, g)
    for col in ("registers", "shared_memory", "blocks_per_sm", "warps_per_sm", "occupancy"):
        if col in events:
            values = events[col].to_numpy()[rows].astype(np.float64, copy=False)
            if col == "occupancy" and "shared_memory" in events:
                # Kineto's 0 % above 48 KiB of shared memory is "not estimated": no figure, not a zero.
                values = np.where(
                    not_estimated(values, events["shared_memory"].to_numpy()[rows]), np.nan, values
                )
            cols[col] = _group_mean(inv, values, g)


def _add_bytes(cols: dict[str, np.ndarray], events: pd.DataFrame, rows: np.ndarray, inv: np.ndarray) -> None:
    """Total ``bytes`` (NaN where none moved) and ``bandwidth_gbps`` over the calls that recorded bytes."""
    g = len(cols["name"])
    dur = events["dur"].to_numpy()[rows]
    nbytes = events["bytes"].to_numpy()[rows]
    has = ~np.isnan(nbytes)
    total = np.where(
        np.bincount(inv[has], minlength=g) > 0,
        np.bincount(inv[has], weights=nbytes[has], minlength=g),
        np.nan,
    )
    byte_time = np.bincount(inv[has], weights=dur[has], minlength=g)
    with np.errstate(invalid="ignore", divide="ignore"):
        cols["bandwidth_gbps"] = np.where((total > 0) & (byte_time > 0), total / (byte_time * 1e3), np.nan)
    cols["bytes"] = np.where(total > 0, total, np.nan)


def _add_name_parts(cols: dict[str, np.ndarray]) -> None:
    """What each kernel's name tells (`names.describe_kernel`): short name, family, op, precision ..."""
    described = [describe_kernel(n) for n in cols["name"].tolist()]
    cols["short_name"] = [d.short for d in described]
    cols["family"] = [d.family for d in described]
    cols["fused_ops"] = [", ".join(d.fused_ops) for d in described]
    cols["op"] = [d.op for d in described]
    cols["precision"] = [d.precision for d in described]
    cols["tile"] = [d.tile for d in described]
    cols["layout"] = [d.layout for d in described]
    cols["tensor_cores"] = [d.tensor_cores for d in described]


def _add_launch_delay(cols: dict[str, np.ndarray], delay: np.ndarray, inv: np.ndarray) -> None:
    """Mean and max launch delay per group (NaN where no call was linked to its launch)."""
    g = len(cols["name"])
    cols["launch_delay_us"] = _group_mean(inv, delay, g)
    ok = ~np.isnan(delay)
    mx = np.full(g, -np.inf)
    np.maximum.at(mx, inv[ok], delay[ok])
    cols["launch_delay_max_us"] = np.where(np.isfinite(mx), mx, np.nan)


def stream_table(
    events: pd.DataFrame, window: tuple[float, float] | None = None, rows: np.ndarray | None = None
) -> pd.DataFrame:
    """Busy and idle time per device stream, and per device (``stream = "all"``).

    Parameters
    ----------
    events
        The events frame.
    window
        (start, end) in µs; by default from the first start to the last end
        of the activities. Activities are cut to it.
    rows
        The device activities to account for (positions in ``events``);
        by default all kernels, copies and memsets. `Profile.streams` passes
        the work the counted steps launched, wherever it ran.

    Returns
    -------
    DataFrame with ``device``, ``stream``, ``kernels`` (activities overlapping
    the window), ``busy_us`` (union of their intervals, overlaps counted
    once), ``window_us``, and two idle times:

    * ``idle_in_window_us``: ``window_us - busy_us``, the time in the window
      the stream (device) ran nothing, before its first and after its last
      activity included;
    * ``idle_between_kernels_us``: Holistic Trace Analysis's idle time. On a
      stream: the activities sorted by start, the sum over each of its start
      minus the previous one's end (HTA's idle time breakdown; a stream runs
      its work in order, so these are the gaps between its consecutive
      kernels, and an overlap, should the trace show one, counts negatively
      as in HTA). On an ``all`` row: the device's span (last end minus first
      start) minus its busy time, HTA's temporal-breakdown idle time.

    and ``utilization_pct`` (``busy_us`` over ``window_us``).
    """
    cols = [
        "device", "stream", "kernels", "busy_us", "window_us",
        "idle_in_window_us", "idle_between_kernels_us", "utilization_pct",
    ]  # fmt: skip
    if rows is None:
        rows = activity_rows(events)
    rows = np.asarray(rows, dtype=np.int64)
    if not len(rows):
        return pd.DataFrame(columns=cols)
    start = events["ts"].to_numpy()[rows].astype(np.float64, copy=False)
    end = start + events["dur"].to_numpy()[rows]
    lo, hi = window if window is not None else (float(start.min()), float(end.max()))
    span = max(hi - lo, 0.0)
    inside = (end > lo) & (start < hi) | ((start == end) & (start >= lo) & (start <= hi))
    s, e = clip_intervals(start[inside], end[inside], lo, hi)
    dev = events["device"].to_numpy()[rows][inside]
    stream = events["stream"].to_numpy()[rows][inside]
    out = []
    for d in sorted(set(dev.tolist())):
        dm = dev == d
        for st in sorted(set(stream[dm].tolist())):
            m = dm & (stream == st)
            out.append((d, str(st), int(m.sum()), union_length(s[m], e[m]), gaps_between(s[m], e[m])))
        busy = union_length(s[dm], e[dm])
        out.append((d, "all", int(dm.sum()), busy, float(e[dm].max() - s[dm].min()) - busy))
    table = pd.DataFrame(out, columns=["device", "stream", "kernels", "busy_us", "idle_between_kernels_us"])
    table["window_us"] = span
    table["idle_in_window_us"] = np.maximum(span - table["busy_us"], 0.0)
    table["utilization_pct"] = 100 * table["busy_us"] / span if span > 0 else np.nan
    return table[cols]


def gaps_between(start: np.ndarray, end: np.ndarray) -> float:
    """HTA's idle time of one stream: sum of each start minus the previous end, in start order."""
    if len(start) < 2:
        return 0.0
    order = np.argsort(start, kind="stable")
    return float((start[order][1:] - end[order][:-1]).sum())


def memcpy_table(events: pd.DataFrame) -> pd.DataFrame:
    """Copies and memsets grouped by name (direction, memory kinds).

    Columns ``name, kind, calls, total_us, bytes, bandwidth_gbps`` (bytes
    over the time of the calls that recorded bytes, in GB/s).
    """
    rows = np.flatnonzero(K.kind_mask(events, (K.MEMCPY, K.MEMSET)))
    cols = ["name", "kind", "calls", "total_us", "bytes", "bandwidth_gbps"]
    if not len(rows):
        return pd.DataFrame(columns=cols)
    uniq, inv = unique_inverse(events["name"].cat.codes.to_numpy()[rows])
    g = len(uniq)
    dur = events["dur"].to_numpy()[rows]
    nbytes = events["bytes"].to_numpy()[rows]
    has = ~np.isnan(nbytes)
    kind_codes = events["kind"].cat.codes.to_numpy()[rows]
    first = np.full(g, -1)
    first[inv[::-1]] = np.arange(len(inv))[::-1]
    total_bytes = np.bincount(inv[has], weights=nbytes[has], minlength=g)
    byte_time = np.bincount(inv[has], weights=dur[has], minlength=g)
    table = pd.DataFrame(
        {
            "name": events["name"].cat.categories.to_numpy(dtype=object)[uniq],
            "kind": np.asarray(K.KINDS, dtype=object)[kind_codes[first]],
            "calls": np.bincount(inv, minlength=g),
            "total_us": np.bincount(inv, weights=dur, minlength=g),
            "bytes": np.where(np.bincount(inv[has], minlength=g) > 0, total_bytes, np.nan),
        }
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        table["bandwidth_gbps"] = np.where(byte_time > 0, total_bytes / (byte_time * 1e3), np.nan)
    return table.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)[cols]


def memcpy_events(events: pd.DataFrame) -> pd.DataFrame:
    """One row per copy or memset: ``row, name, kind, device, stream, ts, dur, bytes, bandwidth_gbps``."""
    rows = np.flatnonzero(K.kind_mask(events, (K.MEMCPY, K.MEMSET)))
    dur = events["dur"].to_numpy()[rows]
    nbytes = events["bytes"].to_numpy()[rows]
    with np.errstate(invalid="ignore", divide="ignore"):
        bw = np.where(dur > 0, nbytes / (dur * 1e3), np.nan)
    return pd.DataFrame(
        {
            "row": rows,
            "name": events["name"].to_numpy()[rows],
            "kind": events["kind"].to_numpy()[rows],
            "device": events["device"].to_numpy()[rows],
            "stream": events["stream"].to_numpy()[rows],
            "ts": events["ts"].to_numpy()[rows],
            "dur": dur,
            "bytes": nbytes,
            "bandwidth_gbps": bw,
        }
    )
