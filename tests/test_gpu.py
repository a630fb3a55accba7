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
from jupyter_torchprof.store import wait_for_compression

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
