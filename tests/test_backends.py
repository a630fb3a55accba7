"""Device backends: capture recipes per backend, and traces of non-CUDA backends.

No TPU, Trainium, XPU or Gaudi is on this machine. What is tested here:

* capture with a PrivateUse1 backend registered in a fresh Python process
  (``torch.utils.rename_privateuse1_backend`` + ``torch._register_device_module``):
  the activities chosen, the ``experimental_config`` handed to torch.profiler,
  the synchronisation after every run, the warm-up advice, and the one-line
  note when the device trace is missing. It cannot check that TorchTPU's or
  TorchNeuron's real config classes accept these arguments or that their
  device tracers write anything: the config classes there are stand-ins
  (real ``torch.profiler._ExperimentalConfig`` subclasses that record their
  arguments), and the device runs nothing;
* traces constructed from the documented formats of Intel XPU
  (``xpu_runtime`` launches, ``kernel`` events with ``sycl queue``), Gaudi
  (``hpu_op``), a PrivateUse1 backend (``privateuse1_runtime``) and
  TorchNeuron (``nc_exec_running``): launch → kernel links and kernel tables,
  checked against sums taken from the documents with plain Python. No such
  device wrote them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

from jupyter_torchprof.capture.backends import Backend, backend_for, registry
from jupyter_torchprof.results.profile import Profile
from jupyter_torchprof.runs.load import load
from jupyter_torchprof.trace import categories as K
from jupyter_torchprof.trace.parser import parse_document

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))


def test_every_backend_module_is_registered() -> None:
    """One file per backend: the registry finds each module's BACKEND without a list."""
    reg = registry()
    assert {"cuda", "xpu", "hpu", "mtia", "tpu", "neuron"} <= set(reg)
    for device_type, cls in reg.items():
        assert issubclass(cls, Backend) and cls.device_type == device_type
    assert backend_for("tpu").min_warmup == 3 and backend_for("neuron").min_warmup == 3
    assert backend_for("cuda").min_warmup == 0
    # A device type without a module: traced through PrivateUse1 only when it is that backend.
    assert backend_for("npu", privateuse1_name="npu").activity == "PrivateUse1"
    assert backend_for("npu", privateuse1_name=None).activity is None


_PRIVATEUSE1_SCRIPT = r"""
import json, sys, tempfile, types
from pathlib import Path
import torch
import torch.profiler as tp

name = sys.argv[1]
torch.utils.rename_privateuse1_backend(name)
syncs = []
dev = types.ModuleType("fake_" + name)
dev.is_available = lambda: True
dev.device_count = lambda: 1
dev.current_device = lambda: 0
dev.synchronize = lambda *a: syncs.append(a)
dev.get_device_name = lambda i=0: "no hardware: " + name
torch._register_device_module(name, dev)

class StandInConfig(tp._ExperimentalConfig):
    # Records what the backend asked for; torch takes it as a real config.
    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

if name == "tpu":
    pkg = types.ModuleType("torch_tpu")
    sub = types.ModuleType("torch_tpu.profiler")
    sub.TpuProfilerConfig = StandInConfig
    pkg.profiler = sub
    sys.modules.update({"torch_tpu": pkg, "torch_tpu.profiler": sub})

seen = {}
real_profile = tp.profile
class SpyProfile(real_profile):
    def __init__(self, *args, **kwargs):
        seen["activities"] = sorted(a.value for a in kwargs["activities"])
        cfg = kwargs.get("experimental_config")
        seen["config"] = getattr(cfg, "kwargs", None) if cfg is not None else None
        super().__init__(*args, **kwargs)
tp.profile = SpyProfile

from jupyter_torchprof.capture.device import resolve_device
from jupyter_torchprof.capture.runner import CaptureOptions, capture

target = resolve_device("auto")
runs = []
def run_once():
    runs.append(1)
    torch.ones(64).sum()
folder = Path(tempfile.mkdtemp())
result = capture(run_once, target, CaptureOptions(warmup=1, steps=2), folder / "trace.json")
print(json.dumps({
    "spec": target.spec, "kind": target.kind, "traced": target.traced, "notes": target.notes,
    "privateuse1_value": tp.ProfilerActivity.PrivateUse1.value, "cpu_value": tp.ProfilerActivity.CPU.value,
    "runs": len(runs), "syncs": len(syncs), "warmup_done": result.warmup_done,
    "steps_done": result.steps_done, "result_notes": result.notes, "folder": str(folder),
    "trace_written": result.trace_path is not None, "error": repr(result.error), **seen,
}))
"""


