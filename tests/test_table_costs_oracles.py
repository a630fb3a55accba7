"""Second paths that make the tables cheaper per event, each checked against the plain one it replaces.

Every fast path here answers exactly what the slower, obvious code answers
(same values, same dtype): the oracle is that code, run on the same input.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jupyter_torchprof.analysis import links

LABELS = ["", "cudaLaunchKernel", "void at::native::elementwise_kernel<128, 4>", "é→ñ 名前", "x" * 300]


@pytest.mark.parametrize(
    "labels", [LABELS, ["kernel", "memcpy", "memset"], ["correlation"], ["é", "ñ"], ["abc", "x", "def"]]
)
@pytest.mark.parametrize("missing_share", [0.0, 0.3, 1.0])
def test_labels_at_equals_take(missing_share: float, labels: list[str]) -> None:
    """The string column made from numpy buffers is what pandas' take makes of the same codes."""
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(7)
    labels = pd.Index(labels)
    for n, dtype in ((0, np.int64), (1, np.int8), (5000, np.int8), (5000, np.int64)):
        codes = rng.integers(0, len(labels), n).astype(dtype)
        if len(labels) == 3 and labels[1] == "x" and n > 1:
            codes[codes == 1] = 0  # only the labels of one length are used
        codes[rng.random(n) < missing_share] = -1
        got = links._labels_at(labels, codes)
        strings = pd.array(np.asarray(labels, dtype=object), dtype="str")
        if not (codes >= 0).any():
            expected = np.append(np.asarray(labels, dtype=object), np.array([np.nan], dtype=object))[codes]
            pd.testing.assert_series_equal(pd.Series(got), pd.Series(expected))
            continue
        expected = strings.take(codes, allow_fill=True)
        pd.testing.assert_series_equal(pd.Series(got), pd.Series(expected), check_exact=True)
        assert got.dtype == expected.dtype


def test_labels_at_without_pyarrow_strings_takes() -> None:
    """An array that is not pyarrow's gets no buffers made: the caller's take answers."""
    strings = pd.array(np.array(["a", "b"], dtype=object), dtype=object)
    assert links._arrow_strings_at(strings, np.array([0, 1, -1])) is None


def _subtree_sums_by_level(parent: np.ndarray, depth: np.ndarray, own: np.ndarray) -> np.ndarray:
    """The pass over every node of each level, deepest first: the oracle of `tree.subtree_sums`."""
    total = own.astype(np.float64, copy=True)
    d = np.maximum(depth, 0)
    order = np.argsort(d, kind="stable")
    bounds = np.searchsorted(d[order], np.arange(int(d.max(initial=0)) + 2))
    for level in range(len(bounds) - 2, 0, -1):
        nodes = order[bounds[level] : bounds[level + 1]]
        p = parent[nodes]
        valid = (p >= 0) & (total[nodes] != 0)
        nodes, p = nodes[valid], p[valid]
        if len(p):
            u, inv = np.unique(p, return_inverse=True)
            total[u] += np.bincount(inv, weights=total[nodes], minlength=len(u))
    return total


def _random_forest(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int32)
    for i in range(1, n):
        if rng.random() < 0.85:
            parent[i] = rng.integers(0, i)
            depth[i] = depth[parent[i]] + 1
    device = rng.random(n) < 0.2  # device events: no parent, depth -1
    parent[device], depth[device] = -1, -1
    parent[np.isin(parent, np.flatnonzero(device))] = -1
    depth = np.where(parent < 0, np.where(device, -1, 0), depth)
    return parent, depth


