"""The clean-capture recipe: warm up, profile N synchronised steps, export.

The runner takes a callable that runs the user's code once; it does not know
about IPython. Whatever happens inside a step (an exception, Ctrl-C), the
profiler is stopped and whatever was recorded is exported, so the caller can
still build a (partial) profile.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CaptureError
from .device import DeviceTarget
from .guards import (
    clear_stale_profiler_flag,
    own_profiler,
    pause_for_tests,
    refuse_nested_profilers,
    sigint_held,
)
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
    step_cpu_us
        The CPU time the code took in each recorded step, in step order
        (`own_cpu_us`). The trace holds wall times only, which a competing
        process inflates; CPU time it mostly does not.
    phases
        Wall seconds per phase, in the order they ran (`PHASES`): where a
        run's time went besides its steps. A first run in a fresh kernel
        pays most of it once (torch's profiler imports its compiler on first
        use, the first runs initialise the device); a later run much less.
    compiler_imported
        True when starting the profiler imported ``torch._inductor`` (torch's
        profiler does on first use; it was not loaded before).
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
    step_cpu_us: list[float] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    compiler_imported: bool = False

    def add(self, phase: str, seconds: float) -> None:
        """Add ``seconds`` of wall time to ``phase`` (kept in `PHASES` order)."""
        self.phases[phase] = self.phases.get(phase, 0.0) + max(seconds, 0.0)
        self.phases = {k: self.phases[k] for k in PHASES if k in self.phases}


#: The capture's phases, in the order they run (`CaptureResult.phases`).
PHASES = (
    "warm-up",  # the unprofiled runs
    "profiler start-up",  # preparing and enabling the profiler (torch imports its compiler the first time)
    "profiler warm-up step",  # the run whose events the profiler discards
    "profiled steps",  # the recorded runs, each with its device synchronisation
    "profiler stop",  # Kineto collects and processes what it recorded
    "trace export",  # the trace written as JSON
)


class ProgressSink:
    """Receives progress updates; the default one ignores them."""

    def update(self, phase: str, done: int, total: int) -> None:
        """``phase`` is ``warm-up``, ``profiling`` or ``exporting``."""


def profiler_is_running() -> bool:
    """Whether some torch profiler is already recording in this process.

    torch's Python flag left set by an interrupted stop, with no profiler
    running natively, is cleared first (with a warning), so one unlucky
    Ctrl-C does not block every later capture (see
    `guards.clear_stale_profiler_flag`).
    """
    import torch

    if clear_stale_profiler_flag():
        warnings.warn(
            "torchprof: an earlier profiler stop was interrupted; cleared torch's leftover "
            "'profiler enabled' flag (no profiler was running)",
            stacklevel=2,
        )
    try:
        flag = bool(torch.autograd.profiler._is_profiler_enabled)
    except AttributeError:  # pragma: no cover - older torch
        flag = False
    return flag or bool(torch._C._autograd._profiler_enabled())


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
    so a step's wall time includes the device work it queued. While the
    profiled runs record, a torch profiler started by the code itself raises
    `NestedProfilerError` (torch cannot nest profilers), and Ctrl-C is held
    back while the profiler starts, steps, stops and exports
    (`guards.sigint_held`): it lands just after, as the result's ``error``.
    """
    __tracebackhide__ = True  # noqa: F841 - keep user tracebacks about the user's code
    if profiler_is_running():
        raise CaptureError(
            "another torch profiler is already running in this process; stop it first "
            "(or leave the enclosing `with torch.profiler.profile()` block)"
        )
    progress = progress or ProgressSink()
    result = CaptureResult(trace_path=None)
    options = _backend_warmup(target, options, result)
    if _warm_up(run_once, target, options, progress, result):
        # Only while ours records: a profiler the code starts in warm-up nests
        # in nothing (and torch.compile may profile while it autotunes).
        with refuse_nested_profilers():
            _profile_steps(run_once, target, options, trace_path, progress, module_names, result)
    return result


