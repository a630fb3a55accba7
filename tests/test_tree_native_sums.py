"""`tree.subtree_sums` and `tree.folded_into` in C (tables.c) answer what their numpy code answers, bit for bit.

Trees are random forests (parents earlier or later in row order), with
depths as the host tree gives them and, for the sums, depths that do not
fit the parents (the numpy code has an answer there too, which C must
repeat).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_torchprof.analysis import tree
from jupyter_torchprof.trace import native

pytestmark = pytest.mark.skipif(
    native.library() is None, reason="no C compiler: the numpy path is all there is"
)

_SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-310, 1e16, 0.1, 1.0, -1.0, 3.0]


def _forest(rng: np.random.Generator, n: int, host_share: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    """Parents pointing anywhere earlier in a random permutation, depths from them (-1 off the host tree)."""
    perm = rng.permutation(n)
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int32)
    for k in range(1, n):
        if rng.random() < 0.85:
            parent[perm[k]] = perm[rng.integers(max(0, k - 6), k)]
    for k in range(n):
        i = perm[k]
        depth[i] = depth[parent[i]] + 1 if parent[i] >= 0 else 0
    off = rng.random(n) > host_share
    # device events: no parent, depth -1
    parent[off] = -1
    depth[off] = -1
    for i in np.flatnonzero(off):
        parent[parent == i] = -1
    return parent, depth


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bits, NaN where NaN: a NaN's sign and payload are left open by IEEE 754 (and a compiler may
    swap an addition's operands, which picks another NaN's), so only that it is NaN is compared."""
    nan = np.isnan(a)
    return bool(
        np.array_equal(nan, np.isnan(b)) and np.array_equal(a[~nan].view(np.int64), b[~nan].view(np.int64))
    )


def _numpy(fn, *args):
    with pytest.MonkeyPatch.context() as m:
        m.setattr(native, fn.__name__, lambda *a: None)
        return fn(*args)


def _native(fn, *args):
    with pytest.MonkeyPatch.context() as m:
        m.setattr(tree, "NATIVE_FROM_NODES", 0)
        return fn(*args)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 120), st.booleans())
def test_subtree_sums_native_equals_numpy(seed: int, n: int, shuffle_depths: bool) -> None:
    rng = np.random.default_rng(seed)
    parent, depth = _forest(rng, n)
    if shuffle_depths and n:
        depth = rng.integers(-1, 6, n).astype(np.int32)  # depths that do not fit the parents
    own = np.where(rng.random(n) < 0.5, 0.0, np.array(_SPECIAL)[rng.integers(0, len(_SPECIAL), n)])
    got = _native(tree.subtree_sums, parent, depth, own)
    want = _numpy(tree.subtree_sums, parent, depth, own)
    assert got.dtype == want.dtype == np.float64
    assert _same_bits(got, want)


def test_subtree_sums_native_large_and_taken(monkeypatch) -> None:
    rng = np.random.default_rng(1)
    n = tree.NATIVE_FROM_NODES + 5
    parent, depth = _forest(rng, n)
    own = np.where(rng.random(n) < 0.7, 0.0, rng.normal(size=n) * 1e3)
    want = _numpy(tree.subtree_sums, parent, depth, own)
    calls = []
    real = native.subtree_sums
    monkeypatch.setattr(native, "subtree_sums", lambda *a: calls.append(1) or real(*a))
    got = tree.subtree_sums(parent, depth, own)
    assert calls and np.array_equal(got.view(np.int64), want.view(np.int64))
    assert own is not got and not np.array_equal(own, got)  # the input is left as it was


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 120), st.integers(1, 4))
def test_folded_into_native_equals_numpy(seed: int, n: int, names: int) -> None:
    rng = np.random.default_rng(seed)
    parent, depth = _forest(rng, n)
    codes = rng.integers(-1, names, n).astype(np.int16)
    got = _native(tree.folded_into, parent, depth, codes)
    want = _numpy(tree.folded_into, parent, depth, codes)
    assert got.dtype == want.dtype
    assert np.array_equal(got, want)


def test_folded_into_chain_folds_into_first_kept() -> None:
    # 0 <- 1 <- 2 <- 3, all "a" and only children: 1, 2, 3 fold into 0; 4 (another name) does not.
    parent = np.array([-1, 0, 1, 2, 3])
    depth = np.array([0, 1, 2, 3, 4], dtype=np.int32)
    codes = np.array([0, 0, 0, 0, 1], dtype=np.int8)
    assert _native(tree.folded_into, parent, depth, codes).tolist() == [-1, 0, 0, 0, -1]
    assert _numpy(tree.folded_into, parent, depth, codes).tolist() == [-1, 0, 0, 0, -1]


def test_native_tree_helpers_refuse_bad_parents() -> None:
    depth = np.zeros(3, dtype=np.int32)
    with pytest.raises(ValueError, match="outside"):
        native.subtree_sums(np.array([-1, 5, 0]), depth, np.ones(3))
    with pytest.raises(ValueError, match="outside"):
        native.folded_into(np.array([-1, -2, 0]), depth, np.zeros(3, dtype=np.int8))
    with pytest.raises(ValueError, match="loop"):
        native.folded_into(np.array([1, 0, -1]), np.ones(3, dtype=np.int32), np.zeros(3, dtype=np.int8))


@pytest.mark.parametrize("deep", [False, True])
def test_subtree_sums_native_shallow_and_deep_trees(deep: bool) -> None:
    """Both ways C finds a level's nodes (a scan per level on shallow trees, an order by level on deep ones)."""
    rng = np.random.default_rng(11)
    n = 3000
    parent, depth = _forest(rng, n)
    if deep:
        # a chain of 40 levels under the first node
        parent[1:41] = np.arange(0, 40)
        depth[:] = -1
        for i in range(n):
            depth[i] = depth[parent[i]] + 1 if parent[i] >= 0 else 0
        assert depth.max() >= 40
    else:
        depth = np.minimum(depth, 5)  # at most 6 levels (depths that need not fit the parents)
    own = np.where(rng.random(n) < 0.6, 0.0, rng.normal(size=n))
    got = _native(tree.subtree_sums, parent, depth, own)
    want = _numpy(tree.subtree_sums, parent, depth, own)
    assert _same_bits(got, want)
