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
from ..trace import native


def lane_keys(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """One integer per distinct (first, second) pair, e.g. (pid, tid).

    The integers are distinct per pair but not necessarily consecutive.
    """
    if len(first) == 0:
        return np.array([], dtype=np.int64)
    first, second = np.asarray(first), np.asarray(second)
    # Events come in long runs of one thread: numbering the run heads only
    # gives the same codes (a value's first appearance always starts a run)
    # for a fraction of the hashing.
    heads = _run_heads(first, second)
    few = len(heads) * 4 <= len(first)
    f, s = (first[heads], second[heads]) if few else (first, second)
    a, _ = pd.factorize(f)
    b, b_uniques = pd.factorize(s)
    lane = a.astype(np.int64) * max(len(b_uniques), 1) + b
    return _per_row(lane, heads, len(first)) if few else lane


def pair_groups(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """One integer per distinct (first, second) pair, for code that only compares them (lanes of `nest`).

    As `lane_keys` (the run heads numbered where events come in long runs
    of one pair), but non-negative integer ids that fit are packed into
    one ``int64`` and hashed once, where `lane_keys` hashes each key: on
    interleaved threads half the cost. The numbers differ from
    `lane_keys`' but group the rows alike (tested); other ids go through it.
    """
    first, second = np.asarray(first), np.asarray(second)
    n = len(first)
    if not n or first.dtype.kind not in "iu" or second.dtype.kind not in "iu":
        return lane_keys(first, second)
    heads = _run_heads(first, second)
    few = len(heads) * 4 <= n
    f, s = (first[heads], second[heads]) if few else (first, second)
    if f.min() < 0 or f.max() >= 2**31 or s.min() < 0 or s.max() >= 2**32:
        return lane_keys(first, second)
    codes = pd.factorize((f.astype(np.int64) << 32) | s.astype(np.int64))[0].astype(np.int64, copy=False)
    return _per_row(codes, heads, n) if few else codes


def _run_heads(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Positions where a run of one (first, second) pair starts (non-empty inputs)."""
    head = np.empty(len(first), dtype=bool)
    head[0] = True
    np.not_equal(first[1:], first[:-1], out=head[1:])
    head[1:] |= second[1:] != second[:-1]
    return np.flatnonzero(head)


def _per_row(per_run: np.ndarray, heads: np.ndarray, n: int) -> np.ndarray:
    """A value per run (`_run_heads`) repeated over each of the ``n`` rows of its run."""
    return np.repeat(per_run, np.diff(np.append(heads, n)))


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

    Notes
    -----
    The definition is the stack walk torch's ``key_averages()`` does
    (`nest_stack`), but a Python loop over a million events costs about a
    second. Here the walk is computed with array operations: in start order,
    an interval's depth is the number of earlier intervals of its lane still
    open when it starts, and its parent is the last earlier interval one level
    up. That equals the stack walk whenever the lane's intervals are properly
    nested (each parent open and enclosing its child, every ancestor open);
    the result is checked for exactly that, and lanes that fail the check
    (overlapping, not nested intervals) fall back to the stack walk. Where
    the native library is (`trace.native`) and lanes are integers, the stack
    walk runs in C over every lane instead, in one pass; both give the same
    (tested).
    """
    n = len(start)
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int32)
    if n == 0:
        return parent, depth
    lane = np.asarray(lane)
    start = np.asarray(start, dtype=np.float64)
    end = np.asarray(end, dtype=np.float64)
    # Parents sort before their children: by lane, start, then longest first;
    # the original position breaks remaining ties.
    order = start_order(lane, start, end)
    walked = (
        native.stack_walk_ordered(order, lane, start, end, tolerance) if lane.dtype.kind in "iu" else None
    )
    if walked is not None:
        # The stack walk in C, reading the intervals in order where they lie
        # (no sorted copies, no scatter back).
        return walked
    # Without the library (or with lanes that are not integers, which the
    # tree's callers never give): the walk in array operations.
    ln, s, e = lane[order], start[order], end[order]
    new_lane = np.empty(n, dtype=bool)
    new_lane[0] = True
    np.not_equal(ln[1:], ln[:-1], out=new_lane[1:])
    # For each interval, the position in this order where its lane begins.
    lane_starts = np.flatnonzero(new_lane)
    lane_first = np.repeat(lane_starts, np.diff(np.append(lane_starts, n)))
    dep, new_segment = _open_before(s, e, new_lane, lane_first)
    par, ok = _parent_one_level_up(s, e, dep, lane_first, tolerance)
    # Where the check failed, the stack walk decides (in place, per segment).
    _restack_segments(par, dep, s, e, np.append(np.flatnonzero(new_segment), n), ok, tolerance)
    parent[order] = np.where(par >= 0, order[np.maximum(par, 0)], -1)
    depth[order] = dep
    return parent, depth


def start_order(lane: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``np.lexsort((-end, start, lane))``: by lane, start, then longest first, ties by position.

    Two stable sorts (start, nearly sorted already; then the lane, a small
    integer) and a lexsort of only the intervals that share their lane and
    start: a three-key lexsort of every interval costs several times more.
    """
    n = len(start)
    order = np.argsort(start, kind="stable")
    lane_sorted = lane[order]
    if n and lane_sorted.min() >= 0 and lane_sorted.max() < 2**15:
        # Small non-negative integers sort by radix.
        lane_sorted = lane_sorted.astype(np.int16)
    order = order[np.argsort(lane_sorted, kind="stable")]
    if n < 2:
        return order
    ln, s = lane[order], start[order]
    same = (ln[1:] == ln[:-1]) & ((s[1:] == s[:-1]) | (np.isnan(s[1:]) & np.isnan(s[:-1])))
    if not same.any():
        return order
    # Runs of equal (lane, start): reorder each by -end (stable, so by position next).
    tied = np.zeros(n, dtype=bool)
    tied[1:] = same
    tied[:-1] |= same
    where = np.flatnonzero(tied)
    run = np.cumsum(np.r_[True, ~same])[where]
    sub = where[np.lexsort((-end[order[where]], run))]
    order[where] = order[sub]
    return order


def _open_before(
    s: np.ndarray, e: np.ndarray, new_lane: np.ndarray, lane_first: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Depth of each interval (sorted as in `nest`): earlier intervals of its lane still open.

    Returns the depth and where a segment starts: a point where everything
    before it in the lane has ended, so the stack walk is empty there and
    segments can be checked (and, if need be, recomputed) independently of
    each other.
    """
    n = len(s)
    pos = np.arange(n)
    lane_bounds = np.append(np.flatnonzero(new_lane), n)
    # Intervals of the lane that ended at or before each start (an interval
    # ending exactly where the next begins is closed, as in the stack walk).
    ended = np.empty(n, dtype=np.int64)
    new_segment = new_lane.copy()
    for a, b in zip(lane_bounds[:-1], lane_bounds[1:], strict=True):
        ended[a:b] = a + np.searchsorted(np.sort(e[a:b]), s[a:b], side="right")
        np.greater_equal(s[a + 1 : b], np.maximum.accumulate(e[a : b - 1]), out=new_segment[a + 1 : b])
    ended -= lane_first
    # ... but zero-length intervals sharing a start sort after the longer
    # ones there (and after themselves): they have not been seen yet.
    zero = e == s
    if zero.any():
        new_group = new_lane.copy()
        new_group[1:] |= s[1:] != s[:-1]
        group_bounds = np.append(np.flatnonzero(new_group), n)
        group_end = np.repeat(group_bounds[1:], np.diff(group_bounds))
        cz = np.concatenate(([0], np.cumsum(zero)))
        ended -= cz[group_end] - cz[pos]
    return (pos - lane_first) - ended, new_segment


def _parent_one_level_up(
    s: np.ndarray, e: np.ndarray, dep: np.ndarray, lane_first: np.ndarray, tolerance: float
) -> tuple[np.ndarray, np.ndarray]:
    """Parent of each interval: the last one before it, one level up, in its lane.

    Returns the parents and whether each interval passed the check that the
    nesting is proper there (depth not negative, parent open and enclosing
    it, every ancestor open).
    """
    n = len(s)
    pos = np.arange(n)
    par = np.full(n, -1, dtype=np.int64)
    ok = dep >= 0
    has = dep > 0
    if not has.any():
        return par, ok
    # A stable sort by level keeps positions increasing within a level.
    by_level = np.argsort(dep.astype(np.int16) if dep.max() < 32_000 else dep, kind="stable")
    keys = dep[by_level].astype(np.int64) * n + pos[by_level]
    q = np.flatnonzero(has)
    found = np.searchsorted(keys, (dep[q].astype(np.int64) - 1) * n + q, side="left") - 1
    cand = by_level[np.maximum(found, 0)]
    good = (found >= 0) & (dep[cand] == dep[q] - 1) & (lane_first[cand] == lane_first[q])
    p = np.where(good, cand, 0)
    # The parent is open when the child starts and encloses it.
    good &= (e[p] > s[q]) & (e[q] <= e[p] + tolerance)
    par[q[good]] = p[good]
    ok[q[~good]] = False
    # Every ancestor is open too (only in doubt where a child pokes out
    # of its parent by less than the tolerance).
    if (good & (e[q] > e[p])).any():
        ok &= _ancestors_open(par, dep, s, e)
    return par, ok


def _restack_segments(
    par: np.ndarray,
    dep: np.ndarray,
    s: np.ndarray,
    e: np.ndarray,
    segment_bounds: np.ndarray,
    ok: np.ndarray,
    tolerance: float,
) -> None:
    """Recompute, by the stack walk, ``par`` and ``dep`` of the segments where ``ok`` is false."""
    if ok.all():
        return
    first_bad = np.unique(np.flatnonzero(~ok))
    bad = np.unique(np.searchsorted(segment_bounds, first_bad, side="right") - 1)
    for seg in bad.tolist():
        a, b = int(segment_bounds[seg]), int(segment_bounds[seg + 1])
        sub_par, sub_dep = nest_stack(s[a:b], e[a:b], tolerance)
        par[a:b] = np.where(sub_par >= 0, sub_par + a, -1)
        dep[a:b] = sub_dep


def _ancestors_open(par: np.ndarray, dep: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Whether every ancestor of each interval is still open at its start."""
    n = len(par)
    min_end = np.full(n, np.inf)
    levels = np.argsort(dep, kind="stable")
    bounds = np.searchsorted(dep[levels], np.arange(int(dep.max(initial=0)) + 2))
    for d in range(1, len(bounds) - 1):
        nodes = levels[bounds[d] : bounds[d + 1]]
        p = par[nodes]
        nodes, p = nodes[p >= 0], p[p >= 0]
        min_end[nodes] = np.minimum(e[p], min_end[p])
    return min_end > s


def nest_stack(start: np.ndarray, end: np.ndarray, tolerance: float = 0.001) -> tuple[np.ndarray, np.ndarray]:
    """The stack walk of one lane whose intervals are sorted by (start, -end).

    Parents are the innermost open interval that encloses each one; an
    interval that starts after the top of the stack ended, or pokes out of it
    by more than ``tolerance``, pops it. Positions refer to the given order.
    """
    n = len(start)
    starts = start.tolist()
    ends = end.tolist()
    par = [-1] * n
    dep = [0] * n
    stack_pos: list[int] = []
    stack_end: list[float] = []
    for k in range(n):
        s = starts[k]
        e = ends[k]
        while stack_end and (s >= stack_end[-1] or e > stack_end[-1] + tolerance):
            stack_end.pop()
            stack_pos.pop()
        if stack_pos:
            par[k] = stack_pos[-1]
            dep[k] = len(stack_pos)
        stack_pos.append(k)
        stack_end.append(e)
    return np.array(par, dtype=np.int64), np.array(dep, dtype=np.int32)


def nest_reference(
    lane: np.ndarray, start: np.ndarray, end: np.ndarray, tolerance: float = 0.001
) -> tuple[np.ndarray, np.ndarray]:
    """`nest` computed by the stack walk alone (slow; the definition, for tests)."""
    n = len(start)
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int32)
    if n == 0:
        return parent, depth
    order = np.lexsort((np.arange(n), -end, start, lane))
    ln = lane[order]
    bounds = np.append(np.flatnonzero(np.r_[True, ln[1:] != ln[:-1]]), n)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        idx = order[a:b]
        p, d = nest_stack(start[idx], end[idx], tolerance)
        parent[idx] = np.where(p >= 0, idx[np.maximum(p, 0)], -1)
        depth[idx] = d
    return parent, depth


def host_tree(events: pd.DataFrame, tolerance: float = 0.001) -> pd.DataFrame:
    """Call tree of the host events (ops, annotations, Python frames, runtime calls).

    Returns a frame aligned with ``events`` with ``parent`` (row position of
    the enclosing host event, -1 for roots and for device events) and
    ``depth`` (-1 for device events).
    """
    idx = np.flatnonzero(K.kind_mask(events, K.HOST_KINDS))
    lane = pair_groups(events["pid"].to_numpy()[idx], events["tid"].to_numpy()[idx])
    ts = events["ts"].to_numpy()[idx]
    end = ts + events["dur"].to_numpy()[idx]
    sub_parent, sub_depth = nest(lane, ts, end, tolerance)
    parent = np.full(len(events), -1, dtype=np.int64)
    depth = np.full(len(events), -1, dtype=np.int32)
    parent[idx] = np.where(sub_parent >= 0, idx[np.maximum(sub_parent, 0)], -1)
    depth[idx] = sub_depth
    return pd.DataFrame({"parent": parent, "depth": depth}, index=events.index, copy=False)


def device_depth(events: pd.DataFrame, tolerance: float = 0.001) -> np.ndarray:
    """Nesting depth of device events within their (device, stream) lane.

    Kernels on one stream rarely overlap, but GPU user annotations enclose
    them; the timeline stacks them by this depth. -1 for host events.
    """
    idx = np.flatnonzero(K.kind_mask(events, K.DEVICE_KINDS))
    depth = np.full(len(events), -1, dtype=np.int32)
    if len(idx):
        lane = pair_groups(events["device"].to_numpy()[idx], events["stream"].to_numpy()[idx])
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
    order, bounds = _levels(depth)
    for d in range(1, len(bounds) - 1):
        nodes = order[bounds[d] : bounds[d + 1]]
        p = parent[nodes]
        valid = p >= 0
        nodes, p = nodes[valid], p[valid]
        result[nodes] = np.where(wanted[p], p, result[p])
    return result


def ancestor_of(parent: np.ndarray, wanted: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """`nearest_ancestor` of ``nodes`` only: for each, the closest proper ancestor where ``wanted``, or -1.

    Walks up from those nodes, one step for all of them at a time, dropping
    each once found: a few steps (a launch's op is its parent) over the
    nodes asked, where the whole tree's walk visits every event.
    """
    out = np.full(len(nodes), -1, dtype=np.int64)
    at = np.arange(len(nodes))
    up = parent[nodes]
    while len(at):
        up_ok = up >= 0
        at, up = at[up_ok], up[up_ok]
        hit = wanted[up]
        out[at[hit]] = up[hit]
        at, up = at[~hit], parent[up[~hit]]
    return out


def subtree_sums(parent: np.ndarray, depth: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Each node's own value plus that of all its descendants.

    Level by level from the deepest, each node with a non-zero total adds
    it to its parent (a node at depth <= 0 adds nothing). Only those nodes
    are visited: the non-zero own values, bucketed by depth, and the
    parents that received something; zeros change no sum, and every
    parent sums its children in row order as a pass over the whole level
    did, so the figures are the same bits (tested against that pass). Device
    time sits on the few ops that launch: sorting every event by depth cost
    most of this.
    """
    if len(parent) >= NATIVE_FROM_NODES:
        # In C: every node bucketed by level once, the same additions.
        done = native.subtree_sums(parent, depth, own)
        if done is not None:
            return done
    total = own.astype(np.float64, copy=True)
    if len(parent) == 0:
        return total
    start = np.flatnonzero(total != 0)
    level = np.maximum(depth[start], 0)
    if not len(start) or int(level.max()) < 1:
        return total
    order = np.argsort(level, kind="stable")
    start, level = start[order], level[order]
    top = int(level[-1])
    bounds = np.searchsorted(level, np.arange(top + 2))
    # Parents that received a sum, by their depth, until that level's turn.
    received: dict[int, list[np.ndarray]] = {}
    for d in range(top, 0, -1):
        nodes = start[bounds[d] : bounds[d + 1]]
        more = received.pop(d, [])
        if more:
            # Sorted runs, merged by a stable sort (timsort merges runs in
            # linear time), duplicates dropped: their union in row order.
            nodes = np.sort(np.concatenate([nodes, *more]), kind="stable")
            nodes = nodes[np.append(True, nodes[1:] != nodes[:-1])]
        p = parent[nodes]
        valid = (p >= 0) & (total[nodes] != 0)
        nodes, p = nodes[valid], p[valid]
        if not len(p):
            continue
        # bincount over the parents present at this level (np.add.at is
        # an order of magnitude slower).
        u, inv = unique_inverse(p)
        total[u] += np.bincount(inv, weights=total[nodes], minlength=len(u))
        u_level = np.maximum(depth[u], 0)
        for lv in np.unique(u_level).tolist():
            # A parent at this level or deeper had its turn already (as in
            # a pass over each level once): it passes nothing further up.
            if lv < d:
                received.setdefault(lv, []).append(u[u_level == lv])
    return total


def unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)``, mostly without sorting (same values, same dtypes).

    Sorted integers (the children of one thread's ops, level by level) are
    numbered by their runs; integers over a range not much wider than
    themselves (names' codes, parents) are counted into a table of that
    range; anything else is sorted as numpy does. Either shortcut is several
    times cheaper than the sort.
    """
    values = np.asarray(values)
    if not len(values) or values.dtype.kind not in "iu":
        return np.unique(values, return_inverse=True)
    if len(values) > 1 and not np.any(values[1:] < values[:-1]):
        head = np.empty(len(values), dtype=bool)
        head[0] = True
        np.not_equal(values[1:], values[:-1], out=head[1:])
        return values[head], np.cumsum(head, dtype=np.intp) - 1
    lo = int(values.min())
    width = int(values.max()) - lo + 1
    if width > 4 * len(values) + (1 << 16):
        return np.unique(values, return_inverse=True)
    shifted = values.astype(np.int64) - lo  # int64 first: a narrow dtype would wrap
    present = np.zeros(width, dtype=bool)
    present[shifted] = True
    rank = np.cumsum(present, dtype=np.intp) - 1
    return (np.flatnonzero(present) + lo).astype(values.dtype), rank[shifted]


def _levels(depth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions ordered by depth, and where each depth level starts in that order."""
    d = np.maximum(depth, 0)
    max_depth = int(d.max(initial=0))
    key = d.astype(np.int16) if max_depth < 32_000 else d
    order = np.argsort(key, kind="stable")
    return order, np.searchsorted(key[order], np.arange(max_depth + 2))


#: Nodes from which the tree's sums and folding call the native library (below, numpy costs less than the call).
NATIVE_FROM_NODES = 1 << 14


def children_sums(parent: np.ndarray, values: np.ndarray, kids: np.ndarray | None = None) -> np.ndarray:
    """Sum of ``values`` over each node's direct children.

    ``kids``: the nodes that have a parent (``np.flatnonzero(parent >= 0)``),
    when the caller sums several columns over one tree. (On a large tree
    with the native library, `ops._self_values` computes what this served in C.)
    """
    if kids is None:
        kids = np.flatnonzero(parent >= 0)
    sums = np.bincount(parent[kids], weights=values[kids], minlength=len(parent))
    return sums.astype(np.float64, copy=False)


def folded_into(
    parent: np.ndarray, depth: np.ndarray, name_code: np.ndarray, kids: np.ndarray | None = None
) -> np.ndarray:
    """Where torch's ``key_averages()`` folds each event: its absorbing ancestor, or -1.

    torch drops an event whose parent has the same name and no other child
    (``EventList._remove_dup_nodes``: ``aten::sum`` calling ``aten::sum``,
    ``record_function("block")`` directly inside another ``"block"``). The
    parent keeps its own duration, so its total is unchanged; it takes over
    the child's children, launched kernels and memory, so the child's self
    time, self device time and self memory become the parent's. Chains of
    such children fold into the first ancestor that is kept.

    The rule is evaluated on the tree as recorded: folding a child gives its
    parent the child's children, so the parent's child count becomes the
    child's, and every other node's condition stays as it was; repeating
    torch's passes therefore gives the same result as one vectorised pass.

    Parameters
    ----------
    parent, depth
        Host call tree (`host_tree`); device events have depth -1.
    name_code
        Integer code of each event's name (equal codes mean equal names).
    kids
        The nodes in the tree that have a parent (``parent >= 0`` and
        ``depth >= 0``), when the caller has them already.
    """
    n = len(parent)
    if n >= NATIVE_FROM_NODES:
        # In C: children counted, names compared and chains walked in three
        # passes, with no array of every event's child count.
        done = native.folded_into(parent, depth, name_code)
        if done is not None:
            return done
    out = np.full(n, -1, dtype=np.int64)
    if kids is None:
        kids = np.flatnonzero((parent >= 0) & (depth >= 0))
    if not len(kids):
        return out
    up = parent[kids]
    n_children = np.bincount(up, minlength=n)
    # Checked on the nodes with a parent only (the others never fold), and
    # the names only where the parent has this one child.
    only = n_children[up] == 1
    kids, up = kids[only], up[only]
    code = name_code[kids]
    rows = kids[(code >= 0) & (code == name_code[up])]
    if not len(rows):
        return out
    folded = np.zeros(n, dtype=bool)
    folded[rows] = True
    out[rows] = ancestor_of(parent, ~folded, rows)
    return out