def _backend_warmup(target: DeviceTarget, options: CaptureOptions, result: CaptureResult) -> CaptureOptions:
    """Options with at least the warm-up runs the backend needs (compile-heavy ones: 3), noted."""
    if options.warmup >= target.min_warmup:
        return options
    from dataclasses import replace

    label = target.backend.label if target.backend is not None else target.kind
    result.notes.append(
        f"{label} compiles on its first runs: warm-up raised from {options.warmup} to {target.min_warmup}"
    )
    return replace(options, warmup=target.min_warmup)


def _warm_up(
    run_once: Callable[[], Any],
    target: DeviceTarget,
    options: CaptureOptions,
    progress: ProgressSink,
    result: CaptureResult,
) -> bool:
    """The unprofiled runs; False when one raised (recorded in ``result``)."""
    __tracebackhide__ = True  # noqa: F841
    t0 = time.perf_counter()
    try:
        for i in range(options.warmup):
            progress.update("warm-up", i, options.warmup)
            run_once()
            target.synchronize()
            result.warmup_done = i + 1
    except BaseException as exc:  # noqa: BLE001 - reported to the caller
        result.error, result.error_phase = exc, "warm-up"
        return False
    finally:
        result.warmup_s = time.perf_counter() - t0
        if options.warmup:
            result.add("warm-up", result.warmup_s)
    return True


@contextmanager
def _state_change() -> Iterator[None]:
    """Around a change of our profiler's state.

    Ctrl-C is held back, our own start is let through the nested-profiler
    guard, and Kineto's marker lines are dropped.
    """
    with sigint_held(), own_profiler(), filtered_native_stderr():
        yield


def _profile_steps(
    run_once: Callable[[], Any],
    target: DeviceTarget,
    options: CaptureOptions,
    trace_path: Path,
    progress: ProgressSink,
    module_names: dict[int, str] | None,
    result: CaptureResult,
) -> None:
    """The profiled runs, then stop and export whatever happened (into ``result``)."""
    __tracebackhide__ = True  # noqa: F841
    exported: list[bool] = []
    backend = target.backend
    # The profiler's own warm-up step (torch's schedule: warmup=1) runs the
    # code with tracing set up but discards its events, so the recorded steps
    # do not pay for the profiler's first-use costs.
    prof = _new_profiler(target, options, trace_path, progress, result, exported, warmup=1)
    t1 = time.perf_counter()
    started = False
    phase = "profiling"
    try:
        _start(prof, result)
        started = True
        # With --memory, torch warns on fd 2 at the first free of a block it
        # never saw allocated; that is a fact about the numbers, kept as a note.
        sift = filtered_native_stderr(result.notes) if options.memory else nullcontext()
        result.notes.extend(overhead_notes(options))
        with sift, module_annotations(options.modules, module_names):
            for k in range(options.steps + 1):
                progress.update("profiling", max(k - 1, 0), options.steps)
                cpu0, t_run = own_cpu(), time.perf_counter()
                run_once()
                target.synchronize()
                # step 0 is the profiler's own warm-up, not recorded
                result.add("profiled steps" if k else "profiler warm-up step", time.perf_counter() - t_run)
                if k > 0:
                    result.step_cpu_us.append(own_cpu_us(cpu0, own_cpu()))
                if k == options.steps:
                    # This step() stops the profiler and exports the trace.
                    phase = "stopping the profiler"
                t_step, export0 = time.perf_counter(), result.export_s
                with _state_change():
                    if k == options.steps:
                        pause_for_tests("stop")
                    prof.step()
                    result.steps_done = k
                # The warm-up step's end enables recording; the last one stops it.
                took = time.perf_counter() - t_step - (result.export_s - export0)
                result.add(_step_end(k, options.steps), took)
    except BaseException as exc:  # noqa: BLE001 - reported to the caller
        result.error, result.error_phase = exc, phase
    finally:
        if started:
            _stop(prof, result)
        result.profile_s = time.perf_counter() - t1 - result.export_s
    if exported:
        result.trace_path = trace_path
        if backend is not None:
            result.notes.extend(backend.check_output(trace_path.parent))
    del prof


