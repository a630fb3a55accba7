"""Tables built from the real GPU traces, checked against sums taken straight from the files."""

from __future__ import annotations

from collections import defaultdict

import pytest
from tracefiles import GPU_TRACES, REAL_TRACES, raw_events, real_trace

from jupyter_torchprof import load

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


@pytest.mark.parametrize("name", REAL_TRACES)
def test_every_real_trace_loads(name):
    path = real_trace(name)
    p = load(str(path))
    assert len(p.events) > 0
    assert not p.ops.empty
    assert p.summary["events"] == len(p.events)
    text = p.table()
    assert "Name" in text and "Self CPU" in text
    bundle = p._repr_mimebundle_()
    assert set(bundle) >= {"text/plain", "text/html"}


@pytest.mark.parametrize("name", GPU_TRACES)
def test_kernel_totals_equal_file_sums(name):
    path = real_trace(name)
    expected_total: dict[str, float] = defaultdict(float)
    expected_calls: dict[str, int] = defaultdict(int)
    events = raw_events(path)
    # Work whose correlation id is below the first runtime call's was queued
    # before the trace started: in no step, so not in the kernel table.
    launches = {
        e["args"]["correlation"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    first = min(launches, default=None)
    for e in events:
        corr = e.get("args", {}).get("correlation", -1)
        if first is not None and corr not in launches and 0 <= corr < first:
            continue
        if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS:
            expected_total[e["name"]] += float(e.get("dur", 0))
            expected_calls[e["name"]] += 1
    k = load(str(path)).kernels.set_index("name")
    assert set(k.index) == set(expected_total)
    for kname, total in expected_total.items():
        assert k.loc[kname, "total_us"] == pytest.approx(total, rel=1e-9, abs=1e-6)
        assert k.loc[kname, "calls"] == expected_calls[kname]
    assert k["pct"].sum() == pytest.approx(100.0)


@pytest.mark.parametrize("name", GPU_TRACES)
def test_device_time_is_attributed_to_ops(name):
    """Self device time of all ops adds up to the device time that has a launching op."""
    path = real_trace(name)
    p = load(str(path))
    ev = p.events
    dev = ev[ev["kind"].isin(["kernel", "memcpy", "memset"])]
    linked = dev[dev["op"] >= 0]["dur"].sum()
    assert p.ops["self_device_us"].sum() == pytest.approx(linked, rel=1e-9)
    # Almost every kernel of a real trace is linked to the op that launched it.
    assert len(dev[dev["op"] >= 0]) >= 0.9 * len(dev)


def test_launching_op_follows_correlation_ids():
    """For each kernel: its launch carries the same correlation id and encloses no other op."""
    path = real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    raw = [e for e in raw_events(path) if e.get("ph") == "X"]
    launches = {e["args"]["correlation"]: e for e in raw if e.get("cat") == "cuda_runtime"}
    p = load(str(path))
    ev = p.events
    kernels = ev[ev["kind"] == "kernel"]
    for row in kernels.itertuples():
        launch = ev.loc[row.launch]
        assert launch["correlation"] == row.correlation
        assert launches[row.correlation]["name"] == launch["name"]
        op = ev.loc[row.op]
        # the op encloses the launch on the same thread
        assert op["tid"] == launch["tid"]
        assert op["ts"] <= launch["ts"] and launch["ts"] + launch["dur"] <= op["ts"] + op["dur"] + 1e-3


def test_mi250_rocm_kernels_and_devices():
    p = load(str(real_trace("mi250_rocm_train.pt.trace.json.gz")))
    assert p.summary["device"] == "AMD Radeon Graphics"
    assert p.summary["device_traced"]
    # two ProfilerStep ranges are recorded; the trailing one is empty (no op, no
    # device work) and is left out of the per-step figures
    assert p.summary["steps_recorded"] == 2 and p.summary["steps_empty"] == 1
    assert p.summary["steps"] == 1
    assert (p.ops["self_device_us"] > 0).any()


def test_cpu_only_trace_claims_no_device_time():
    p = load(str(real_trace("cpu_only.pt.trace.json.gz")))
    assert p.summary["device"] == "CPU"
    assert not p.summary["device_traced"]
    assert p.kernels.empty
    assert p.ops["self_device_us"].sum() == 0
    assert "Self device" not in p.table()


def test_v100_ns_timestamps_nest_correctly():
    """Float µs timestamps with ns decimals: children stay inside their parents."""
    p = load(str(real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz")))
    ev = p.events
    host = ev[ev["depth"] >= 0]
    child = host[host["parent"] >= 0]
    parent = ev.loc[child["parent"].to_numpy()]
    tol = p.meta.time_precision_us
    assert (child["ts"].to_numpy() >= parent["ts"].to_numpy() - tol).all()
    assert (
        child["ts"].to_numpy() + child["dur"].to_numpy()
        <= parent["ts"].to_numpy() + parent["dur"].to_numpy() + tol
    ).all()
    # Self CPU time is never meaningfully negative.
    assert (p.ops["self_cpu_us"] >= -1.0).all()


def test_self_cpu_sum_equals_root_durations():
    """Self times partition the root events' durations (per thread)."""
    p = load(str(real_trace("a100_nccl_rank0.pt.trace.json.gz")))
    ev = p.events
    host = ev[ev["depth"] >= 0]
    roots = host[host["parent"] < 0]
    assert host["self_cpu_us"].sum() == pytest.approx(roots["dur"].sum(), rel=1e-6)


def test_steps_from_profiler_step_ranges():
    path = real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz")
    raw = [
        e
        for e in raw_events(path)
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    p = load(str(path))
    assert len(p.steps) == len(raw)
    assert p.steps["wall_us"].sum() == pytest.approx(sum(e["dur"] for e in raw))
    assert p.summary["wall_per_step_us"] == pytest.approx(sum(e["dur"] for e in raw) / len(raw))
