"""`native.dense_numbers` (`tp_group_keys` over every row) numbers rows exactly as the numpy fallback and pandas' factorize do."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_torchprof.analysis import ops
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
