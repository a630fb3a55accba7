"""Findings never claim more than happened.

* Over the whole corpus of real traces: no finding's ``impact_us`` exceeds the
  trace's span, the time per step, or the step it names.
* Threads that block at the same time block the host once (the union over time).
* Left-out steps (empty, truncated by an error, suspicious ranges) stay out of
  the per-step figures, and the profile says so.
"""

from __future__ import annotations

import functools
import gzip
import json
import re

import pytest
from tracefiles import REAL_TRACES, raw_events, real_trace, union_length

from jupyter_torchprof import load
from jupyter_torchprof.format import headline_chips

STEP = re.compile(r"^ProfilerStep#\d+$")


@functools.cache
def profile(name: str):
    return load(str(real_trace(name)))


@pytest.mark.parametrize("name", REAL_TRACES)
def test_no_finding_claims_more_time_than_the_trace_or_its_step(name):
    p = profile(name)
    s = p.summary
    ev = [e for e in raw_events(real_trace(name)) if e.get("ph") == "X" and e.get("cat") != "Trace"]
    span = max(e["ts"] + e.get("dur", 0) for e in ev) - min(e["ts"] for e in ev)
    walls = dict(zip(p.steps["step"].tolist(), p.steps["wall_us"].tolist(), strict=True))
    per_step = s["wall_per_step_us"]
    assert per_step <= span + 1e-3
    for r in p.findings.itertuples():
        assert r.impact_us >= 0, r.title
        assert r.impact_us <= span + 1e-3, r.title
        assert r.impact_us <= per_step * (1 + 1e-9) + 1e-6, r.title
        step = r.evidence.get("step") if isinstance(r.evidence, dict) else None
        if step is not None:
            assert r.impact_us <= walls[step] + 1e-6, r.title
            assert r.evidence.get("gap_us", 0.0) <= walls[step] + 1e-6, r.title


def test_a_step_range_far_outside_the_recording_is_flagged_not_counted():
    name = "triton_kernel.pt.trace.json.gz"
    ev = [e for e in raw_events(real_trace(name)) if e.get("ph") == "X" and e.get("cat") != "Trace"]
    (step,) = [e for e in ev if e["cat"] == "user_annotation" and STEP.match(e["name"])]
    others = [e for e in ev if e is not step]
    lo, hi = min(e["ts"] for e in others), max(e["ts"] + e["dur"] for e in others)
    # the range sits on a thread no op uses and reaches far past every other event
    assert (step["pid"], step["tid"]) not in {(e["pid"], e["tid"]) for e in ev if e["cat"] == "cpu_op"}
    assert step["dur"] > 100 * (hi - lo)
    p = profile(name)
    assert p.steps["suspicious"].tolist() == [True] and not p.steps["counted"].any()
    s = p.summary
    assert s["steps"] == 0 and s["steps_suspicious"] == 1
    t0 = min(e["ts"] for e in ev)
    assert s["window_start_us"] == pytest.approx(lo - t0) and s["window_end_us"] == pytest.approx(hi - t0)
    assert s["wall_per_step_us"] == pytest.approx(hi - lo)
    assert any("ProfilerStep#1" in n and "looks wrong" in n for n in p.notes)
    # the findings speak of the recorded 1.5 ms, never of the 13 s range
    assert p.findings["impact_us"].max() <= hi - lo + 1e-6
    gaps = p.findings[p.findings["rule"] == "idle_gaps"]
    assert not gaps.empty and max(e["gap_us"] for e in gaps["evidence"]) <= hi - lo
    assert not any(" s " in t or "13.3" in t for t in p.findings["title"])


def _with_a_second_blocking_thread(src, dst) -> dict:
    """The trace with every blocking sync call, and the ops around it, copied onto another
    thread at the same times: two threads blocked at once."""
    with gzip.open(src, "rt") as fh:
        doc = json.load(fh)
    ev = doc["traceEvents"]
    x = [e for e in ev if e.get("ph") == "X"]
    syncs = [e for e in x if e["name"] == "cudaStreamSynchronize"]
    copies = []
    for c in syncs:
        around = [
            e
            for e in x
            if e["cat"] == "cpu_op"
            and e["tid"] == c["tid"]
            and e["pid"] == c["pid"]
            and e["ts"] <= c["ts"]
            and c["ts"] + c["dur"] <= e["ts"] + e["dur"]
        ]
        for e in [*around, c]:
            dup = json.loads(json.dumps(e))
            dup["tid"] = 999_999
            dup.setdefault("args", {}).pop("correlation", None)
            copies.append(dup)
    doc["traceEvents"] = ev + copies
    with gzip.open(dst, "wt") as fh:
        json.dump(doc, fh)
    return {"syncs": syncs}


def test_blocking_sync_is_the_union_over_threads(tmp_path):
    src = real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    dst = tmp_path / "two_threads.pt.trace.json.gz"
    syncs = _with_a_second_blocking_thread(src, dst)["syncs"]
    union = union_length([(e["ts"], e["ts"] + e["dur"]) for e in syncs])
    summed = sum(e["dur"] for e in syncs)
    p = load(str(dst))
    f = p.findings[p.findings["rule"] == "sync"]
    rows = [r for r in f.itertuples() if r.evidence.get("call") == "cudaStreamSynchronize"]
    assert len(rows) == 1
    e = rows[0].evidence
    assert e["threads"] == 2 and e["count"] == 2 * len(syncs)
    assert e["blocked_summed_us"] == pytest.approx(2 * summed)
    assert e["blocked_us"] == pytest.approx(union)  # once, not twice
    assert "on 2 threads" in rows[0].title
    assert rows[0].impact_us <= p.summary["wall_per_step_us"]


PARTIAL_CELL = """%%torchprof --warmup 0 --steps 3 -q
calls.append(torch.autograd.profiler._is_profiler_enabled)
y = (x @ w).relu()
if calls[-1] and calls.count(True) == 1:
    time.sleep(0.02)  # a slow first step: the cut-short second one must not look 'warm'
if calls[-1] and calls.count(True) == 2:
    raise ValueError("boom in step 2")
"""


def test_partial_profile_counts_agree_everywhere(shell):
    shell.run_cell("import time, torch\nx = torch.randn(64, 64)\nw = torch.randn(64, 64)\ncalls = []")
    res = shell.run_cell(PARTIAL_CELL)
    assert isinstance(res.error_in_exec, ValueError)
    p = shell.user_ns["_torchprof"]
    assert p.partial and "1 of 3 steps completed" in p.error
    # the trace keeps the interrupted step; it is marked and left out
    ev = [e for e in raw_events(p.trace_path) if e.get("ph") == "X"]
    recorded = [e for e in ev if e.get("cat") == "user_annotation" and STEP.match(e["name"])]
    assert len(p.steps) == len(recorded) == 2
    assert p.steps["truncated"].tolist() == [False, True]
    s = p.summary
    assert s["steps"] == p.capture.steps == 1 and s["steps_truncated"] == 1
    assert dict(headline_chips(s))["steps"] == "1"
    first = min(recorded, key=lambda e: e["ts"])
    assert s["wall_per_step_us"] == pytest.approx(first["dur"], abs=0.5)
    assert any("cut short" in n for n in p.notes)
    # one counted step: no cold start can be read from it
    assert p.findings[p.findings["rule"] == "cold_start"].empty
    assert first["dur"] >= 20_000
