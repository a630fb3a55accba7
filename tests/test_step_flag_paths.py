"""The faster paths of the call tree's lanes and the step flags equal the plain numpy they replace."""

from __future__ import annotations

import numpy as np
import pandas as pd

from jupyter_torchprof.analysis import steps
from jupyter_torchprof.analysis.tree import lane_keys


def _plain_lane_keys(first, second):
    a, _ = pd.factorize(np.asarray(first))
    b, b_uniques = pd.factorize(np.asarray(second))
    return a.astype(np.int64) * max(len(b_uniques), 1) + b


def test_lane_keys_by_runs_equal_factorizing_every_row():
    rng = np.random.default_rng(0)
    for trial in range(400):
        n = int(rng.integers(1, 300))
        runs = int(rng.integers(1, n + 1))
        length = rng.integers(1, 40, runs)
        first = np.repeat(rng.integers(0, 4, runs), length)[:n]
        n = len(first)
        # Runs of the second key that end where the first's do not.
        second = np.repeat(rng.integers(0, 5, runs), rng.permutation(length) if trial % 2 else length)
        second = second[:n]
        if trial % 3 == 0:
            first = first.astype(float)
            first[rng.random(len(first)) < 0.1] = np.nan
        if trial % 5 == 0:
            second = second.astype(str).astype(object)
        got = lane_keys(first, second)
        want = _plain_lane_keys(first, second)
        assert got.dtype == want.dtype and np.array_equal(got, want), trial


def test_starts_inside_equals_sorted_search():
    rng = np.random.default_rng(1)
    for k in (0, 1, 5, 16, 17, 60):
        starts = rng.integers(0, 100, 500).astype(float)
        starts[rng.random(500) < 0.05] = np.nan
        lo = np.sort(rng.integers(0, 100, k)).astype(float)
        hi = lo + rng.integers(0, 30, k)
        ordered = np.sort(starts)
        want = np.searchsorted(ordered, hi, side="left") - np.searchsorted(ordered, lo, side="left")
        assert np.array_equal(steps._starts_inside(starts, lo, hi), want), k


def test_lanes_present_equals_isin():
    rng = np.random.default_rng(2)
    for trial in range(200):
        op_lanes = rng.integers(
            -1 if trial % 4 == 0 else 0, 10 if trial % 3 else 10_000, int(rng.integers(0, 30))
        )
        wanted = rng.integers(-2, 12, int(rng.integers(0, 8)))
        want = np.isin(wanted, np.unique(op_lanes)) | (len(op_lanes) == 0)
        assert np.array_equal(steps._lanes_present(op_lanes, wanted), want), trial