@pytest.mark.parametrize("seed", range(6))
def test_subtree_sums_equals_pass_over_levels(seed: int) -> None:
    """Visiting only the non-zero nodes gives the same bits as the pass over every node of each level."""
    from jupyter_torchprof.analysis.tree import subtree_sums

    rng = np.random.default_rng(seed)
    for n in (0, 1, 50, 3000):
        parent, depth = _random_forest(rng, n)
        for density in (0.0, 0.05, 0.5, 1.0):
            own = np.where(rng.random(n) < density, rng.normal(size=n) * 1e3, 0.0)
            if n and seed % 2:
                own[rng.integers(0, n, 3)] = np.nan
                own[rng.integers(0, n)] = -own[rng.integers(0, n)]  # sums that may cancel
            got = subtree_sums(parent, depth, own)
            np.testing.assert_array_equal(got, _subtree_sums_by_level(parent, depth, own))
        # A depth that disagrees with the parents' (not one more than the parent's) is honoured alike.
        if n:
            odd = depth.copy()
            odd[rng.integers(0, n, max(n // 10, 1))] = rng.integers(-1, 5)
            own = np.where(rng.random(n) < 0.3, rng.random(n), 0.0)
            np.testing.assert_array_equal(
                subtree_sums(parent, odd, own), _subtree_sums_by_level(parent, odd, own)
            )


def _kernel_names() -> list[str]:
    """Every device activity's name in the test traces, and generated kernels' names."""
    from pathlib import Path

    import jupyter_torchprof
    from jupyter_torchprof.trace import categories as K

    names = {
        "triton_poi_fused_add_mul_0", "triton_red_fused_sum_1", "triton_tem_fused_mm_2", "triton_xyz_fused_3",
        "cpp_fused_relu_4", "ncclKernel_AllReduce_RING_LL_Sum_float", "triton_poi_fused_all_reduce_5",
        "cpp_fused_nccl_all_gather_6", "Memcpy DtoH (Device -> Pinned)", "Memset (Device)", "",
    }  # fmt: skip
    for path in sorted((Path(__file__).parent / "data" / "kineto").rglob("*.json.gz")):
        events = jupyter_torchprof.load(str(path)).parsed_events
        rows = np.flatnonzero(K.kind_mask(events, K.DEVICE_ACTIVITY))
        names.update(str(n) for n in events["name"].iloc[rows].dropna().unique())
    return sorted(names)


def test_family_of_equals_describe_kernel() -> None:
    """The family alone is the family `describe_kernel` gives, on every kernel name of the test traces."""
    from jupyter_torchprof.analysis.names import describe_kernel, family_of

    names = _kernel_names()
    assert len(names) > 50
    assert [family_of(n) for n in names] == [describe_kernel(n).family for n in names]


def _has_ancestor_walk(parent: np.ndarray, rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """One row at a time up the tree (512 levels at most): the oracle of `findings.cpu.has_ancestor`."""
    out = np.zeros(len(rows), dtype=bool)
    for i, row in enumerate(rows.tolist()):
        at = int(parent[row])
        for _ in range(512):
            if at < 0:
                break
            if mask[at]:
                out[i] = True
                break
            at = int(parent[at])
    return out


@pytest.mark.parametrize("seed", range(4))
def test_has_ancestor_equals_walk(seed: int) -> None:
    """The parents' answer first, then the climb of the rest: what a walk up from each row finds."""
    from types import SimpleNamespace

    from jupyter_torchprof.analysis.findings.cpu import has_ancestor

    rng = np.random.default_rng(seed)
    for n in (0, 1, 40, 2000):
        parent, _ = _random_forest(rng, n)
        if n > 3 and seed == 3:
            parent[1], parent[2] = 2, 1  # a cycle (a corrupt tree): the depth guard ends it
        mask = rng.random(n) < 0.3
        rows = np.flatnonzero(rng.random(n) < 0.7)
        got = has_ancestor(SimpleNamespace(parent=parent), rows, mask)
        np.testing.assert_array_equal(got, _has_ancestor_walk(parent, rows, mask))


@pytest.mark.parametrize("groups", [1, 66, 40_000])
def test_order_by_group_is_lexsort(groups: int) -> None:
    """Two stable sorts give lexsort's order exactly, NaN and ties included."""
    from jupyter_torchprof.analysis.kernels import order_by_group

    rng = np.random.default_rng(groups)
    for n in (0, 1, 5000):
        group = rng.integers(0, groups, n)
        values = np.round(rng.exponential(5.0, n), 1)
        values[rng.random(n) < 0.05] = np.nan
        np.testing.assert_array_equal(order_by_group(group, values), np.lexsort((values, group)))


@pytest.mark.parametrize("runs", [False, True])
def test_event_lanes_group_as_lane_keys(runs: bool) -> None:
    """Packed (pid, tid) numbers group the events exactly as `tree.lane_keys` does, ids that do not pack included."""
    from jupyter_torchprof.analysis.steps import event_lanes
    from jupyter_torchprof.analysis.tree import lane_keys

    rng = np.random.default_rng(11)
    for pids, tids in (([0, 7, 4242], [7, 4250, 2**32 - 1]), ([-1, 3], [5, 6]), ([1, 2], [-5, 2**40])):
        for n in (0, 1, 3000):
            events = pd.DataFrame({"pid": rng.choice(pids, n), "tid": rng.choice(tids, n)})
            if runs:  # long runs of one thread: numbered by their heads
                events = events.sort_values(["pid", "tid"], kind="stable").reset_index(drop=True)
            got = event_lanes(events)
            want = lane_keys(events["pid"].to_numpy(), events["tid"].to_numpy())
            assert got.dtype == np.int64 and len(got) == n
            # The same partition: each lane of one is one lane of the other.
            np.testing.assert_array_equal(pd.factorize(got)[0], pd.factorize(want)[0])


def test_idle_lengths_are_idle_segments_lengths() -> None:
    """The gap lengths alone equal the lengths of the gaps `idle_segments` finds, bit for bit."""
    from jupyter_torchprof.analysis.findings.intervals import idle_lengths, idle_segments

    rng = np.random.default_rng(13)
    for n in (0, 1, 2, 50, 2000):
        start = np.round(rng.uniform(0, 1000, n), 3)
        end = start + np.round(rng.exponential(2.0, n), 3)
        for lo, hi in ((0.0, 1000.0), (100.5, 250.25), (2000.0, 3000.0), (-5.0, 0.5)):
            gs, ge, _, _ = idle_segments(start, end, lo, hi)
            np.testing.assert_array_equal(idle_lengths(start, end, lo, hi), ge - gs)


def test_pair_groups_group_as_lane_keys() -> None:
    """`tree.pair_groups` partitions rows as `tree.lane_keys` does: packed ids, runs, and ids that do not pack."""
    from jupyter_torchprof.analysis.tree import lane_keys, pair_groups

    rng = np.random.default_rng(17)
    for trial in range(200):
        n = int(rng.integers(0, 400))
        first = np.repeat(rng.integers(0, 4, n), rng.integers(1, 30, n))[:n]
        second = np.repeat(rng.integers(0, 6, n), rng.integers(1, 30, n))[:n]
        if trial % 4 == 1:
            second = second + 2**33  # does not pack
        if trial % 4 == 2:
            first = first.astype(float)  # not integers
        if trial % 4 == 3:
            order = rng.permutation(n)  # interleaved: no long runs
            first, second = first[order], second[order]
        got, want = pair_groups(first, second), lane_keys(first, second)
        assert got.dtype == np.int64 and len(got) == len(want)
        np.testing.assert_array_equal(pd.factorize(got)[0], pd.factorize(want)[0])
