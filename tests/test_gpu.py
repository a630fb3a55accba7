"""Live captures on a real accelerator (marked ``gpu``: skipped without one).

Run them where a GPU is present: ``python -m pytest -m gpu``. Numbers are
checked against the trace file each run wrote and against torch's own
key_averages() of an identical profile.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch
from tracefiles import raw_events

from jupyter_torchprof import load
from jupyter_torchprof.runs.store import wait_for_compression

pytestmark = pytest.mark.gpu

SETUP = """
import torch
dev = torch.accelerator.current_accelerator()
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to(dev)
x = torch.randn(256, 1024, device=dev)
"""


def _device_sums(path):
    sums: dict[str, float] = defaultdict(float)
    for e in raw_events(path):
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            sums[e["name"]] += float(e["dur"])
    return sums


def test_live_capture_traces_device_kernels(shell):
    shell.run_cell(SETUP)
    res = shell.run_cell("%%torchprof --steps 3\ny = model(x).sum()")
    assert res.error_in_exec is None
    p = shell.user_ns["_torchprof"]
    wait_for_compression()
    s = p.summary
    assert s["device_traced"] and s["steps"] == 3
    assert not p.kernels.empty
    sums = _device_sums(p.trace_path)
    k = p.kernels.set_index("name")
    assert set(k.index) == set(sums)
    for name, total in sums.items():
        assert k.loc[name, "total_us"] == pytest.approx(total)
    # every step waited for its device work (synchronised)
    assert (p.steps["device_busy_us"] > 0).all()
    assert (p.steps["wall_us"] >= p.steps["device_busy_us"]).all()
    assert p.ops.set_index("name").loc["aten::addmm", "self_device_us"] > 0


def test_device_times_match_key_averages(tmp_path):
    from torch.profiler import ProfilerActivity, profile, record_function

    dev = torch.accelerator.current_accelerator()
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512)).to(
        dev
    )
    x = torch.randn(128, 512, device=dev)
    model(x).sum().backward()
    torch.accelerator.synchronize()
    activity = ProfilerActivity.CUDA if dev.type == "cuda" else getattr(ProfilerActivity, dev.type.upper())
    with profile(activities=[ProfilerActivity.CPU, activity]) as prof:
        for k in range(3):
            with record_function(f"ProfilerStep#{k}"):
                model(x).sum().backward()
                torch.accelerator.synchronize()
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    ours = load(str(path)).ops.set_index("name")
    total = sum(e.self_device_time_total for e in prof.key_averages())
    for e in prof.key_averages():
        assert ours.loc[e.key, "calls"] == e.count
        if e.self_device_time_total >= 0.01 * total:
            assert ours.loc[e.key, "self_device_us"] == pytest.approx(
                e.self_device_time_total, rel=0.01, abs=2
            )


def test_compare_generates_triton_kernels(shell):
    shell.run_cell(SETUP)
    res = shell.run_cell(
        "%%torchprof --compare --steps 2\nh = torch.nn.functional.gelu(x) * 2 + 1\ny = h.sum()"
    )
    assert res.error_in_exec is None
    c = shell.user_ns["_torchprof"]
    kernels = c.compile_stats.kernels
    assert len(kernels) and kernels["kind"].isin(["pointwise", "reduction", "persistent reduction"]).all()
    assert (c.diff_kernels["status"] == "only_b").any()


def test_scheduled_capture_matches_key_averages_and_launches(tmp_path):
    """A scheduled profile of a training step: key_averages() taken inside on_trace_ready
    (the cycle clears the events after), and each step's device work found by launch."""
    from test_step_attribution import Raw
    from torch.profiler import ProfilerActivity, profile, schedule

    dev = torch.accelerator.current_accelerator()
    activity = ProfilerActivity.CUDA if dev.type == "cuda" else getattr(ProfilerActivity, dev.type.upper())
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512)).to(
        dev
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 512, device=dev)
    path = tmp_path / "scheduled.json"
    seen: dict[str, list] = {}

    def ready(p):
        p.export_chrome_trace(str(path))
        seen["ka"] = [(e.key, e.count, e.self_device_time_total) for e in p.key_averages()]

    with profile(
        activities=[ProfilerActivity.CPU, activity],
        schedule=schedule(wait=0, warmup=1, active=3, repeat=1),
        on_trace_ready=ready,
    ) as prof:
        for _ in range(4):
            # no synchronize: device work runs on after its host step ends
            model(x).relu().mean().backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    p = load(str(path))
    ours = p.ops.set_index("name")
    total = sum(t for _, _, t in seen["ka"])
    assert total > 0
    for key, count, self_device in seen["ka"]:
        assert ours.loc[key, "calls"] == count, key
        if self_device >= 0.01 * total:
            assert ours.loc[key, "self_device_us"] == pytest.approx(self_device, rel=0.01, abs=2), key
    raw = Raw("", path=path)
    steps = p.steps
    assert len(steps) == len(raw.steps) and steps["counted"].any()
    for k in range(len(raw.steps)):
        mine = raw.launched(k)
        assert steps["device_activities"].iloc[k] == len(mine)
        launched_us = sum(d["dur"] for d in mine)
        got = steps[["kernel_us", "memcpy_us", "memset_us"]].iloc[k].sum()
        assert got == pytest.approx(launched_us, rel=1e-9, abs=1e-6)
    k = p.kernels
    s = p.summary
    parts = ("in_steps", "left_out", "outside_steps", "queued", "unlinked")
    assert sum(s[f"device_activities_{x}"] for x in parts) == len(raw.device)
    # the kernel table counts the counted steps' work (the warm-up's queued kernels are in no step)
    counted = set(raw.counted())
    assert int(k["calls"].sum()) == s["device_activities_in_steps"] == sum(o in counted for o in raw.owner)
    assert s["device_activities_queued"] == sum(raw.queued)
