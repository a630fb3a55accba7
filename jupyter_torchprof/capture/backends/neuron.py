"""TorchNeuron (AWS Trainium, PrivateUse1 ``neuron``): NeuronConfig + NeuronProfiler's export.

torch.profiler takes ``experimental_config=NeuronConfig(modes=[...],
profile_output_dir=...)`` and ``NeuronProfiler(cfg).export_trace`` as its
trace handler, which writes a Kineto ``trace.json`` (host side, and the
NeuronCores' executions as ``nc_exec_running`` events) beside Neuron
Explorer's ``ntrace.pb``, ``*.neff`` and ``*.ntff`` files. Programs compile
on the first calls: three warm-up runs by default, and
``torch.neuron.synchronize()`` inside each step.

Where these classes live is read from the backend at run time (the
registered ``torch.neuron`` module's ``profiler``, else
``torch_neuronx.profiler``); no Trainium has run this code yet.
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .base import Backend

_PLACES = ("torch.neuron.profiler", "torch_neuronx.profiler")
#: Every mode the beta documents: device instructions, runtime calls, host CPU and memory.
_MODES = ("DEVICE", "RUNTIME", "CPU_UTIL", "HOST_MEMORY")


def _profiler_module() -> Any:
    for place in _PLACES:
        try:
            mod = importlib.import_module(place)
        except ImportError:
            continue
        if hasattr(mod, "NeuronConfig"):
            return mod
    return None


class NeuronBackend(Backend):
    """TorchNeuron: NeuronConfig, NeuronProfiler's export, torch.neuron.synchronize, three warm-up runs."""

    device_type = "neuron"
    label = "TorchNeuron"
    activity = "PrivateUse1"
    min_warmup = 3
    device_dir = "device"

    def experimental_config(self, run_dir: Path, rank: int | None) -> Any:
        """See `Backend.experimental_config`."""
        mod = _profiler_module()
        if mod is None:
            return None
        out = run_dir / self.device_dir
        out.mkdir(parents=True, exist_ok=True)
        kwargs: dict[str, Any] = {"profile_output_dir": str(out)}
        modes = getattr(mod, "ProfileMode", None)
        if modes is not None:
            kwargs["modes"] = [getattr(modes, m) for m in _MODES if hasattr(modes, m)]
        return mod.NeuronConfig(**kwargs)

    def exporter(self, run_dir: Path) -> Callable[[Any, Path], None] | None:
        """See `Backend.exporter`."""
        mod = _profiler_module()
        if mod is None or not hasattr(mod, "NeuronProfiler"):
            return None
        out = run_dir / self.device_dir

        def export(prof: Any, trace_path: Path) -> None:
            cfg = getattr(prof, "experimental_config", None)
            mod.NeuronProfiler(cfg).export_trace(prof)
            # NeuronProfiler writes trace.json into its output folder (per
            # rank); the run keeps a copy as its Kineto trace.
            written = sorted(out.rglob("trace.json"), key=lambda p: p.stat().st_mtime)
            if not written:
                raise RuntimeError(f"NeuronProfiler.export_trace wrote no trace.json in {out}")
            shutil.copyfile(written[-1], trace_path)

        return export

    def synchronizer(self, torch: Any, index: int | None) -> Callable[[], None] | None:
        """See `Backend.synchronizer`."""
        mod = getattr(torch, "neuron", None)
        return getattr(mod, "synchronize", None)

    def setup_notes(self) -> list[str]:
        """See `Backend.setup_notes`."""
        if _profiler_module() is None:
            return [
                "TorchNeuron: NeuronConfig not found (looked in " + ", ".join(_PLACES) + "): the "
                "NeuronCores' device trace will not be captured; host side only"
            ]
        return []

    def check_output(self, run_dir: Path) -> list[str]:
        """See `Backend.check_output`."""
        from ...trace.neuron import check_folder, neuron_files

        out = run_dir / self.device_dir
        if _profiler_module() is None:
            return []
        files = neuron_files(out) if out.is_dir() else []
        if not files:
            return [
                f"TorchNeuron: the profile folder {out} is empty: the device capture failed "
                "(no ntrace.pb, .neff or .ntff written); device columns come only from trace.json"
            ]
        problem = check_folder(out, files)
        return [problem] if problem else []


BACKEND = NeuronBackend
