"""Interval arithmetic on numpy arrays: merged blocks, gaps, overlaps."""

from __future__ import annotations

import numpy as np


def merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted blocks covering the union of the intervals."""
    if len(start) == 0:
        return np.array([], dtype=np.float64), np.array([], dtype=np.float64)
    order = np.argsort(start, kind="stable")
    s = start[order].astype(np.float64, copy=False)
    e = np.maximum.accumulate(end[order].astype(np.float64, copy=False))
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1]
    block = np.cumsum(new) - 1
    bs = s[new]
    be = np.zeros(len(bs))
    np.maximum.at(be, block, e)
    return bs, be


def covered_until(bs: np.ndarray, be: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Length of the union of blocks ``[bs, be)`` lying before each time ``t``."""
    t = np.asarray(t, dtype=np.float64)
    if len(bs) == 0:
        return np.zeros(t.shape)
    lengths = be - bs
    before = np.concatenate([[0.0], np.cumsum(lengths)])
    i = np.searchsorted(bs, t, side="right") - 1  # last block starting at or before t
    inside = np.where(i >= 0, np.clip(t - bs[np.maximum(i, 0)], 0.0, lengths[np.maximum(i, 0)]), 0.0)
    return np.where(i >= 0, before[np.maximum(i, 0)] + inside, 0.0)


def overlap_with(bs: np.ndarray, be: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For each interval, how much of it the blocks ``[bs, be)`` cover."""
    return covered_until(bs, be, end) - covered_until(bs, be, start)


def idle_lengths(start: np.ndarray, end: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The lengths of `idle_segments` (``gap_end - gap_start``), without finding the intervals around each gap."""
    keep = np.flatnonzero((end > lo) & (start < hi))
    if len(keep) == 0:
        return np.array([hi]).astype(np.float64) - np.array([lo]).astype(np.float64)
    order = keep[np.argsort(start[keep], kind="stable")]
    s = np.clip(start[order], lo, hi).astype(np.float64, copy=False)
    e_acc = np.maximum.accumulate(np.clip(end[order], lo, hi).astype(np.float64, copy=False))
    inner = np.flatnonzero(s[1:] > e_acc[:-1])
    head = s[0] > lo
    tail = e_acc[-1] < hi
    gap_start = np.concatenate([[lo] if head else [], e_acc[inner], [float(e_acc[-1])] if tail else []])
    gap_end = np.concatenate([s[:1] if head else [], s[inner + 1], [hi] if tail else []])
    return gap_end.astype(np.float64) - gap_start.astype(np.float64)


def idle_segments(
    start: np.ndarray, end: np.ndarray, lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Idle stretches of a lane inside the window ``[lo, hi]``.

    Returns ``(gap_start, gap_end, before, after)`` where ``before`` and
    ``after`` are positions (into ``start``) of the interval that ended last
    before the gap and of the one that starts it (-1 at the window edges).
    """
    keep = np.flatnonzero((end > lo) & (start < hi))
    if len(keep) == 0:
        return np.array([lo]), np.array([hi]), np.array([-1]), np.array([-1])
    order = keep[np.argsort(start[keep], kind="stable")]
    s = np.clip(start[order], lo, hi).astype(np.float64, copy=False)
    e = np.clip(end[order], lo, hi).astype(np.float64, copy=False)
    e_acc = np.maximum.accumulate(e)
    # The interval holding the running maximum end is the one the gap follows.
    holder = np.maximum.accumulate(np.where(e >= e_acc, np.arange(len(e)), 0))
    inner = np.flatnonzero(s[1:] > e_acc[:-1])
    # Arrays joined once, not Python lists: a lane has a gap between most of
    # its kernels (a million floats boxed per call on a big trace).
    head = s[0] > lo
    tail = e_acc[-1] < hi
    none = np.array([], dtype=np.int64)
    return (
        np.concatenate([[lo] if head else [], e_acc[inner], [float(e_acc[-1])] if tail else []]).astype(
            np.float64
        ),
        np.concatenate([s[:1] if head else [], s[inner + 1], [hi] if tail else []]).astype(np.float64),
        np.concatenate(
            [[-1] if head else none, order[holder[inner]], order[holder[-1:]] if tail else none]
        ).astype(np.int64),
        np.concatenate([order[:1] if head else none, order[inner + 1], [-1] if tail else none]).astype(
            np.int64
        ),
    )
