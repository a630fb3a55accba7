"""Profile.diff on the real diff pair, checked against per-name sums from the files."""

from __future__ import annotations

import statistics
from collections import defaultdict

import pytest
from tracefiles import raw_events, real_trace

from jupyter_torchprof import load


def _kernel_sums(path):
    """Device time per name in the file, but the work queued before the trace started.

    That work (no launch recorded, correlation id below the first runtime
    call's) is in no step, so not in the kernel tables the diff compares.
    """
    events = raw_events(path)
    calls = {
        e["args"]["correlation"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    first = min(calls, default=None)
    sums = defaultdict(float)
    for e in events:
        corr = e.get("args", {}).get("correlation", -1)
        if first is not None and corr not in calls and 0 <= corr < first:
            continue
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            sums[e["name"]] += e["dur"]
    return sums


def test_diff_pair_kernels():
    pa = real_trace("diff_pair/control.pt.trace.json.gz")
    pb = real_trace("diff_pair/test.pt.trace.json.gz")
    a, b = load(str(pa)), load(str(pb))
    d = a.diff(b)
    sa, sb = _kernel_sums(pa), _kernel_sums(pb)
    steps_a, steps_b = a.summary["steps"], b.summary["steps"]
    assert steps_a == 6 and steps_b == 6
    k = d.kernels.set_index("name")
    assert set(k.index) == set(sa) | set(sb)
    for name in set(sa) | set(sb):
        assert k.loc[name, "total_us_a"] == pytest.approx(sa.get(name, 0.0) / steps_a)
        assert k.loc[name, "total_us_b"] == pytest.approx(sb.get(name, 0.0) / steps_b)
        expected = "both" if name in sa and name in sb else ("only_a" if name in sa else "only_b")
        assert k.loc[name, "status"] == expected
    # rows are ordered by the size of the change
    deltas = d.kernels["total_us_delta"].abs().to_numpy()
    assert (deltas[:-1] >= deltas[1:]).all()


def test_headline_speedup_is_a_over_b():
    a = load(str(real_trace("diff_pair/control.pt.trace.json.gz")))
    b = load(str(real_trace("diff_pair/test.pt.trace.json.gz")))
    h = a.diff(b).headline.set_index("metric")
    wall = h.loc["wall per step"]
    assert wall["a_us"] == pytest.approx(a.summary["wall_per_step_us"])
    # The speed-up is the ratio of the median step (a mean moves with one
    # descheduled step), from the ProfilerStep ranges in the raw files.
    med = [
        statistics.median(
            float(e["dur"])
            for e in raw_events(p.trace_path)
            if str(e.get("name", "")).startswith("ProfilerStep#")
        )
        for p in (a, b)
    ]
    assert wall["speedup"] == pytest.approx(med[0] / med[1])
    assert wall["a_median_us"] == pytest.approx(med[0])
    assert "→" in a.diff(b).text()


def test_diff_of_cpu_profile_with_itself_is_zero():
    p = load(str(real_trace("cpu_only.pt.trace.json.gz")))
    d = p.diff(p)
    assert (d.ops["status"] == "both").all()
    assert d.ops["self_cpu_us_delta"].abs().max() == 0
    assert d.kernels.empty


def test_a_ratio_needs_both_sides_and_loaded_runs_say_what_the_verdict_rests_on():
    """New and gone rows have no ratio (never inf or 0, shown as Infinity / 0.00×); both-side rows are b / a."""
    from jupyter_torchprof import columns

    a = load(str(real_trace("diff_pair/control.pt.trace.json.gz")))
    b = load(str(real_trace("diff_pair/test.pt.trace.json.gz")))
    d = a.diff(b)
    k = d.kernels
    ratio = next(c for c in columns.diff_kernels() if c.key == "ratio")
    absent = k[k["status"] != "both"]
    assert len(absent) and absent["ratio"].isna().all()
    assert {columns.format_cell(ratio, v) for v in absent["ratio"]} == {"–"}
    both = k[(k["status"] == "both") & (k["total_us_a"] > 0)]
    assert both["ratio"].to_numpy() == pytest.approx((both["total_us_b"] / both["total_us_a"]).to_numpy())
    # Two traces from files: two separate runs, and no CPU time of the process to lean on.
    h = d.headline.set_index("metric")
    assert set(h["evidence"]) == {"separate runs"}
    assert "process CPU per step" not in h.index
    assert any("CPU time per step is not known" in n for n in d.notes)
    assert "evidence: two separate runs" in h.loc["wall per step", "reason"]