def _run_privateuse1(name: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_PRIVATEUSE1_SCRIPT), name],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_privateuse1_tpu_capture_recipe() -> None:
    """TorchTPU registered as PrivateUse1 'tpu': activities, TpuProfilerConfig, sync, warm-up, missing XPlane."""
    r = _run_privateuse1("tpu")
    assert r["error"] == "None" and r["trace_written"]
    assert (r["spec"], r["kind"], r["traced"]) == ("tpu:0", "tpu", True)
    assert r["activities"] == sorted([r["cpu_value"], r["privateuse1_value"]])
    cfg = r["config"]
    # The XPlane goes inside the run's folder, where the loader looks for it.
    assert cfg["run_dir"] == str(Path(r["folder"]) / "device")
    assert (cfg["host_tracer_level"], cfg["device_tracer_level"], cfg["python_tracer_level"]) == (2, 1, 0)
    assert cfg["worker_rank"] == 0
    # XLA compiles on the first calls: the warm-up was raised, and said so.
    assert r["warmup_done"] == 3 and any("warm-up raised from 1 to 3" in n for n in r["result_notes"])
    # Every run (warm-up, the profiler's own warm-up step, the steps) ends with a sync.
    assert r["runs"] == r["warmup_done"] + r["steps_done"] + 1
    assert r["syncs"] >= r["runs"]
    (missing,) = [n for n in r["result_notes"] if "no TPU device trace" in n]
    assert "plugins/profile/<timestamp>/<host>.xplane.pb" in missing and r["folder"] in missing


def test_privateuse1_neuron_without_its_profiler_module() -> None:
    """TorchNeuron registered as 'neuron' with no NeuronConfig anywhere: host side, said up front."""
    r = _run_privateuse1("neuron")
    assert r["error"] == "None" and r["trace_written"]
    assert r["activities"] == sorted([r["cpu_value"], r["privateuse1_value"]])
    assert r["config"] is None
    (note,) = [n for n in r["notes"] if n.startswith("TorchNeuron:")]
    assert "NeuronConfig not found" in note
    assert r["warmup_done"] == 3
    assert r["runs"] == r["warmup_done"] + r["steps_done"] + 1 and r["syncs"] >= r["runs"]


def test_neuron_output_checks(tmp_path: Path) -> None:
    """A failed Neuron capture (empty folder, 0-byte .ntff) is one line naming what was expected."""
    from jupyter_torchprof.trace.neuron import check_folder, neuron_files

    (tmp_path / "neff_1.neff").write_bytes(b"x" * 10)
    assert "no device trace (*.ntff)" in check_folder(tmp_path)
    (tmp_path / "1_instid_0_vnc_0.ntff").write_bytes(b"")
    msg = check_folder(tmp_path)
    assert "empty (0 bytes)" in msg and str(tmp_path) in msg and "\n" not in msg
    (tmp_path / "1_instid_0_vnc_0.ntff").write_bytes(b"data")
    assert check_folder(tmp_path) is None
    assert [p.name for p in neuron_files(tmp_path)] == ["1_instid_0_vnc_0.ntff", "neff_1.neff"]


# --------------------------------------------------------------------------- #
# constructed traces of each backend's documented shape


def _host(ts: float, name: str, ext: int) -> dict:
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": 10,
        "tid": 10,
        "ts": ts,
        "dur": 50,
        "args": {"External id": ext},
    }


