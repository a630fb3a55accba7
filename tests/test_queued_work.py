"""Which work counts in which step: work queued before the trace, and one set of work for every table.

Issue 27, items 3 and 4. The oracle reads the trace with the json module only:
device work (``kernel``, ``gpu_memcpy``, ``gpu_memset``) whose correlation id
is below the first runtime call's was launched before the profiler recorded
anything (HTA gives it iteration -1), so it belongs to no step, even when it
runs inside the first one. The kernel table, the steps table and the
communication finding must then count the same work.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from test_step_attribution import Raw
from tracefiles import GPU_TRACES, REAL_TRACES, raw_events, real_trace, union_length

from jupyter_torchprof import load
from jupyter_torchprof.analysis.findings import inputs_from_profile
from jupyter_torchprof.analysis.findings.distributed import find_exposed_communication
from jupyter_torchprof.analysis.findings.thresholds import Thresholds
from jupyter_torchprof.analysis.kernels import activity_rows
from jupyter_torchprof.format import fmt_time

#: The real trace whose rank had work in flight when the profiler started
#: (a V100 DDP rank: kernels, copies, memsets and NCCL collectives).
QUEUED_TRACE = "diff_pair/test.pt.trace.json.gz"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def queued_oracle(name: str) -> tuple[list[dict], list[dict], dict]:
    """(queued device work, all device work, runtime calls by correlation), from the json alone."""
    events = [e for e in raw_events(real_trace(name)) if e.get("ph") == "X"]
    runtime = {}
    for e in events:
        if str(e.get("cat", "")).lower().endswith(("_runtime", "_driver")) and "correlation" in e.get(
            "args", {}
        ):
            runtime.setdefault(e["args"]["correlation"], e)
    device = [e for e in events if e.get("cat") in DEVICE_CATS]
    first = min(runtime, default=None)
    queued = [
        d
        for d in device
        if first is not None
        and d.get("args", {}).get("correlation") not in runtime
        and 0 <= d.get("args", {}).get("correlation", -1) < first
    ]
    return queued, device, runtime


@pytest.fixture(scope="module")
def queued_profile():
    return load(str(real_trace(QUEUED_TRACE)))


def test_work_queued_before_the_trace_is_in_no_step(queued_profile):
    queued, device, runtime = queued_oracle(QUEUED_TRACE)
    # the trace does hold such work: 614 activities, NCCL collectives among them
    assert len(queued) > 100 and any("nccl" in d["name"].lower() for d in queued)
    p = queued_profile
    s = p.summary
    assert s["device_activities_queued"] == len(queued)
    assert s["device_us_queued"] == pytest.approx(sum(d["dur"] for d in queued), abs=1e-3)
    # in no step: the steps hold every other activity, and not one of these
    steps = p.steps
    assert int(steps["device_activities"].sum()) == len(device) - len(queued)
    act = activity_rows(p.parsed_events)
    corr = p.parsed_events["correlation"].to_numpy()[act]
    wanted = {d["args"]["correlation"] for d in queued}
    owner = [int(o) for c, o in zip(corr.tolist(), p._device_steps.tolist(), strict=True) if c in wanted]
    assert len(owner) == len(queued) and set(owner) == {-1}


def test_first_step_is_busy_with_the_work_it_launched_only(queued_profile):
    _, device, runtime = queued_oracle(QUEUED_TRACE)
    events = [e for e in raw_events(real_trace(QUEUED_TRACE)) if e.get("ph") == "X"]
    ranges = sorted(
        (int(STEP.match(e["name"]).group(1)), e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "user_annotation" and STEP.match(str(e.get("name")))
    )
    _, lo, hi = ranges[0]
    launched = [
        d
        for d in device
        if (call := runtime.get(d.get("args", {}).get("correlation"))) is not None and lo <= call["ts"] < hi
    ]
    first = queued_profile.steps.iloc[0]
    assert first["step"] == ranges[0][0]
    assert first["device_activities"] == len(launched)
    assert first["device_busy_us"] == pytest.approx(
        union_length([(d["ts"], d["ts"] + d["dur"]) for d in launched])
    )
    # the first step is now like the others (each launched the same work)
    assert (queued_profile.steps["device_activities"] == len(launched)).all()


def test_a_note_says_how_much_queued_work_was_left_out(queued_profile):
    queued, _, _ = queued_oracle(QUEUED_TRACE)
    count = f"{len(queued):,} device activities"
    time = fmt_time(sum(d["dur"] for d in queued))
    hits = [n for n in queued_profile.notes if count in n and time in n and "queued before the trace" in n]
    assert len(hits) == 1
    assert "left out of the kernel table and the per-step figures" in hits[0]
    assert hits[0] in queued_profile.summary["notes"]


def _counted_work(raw: Raw) -> list[dict]:
    counted = set(raw.counted())
    if not counted:  # no step to count: the figures are over the whole trace
        return raw.device
    return [d for d, o in zip(raw.device, raw.owner, strict=True) if o in counted]


@pytest.mark.parametrize("name", GPU_TRACES)
def test_kernel_table_counts_the_work_the_steps_count(name):
    raw = Raw(name)
    p = load(str(raw.path))
    mine = _counted_work(raw)
    k = p.kernels.set_index("name")
    # per name, against the json: calls and time (Memset, Memcpy, NCCL ... alike)
    calls = Counter(d["name"] for d in mine)
    total = Counter()
    for d in mine:
        total[d["name"]] += d["dur"]
    assert sorted(k.index) == sorted(calls)
    for n, c in calls.items():
        assert k.loc[n, "calls"] == c, n
        assert k.loc[n, "total_us"] == pytest.approx(total[n], abs=1e-6), n
    counted = p.steps[p.steps["counted"]] if len(p.steps) else p.steps
    if counted.empty:
        return
    # and against the steps table's sums
    assert int(k["calls"].sum()) == int(counted["device_activities"].sum())
    for col, kind in (("kernel_us", "kernel"), ("memcpy_us", "memcpy"), ("memset_us", "memset")):
        assert k.loc[k["kind"] == kind, "total_us"].sum() == pytest.approx(counted[col].sum(), abs=1e-3), col
    comm = k.loc[k["family"] == "communication", "total_us"].sum()
    assert comm == pytest.approx(counted["comm_us"].sum(), abs=1e-3)


@pytest.mark.parametrize("name", REAL_TRACES)
def test_communication_finding_counts_the_steps_collectives(name):
    p = load(str(real_trace(name)))
    # every device with collectives reports, however little is exposed
    found = find_exposed_communication(inputs_from_profile(p), Thresholds(comm_exposed_min_pct=-1.0))
    counted = p.steps[p.steps["counted"]] if len(p.steps) else p.steps
    k = p.kernels
    comm_kt = float(k.loc[k["family"] == "communication", "total_us"].sum()) if len(k) else 0.0
    per_step = sum(f.evidence["comm_per_step_us"] for f in found)
    assert per_step == pytest.approx(comm_kt / p.step_count, abs=1e-6)
    if not counted.empty:
        assert per_step == pytest.approx(float(counted["comm_us"].mean()), abs=1e-6)
    # the collectives it names are those the steps launched
    assert sum(f.evidence["comm_kernels"] for f in found) == int(
        k.loc[k["family"] == "communication", "calls"].sum()
    )
    # and the findings shown use the same figure
    shown = p.findings[p.findings["rule"] == "communication"]
    for ev in shown["evidence"]:
        if "comm_per_step_us" in ev:
            match = [f for f in found if f.evidence["device"] == ev["device"]]
            assert ev["comm_per_step_us"] == pytest.approx(match[0].evidence["comm_per_step_us"])
