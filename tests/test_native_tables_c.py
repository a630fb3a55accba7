"""tables.c's helpers give the bits of the code they stand in for.

`native.group_sums` is pandas' grouped float sum (its Cython kernel, taken
where the groups are not sorted) and `native.code_order` is a stable
argsort of small codes with the start of each code's rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_torchprof.trace import native

pytestmark = pytest.mark.skipif(
    native.library() is None, reason="no C compiler: the numpy path is all there is"
)

# Values that make a compensated sum differ from a plain one, and its special cases.
_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-310, -1e-310, 1e16, -1e16, 1.0, 0.1, np.nan, np.inf, -np.inf]),
)


def _pandas_sums(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    return pd.DataFrame({"v": values}, copy=False).groupby(group, sort=False).sum()["v"].to_numpy()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), _FLOATS), min_size=2, max_size=200))
def test_group_sums_are_pandas_bits(rows) -> None:
    keys = np.array([k for k, _ in rows])
    values = np.array([v for _, v in rows], dtype=np.float64)
    group, uniques = pd.factorize(keys)
    got = native.group_sums(group, values, len(uniques))
    if not np.any(group[1:] < group[:-1]):
        # Sorted groups: pandas adds by np.add.reduceat, so the helper declines.
        assert got is None
        return
    want = _pandas_sums(group, values)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))


def test_group_sums_large_and_compensated() -> None:
    rng = np.random.default_rng(3)
    n = 300_000
    group, uniques = pd.factorize(rng.integers(0, 500, n))
    values = rng.normal(size=n) * 10.0 ** rng.integers(-12, 12, n)
    values[rng.random(n) < 0.01] = np.nan
    values[rng.random(n) < 0.01] = -0.0
    got = native.group_sums(group, values, len(uniques))
    want = _pandas_sums(group, values)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
    # A plain (uncompensated) sum in row order differs somewhere: the test can tell.
    plain = np.zeros(len(uniques))
    ok = ~np.isnan(values)
    np.add.at(plain, group[ok], values[ok])
    assert not np.array_equal(plain.view(np.int64), want.view(np.int64))


def test_group_sums_refuse_a_group_outside() -> None:
    with pytest.raises(ValueError, match="outside"):
        native.group_sums(np.array([1, 0, 2]), np.ones(3), 2)
    with pytest.raises(ValueError, match="outside"):
        native.group_sums(np.array([1, -1, 0]), np.ones(3), 2)
    with pytest.raises(ValueError, match="length"):
        native.group_sums(np.array([1, 0]), np.ones(3), 2)


def test_group_sums_empty() -> None:
    assert native.group_sums(np.array([], dtype=np.int64), np.array([]), 0) is None


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([np.int8, np.int16, np.int32, np.int64]),
    st.integers(0, 40).flatmap(
        lambda k: st.tuples(st.just(k), st.lists(st.integers(-1, k - 1), max_size=300))
    ),
)
def test_code_order_is_stable_argsort(dtype, case) -> None:
    ncodes, codes = case
    codes = np.array(codes, dtype=dtype)
    order, bounds = native.code_order(codes, ncodes)
    want = np.argsort(codes, kind="stable")
    assert np.array_equal(order, want)
    assert np.array_equal(bounds, np.searchsorted(codes[want], np.arange(ncodes + 1)))


def test_code_order_refuses_a_code_outside() -> None:
    for bad in ([0, 3], [0, -2]):
        with pytest.raises(ValueError, match="outside"):
            native.code_order(np.array(bad, dtype=np.int16), 3)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), _FLOATS), min_size=2, max_size=150),
    st.lists(st.integers(0, 10_000), min_size=2, max_size=150),
)
def test_group_sums_read_at_positions_as_gathered(rows, picks) -> None:
    """Sums of ``values[at]`` read in place are the sums of the gathered copy."""
    column = np.array([v for _, v in rows], dtype=np.float64)
    at = np.array([p % len(column) for p in picks], dtype=np.int64)
    group, uniques = pd.factorize(np.array([rows[k % len(rows)][0] for k in range(len(at))]))
    got = native.group_sums(group, column, len(uniques), at=at)
    want = native.group_sums(group, column[at], len(uniques))
    assert (got is None) == (want is None)
    if want is not None:
        assert np.array_equal(got.view(np.int64), want.view(np.int64))
        assert np.array_equal(want.view(np.int64), _pandas_sums(group, column[at]).view(np.int64))


def test_group_sums_refuse_a_position_outside() -> None:
    for at in ([0, 3, 1], [0, -1, 1]):
        with pytest.raises(ValueError, match="outside"):
            native.group_sums(np.array([1, 0, 1]), np.ones(3), 2, at=np.array(at))
    with pytest.raises(ValueError, match="length"):
        native.group_sums(np.array([1, 0]), np.ones(3), 2, at=np.array([0, 1, 2]))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**31),
    st.integers(0, 200),
    st.lists(st.tuples(st.integers(1, 9), st.booleans()), min_size=1, max_size=3),
)
def test_group_keys_number_tuples_as_group_codes(seed: int, n: int, shapes) -> None:
    """Tuples of key values at the rows, numbered in C, are `ops._group_codes`' groups of the values read there."""
    from jupyter_torchprof.analysis import ops

    rng = np.random.default_rng(seed)
    events = n + 5
    rows = np.sort(rng.choice(events, size=n, replace=False))
    keys, read = [], []
    for span, remapped in shapes:
        if remapped:
            # name codes merged by a remap: code -1 reads the remap's last entry
            ncodes = span + 2
            codes = rng.integers(-1, ncodes, events).astype(np.int16)
            remap = rng.integers(0, span, ncodes + 1)
            keys.append((codes, remap, span))
            read.append(remap[codes[rows]])
        else:
            codes = rng.integers(-1, span, events).astype(np.int8)
            keys.append((codes, None, span))
            read.append(codes[rows])
    number, count, first = native.group_keys(rows, events, keys, 1 << 20)
    want_number, want_first = ops._group_codes(read)
    assert count == len(want_first)
    assert np.array_equal(number, want_number)
    assert np.array_equal(first, want_first)


