"""Findings work skipped where its result is not used (issue 25), against the rule run in full."""

from __future__ import annotations

import dataclasses
import functools

import pytest
from tracefiles import GPU_TRACES, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis.findings import THRESHOLDS, gaps, inputs_from_profile


@functools.cache
def _inputs(name):
    return inputs_from_profile(load(str(real_trace(name))))


def _per_stream_in_full(inp, d):
    act = inp.activity_rows
    on_d = inp.column("device")[act] == d
    stream = inp.column("stream")[act]
    return {
        str(s): gaps._largest_gap(inp, act[on_d & (stream == s)]) for s in sorted(set(stream[on_d].tolist()))
    }


@pytest.mark.parametrize("name", GPU_TRACES)
def test_gap_findings_keep_every_streams_largest_gap(name):
    inp = _inputs(name)
    th = dataclasses.replace(THRESHOLDS, gap_min_us=0.0, gap_min_step_pct=0.0)
    found = gaps.find_idle_gaps(inp, th)
    assert found  # any trace with device work idles somewhere at this threshold
    for f in found:
        assert f.evidence["largest_gap_per_stream_us"] == _per_stream_in_full(inp, f.evidence["device"])


@pytest.mark.parametrize("name", GPU_TRACES[:2])
def test_no_stream_is_searched_without_a_gap_to_report(name, monkeypatch):
    inp = _inputs(name)
    calls = []
    real = gaps._largest_gap
    monkeypatch.setattr(gaps, "_largest_gap", lambda *a: calls.append(1) or real(*a))
    assert gaps.find_idle_gaps(inp, dataclasses.replace(THRESHOLDS, gap_min_us=float("inf"))) == []
    assert calls == []


@pytest.mark.parametrize("name", GPU_TRACES[:3] + ["cpu_only.pt.trace.json.gz"])
def test_host_ops_found_once_and_equal_to_a_fresh_search(name, monkeypatch):
    import numpy as np

    from jupyter_torchprof.analysis.findings import cpu, find
    from jupyter_torchprof.trace import categories as K

    inp = inputs_from_profile(load(str(real_trace(name))))
    real = type(inp).in_steps
    found = []
    real_has_ancestor = cpu.has_ancestor
    monkeypatch.setattr(
        cpu,
        "has_ancestor",
        lambda *a: found.append(a[1] is inp.__dict__.get("_host_ops")) or real_has_ancestor(*a),
    )
    find(inp)
    assert found.count(True) <= 1  # the host ops' top level looked for once at most
    ops = np.flatnonzero(inp.is_kind(K.CPU_OP))
    if inp.has_steps and len(ops):
        ops = ops[real(inp, ops)]
    got = cpu.host_ops(inp)
    assert got is cpu.host_ops(inp) and not got.flags.writeable
    np.testing.assert_array_equal(got, ops)
    top = cpu.top_level_ops(inp, got)
    assert top is cpu.top_level_ops(inp, got) and not top.flags.writeable
    np.testing.assert_array_equal(top, ops[~cpu.has_ancestor(inp, ops, inp.is_kind(K.CPU_OP))])
    np.testing.assert_array_equal(cpu.top_level_ops(inp, ops.copy()), top)  # not the cached array: searched
