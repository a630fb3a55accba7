"""`Backend`: the profiling recipe of one device type, which each backend module subclasses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar


class Backend:
    """Profiling recipe of one device type; the defaults fit CUDA-like backends.

    Attributes
    ----------
    device_type
        ``torch.device`` type it serves (``cuda``, ``tpu`` ...); "" for the fallback.
    label
        Name shown to users (``TorchTPU``).
    activity
        Name of the `torch.profiler.ProfilerActivity` that traces the
        device, or None when none does; ``PrivateUse1`` for out-of-tree backends.
    min_warmup
        Warm-up runs the backend needs before its steps are representative
        (compile-heavy backends compile on the first calls); 0 leaves the
        user's setting alone.
    device_dir
        Subfolder of the run folder where the backend's profiler writes
        its own device trace files, or None when the Kineto JSON holds them.
    """

    device_type: ClassVar[str] = ""
    label: ClassVar[str] = ""
    activity: ClassVar[str | None] = None
    min_warmup: ClassVar[int] = 0
    device_dir: ClassVar[str | None] = None

    def experimental_config(self, run_dir: Path, rank: int | None) -> Any:
        """The profiler's ``experimental_config`` for a run in ``run_dir``, or None for torch's default."""
        return None

    def synchronizer(self, torch: Any, index: int | None) -> Callable[[], None] | None:
        """A call that waits for all queued device work, or None to use torch's generic ones."""
        return None

    def exporter(self, run_dir: Path) -> Callable[[Any, Path], None] | None:
        """A call ``(profiler, trace_path)`` writing the Kineto trace, or None for ``export_chrome_trace``."""
        return None

    def check_output(self, run_dir: Path) -> list[str]:
        """One line per way the device trace of a finished capture is missing or empty."""
        return []

    def setup_notes(self) -> list[str]:
        """What the user must know before the run (e.g. the backend's config is unavailable)."""
        return []