def _step_end(k: int, steps: int) -> str:
    """The phase ``prof.step()`` after run ``k`` belongs to (run 0 is the profiler's warm-up step)."""
    if k == steps:
        return "profiler stop"  # it stops recording (and exports, timed apart)
    return "profiled steps" if k else "profiler start-up"  # after run 0 it enables recording


def _start(prof: Any, result: CaptureResult) -> None:
    """Start ``prof``, timed as the profiler's start-up (noting whether torch imported its compiler then)."""
    import sys

    before = "torch._inductor" in sys.modules
    t0 = time.perf_counter()
    try:
        with _state_change():
            prof.start()
    finally:
        result.add("profiler start-up", time.perf_counter() - t0)
        result.compiler_imported = not before and "torch._inductor" in sys.modules


def _new_profiler(
    target: DeviceTarget,
    options: CaptureOptions,
    trace_path: Path,
    progress: ProgressSink,
    result: CaptureResult,
    exported: list[bool],
    warmup: int,
) -> Any:
    """A torch profiler for ``options.steps`` recorded steps after ``warmup`` discarded ones.

    It writes its trace to ``trace_path`` when the last step ends (appending
    to ``exported``).
    """
    from torch.profiler import profile, schedule

    # The backend's own profiler config (TorchTPU, TorchNeuron) writes its
    # device trace into the run folder, where the loader finds it.
    backend = target.backend
    config = backend.experimental_config(trace_path.parent, _rank()) if backend is not None else None
    export = backend.exporter(trace_path.parent) if backend is not None else None
    with warnings.catch_warnings():
        # warmup=0 (a block, which runs once) makes torch warn that the step
        # may be skewed; `BlockCapture` says so in its docstring instead.
        warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
        return profile(
            activities=target.activities,
            schedule=schedule(wait=0, warmup=warmup, active=options.steps, repeat=1),
            on_trace_ready=_trace_writer(trace_path, export, progress, result, exported),
            record_shapes=options.record_shapes or options.flops,
            profile_memory=options.memory,
            with_stack=options.stack,
            with_flops=options.flops,
            **({"experimental_config": config} if config is not None else {}),
        )


def overhead_notes(options: CaptureOptions) -> list[str]:
    """What the recording switches cost: wall times are not comparable across them."""
    out = []
    for on, what in (
        (options.memory, "--memory records every allocation"),
        (options.stack, "--stack records every Python call"),
    ):
        if on:
            out.append(
                f"{what}, which slows the steps: compare wall times only with runs recorded the same way"
            )
    return out


def _rank() -> int | None:
    """The rank of this process when torch.distributed is initialised."""
    try:
        import torch.distributed as dist

        return dist.get_rank() if dist.is_available() and dist.is_initialized() else None
    except Exception:  # noqa: BLE001 - a rank is only a hint for file names
        return None


def _trace_writer(
    trace_path: Path,
    export: Callable[[Any, Path], None] | None,
    progress: ProgressSink,
    result: CaptureResult,
    exported: list[bool],
) -> Callable[[Any], None]:
    """The profiler's ``on_trace_ready``: write the trace (appends to ``exported``)."""

    def on_trace_ready(p: Any) -> None:
        progress.update("exporting", 0, 1)
        pause_for_tests("export")
        trace_path.parent.mkdir(parents=True, exist_ok=True)
        t_export = time.perf_counter()
        try:
            if export is not None:
                export(p, trace_path)
            else:
                p.export_chrome_trace(str(trace_path))
            exported.append(True)
        except Exception as exc:  # noqa: BLE001
            result.notes.append(f"the trace could not be exported: {exc}")
        took = time.perf_counter() - t_export
        result.export_s += took
        result.add("trace export", took)

    return on_trace_ready


