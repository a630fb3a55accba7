"""Memory from the ``[memory]`` events: each device's peak, and each interval's bytes.

Kineto writes, with every allocation and free, the allocator's running total
(``total_allocated``). The CPU total counts only what was allocated while
profiling (torch cannot size blocks allocated before it started); a device
allocator reports its own running total.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import native

#: Kineto's ``Device Type`` of host memory.
CPU_DEVICE_TYPE = 0
#: How far (µs) an allocation may lie outside an interval and still count as
#: inside: half a nanosecond, below the trace's resolution, so the bounds are
#: inclusive (as torch's) without taking in the next nanosecond's allocation.
INTERVAL_TOLERANCE_US = 0.0005

_COLUMNS = ["device", "peak_bytes", "allocations", "frees", "allocated_bytes", "relative"]


def memory_peaks(memory: pd.DataFrame) -> pd.DataFrame:
    """One row per memory device, with its peak.

    Columns: ``device`` (``CPU`` / ``device N``), ``peak_bytes``,
    ``allocations`` and ``frees`` (event counts), ``allocated_bytes`` (sum of
    the allocations) and ``relative`` (True for the CPU: counted from the
    start of profiling).
    """
    if memory is None or not len(memory):
        return pd.DataFrame({c: pd.Series(dtype=object if c == "device" else float) for c in _COLUMNS})
    rows = []
    dtype = memory["device_type"].to_numpy()
    did = memory["device_id"].to_numpy()
    nbytes = memory["bytes"].to_numpy(np.float64)
    total = memory["total_allocated"].to_numpy(np.float64)
    for t, d in sorted({(int(a), int(b)) for a, b in zip(dtype, did, strict=True)}):
        sel = (dtype == t) & (did == d)
        cpu = t == CPU_DEVICE_TYPE
        rows.append(
            {
                "device": "CPU" if cpu else f"device {d}",
                "peak_bytes": float(np.nanmax(total[sel])) if np.isfinite(total[sel]).any() else np.nan,
                "allocations": int((nbytes[sel] > 0).sum()),
                "frees": int((nbytes[sel] < 0).sum()),
                "allocated_bytes": float(nbytes[sel][nbytes[sel] > 0].sum()),
                "relative": bool(cpu),
            }
        )
    return pd.DataFrame(rows, columns=_COLUMNS)


def memory_in_intervals(
    start: np.ndarray,
    end: np.ndarray,
    memory: pd.DataFrame,
    tolerance: float = INTERVAL_TOLERANCE_US,
) -> tuple[np.ndarray, np.ndarray]:
    """Bytes allocated (net of frees) inside each ``[start, end]``, on any thread.

    This is torch's rule (``_parse_kineto_results``): an event's memory
    usage is the sum of every ``[memory]`` record whose time lies in its
    interval, bounds included, whichever thread made it. A tensor allocated
    on a forked TorchScript thread while a main-thread op waits counts for
    that op as well as for the op that allocated it.

    Parameters
    ----------
    start, end
        Interval bounds (µs, the trace's clock after parsing).
    memory
        ``[memory]`` events: ``ts``, ``bytes`` and ``device_type``.
    tolerance
        Slack (µs) on both bounds, for the rounding of parsed timestamps.

    Returns
    -------
    (host bytes, device bytes) per interval, as float arrays.
    """
    n = len(start)
    if memory is None or not len(memory):
        return np.zeros(n), np.zeros(n)
    ts = memory["ts"].to_numpy(np.float64)
    order = np.argsort(ts, kind="stable")
    ts = ts[order]
    # A record without a size adds nothing, rather than poisoning the sums.
    nbytes = np.nan_to_num(memory["bytes"].to_numpy(np.float64)[order])
    on_cpu = memory["device_type"].to_numpy()[order] == CPU_DEVICE_TYPE
    # Prefix sums turn each interval's sum into two look-ups (the events
    # are many, the records sorted once).
    low = np.asarray(start, np.float64) - tolerance
    high = np.asarray(end, np.float64) + tolerance
    lo = count_before(ts, low, side="left")
    # Most intervals hold no record (on a large trace three in four): their
    # end is counted only where a record may lie inside.
    rest = _holding_records(ts, low, high, lo)
    hi = count_before(ts, high[rest], side="right")
    lo_rest = lo[rest]
    out = []
    for sel in (on_cpu, ~on_cpu):
        if not sel.any():
            # No record on this side: the differences of a sum of zeros.
            out.append(np.zeros(n))
            continue
        csum = np.concatenate([[0.0], np.cumsum(np.where(sel, nbytes, 0.0))])
        if np.isfinite(csum[-1]):
            # Every prefix sum is finite (one that overflows stays infinite
            # to the end), so an empty interval's csum[lo] - csum[lo] is +0.0.
            inside = np.zeros(n)
        else:
            inside = csum[lo] - csum[lo]
        inside[rest] = csum[hi] - csum[lo_rest]
        out.append(inside)
    return out[0], out[1]


def _holding_records(ts: np.ndarray, low: np.ndarray, high: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Positions of the intervals that may hold a record: all but those whose end count is ``lo`` for sure.

    ``searchsorted(ts, high, "right")`` is ``lo`` when ``low <= high`` and the
    first record at or after ``low`` (``ts[lo]``, or none) lies past
    ``high``. Bounds reversed or NaN are kept, to be counted in full.
    ``low`` is overwritten (the caller's own scratch).
    """
    counted_in_full = ~(high >= low)
    # ts[lo], NaN past the last record (it lies past every bound, as numpy orders NaN last).
    first = np.take(np.append(ts, np.nan), lo, out=low)
    may_hold = first <= high
    may_hold |= counted_in_full
    return np.flatnonzero(may_hold)


def count_before(ordered: np.ndarray, wanted: np.ndarray, side: str) -> np.ndarray:
    """``np.searchsorted(ordered, wanted, side)``, by searching ``ordered`` in ``wanted`` sorted when that is cheaper.

    A binary search per event into many records misses the cache at every
    step; sorting the events (in runs already, one per thread) and placing
    each record among them costs less once the records are more than a few
    thousand. Both count under numpy's one order (NaN last), so they agree.
    """
    if len(ordered) <= 4096 or len(wanted) <= 4 * 4096:
        return np.searchsorted(ordered, wanted, side=side)
    # In C, each search starts from the previous answer (one thread's
    # events come in runs of near times): no sort of the events.
    done = native.count_before(ordered, wanted, side)
    if done is not None:
        return done
    order = np.argsort(wanted, kind="stable")
    # Record j lies before wanted[order[k]] exactly when k >= (wanted sorted placed before or at it).
    ranked = wanted[order]
    place = np.searchsorted(ranked, ordered, side="right" if side == "left" else "left")
    counts = np.bincount(place, minlength=len(wanted) + 1)[: len(wanted)]
    np.cumsum(counts, out=counts)
    # The sorted copy is spent: its buffer takes the answer (on ten million
    # events each fresh array costs tens of ms of page faults).
    same_size = ranked.dtype.itemsize == np.dtype(np.intp).itemsize
    out = ranked.view(np.intp) if same_size else np.empty(len(wanted), np.intp)
    out[order] = counts
    return out
