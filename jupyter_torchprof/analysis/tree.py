"""Nesting by time: which event encloses which.

The profiler records flat intervals; the call tree is implied by time
containment on one thread. This is the same rule torch's own ``key_averages()``
uses (events sorted by start, longest first; an event is a child of the
innermost open event that fully contains it), so self times agree with it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import categories as K


def lane_keys(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """One integer per distinct (first, second) pair, e.g. (pid, tid)."""
    if len(first) == 0:
        return np.array([], dtype=np.int64)
    pairs = pd.MultiIndex.from_arrays([first, second])
    codes, _ = pd.factorize(pairs)
    return codes.astype(np.int64)


def nest(
    lane: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    tolerance: float = 0.001,
) -> tuple[np.ndarray, np.ndarray]:
    """Parent index and depth of each interval within its lane.

    Parameters
    ----------
    lane
        Integer lane of each interval (thread, or device stream); intervals
        only nest inside their own lane.
    start, end
        Interval bounds (µs).
    tolerance
        How far a child may poke out past its parent's end and still count
        as inside: timestamps decoded from epoch-based clocks lose sub-µs
        precision, so exact comparison would orphan real children.

    Returns
    -------
    parent, depth
        ``parent[i]`` is the position of the innermost interval enclosing
        ``i`` (or -1); ``depth[i]`` is how many intervals enclose it.
    """
    n = len(start)
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int32)
    if n == 0:
        return parent, depth
    # Parents sort before their children: by lane, start, then longest first;
    # the original position breaks remaining ties deterministically.
    order = np.lexsort((np.arange(n), -end, start, lane))
    lanes = lane[order].tolist()
    starts = start[order].tolist()
    ends = end[order].tolist()
    order_l = order.tolist()
    par = [-1] * n
    dep = [0] * n
    stack_pos: list[int] = []
    stack_end: list[float] = []
    current = None
    for k in range(n):
        ln = lanes[k]
        if ln != current:
            stack_pos.clear()
            stack_end.clear()
            current = ln
        s = starts[k]
        e = ends[k]
        while stack_end and (s >= stack_end[-1] or e > stack_end[-1] + tolerance):
            stack_end.pop()
            stack_pos.pop()
        i = order_l[k]
        if stack_pos:
            par[i] = stack_pos[-1]
            dep[i] = len(stack_pos)
        stack_pos.append(i)
        stack_end.append(e)
    parent[:] = par
    depth[:] = dep
    return parent, depth


def host_tree(events: pd.DataFrame, tolerance: float = 0.001) -> pd.DataFrame:
    """Call tree of the host events (ops, annotations, Python frames, runtime calls).

    Returns a frame aligned with ``events`` with ``parent`` (row position of
    the enclosing host event, -1 for roots and for device events) and
    ``depth`` (-1 for device events).
    """
    kind = events["kind"].to_numpy()
    is_host = np.isin(kind, K.HOST_KINDS)
    idx = np.flatnonzero(is_host)
    lane = lane_keys(events["pid"].to_numpy()[idx], events["tid"].to_numpy()[idx])
    ts = events["ts"].to_numpy()[idx]
    end = ts + events["dur"].to_numpy()[idx]
    sub_parent, sub_depth = nest(lane, ts, end, tolerance)
    parent = np.full(len(events), -1, dtype=np.int64)
    depth = np.full(len(events), -1, dtype=np.int32)
    parent[idx] = np.where(sub_parent >= 0, idx[np.maximum(sub_parent, 0)], -1)
    depth[idx] = sub_depth
    return pd.DataFrame({"parent": parent, "depth": depth}, index=events.index)


def device_depth(events: pd.DataFrame, tolerance: float = 0.001) -> np.ndarray:
    """Nesting depth of device events within their (device, stream) lane.

    Kernels on one stream rarely overlap, but GPU user annotations enclose
    them; the timeline stacks them by this depth. -1 for host events.
    """
    kind = events["kind"].to_numpy()
    idx = np.flatnonzero(np.isin(kind, K.DEVICE_KINDS))
    depth = np.full(len(events), -1, dtype=np.int32)
    if len(idx):
        lane = lane_keys(events["device"].to_numpy()[idx], events["stream"].to_numpy()[idx])
        ts = events["ts"].to_numpy()[idx]
        _, sub_depth = nest(lane, ts, ts + events["dur"].to_numpy()[idx], tolerance)
        depth[idx] = sub_depth
    return depth


def nearest_ancestor(parent: np.ndarray, depth: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each node, the closest proper ancestor for which ``wanted`` is true.

    Walks the tree one depth level at a time (vectorised), so the cost is
    O(nodes) regardless of how deep the stack is.
    """
    n = len(parent)
    result = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return result
    max_depth = int(depth.max(initial=0))
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(max_depth + 2))
    for d in range(1, max_depth + 1):
        nodes = order[bounds[d] : bounds[d + 1]]
        p = parent[nodes]
        valid = p >= 0
        nodes, p = nodes[valid], p[valid]
        result[nodes] = np.where(wanted[p], p, result[p])
    return result


def subtree_sums(parent: np.ndarray, depth: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Each node's own value plus that of all its descendants."""
    total = own.astype(np.float64).copy()
    if len(parent) == 0:
        return total
    max_depth = int(depth.max(initial=0))
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(max_depth + 2))
    for d in range(max_depth, 0, -1):
        nodes = order[bounds[d] : bounds[d + 1]]
        p = parent[nodes]
        valid = p >= 0
        np.add.at(total, p[valid], total[nodes[valid]])
    return total


def children_sums(parent: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Sum of ``values`` over each node's direct children."""
    has = parent >= 0
    return np.bincount(parent[has], weights=values[has], minlength=len(parent)).astype(np.float64)