def _stop(prof: Any, result: CaptureResult) -> None:
    """Stop the profiler whatever went wrong.

    Otherwise every later profiler in this process would fail. Stopping
    mid-recording still hands the steps recorded so far to on_trace_ready;
    after the last step it does nothing.
    """
    t0, export0 = time.perf_counter(), result.export_s
    try:
        with _state_change():
            prof.stop()
    except KeyboardInterrupt as exc:  # held while stopping, delivered after
        if result.error is None:
            result.error, result.error_phase = exc, "stopping the profiler"
    except Exception as exc:  # noqa: BLE001
        result.notes.append(f"profiler did not stop cleanly: {exc}")
    finally:
        # After the last step this does nothing: only an early stop adds time here.
        took = time.perf_counter() - t0 - (result.export_s - export0)
        if took > 1e-3:
            result.add("profiler stop", took)


def own_cpu() -> tuple[float, dict[int, float]]:
    """A reading of this process's CPU time and of each of its other Python threads' (seconds)."""
    me = threading.get_ident()
    others: dict[int, float] = {}
    clock = getattr(time, "pthread_getcpuclockid", None)
    if clock is not None:
        for t in threading.enumerate():
            if t.ident is None or t.ident == me:
                continue
            try:
                others[t.ident] = time.clock_gettime(clock(t.ident))
            except (OSError, ValueError):  # it ended meanwhile
                continue
    return time.process_time(), others


def own_cpu_us(start: tuple[float, dict[int, float]], end: tuple[float, dict[int, float]]) -> float:
    """CPU time (µs) the process spent between two `own_cpu` readings, less its other Python threads'.

    The process's CPU time counts every thread: torch's intra-op and device
    threads, which work for the step, but also this package's own background
    threads (packing the previous run's trace, writing its table cache) and
    a kernel's, which measured here tripled a 4.5 ms step's CPU time. Those
    are Python threads, torch's workers are not: so the Python threads other
    than the caller are taken out (a thread that ends within the step is
    not, being no longer readable).
    """
    (p0, o0), (p1, o1) = start, end
    others = sum(v - o0.get(ident, 0.0) for ident, v in o1.items())
    return max(p1 - p0 - others, 0.0) * 1e6


#: Rounds of alternating runs at least (``--compare``): 8 pairs let the
#: signed-rank test reach p = 0.008; 5 could never go below 0.0625.
INTERLEAVE_ROUNDS = 8


@dataclass
class Interleaved:
    """Wall and CPU time of runs of two sides that alternated, one pair per round.

    Attributes
    ----------
    wall_us, cpu_us
        One list per side (``[a, b]``), one value per round: the wall time
        and this process's CPU time of one run followed by a device
        synchronisation. Round ``i`` of side a and of side b ran back to back,
        so load that drifts on the machine hits both alike.
    error
        What stopped the rounds early (the rounds done so far are kept).
    """

    wall_us: list[list[float]] = field(default_factory=lambda: [[], []])
    cpu_us: list[list[float]] = field(default_factory=lambda: [[], []])
    error: BaseException | None = None

    @property
    def pairs(self) -> int:
        """Rounds in which both sides ran."""
        return min(len(self.wall_us[0]), len(self.wall_us[1]))


