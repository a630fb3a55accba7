"""TorchTPU (``pip install torch-tpu``): PrivateUse1 ``tpu``, device events in an XPlane file.

Its Kineto JSON holds the host side only; the TPU's timeline goes to
``<run_dir>/plugins/profile/<timestamp>/<host>[_<rank>].xplane.pb``, where
``run_dir`` is what `TpuProfilerConfig` is given (here the run folder's
``device/``). trace/loader.py reads that file into the same trace.
XLA compiles a program on its first calls, so the first runs are not
representative: three warm-up runs by default.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .base import Backend

#: Tracer levels: host TraceMe events at the level TorchTPU's docs use for
#: op-level analysis, device ops on, the Python tracer off (torch.profiler
#: records Python frames itself when asked, with far less overhead).
_LEVELS = {"host_tracer_level": 2, "device_tracer_level": 1, "python_tracer_level": 0}


class TpuBackend(Backend):
    """TorchTPU: TpuProfilerConfig writing an XPlane into the run folder, three warm-up runs."""

    device_type = "tpu"
    label = "TorchTPU"
    activity = "PrivateUse1"
    min_warmup = 3
    device_dir = "device"

    def _config_class(self) -> Any:
        """See `Backend._config_class`."""
        try:
            return importlib.import_module("torch_tpu.profiler").TpuProfilerConfig
        except (ImportError, AttributeError):
            return None

    def experimental_config(self, run_dir: Path, rank: int | None) -> Any:
        """See `Backend.experimental_config`."""
        cls = self._config_class()
        if cls is None:
            return None
        out = run_dir / self.device_dir
        out.mkdir(parents=True, exist_ok=True)
        return cls(**_LEVELS, run_dir=str(out), worker_rank=rank if rank is not None else 0)

    def synchronizer(self, torch: Any, index: int | None) -> Callable[[], None] | None:
        """See `Backend.synchronizer`."""
        mod = getattr(torch, "tpu", None)
        return getattr(mod, "synchronize", None)

    def setup_notes(self) -> list[str]:
        """See `Backend.setup_notes`."""
        if self._config_class() is None:
            return [
                "TorchTPU: torch_tpu.profiler.TpuProfilerConfig is not importable, so the TPU's "
                "device trace (an .xplane.pb file) will not be written: host side only"
            ]
        return []

    def check_output(self, run_dir: Path) -> list[str]:
        """See `Backend.check_output`."""
        out = run_dir / self.device_dir
        files = sorted(out.glob("plugins/profile/*/*.xplane.pb")) if out.is_dir() else []
        expected = f"{out}/plugins/profile/<timestamp>/<host>.xplane.pb"
        if not files:
            return [
                f"TorchTPU: no TPU device trace: expected {expected}, found none; device columns are not measured"
            ]
        if all(p.stat().st_size == 0 for p in files):
            return [
                f"TorchTPU: the TPU device trace {files[-1]} is empty (0 bytes): the device capture failed"
            ]
        return []


BACKEND = TpuBackend
