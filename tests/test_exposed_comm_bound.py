"""Exposed communication: a device whose collectives cannot reach the threshold skips the compute merge, same findings.

The reference is the rule as it was (every device's compute merged); the
traces' times are also bent (negative durations, NaN, inf on compute or
collectives) where the bound no longer holds and the rule must merge.
"""

from __future__ import annotations

import copy
import dataclasses
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracefiles import real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis.findings import THRESHOLDS, distributed, inputs_from_profile
from jupyter_torchprof.analysis.findings.distributed import is_communication
from jupyter_torchprof.analysis.findings.intervals import merge, overlap_with
from jupyter_torchprof.trace import categories as K

COMM_TRACES = [
    "a100_nccl_rank0.pt.trace.json.gz",
    "diff_pair/control.pt.trace.json.gz",
    "diff_pair/test.pt.trace.json.gz",
]


def reference(inp, th):
    """(device, exposed %, hidden %, rows) of each finding, as the rule computed them before."""
    kern = np.flatnonzero(inp.is_kind(K.KERNEL))
    is_comm = inp.name_flags(kern, is_communication)
    dev = inp.column("device")[kern]
    mine = inp.launched_in_steps(kern)
    out = []
    for d in sorted(set(dev[is_comm & mine].tolist())):
        comm = kern[is_comm & mine & (dev == d)]
        compute = kern[~is_comm & (dev == d)]
        c_ts, c_end = inp.ts[comm], inp.end[comm]
        bs, be = merge(c_ts, c_end)
        ks, ke = merge(inp.ts[compute], inp.end[compute])
        comm_union = float((be - bs).sum())
        exposed = comm_union - float(overlap_with(ks, ke, bs, be).sum())
        exp_step = exposed / inp.n_steps
        wall = inp.wall_per_step
        pct = 100 * exp_step / wall if wall > 0 else 0.0
        if pct < th.comm_exposed_min_pct:
            continue
        out.append((d, pct))
    return out


def _got(inp, th):
    return [
        (f.evidence["device"], f.evidence["exposed_step_pct"])
        for f in distributed.find_exposed_communication(inp, th)
    ]


def _same(a, b):
    assert len(a) == len(b)
    for (d1, p1), (d2, p2) in zip(a, b, strict=True):
        assert d1 == d2 and (p1 == p2 or (np.isnan(p1) and np.isnan(p2)))


@functools.cache
def _inputs(name):
    return inputs_from_profile(load(str(real_trace(name))))


def _exposed_pcts(inp):
    return [p for _, p in reference(inp, dataclasses.replace(THRESHOLDS, comm_exposed_min_pct=-np.inf))]


@pytest.mark.parametrize("name", COMM_TRACES)
def test_equal_at_thresholds_around_each_devices_figure(name):
    inp = _inputs(name)
    pcts = _exposed_pcts(inp)
    assert pcts  # the trace has exposed communication to find
    for t in [-1.0, 0.0, 5.0, 1e9, *pcts, *(np.nextafter(p, np.inf) for p in pcts)]:
        th = dataclasses.replace(THRESHOLDS, comm_exposed_min_pct=float(t))
        _same(_got(inp, th), reference(inp, th))


@pytest.mark.parametrize("name", COMM_TRACES)
def test_skips_the_compute_merge_under_the_threshold(name, monkeypatch):
    inp = _inputs(name)
    merged = []
    monkeypatch.setattr(distributed, "merge", lambda s, e: merged.append(len(s)) or merge(s, e))
    assert (
        distributed.find_exposed_communication(inp, dataclasses.replace(THRESHOLDS, comm_exposed_min_pct=1e9))
        == []
    )
    devices = len(set(inp.column("device")[np.flatnonzero(inp.is_kind(K.KERNEL))].tolist()))
    assert len(merged) <= devices  # the collectives' merges only


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_bent_times_still_equal(data):
    inp = copy.copy(_inputs(data.draw(st.sampled_from(COMM_TRACES))))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    kern = np.flatnonzero(inp.is_kind(K.KERNEL))
    ts, end = inp.ts.copy(), inp.end.copy()
    rows = kern[rng.integers(0, len(kern), data.draw(st.integers(0, 3)))]
    bent = data.draw(st.sampled_from(["negative", "nan", "inf", "none"]))
    if bent == "negative":
        end[rows] = ts[rows] - rng.uniform(0, 1e4, len(rows))
    elif bent == "nan":
        end[rows] = np.nan
    elif bent == "inf":
        ts[rows], end[rows] = -np.inf, np.inf
    inp.__dict__.update(ts=ts, end=end)
    pcts = [p for p in _exposed_pcts(inp) if np.isfinite(p)] or [0.0]
    t = data.draw(st.sampled_from([-1.0, 5.0, 1e9, *pcts]))
    th = dataclasses.replace(THRESHOLDS, comm_exposed_min_pct=float(t))
    _same(_got(inp, th), reference(inp, th))
