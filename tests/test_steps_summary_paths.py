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


def _old_recording_window(events, exclude=None):
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    mask = np.ones(len(events), dtype=bool)
    if exclude is not None and len(exclude):
        mask[exclude] = False
    if not mask.any():
        return 0.0, 0.0
    return float(ts[mask].min()), float(end[mask].max())


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_recording_window_is_the_masked_min_and_max(data):
    n = data.draw(st.sampled_from([0, 1, 5, 70_000, 200_000]))  # blocks of 65536: one, several
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    ts = rng.uniform(-1e6, 1e6, n).round(data.draw(st.sampled_from([0, 3])))
    dur = rng.uniform(0, 1e3, n)
    for arr in (ts, dur):
        for value in data.draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf, 0.0]), max_size=3)):
            if n:
                arr[rng.integers(0, n)] = value
    exclude = rng.integers(0, max(n, 1), data.draw(st.integers(0, 4))) if n else np.array([], dtype=np.int64)
    if n and data.draw(st.booleans()):  # the extremes left out (a suspicious step range often is one)
        exclude = np.append(exclude, [int(np.argmin(ts)), int(np.argmax(ts + dur))])
    if n and data.draw(st.booleans()):
        exclude = np.arange(n)  # everything left out
    events = pd.DataFrame({"ts": ts, "dur": dur})
    got, want = steps_mod.recording_window(events, exclude), _old_recording_window(events, exclude)
    assert np.array_equal(np.array(got), np.array(want), equal_nan=True)
