"""Guards around the profiler's state changes: Ctrl-C, a profiler nested in the cell.

* `sigint_held`: a Ctrl-C that lands while torch stops its profiler
  (between ``_disable_profiler()`` and the Python flag that mirrors it) left
  torch believing a profiler still runs, so every later capture refused to
  start. Starting, stepping and stopping the profiler, and exporting the
  trace, run with SIGINT held back; the interrupt is delivered right after.
* `clear_stale_profiler_flag`: recovers a process where that happened
  anyway (an older run, or a profiler stopped outside our guard), by asking
  the native profiler state, which is the one that counts.
* `refuse_nested_profilers`: torch cannot nest profilers (a second one
  started under ours takes over its session or crashes the process), so
  while a capture runs, starting any other torch profiler raises
  `NestedProfilerError` instead.
* `pause_for_tests`: a sleep the signal tests use to make a short phase long
  enough to interrupt on purpose; it does nothing unless
  ``TORCHPROF_TEST_PAUSE`` names the phase.
"""

from __future__ import annotations

import inspect
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import CaptureError

#: The message of `NestedProfilerError` (and of the check made before the cell runs).
NESTED_MESSAGE = (
    "this cell starts its own torch profiler, which cannot run inside %%torchprof "
    "(torch cannot nest profilers); remove it from the cell or run the cell without %%torchprof"
)


class NestedProfilerError(CaptureError):
    """A torch profiler was started while %%torchprof was profiling."""

    def __init__(self, message: str = NESTED_MESSAGE) -> None:
        super().__init__(message)


class HeldSignal:
    """What `sigint_held` held back: ``count`` SIGINTs while its block ran."""

    def __init__(self) -> None:
        self.count = 0


@contextmanager
def sigint_held() -> Iterator[HeldSignal]:
    """Hold SIGINT back while the block runs; deliver it when the block ends.

    A SIGINT that arrives inside the block is counted, not raised. When the
    block ends normally, the handler that was in place is restored and, if
    a SIGINT came, it is delivered to that handler (Python's default one
    raises `KeyboardInterrupt` there). When the block raises, its exception
    wins and the held interrupt is dropped: the block is being abandoned
    anyway.

    Signal handlers can only be changed from the main thread; elsewhere (and
    where the current handler was not set from Python, so it could not be
    put back) the block runs unguarded.
    """
    held = HeldSignal()
    previous = signal.getsignal(signal.SIGINT) if _in_main_thread() else None
    if previous is None:
        yield held
        return

    def hold(signum: int, frame: Any) -> None:
        held.count += 1

    signal.signal(signal.SIGINT, hold)
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, previous)
    if held.count:
        _deliver(previous)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _deliver(handler: Any) -> None:
    """Hand a held SIGINT to ``handler``, as the signal itself would have."""
    if handler is signal.SIG_IGN:
        return
    if handler is signal.SIG_DFL or handler is signal.default_int_handler or not callable(handler):
        # SIG_DFL would end the process: a KeyboardInterrupt is the kinder reading.
        raise KeyboardInterrupt
    handler(signal.SIGINT, inspect.currentframe())


def clear_stale_profiler_flag() -> bool:
    """Reset torch's Python "profiler enabled" flag when no profiler runs natively.

    ``torch.autograd.profiler._is_profiler_enabled`` mirrors the native state
    for quick checks; it is set just before the native profiler starts and
    cleared just after it stops, so an exception in between (a Ctrl-C right
    after the native stop) leaves it set for good. The native state is the
    truth. Returns whether the flag was reset.
    """
    import torch
    from torch.autograd import profiler as autograd_profiler

    flag = getattr(autograd_profiler, "_is_profiler_enabled", None)
    if not flag or torch._C._autograd._profiler_enabled():
        return False
    # The native state is per thread: a profiler recording in another thread
    # sets the flag too. Its profile object is alive and mid-recording.
    if _recording_elsewhere(autograd_profiler.profile):
        return False
    setter = getattr(autograd_profiler, "_set_is_profiler_enabled", None)
    if setter is not None:
        setter(False)
    else:  # pragma: no cover - older torch keeps only the attribute
        autograd_profiler._is_profiler_enabled = False
    return True


def _recording_elsewhere(profile_class: type) -> bool:
    """Whether a live torch.autograd.profiler.profile has started and is not stopping.

    Only asked when the flag and the native state disagree (rare), since it
    walks the objects the garbage collector tracks. Started: its start time
    is later than its end time. Not stopping: ``__exit__`` marks its events
    as needing processing before it stops the native profiler, so a stop
    that was interrupted there is told apart from a profile still recording.
    """
    import gc

    for obj in gc.get_objects():
        # type(), not isinstance(): that would ask proxies for their __class__
        if issubclass(type(obj), profile_class) and not getattr(obj, "_needs_processing", True):
            if getattr(obj, "profiling_start_time_ns", 0) > getattr(obj, "profiling_end_time_ns", 0):
                return True
    return False


# Names in torch.autograd.profiler through which every Python-level torch
# profiler starts (torch.profiler.profile, torch.autograd.profiler.profile,
# emit_nvtx, emit_itt all look them up there at call time).
_START_FUNCTIONS = ("_prepare_profiler", "_enable_profiler")
_OWN = threading.local()


@contextmanager
def refuse_nested_profilers() -> Iterator[None]:
    """While the block runs, starting a torch profiler raises `NestedProfilerError`.

    Our own profiler's state changes go through `own_profiler`, which lets
    them through. The original functions are put back when the block ends.
    """
    from torch.autograd import profiler as autograd_profiler

    originals = {name: getattr(autograd_profiler, name, None) for name in _START_FUNCTIONS}
    guards = {name: _guarded(fn) for name, fn in originals.items() if fn is not None}
    for name, guard in guards.items():
        setattr(autograd_profiler, name, guard)
    try:
        yield
    finally:
        for name, guard in guards.items():
            # Put back only what we installed (someone may have patched it since).
            if getattr(autograd_profiler, name, None) is guard:
                setattr(autograd_profiler, name, originals[name])


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    def guard(*args: Any, **kwargs: Any) -> Any:
        if not getattr(_OWN, "active", False):
            raise NestedProfilerError()
        return fn(*args, **kwargs)

    guard.__wrapped__ = fn  # type: ignore[attr-defined]
    return guard


@contextmanager
def own_profiler() -> Iterator[None]:
    """Mark the block as our profiler's own start/step/stop (let through the guard)."""
    before = getattr(_OWN, "active", False)
    _OWN.active = True
    try:
        yield
    finally:
        _OWN.active = before


def pause_for_tests(phase: str) -> None:
    """Sleep in ``phase`` when ``TORCHPROF_TEST_PAUSE`` is ``phase:seconds``.

    For the signal tests only: they need a real SIGINT to land inside a
    phase (stopping the profiler, exporting, parsing) that is otherwise
    over in milliseconds. ``TORCHPROF_TEST_PAUSE_MARK``, when set, names a
    file created on entering the pause, so a test knows when to send it.
    """
    setting = os.environ.get("TORCHPROF_TEST_PAUSE", "")
    if not setting:
        return
    name, _, seconds = setting.partition(":")
    if name != phase:
        return
    mark = os.environ.get("TORCHPROF_TEST_PAUSE_MARK")
    if mark:
        Path(mark).write_text(phase, encoding="utf-8")
    time.sleep(float(seconds or 1.0))