def _doc(
    runtime_cat: str | None, launch: str, device_cat: str, device_args: dict, kernel_names: list[str]
) -> dict:
    """Three ops, each launching one device event a little later (constructed from the documented shape)."""
    events = []
    for i, kname in enumerate(kernel_names):
        t = 100.0 * i
        events.append(_host(t, "aten::mm", i + 1))
        args = {**device_args, "correlation": 500 + i} if runtime_cat else dict(device_args)
        if runtime_cat:
            events.append(
                {
                    "ph": "X",
                    "cat": runtime_cat,
                    "name": launch,
                    "pid": 10,
                    "tid": 10,
                    "ts": t + 5,
                    "dur": 8,
                    "args": {"External id": i + 1, "correlation": 500 + i},
                }
            )
        events.append(
            {
                "ph": "X",
                "cat": device_cat,
                "name": kname,
                "pid": 0,
                "tid": 7,
                "ts": t + 20 + i,
                "dur": 10.0 + 3 * i,
                "args": {"device": 0, **args},
            }
        )
    return {"schemaVersion": 1, "traceEvents": events}


_SHAPES = {
    # Intel XPU (XPUPTI): Unified Runtime launches; kernels on a SYCL queue.
    "xpu": ("xpu_runtime", "urEnqueueKernelLaunch", "kernel", {"sycl queue": 1, "l0 queue": 2}),
    # A PrivateUse1 backend (TorchTPU/TorchNeuron/Ascend host side).
    "privateuse1": ("privateuse1_runtime", "launch", "kernel", {}),
    # TorchNeuron's device executions (category not documented: any).
    "neuron": ("privateuse1_runtime", "nrt_execute", "neuron_device", {}),
    # MTIA.
    "mtia": ("mtia_runtime", "mtiaLaunchKernel", "mtia_ccp_events", {}),
}


