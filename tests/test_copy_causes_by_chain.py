"""The copy rule's causes, labelled once per distinct chain, against one `cause_label` per op.

`Inputs.op_levels` walks up the call tree for many rows at once and
`vocab.cause_labels` names each chain's cause from its outermost op, trigger
and innermost op (issue 25). On every real trace both are checked against
the per-row Python they replaced (`Inputs.op_chain`, `vocab.cause_label`),
for every copy's launching op and for a spread of other rows.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from tracefiles import REAL_TRACES, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis.findings import inputs_from_profile
from jupyter_torchprof.analysis.findings.vocab import cause_label, cause_labels
from jupyter_torchprof.trace import categories as K


@functools.cache
def _inputs(name):
    return inputs_from_profile(load(str(real_trace(name))))


def _rows(inp):
    op = inp.column("op")
    copies = op[np.flatnonzero(inp.is_kind(K.MEMCPY, K.MEMSET, K.KERNEL))]
    spread = np.arange(len(inp.events))[:: max(1, len(inp.events) // 3000)]
    return np.unique(np.concatenate([copies[copies >= 0], spread]))


@pytest.mark.parametrize("name", REAL_TRACES)
def test_op_levels_read_as_the_op_chains(name):
    inp = _inputs(name)
    rows = _rows(inp)
    levels = inp.op_levels(rows)
    got = [[int(r) for r in levels[::-1, i] if r >= 0] for i in range(len(rows))]
    assert got == [inp.op_chain(int(r)) for r in rows]
    assert inp.name_text(rows) == [inp.op_name(int(r)) for r in rows]


@pytest.mark.parametrize("name", REAL_TRACES)
def test_cause_labels_equal_one_label_per_op(name):
    inp = _inputs(name)
    rows = _rows(inp)
    want = [cause_label(inp, inp.op_chain(int(r))) for r in rows]
    assert cause_labels(inp, inp.op_levels(rows)) == want
    assert len(set(want)) > 1 or name == "cpu_only.pt.trace.json.gz" or len(rows) < 50
