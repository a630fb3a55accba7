"""One sort of the device activities by start shared by the steps, the summary and the findings, against each sorting its own."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracefiles import GPU_TRACES, REAL_TRACES, real_trace

from jupyter_torchprof.analysis import kernels as kernels_mod
from jupyter_torchprof.analysis import steps as steps_mod
from jupyter_torchprof.analysis.findings import THRESHOLDS, gaps, inputs_from_profile
from jupyter_torchprof.results.profile import Profile


def _values(data, n):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    v = rng.integers(0, data.draw(st.sampled_from([2, 5, 1000])), n).astype(np.float64)
    for special in data.draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf, -0.0]), max_size=3)):
        if n:
            v[rng.integers(0, n)] = special
    return rng, v


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_order_of_subset_is_the_subsets_stable_order(data):
    n = data.draw(st.integers(0, 200))
    rng, v = _values(data, n)
    mask = rng.random(n) < data.draw(st.sampled_from([0.0, 0.3, 1.0]))
    got = kernels_mod.order_of_subset(np.argsort(v, kind="stable"), mask)
    np.testing.assert_array_equal(got, np.argsort(v[mask], kind="stable"))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_merges_and_unions_with_the_order_given(data):
    n = data.draw(st.integers(1, 200))
    rng, s = _values(data, n)
    e = s + rng.integers(0, 4, n)
    order = np.argsort(s, kind="stable")
    for a, b in zip(kernels_mod.merge_intervals(s, e, order), kernels_mod.merge_intervals(s, e), strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.array_equal(
        kernels_mod.union_length(s, e, order), kernels_mod.union_length(s, e), equal_nan=True
    )
    group = rng.integers(-1, 4, n)
    np.testing.assert_array_equal(
        steps_mod.union_per_group(group, s, e, 4, order), steps_mod.union_per_group(group, s, e, 4)
    )


@functools.cache
def _profile(name):
    return Profile.from_file(real_trace(name))


@pytest.mark.parametrize("name", REAL_TRACES)
def test_steps_and_summary_equal_without_the_shared_order(name):
    p = _profile(name)
    events, links, parent = p._data.events, p._links, p._tree["parent"].to_numpy()
    order = kernels_mod.start_order(events)
    owner = p._device_steps
    ranges = steps_mod.step_ranges(events)
    with_order = steps_mod.step_table(events, links, None, owner, None, ranges, parent, order)
    without = steps_mod.step_table(events, links, None, owner, None, ranges, parent)
    pd.testing.assert_frame_equal(with_order, without, check_exact=True)
    a = steps_mod.summarize(p.meta, events, without, owner, links, order)
    b = steps_mod.summarize(p.meta, events, without, owner, links)
    assert a.keys() == b.keys()
    for k in a:
        assert a[k] == b[k] or (isinstance(a[k], float) and np.isnan(a[k]) and np.isnan(b[k])), k


@pytest.mark.parametrize("name", GPU_TRACES)
def test_gap_findings_equal_without_the_shared_order(name):
    inp = inputs_from_profile(_profile(name))
    assert inp.activity_order is not None
    th = dataclasses.replace(THRESHOLDS, gap_min_us=0.0, gap_min_step_pct=0.0)
    got = gaps.find_idle_gaps(inp, th)
    bare = inputs_from_profile(_profile(name))
    bare.activity_order = None
    want = gaps.find_idle_gaps(bare, th)
    assert [(f.title, f.evidence, f.event_rows) for f in got] == [
        (f.title, f.evidence, f.event_rows) for f in want
    ]
