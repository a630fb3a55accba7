"""steps.c's `tp_outermost` (native.outermost) against numpy's `steps._outermost`, and the step table either way."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracefiles import REAL_TRACES, real_trace

from jupyter_torchprof.analysis import steps as steps_mod
from jupyter_torchprof.trace import categories as K
from jupyter_torchprof.trace import native

pytestmark = pytest.mark.skipif(native.library() is None, reason="no native library")


def numpy_way(codes, member, parent, ts, dur):
    is_member = member[codes.astype(np.uint8)].astype(bool)
    rows = np.flatnonzero(is_member)
    return steps_mod._outermost(rows, is_member, parent[rows], ts, ts + dur)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_equal_to_numpy(data) -> None:
    n = data.draw(st.integers(0, 300))
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    codes = rng.integers(-1, len(K.KINDS), n).astype(np.int8)
    member = np.zeros(256, dtype=np.uint8)
    member[rng.integers(0, 256, data.draw(st.integers(0, 6)))] = 1
    member[255] = data.draw(st.booleans())  # code -1 may be asked for too
    # Parents: none, earlier rows, any row, and negative values other than -1.
    parent = np.where(rng.random(n) < 0.2, -1, rng.integers(-3, max(n, 1), n)) if n else np.zeros(0, np.int64)
    # Small integer times, so starts and ends tie with the parent's; NaN and inf too.
    ts = rng.integers(0, 6, n).astype(np.float64)
    dur = rng.integers(0, 6, n).astype(np.float64)
    if n and data.draw(st.booleans()):
        ts[rng.integers(0, n, 3)] = np.nan
        dur[rng.integers(0, n, 3)] = np.inf
    got = native.outermost(codes, member, parent, ts, dur)
    np.testing.assert_array_equal(got, numpy_way(codes, member, parent, ts, dur))


def test_float_ends_as_numpy_adds_them() -> None:
    # 0.1 + 0.2 > 0.3 in doubles: the child ends after its parent by one ulp and stays.
    codes = np.zeros(2, dtype=np.int8)
    member = np.zeros(256, dtype=np.uint8)
    member[0] = 1
    ts, dur = np.array([0.0, 0.1]), np.array([0.3, 0.2])
    parent = np.array([-1, 0])
    assert native.outermost(codes, member, parent, ts, dur).tolist() == [0, 1]
    assert numpy_way(codes, member, parent, ts, dur).tolist() == [0, 1]


def test_bad_input_refused() -> None:
    member = np.ones(256, dtype=np.uint8)
    one = np.zeros(1)
    with pytest.raises(ValueError, match="parent outside"):
        native.outermost(np.zeros(1, np.int8), member, np.array([1]), one, one)
    with pytest.raises(ValueError, match="256"):
        native.outermost(np.zeros(1, np.int8), member[:10], np.array([-1]), one, one)
    with pytest.raises(ValueError, match="differ"):
        native.outermost(np.zeros(2, np.int8), member, np.array([-1]), one, one)


@pytest.mark.parametrize("name", REAL_TRACES)
def test_step_table_native_and_numpy(name, monkeypatch) -> None:
    from jupyter_torchprof.results.profile import Profile

    p = Profile.from_file(real_trace(name))
    events, parent = p._data.events, p._tree["parent"].to_numpy()
    calls = []
    real = native.outermost
    monkeypatch.setattr(native, "outermost", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(steps_mod, "NATIVE_FROM_ROWS", 0)
    fast = steps_mod.step_table(events, p._links, parent=parent)
    assert calls == ([1] if len(steps_mod.step_ranges(events).rows) else [])  # the C path taken
    monkeypatch.setattr(steps_mod, "NATIVE_FROM_ROWS", 10**12)
    slow = steps_mod.step_table(events, p._links, parent=parent)
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)
