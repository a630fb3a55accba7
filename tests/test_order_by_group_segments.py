"""`kernels.order_by_group` sorting each group apart equals np.lexsort((values, group))."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_torchprof.analysis import kernels


@pytest.fixture(autouse=True)
def _segments_always(monkeypatch):
    monkeypatch.setattr(kernels, "SEGMENT_SORT_FROM", 0)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_equal_to_lexsort(data):
    n = data.draw(st.integers(0, 300))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    groups = data.draw(st.sampled_from([1, 3, 40, 2**15 - 1, 2**15 + 5]))
    group = rng.integers(0, groups, n)
    values = rng.integers(0, data.draw(st.sampled_from([2, 10, 1000])), n).astype(np.float64)
    for special in data.draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf, -0.0, 0.0]), max_size=4)):
        if n:
            values[rng.integers(0, n)] = special
    got = kernels.order_by_group(group, values)
    np.testing.assert_array_equal(got, np.lexsort((values, group)))


def test_too_many_groups_fall_back(monkeypatch):
    monkeypatch.setattr(kernels, "SEGMENT_SORT_GROUPS", 2)
    group = np.array([2, 0, 1, 0, 2])
    values = np.array([1.0, 2.0, 1.0, 1.0, 0.0])
    assert kernels._by_group_then_value(group.astype(np.int16), values) is None
    np.testing.assert_array_equal(kernels.order_by_group(group, values), np.lexsort((values, group)))