def _plain_union_per_group(group, start, end, groups):
    out = np.zeros(groups, dtype=np.float64)
    ok = group >= 0
    if not ok.any():
        return out
    g, s, e = group[ok], start[ok].astype(np.float64), end[ok].astype(np.float64)
    order = np.lexsort((s, g))
    g, s, e = g[order], s[order], e[order]
    reach = pd.Series(e).groupby(g).cummax().to_numpy()
    new = np.ones(len(s), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (s[1:] > reach[:-1])
    first = np.flatnonzero(new)
    np.add.at(out, g[first], np.maximum.reduceat(e, first) - s[first])
    return out


def test_union_per_group_equals_lexsort_and_pandas_cummax():
    rng = np.random.default_rng(4)
    for trial in range(300):
        n = int(rng.integers(1, 200))
        groups = int(rng.integers(1, 6 if trial % 2 else 100))
        group = rng.integers(-1, groups, n)
        start = rng.integers(0, 50, n) + rng.random(n).round(1)
        end = start + rng.integers(0, 10, n)
        if trial % 7 == 0:
            end[rng.random(n) < 0.1] = np.nan
        if trial % 11 == 0:
            start[rng.random(n) < 0.1] = np.nan
        want = _plain_union_per_group(group, start, end, groups)
        got = steps.union_per_group(group, start, end, groups)
        assert np.array_equal(got, want, equal_nan=True), trial


def test_unique_inverse_equals_numpy():
    from jupyter_torchprof.analysis.tree import unique_inverse

    rng = np.random.default_rng(5)
    for trial in range(400):
        span = int(rng.integers(1, 200))
        values = rng.integers(0, span, int(rng.integers(1, 300)))
        if trial % 3 == 0:
            values = np.sort(values)
        got_u, got_i = unique_inverse(values)
        want_u, want_i = np.unique(values, return_inverse=True)
        assert got_u.dtype == want_u.dtype and got_i.dtype == want_i.dtype, trial
        assert np.array_equal(got_u, want_u) and np.array_equal(got_i, want_i), trial


def test_ancestor_of_equals_nearest_ancestor():
    from jupyter_torchprof.analysis.tree import ancestor_of, nearest_ancestor

    rng = np.random.default_rng(6)
    for trial in range(300):
        n = int(rng.integers(1, 200))
        # A random forest: each node's parent comes before it (or none).
        parent = np.array([int(rng.integers(-1, i)) if i and rng.random() < 0.9 else -1 for i in range(n)])
        depth = np.zeros(n, dtype=np.int32)
        for i in range(n):
            depth[i] = depth[parent[i]] + 1 if parent[i] >= 0 else 0
        wanted = rng.random(n) < (0.1 if trial % 2 else 0.6)
        nodes = rng.integers(0, n, int(rng.integers(0, 50)))
        want = nearest_ancestor(parent, depth, wanted)[nodes]
        assert np.array_equal(ancestor_of(parent, wanted, nodes), want), trial


def test_outermost_intervals_merge_to_the_same_blocks():
    from jupyter_torchprof.analysis.kernels import merge_intervals

    rng = np.random.default_rng(7)
    for trial in range(300):
        n = int(rng.integers(1, 120))
        start = rng.integers(0, 60, n).astype(float)
        end = start + rng.integers(0, 15, n)
        if trial % 5 == 0:
            start[rng.random(n) < 0.1] = np.nan
        # A parent before each row (a forest), enclosing it or not; some rows not members.
        up = np.array([int(rng.integers(-1, i)) if i else -1 for i in range(n)])
        member = rng.random(n) < 0.8
        rows = np.flatnonzero(member)
        kept = steps._outermost(rows, member, up[rows], start, end)
        want = merge_intervals(start[rows], end[rows])
        got = merge_intervals(start[kept], end[kept])
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, want, strict=True)), trial


def test_step_table_with_the_call_tree_equals_without():
    from pathlib import Path

    import jupyter_torchprof

    folder = Path(__file__).parent / "data" / "kineto"
    counted = 0
    for name in ("v100_ddp_ns_timestamps", "gp100_sgd_step_user_annotation", "a100_nccl_rank0"):
        p = jupyter_torchprof.load(str(folder / f"{name}.pt.trace.json.gz"))
        events, links = p._data.events, p._links
        with_tree = steps.step_table(events, links, parent=p._tree["parent"].to_numpy())
        pd.testing.assert_frame_equal(with_tree, steps.step_table(events, links), check_exact=True)
        counted += len(with_tree)
    assert counted


def test_count_before_equals_searchsorted():
    from jupyter_torchprof.analysis.memory import count_before

    rng = np.random.default_rng(8)
    for trial in range(12):
        ordered = np.sort(rng.integers(0, 3000, 5000 + trial).astype(float))
        wanted = rng.integers(-5, 3005, 20_000).astype(float)
        if trial % 3 == 0:
            wanted[rng.random(len(wanted)) < 0.01] = np.nan
        if trial % 4 == 0:
            ordered[-3:] = np.nan
        for side in ("left", "right"):
            want = np.searchsorted(ordered, wanted, side=side)
            assert np.array_equal(count_before(ordered, wanted, side), want), (trial, side)
