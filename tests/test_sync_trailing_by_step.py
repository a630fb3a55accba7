"""The sync rule's step-ending check against the pandas groupby it replaced.

`sync._trailing` finds the last op start per (step, thread) with numpy
(issue 25). Here the old two-key ``groupby(...).max()`` answers the same
question for every runtime call of every real trace (not only the syncs,
so many rows are checked), and the answers must be equal.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
from tracefiles import REAL_TRACES, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis.findings import inputs_from_profile
from jupyter_torchprof.analysis.findings.sync import _trailing
from jupyter_torchprof.trace import categories as K


def _old_trailing(inp, rows):
    out = np.zeros(len(rows), dtype=bool)
    if not len(rows):
        return out
    ops = np.flatnonzero(inp.is_kind(K.CPU_OP))
    tid = inp.column("tid")
    last = pd.Series(inp.ts[ops]).groupby([inp.step_of(ops), tid[ops]]).max().to_dict()
    step = inp.step_of(rows)
    for i, r in enumerate(rows.tolist()):
        if step[i] < 0 or inp.op_chain(r):
            continue
        out[i] = last.get((int(step[i]), int(tid[r])), -np.inf) < inp.end[r]
    return out


@functools.cache
def _inputs(name):
    return inputs_from_profile(load(str(real_trace(name))))


@pytest.mark.parametrize("name", REAL_TRACES)
def test_trailing_equals_the_groupby(name):
    inp = _inputs(name)
    rows = np.flatnonzero(inp.is_kind(K.RUNTIME, K.USER_ANNOTATION))
    want = _old_trailing(inp, rows)
    assert _trailing(inp, rows).tolist() == want.tolist()
