"""Step ranges whose threads are numbered among themselves give the step tables of `event_lanes` numbers.

Real traces, and the same traces with their step ranges copied onto other
threads, overlapping the originals (the ranges' threads then decide which
step launched the work), with and without ops on those threads.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
from tracefiles import REAL_TRACES, real_trace

from jupyter_torchprof.analysis import steps as steps_mod
from jupyter_torchprof.results.profile import Profile


@functools.cache
def _profile(name):
    p = Profile.from_file(real_trace(name))
    return p._data.events, p._links, p._tree["parent"].to_numpy()


def _both(events, links, parent):
    lanes = steps_mod.event_lanes(events)
    full = steps_mod.step_ranges(events, lanes)
    local = steps_mod.step_ranges(events)
    owner_full = steps_mod.device_steps(events, links, full, lanes)
    owner_local = steps_mod.device_steps(events, links, local)
    np.testing.assert_array_equal(owner_local, owner_full)
    want = steps_mod.step_table(events, links, None, owner_full, lanes, full, parent)
    got = steps_mod.step_table(events, links, None, owner_local, None, local, parent)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    return local


@pytest.mark.parametrize("name", REAL_TRACES)
def test_real_traces(name):
    local = _both(*_profile(name))
    if len(local.rows):
        assert local.pairs is not None  # numbered among the ranges' threads


def _with_copies(name, shift_frac, tids, op_on_copy):
    events, links, parent = _profile(name)
    ranges = steps_mod.step_ranges(events)
    if not len(ranges.rows):
        pytest.skip("no steps")
    extra = []
    wall = float(np.median(ranges.hi - ranges.lo))
    for i, tid in enumerate(tids):
        rows = ranges.rows if i % 2 == 0 else ranges.rows[::2]
        copy = events.iloc[rows].copy()
        copy["tid"] = tid
        copy["ts"] = copy["ts"] + shift_frac * wall * (i + 1)
        extra.append(copy)
        if op_on_copy:
            op = events.iloc[[int(np.flatnonzero(events["kind"].to_numpy() == "cpu_op")[0])]].copy()
            op["tid"] = tid
            extra.append(op)
    more = pd.concat([events, *extra], ignore_index=True)
    n_extra = len(more) - len(events)
    link_rows = links.iloc[np.zeros(n_extra, dtype=np.int64)].copy()
    link_rows["launch"], link_rows["op"] = -1, -1
    more_links = pd.concat([links, link_rows], ignore_index=True)
    return more, more_links, np.append(parent, np.full(n_extra, -1))


@pytest.mark.parametrize(
    "name", ["v100_ddp_ns_timestamps.pt.trace.json.gz", "a100_nccl_rank0.pt.trace.json.gz"]
)
@pytest.mark.parametrize("shift_frac", [-0.3, 0.3, 0.5, 1.0])
@pytest.mark.parametrize("tids", [[987654], [987654, 12], [5, 6, 7, 8, 9]])
@pytest.mark.parametrize("op_on_copy", [False, True])
def test_overlapping_ranges_on_other_threads(name, shift_frac, tids, op_on_copy):
    _both(*_with_copies(name, shift_frac, tids, op_on_copy))


def test_more_threads_than_numbered_locally_use_event_lanes(monkeypatch):
    monkeypatch.setattr(steps_mod, "LOCAL_LANES_MAX", 0)
    local = _both(*_profile("v100_ddp_ns_timestamps.pt.trace.json.gz"))
    assert local.pairs is None
