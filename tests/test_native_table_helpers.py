"""The native table helpers give exactly what their numpy fallbacks give.

`native.dense_numbers` (group.c) numbers rows as the numpy fallback and
pandas' factorize do; `native.children_sums` (nest.c) adds children's
values in np.bincount's order, to the same bits.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_torchprof.analysis import ops, tree
from jupyter_torchprof.trace import native

pytestmark = pytest.mark.skipif(
    native.library() is None, reason="no C compiler: the numpy path is all there is"
)


def _numpy(values: np.ndarray, span: int, monkeypatch) -> tuple:
    with monkeypatch.context() as m:
        m.setattr(native, "dense_numbers", lambda *a: None)
        return ops._dense_numbers(values, span)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 40).flatmap(
        lambda span: st.tuples(st.just(span), st.lists(st.integers(0, span - 1), max_size=300))
    )
)
def test_native_equals_numpy_and_factorize(case) -> None:
    span, values = case
    v = np.array(values, dtype=np.int64)
    number, count, first = native.dense_numbers(v, span)
    with pytest.MonkeyPatch.context() as m:
        want = _numpy(v, span, m)
    assert np.array_equal(number, want[0]) and count == want[1] and np.array_equal(first, want[2])
    codes, uniques = pd.factorize(v)
    assert np.array_equal(number, codes) and count == len(uniques)
    assert np.array_equal(v[first], uniques)


def test_large_input_takes_the_native_path_with_the_same_numbers(monkeypatch) -> None:
    rng = np.random.default_rng(7)
    v = rng.integers(0, 5000, ops.NATIVE_FROM_ROWS * 4).astype(np.int64)
    calls = []
    real = native.dense_numbers
    monkeypatch.setattr(native, "dense_numbers", lambda *a: calls.append(1) or real(*a))
    got = ops._dense_numbers(v, 5000)
    assert calls == [1]
    want = _numpy(v, 5000, monkeypatch)
    assert np.array_equal(got[0], want[0]) and got[1] == want[1] and np.array_equal(got[2], want[2])


def test_a_value_outside_the_span_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        native.dense_numbers(np.array([0, 3, 1], dtype=np.int64), 3)
    with pytest.raises(ValueError, match="outside"):
        native.dense_numbers(np.array([-1], dtype=np.int64), 3)


def _bincount_sums(parent: np.ndarray, values: np.ndarray) -> np.ndarray:
    kids = np.flatnonzero(parent >= 0)
    return np.bincount(parent[kids], weights=values[kids], minlength=len(parent)).astype(np.float64)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 60).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(-1, n - 1), min_size=n, max_size=n),
            st.lists(
                st.floats(-1e12, 1e12, allow_subnormal=True) | st.sampled_from([0.0, -0.0, 1e-300]),
                min_size=n,
                max_size=n,
            ),
        )
    )
)
def test_children_sums_native_equals_bincount_bit_for_bit(case) -> None:
    parent, values = (np.array(case[0], dtype=np.int64), np.array(case[1], dtype=np.float64))
    got = native.children_sums(parent, values)
    want = _bincount_sums(parent, values)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))


def test_a_large_tree_sums_natively_to_the_same_bits(monkeypatch) -> None:
    rng = np.random.default_rng(3)
    n = tree.NATIVE_FROM_NODES * 4
    # Parents before their children, as in a call tree, and roots (-1).
    parent = np.where(rng.random(n) < 0.2, -1, (np.arange(n) * rng.random(n)).astype(np.int64))
    values = rng.exponential(50.0, n)
    calls = []
    real = native.children_sums
    monkeypatch.setattr(native, "children_sums", lambda *a: calls.append(1) or real(*a))
    got = tree.children_sums(parent, values, np.flatnonzero(parent >= 0))
    assert calls == [1]
    assert np.array_equal(got.view(np.int64), _bincount_sums(parent, values).view(np.int64))


def test_children_sums_refuses_a_parent_outside_the_tree() -> None:
    with pytest.raises(ValueError, match="outside"):
        native.children_sums(np.array([-1, 5], dtype=np.int64), np.ones(2))
