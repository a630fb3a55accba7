"""Op-row notes on a live accelerator (marked ``gpu``: skipped without one).

The device-side patterns the CPU tests read from constructed traces, made
for real: each SDPA backend forced in turn (the note must name the one that
ran, checked against the kernels the file holds), and the profiler's own
final synchronisation. Run with ``python -m pytest -m gpu tests/test_op_notes_gpu.py``.
"""

from __future__ import annotations

import pytest
import torch
from test_op_notes import encloses, notes_of, x_events
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from jupyter_torchprof import load
from jupyter_torchprof.analysis.notes.ops_attention import kernel_backend

pytestmark = pytest.mark.gpu

BACKENDS = {
    SDPBackend.FLASH_ATTENTION: "flash",
    SDPBackend.EFFICIENT_ATTENTION: "memory-efficient",
    SDPBackend.CUDNN_ATTENTION: "cuDNN",
    SDPBackend.MATH: "math",
}
SDPA = "aten::scaled_dot_product_attention"


def _profile(fn, path):
    fn()
    torch.accelerator.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        for _ in range(2):
            fn()
    prof.export_chrome_trace(str(path))
    return load(str(path))


@pytest.mark.parametrize("backend", list(BACKENDS), ids=lambda b: BACKENDS[b])
def test_forced_sdpa_backend_is_named(tmp_path, backend):
    dev = torch.accelerator.current_accelerator()
    q = torch.randn(2, 8, 512, 64, device=dev, dtype=torch.float16)

    def run():
        with torch.no_grad(), sdpa_kernel(backend):
            torch.nn.functional.scaled_dot_product_attention(q, q, q)

    try:
        run()
    except RuntimeError as exc:  # this device or build has no such backend
        pytest.skip(f"{BACKENDS[backend]} unavailable here: {exc}")
    p = _profile(run, tmp_path / "sdpa.json")
    ev = x_events(p.trace_path)
    kernels = {e["name"] for e in ev if e["cat"] == "kernel"}
    fused = {kernel_backend(k) for k in kernels} - {None}
    name = BACKENDS[backend]
    # the file's own kernels agree with the backend forced (math launches no fused attention kernel)
    assert fused == (set() if name == "math" else {name})
    assert notes_of(p, SDPA)["sdpa-backend"] == f"SDPA backend: {name}"


def test_linear_bias_and_final_sync_live(tmp_path):
    dev = torch.accelerator.current_accelerator()
    model = torch.nn.Linear(256, 512).to(dev)
    x = torch.randn(64, 256, device=dev)

    def run():
        with torch.no_grad():
            model(x)

    p = _profile(run, tmp_path / "linear.json")
    assert "bias-in-gemm" in notes_of(p, "aten::addmm")
    ev = x_events(p.trace_path)
    host = [e for e in ev if e["cat"] in ("cpu_op", "cuda_runtime", "cuda_driver")]
    syncs = [e for e in host if e["name"] in ("cudaDeviceSynchronize", "hipDeviceSynchronize")]
    final = max(syncs, key=lambda e: e["ts"])
    assert not any(encloses(o, final) for o in host)
    assert "profiler-final-sync" in notes_of(p, final["name"])


def test_recipe_step_syncs_and_final_sync_live(shell):
    """%%torchprof synchronises at the end of every step: those calls are the step-closing ones, counted."""
    shell.run_cell(
        "import torch\n"
        "dev = torch.accelerator.current_accelerator()\n"
        "model = torch.nn.Linear(512, 512).to(dev)\n"
        "x = torch.randn(256, 512, device=dev)\n"
    )
    res = shell.run_cell("%%torchprof --steps 3 -q\nwith torch.no_grad():\n    y = model(x)\n")
    assert res.error_in_exec is None, res.error_in_exec
    p = shell.user_ns["_torchprof"]
    ev = x_events(p.trace_path)
    host = [e for e in ev if e["cat"] in ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")]
    steps = [e for e in host if e["cat"] == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    syncs = [e for e in host if e["name"] in ("cudaDeviceSynchronize", "hipDeviceSynchronize")]
    name = syncs[0]["name"]
    closing = 0
    for step in steps:
        inside = [e for e in host if e is not step and encloses(step, e)]
        top = [e for e in inside if not any(encloses(o, e) for o in inside)]
        last = max(top, key=lambda e: e["ts"])
        closing += last["name"] == name
    assert closing == len(steps) == 3
    got = notes_of(p, name)
    counted = "" if closing == len(syncs) else f" (in {closing} of {len(syncs)} calls)"
    assert got["step-end-sync"] == "the step's closing sync (waits for its device work)" + counted
