"""The idle-gap rule's shortcuts against the longer ways they replaced.

`gaps._largest_gap` takes a lane's largest gap without making and sorting
every gap, and `gaps._host_rows` finds the host rows from two masks (issue
25). Each test computes them the old way (`gaps._gaps`' first gap; a gather
of the step flags at the host rows) on every lane of every real trace and
on random subsets of its device work.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from tracefiles import GPU_TRACES, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis.findings import gaps, inputs_from_profile
from jupyter_torchprof.trace import categories as K


@functools.cache
def _inputs(name):
    return inputs_from_profile(load(str(real_trace(name))))


def _old_largest(inp, rows):
    size = gaps._gaps(inp, rows)
    return float(size["end"][0] - size["start"][0]) if len(size["start"]) else 0.0


@pytest.mark.parametrize("name", GPU_TRACES)
def test_largest_gap_equals_the_first_of_all_gaps(name):
    inp = _inputs(name)
    act = inp.activity_rows
    dev, stream = inp.column("device")[act], inp.column("stream")[act]
    lanes = [act[(dev == d) & (stream == s)] for d, s in set(zip(dev.tolist(), stream.tolist(), strict=True))]
    rng = np.random.default_rng(len(act))
    lanes += [act[rng.uniform(size=len(act)) < p] for p in (0.01, 0.3, 1.0)]
    for rows in lanes:
        if not len(rows):  # the rule has no empty lane (and _gaps fails on one)
            continue
        assert gaps._largest_gap(inp, rows) == _old_largest(inp, rows)


@pytest.mark.parametrize("name", GPU_TRACES)
def test_host_rows_equal_the_gathered_flags(name):
    inp = _inputs(name)
    host = np.flatnonzero(inp.is_kind(*K.HOST_KINDS))
    assert gaps._host_rows(inp).tolist() == host[~inp.is_step_range[host]].tolist()
