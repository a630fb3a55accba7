"""The summary's shortcuts (issue 25) against what they replaced: np.isin of the counted steps, sorted(set(...))."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tracefiles import REAL_TRACES, real_trace

from jupyter_torchprof.analysis import steps as steps_mod


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_launched_by_counted_is_isin(data):
    counted = np.array(data.draw(st.lists(st.booleans(), max_size=8)), dtype=bool)
    steps = pd.DataFrame({"counted": counted})
    dtype = data.draw(st.sampled_from([np.int64, np.int32, np.float64]))
    owner = data.draw(hnp.arrays(dtype, st.integers(0, 40), elements=st.integers(-3, len(counted) + 2)))
    want = np.isin(owner, np.flatnonzero(counted))
    got = steps_mod.launched_by_counted(steps, owner)
    assert got.dtype == bool
    np.testing.assert_array_equal(got, want)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_distinct_is_sorted_set(data):
    dtype, lo, hi = data.draw(
        st.sampled_from(
            [
                (np.int64, -5, 300),
                (np.int32, 0, 10**6),
                (np.uint16, 0, 60000),
                (np.int8, -128, 127),
                (np.int64, -(2**62), 2**62),
            ]
        )
    )
    values = data.draw(hnp.arrays(dtype, st.integers(0, 50), elements=st.integers(lo, hi)))
    assert steps_mod._distinct(values) == sorted(set(values.tolist()))


@pytest.mark.parametrize("name", REAL_TRACES)
def test_summary_and_accounting_with_the_rows_passed(name):
    from jupyter_torchprof.results.profile import Profile

    p = Profile.from_file(real_trace(name))
    events, steps, owner = p._data.events, p.steps, p._device_steps
    act = steps_mod.activity_rows(events)
    assert steps_mod.device_label(p.meta, events, act) == steps_mod.device_label(p.meta, events)
    if len(steps):
        dur = events["dur"].to_numpy()[act]
        assert steps_mod._device_accounting(events, steps, owner, p._links, dur, act) == (
            steps_mod._device_accounting(events, steps, owner, p._links, dur)
        )