@pytest.mark.parametrize("backend", sorted(_SHAPES))
def test_constructed_launches_link_to_kernels(backend: str) -> None:
    runtime_cat, launch, device_cat, dargs = _SHAPES[backend]
    names = ["nc_exec_running"] * 3 if backend == "neuron" else ["gemm_a", "gemm_b", "gemm_a"]
    doc = _doc(runtime_cat, launch, device_cat, dargs, names)
    prof = Profile(parse_document(doc))
    if backend == "neuron":
        from jupyter_torchprof.trace.neuron import mark_device_work

        prof = Profile(parse_document(doc))
        assert mark_device_work(prof._data.events) == 3
    want: dict[str, list[float]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["cat"] == device_cat:
            want[e["name"]].append(e["dur"])
    k = prof.kernels.set_index("name")
    assert {n: int(k.loc[n, "calls"]) for n in want} == {n: len(v) for n, v in want.items()}
    assert {n: k.loc[n, "total_us"] for n in want} == pytest.approx({n: sum(v) for n, v in want.items()})
    links = prof.launches
    if backend == "neuron":
        # Reclassified by name after parsing: their correlation ids were not read.
        assert len(links) == 3
        return
    assert (links["link"] == "correlation").all() and set(links["launch_name"]) == {launch}
    assert set(links["op_name"]) == {"aten::mm"}
    delays = sorted(links["launch_delay_us"])
    assert delays == pytest.approx([15.0, 16.0, 17.0])  # (t + 20 + i) - (t + 5)
    assert prof.launch_summary.iloc[-1]["launches"] == 3
    assert K.backend_of_category(runtime_cat) == backend


def test_constructed_gaudi_device_events() -> None:
    """Gaudi's ``hpu_op`` device events (``HW event name``) fill the kernel table; no launch link is documented."""
    events = [_host(0, "aten::add", 1)] + [
        {
            "ph": "X",
            "cat": "hpu_op",
            "name": f"TPC{i % 2}",
            "pid": 3,
            "tid": 1,
            "ts": 10 + 20 * i,
            "dur": 5 + i,
            "args": {"HW event name": f"TPC{i % 2}"},
        }
        for i in range(4)
    ]
    prof = Profile(parse_document({"traceEvents": events}))
    k = prof.kernels.set_index("name")
    assert k.loc["TPC0", "total_us"] == 5 + 7 and k.loc["TPC1", "total_us"] == 6 + 8
    s = prof.streams
    assert s.loc[s["stream"] == "all", "busy_us"].item() == sum(5 + i for i in range(4))


def test_findings_run_on_a_privateuse1_trace() -> None:
    """Device-neutral rules run on a non-CUDA trace; none fails."""
    doc = _doc("privateuse1_runtime", "launch", "kernel", {}, ["a", "b", "c"])
    f = Profile(parse_document(doc)).findings
    assert not f["title"].str.contains("rule failed").any()
    assert not f["title"].str.contains("no device traced").any()
    # The TPU-only rule says why it did not run.
    (row,) = f[f["rule"] == "device_bursts"].to_dict("records")
    assert row["severity"] == "not checked" and "privateuse1" in row["detail"]


def test_neuron_trace_in_a_folder_with_empty_ntff(tmp_path: Path) -> None:
    doc = _doc("privateuse1_runtime", "nrt_execute", "neuron_device", {}, ["nc_exec_running"] * 3)
    (tmp_path / "trace.json").write_text(json.dumps(doc))
    (tmp_path / "1_instid_0_vnc_0.ntff").write_bytes(b"")
    prof = load(tmp_path)
    assert len(prof.kernels) == 1 and prof.kernels["calls"].item() == 3
    assert any("TorchNeuron" in n and "empty (0 bytes)" in n for n in prof.notes)
    assert "1_instid_0_vnc_0.ntff" in prof.meta.top_level["device_files"]


def test_captured_run_folder_reads_the_device_xplane(tmp_path: Path) -> None:
    """A real CPU capture into a run folder, plus an XPlane where TorchTPU writes it (``device/``).

    The XPlane is written here (tests/xplane_writer.py: one TPU op per
    profiled step, placed by the epoch times of the captured trace's own
    steps), so what is checked is the run-folder layout and the clock:
    every op lands inside the host step it was placed in. It is not a TPU's
    output.
    """
    import torch
    from xplane_writer import encode_xspace

    from jupyter_torchprof.capture.device import resolve_device
    from jupyter_torchprof.capture.runner import CaptureOptions, capture
    from jupyter_torchprof.trace.files import parse_trace

    x = torch.randn(64, 64)
    result = capture(
        lambda: (x @ x).sum(),
        resolve_device("cpu"),
        CaptureOptions(warmup=0, steps=3),
        tmp_path / "trace.json",
    )
    doc = json.loads(result.trace_path.read_text())
    base_ns = doc["baseTimeNanoseconds"]
    steps = sorted(
        (round(e["ts"] * 1000), round(e["dur"] * 1000))
        for e in doc["traceEvents"]
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    )
    assert len(steps) == 3
    t0 = base_ns + steps[0][0]
    ops = [
        (f"fusion.{i}", (s - steps[0][0] + d // 10) * 1000, (d // 5) * 1000, {"hlo_category": "fusion"})
        for i, (s, d) in enumerate(steps)
    ]
    plane = {
        "id": 1,
        "name": "/device:TPU:0",
        "lines": [{"id": 3, "name": "XLA Ops", "timestamp_ns": t0, "events": ops}],
    }
    folder = tmp_path / "device" / "plugins" / "profile" / "2026_12_01_12_00_00"
    folder.mkdir(parents=True)
    (folder / "vm.xplane.pb").write_bytes(encode_xspace([plane], ("vm",)))

    prof = Profile(parse_trace(result.trace_path))
    k = prof.kernels.set_index("name")
    assert sorted(k.index) == ["fusion.0", "fusion.1", "fusion.2"]
    ev = prof.events
    for i, (_s, d) in enumerate(steps):
        (step_ts,) = ev.loc[ev["name"] == f"ProfilerStep#{i + 1}", "ts"]
        op = ev[ev["name"] == f"fusion.{i}"].iloc[0]
        assert op["dur"] == pytest.approx((d // 5) / 1000)
        # Same clock: the op starts a tenth into its step, as placed.
        assert op["ts"] - step_ts == pytest.approx((d // 10) / 1000, abs=2e-3)
    assert prof.meta.top_level["device_files"] == "vm.xplane.pb"
    # Nothing on the host launched these ops: they count in the step whose window
    # they start in (not as an idle device), and the notes say so.
    assert prof.summary["device_activities_by_window"] == 3
    assert prof.summary["device_activities_unlinked"] == 0
    assert prof.summary["device_busy_per_step_us"] > 0
    assert any("no recorded launch" in n and "time window" in n for n in prof.notes)
