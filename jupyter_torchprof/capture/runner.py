"""The clean-capture recipe: warm up, profile N synchronised steps, export.

The runner takes a callable that runs the user's code once; it does not know
about IPython. Whatever happens inside a step (an exception, Ctrl-C), the
profiler is stopped and whatever was recorded is exported, so the caller can
still build a (partial) profile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CaptureError
from .device import DeviceTarget
from .modules import module_annotations
from .native_stderr import filtered_native_stderr


@dataclass
class CaptureOptions:
    """What to record and how often to run the code.

    Attributes
    ----------
    warmup
        Unprofiled runs first (compilation, allocator and cache warm-up).
    steps
        Profiled runs, each recorded as a ``ProfilerStep#k`` range.
    record_shapes, memory, stack, flops, modules
        torch.profiler switches; ``modules`` adds one range per
        ``nn.Module.forward`` call (named after the module).
    """

    warmup: int = 1
    steps: int = 3
    record_shapes: bool = False
    memory: bool = False
    stack: bool = False
    flops: bool = False
    modules: bool = False

    def as_dict(self) -> dict[str, bool]:
        """The profiler switches, for `CaptureInfo.options`."""
        return {
            "record_shapes": self.record_shapes,
            "memory": self.memory,
            "stack": self.stack,
            "flops": self.flops,
            "modules": self.modules,
        }


@dataclass
class CaptureResult:
    """What a capture produced.

    Attributes
    ----------
    trace_path
        The exported Kineto trace (None if nothing could be exported).
    steps_done
        Profiled steps that completed.
    error
        The exception that interrupted the run, if any (re-raise it after
        showing the partial profile).
    warmup_s, profile_s
        Wall time spent warming up and in the profiled steps.
    """

    trace_path: Path | None
    steps_done: int = 0
    warmup_done: int = 0
    error: BaseException | None = None
    error_phase: str = ""
    warmup_s: float = 0.0
    profile_s: float = 0.0
    export_s: float = 0.0
    notes: list[str] = field(default_factory=list)


class ProgressSink:
    """Receives progress updates; the default one ignores them."""

    def update(self, phase: str, done: int, total: int) -> None:
        """``phase`` is ``warm-up``, ``profiling`` or ``exporting``."""


def profiler_is_running() -> bool:
    """Whether some torch profiler is already recording in this process."""
    import torch

    try:
        return bool(torch.autograd.profiler._is_profiler_enabled)
    except AttributeError:  # pragma: no cover - older torch
        return bool(torch._C._autograd._profiler_enabled())


def capture(
    run_once: Callable[[], Any],
    target: DeviceTarget,
    options: CaptureOptions,
    trace_path: Path,
    progress: ProgressSink | None = None,
    module_names: dict[int, str] | None = None,
) -> CaptureResult:
    """Run ``run_once`` ``warmup + steps`` times and profile the last ``steps``.

    Every run is followed by a device synchronisation, inside the step's range,
    so a step's wall time includes the device work it queued.
    """
    __tracebackhide__ = True  # noqa: F841 - keep user tracebacks about the user's code
    from torch.profiler import profile, schedule

    if profiler_is_running():
        raise CaptureError(
            "another torch profiler is already running in this process; stop it first "
            "(or leave the enclosing `with torch.profiler.profile()` block)"
        )
    progress = progress or ProgressSink()
    result = CaptureResult(trace_path=None)

    t0 = time.perf_counter()
    for i in range(options.warmup):
        progress.update("warm-up", i, options.warmup)
        try:
            run_once()
            target.synchronize()
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            result.error, result.error_phase = exc, "warm-up"
            result.warmup_s = time.perf_counter() - t0
            return result
        result.warmup_done = i + 1
    result.warmup_s = time.perf_counter() - t0

    # The profiler's own warm-up step (torch's schedule: warmup=1) runs the
    # code with tracing set up but discards its events, so the recorded steps
    # do not pay for the profiler's first-use costs.
    exported: list[bool] = []

    def on_trace_ready(p: Any) -> None:
        progress.update("exporting", 0, 1)
        trace_path.parent.mkdir(parents=True, exist_ok=True)
        t_export = time.perf_counter()
        try:
            p.export_chrome_trace(str(trace_path))
            exported.append(True)
        except Exception as exc:  # noqa: BLE001
            result.notes.append(f"the trace could not be exported: {exc}")
        result.export_s += time.perf_counter() - t_export

    prof = profile(
        activities=target.activities,
        schedule=schedule(wait=0, warmup=1, active=options.steps, repeat=1),
        on_trace_ready=on_trace_ready,
        record_shapes=options.record_shapes or options.flops,
        profile_memory=options.memory,
        with_stack=options.stack,
        with_flops=options.flops,
    )
    t1 = time.perf_counter()
    started = False
    try:
        with filtered_native_stderr():
            prof.start()
        started = True
        with module_annotations(options.modules, module_names):
            for k in range(options.steps + 1):
                progress.update("profiling", max(k - 1, 0), options.steps)
                run_once()
                target.synchronize()
                with filtered_native_stderr():
                    prof.step()
                result.steps_done = max(k, 0)
    except BaseException as exc:  # noqa: BLE001 - reported to the caller
        result.error, result.error_phase = exc, "profiling"
    finally:
        if started:
            # Stopping must happen whatever went wrong, or every later
            # profiler in this kernel would fail. Stopping mid-recording
            # still hands the steps recorded so far to on_trace_ready.
            try:
                with filtered_native_stderr():
                    prof.stop()
            except BaseException as exc:  # noqa: BLE001
                result.notes.append(f"profiler did not stop cleanly: {exc}")
        result.profile_s = time.perf_counter() - t1 - result.export_s
    if exported:
        result.trace_path = trace_path
    del prof
    return result