def interleave(
    run_a: Callable[[], Any], run_b: Callable[[], Any], target: DeviceTarget, rounds: int
) -> Interleaved:
    """Run two sides alternately, ``rounds`` times each, timing every run (unprofiled).

    The order within a round alternates (a b, b a, a b ...), so a load that
    rises or falls steadily does not favour the side that always runs
    second. An exception (or Ctrl-C) ends the rounds; it is kept in
    ``error`` and the completed pairs stay usable.
    """
    __tracebackhide__ = True  # noqa: F841
    out = Interleaved()
    sides = (run_a, run_b)
    try:
        for i in range(rounds):
            order = (0, 1) if i % 2 == 0 else (1, 0)
            for side in order:
                t0, c0 = time.perf_counter(), own_cpu()
                sides[side]()
                target.synchronize()
                out.wall_us[side].append((time.perf_counter() - t0) * 1e6)
                out.cpu_us[side].append(own_cpu_us(c0, own_cpu()))
    except BaseException as exc:  # noqa: BLE001 - reported to the caller
        out.error = exc
    n = out.pairs
    out.wall_us = [w[:n] for w in out.wall_us]
    out.cpu_us = [c[:n] for c in out.cpu_us]
    return out


class BlockCapture:
    """Profile one run of a ``with`` block: `start` before it, `finish` after it.

    A block runs once, so unlike `capture` there are no warm-up runs and no
    profiler warm-up step: the one recorded step (``ProfilerStep#0``) pays
    the profiler's first-use costs and whatever the block does for the
    first time (lazy initialisation, a first torch.compile).

    Parameters
    ----------
    target, options, trace_path, progress, module_names
        As for `capture` (``options.steps`` and ``options.warmup`` are not used).
    """

    def __init__(
        self,
        target: DeviceTarget,
        options: CaptureOptions,
        trace_path: Path,
        progress: ProgressSink | None = None,
        module_names: dict[int, str] | None = None,
    ) -> None:
        from contextlib import ExitStack
        from dataclasses import replace

        self.target = target
        self.options = replace(options, steps=1, warmup=0)
        self.trace_path = trace_path
        self.progress = progress or ProgressSink()
        self.module_names = module_names
        self.result = CaptureResult(trace_path=None)
        self._exported: list[bool] = []
        self._contexts = ExitStack()
        self._prof: Any = None
        self._t0 = self._t_block = 0.0

    def start(self) -> None:
        """Start recording (raises `CaptureError` when another profiler is running)."""
        if profiler_is_running():
            raise CaptureError(
                "another torch profiler is already running in this process; stop it first "
                "(or leave the enclosing `with torch.profiler.profile()` block)"
            )
        options, result = self.options, self.result
        self._prof = _new_profiler(
            self.target, options, self.trace_path, self.progress, result, self._exported, warmup=0
        )
        self._t0 = time.perf_counter()
        _start(self._prof, result)
        self._t_block = time.perf_counter()
        self.progress.update("profiling", 0, 1)
        result.notes.extend(overhead_notes(options))
        sift = filtered_native_stderr(result.notes) if options.memory else nullcontext()
        try:
            for context in (
                refuse_nested_profilers(),
                sift,
                module_annotations(options.modules, self.module_names),
            ):
                self._contexts.enter_context(context)
        except BaseException:
            self._contexts.close()
            _stop(self._prof, result)
            raise

    def finish(self, error: BaseException | None = None) -> CaptureResult:
        """Stop recording after the block (``error``: what the block raised) and export the trace."""
        __tracebackhide__ = True  # noqa: F841
        result = self.result
        try:
            if error is None:
                self.target.synchronize()
                result.add("profiled steps", time.perf_counter() - self._t_block)
                t_stop, export0 = time.perf_counter(), result.export_s
                with _state_change():
                    # The step's end stops the profiler and exports the trace.
                    self._prof.step()
                result.add("profiler stop", time.perf_counter() - t_stop - (result.export_s - export0))
                result.steps_done = 1
            else:
                result.error, result.error_phase = error, "profiling"
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            result.error, result.error_phase = exc, "stopping the profiler"
        finally:
            self._contexts.close()
            _stop(self._prof, result)
            result.profile_s = time.perf_counter() - self._t0 - result.export_s
        if self._exported:
            result.trace_path = self.trace_path
            backend = self.target.backend
            if backend is not None:
                result.notes.extend(backend.check_output(self.trace_path.parent))
        self._prof = None
        return result