def test_group_keys_decline_and_refuse() -> None:
    codes = np.array([0, 1, 2], dtype=np.int8)
    assert native.group_keys(np.array([0, 1]), 3, [(codes, None, 3)] * 3, 10) is None  # 4 * 4 * 4 slots > 10
    with pytest.raises(ValueError, match="outside"):
        native.group_keys(np.array([0, 3]), 3, [(codes, None, 3)], 100)
    with pytest.raises(ValueError, match="outside"):
        native.group_keys(np.array([0, 2]), 3, [(codes, None, 2)], 100)  # value 2 past span 2
    with pytest.raises(ValueError, match="outside"):
        native.group_keys(
            np.array([0, 2]), 3, [(codes, np.array([0, 0, 0]), 1)], 100
        )  # code 2 past the remap


def test_group_sums_after_an_overflow_keep_pandas_inf() -> None:
    """A sum that overflows to inf stays inf as in pandas (its compensation, inf, is reset), not NaN."""
    group = np.array([0, 1, 0, 0])
    values = np.array([8.98846567431158e307, 0.0, 8.988465674311579e307, 0.0])
    got = native.group_sums(group, values, 2)
    want = _pandas_sums(group, values)
    assert np.isinf(want[0])
    assert np.array_equal(got.view(np.int64), want.view(np.int64))


_SORTABLE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 2.0, np.nan, np.inf, -np.inf]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_SORTABLE, max_size=60), st.lists(_SORTABLE, max_size=60), st.sampled_from(["left", "right"]))
def test_count_before_is_searchsorted(ordered, wanted, side) -> None:
    """Counts by galloping from the previous answer are numpy's searchsorted (NaN last, -0.0 == 0.0, ties)."""
    ordered = np.sort(np.array(ordered, dtype=np.float64))
    wanted = np.array(wanted, dtype=np.float64)
    got = native.count_before(ordered, wanted, side)
    want = np.searchsorted(ordered, wanted, side=side)
    assert got.dtype == want.dtype
    assert np.array_equal(got, want)


def test_count_before_large_runs_and_jumps() -> None:
    """Runs of near times are counted in C; values in no order make it decline (the sort is cheaper), and count_before answers alike."""
    from jupyter_torchprof.analysis import memory

    rng = np.random.default_rng(5)
    ordered = np.sort(np.round(rng.uniform(0, 1e6, 50_000), 1))
    # four threads' runs of near times, one after another, and repeats of the records
    runs = np.concatenate([np.sort(rng.uniform(0, 1e6, 20_000)) for _ in range(4)] + [ordered[::7]])
    jumps = rng.uniform(-10, 1.1e6, 40_000)
    for side in ("left", "right"):
        want = np.searchsorted(ordered, runs, side=side)
        assert np.array_equal(native.count_before(ordered, runs, side), want)
        assert native.count_before(ordered, jumps, side) is None
        for wanted in (runs, jumps):
            assert np.array_equal(
                memory.count_before(ordered, wanted, side), np.searchsorted(ordered, wanted, side=side)
            )
    with pytest.raises(ValueError, match="side"):
        native.count_before(ordered, runs, "both")
