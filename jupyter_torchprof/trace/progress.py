"""How far a trace has been read, for whoever shows it.

Reading a trace of gigabytes takes tens of seconds. The reader and the
parser call `report` as they go (bytes inflated, bytes parsed); a caller that
shows progress wraps its work in `reporting`. Nothing here knows how progress
is shown: the sink is a plain function, set for the current context only, so
parsing in a worker thread or process reports nothing unless asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: ``sink(phase, done, total)``; phases are ``inflating`` and ``parsing`` (units: bytes).
Sink = Callable[[str, int, int], None]

_sink: ContextVar[tuple[Sink, list[float]] | None] = ContextVar("torchprof_trace_progress", default=None)

#: Least time between two reports of the same work (the last one always goes through).
MIN_INTERVAL_S = 0.1


@contextmanager
def reporting(sink: Sink | None) -> Iterator[None]:
    """Send the progress of the traces read inside this block to ``sink`` (None: nowhere)."""
    token = _sink.set((sink, [0.0]) if sink is not None else None)
    try:
        yield
    finally:
        _sink.reset(token)


def report(phase: str, done: int, total: int) -> None:
    """Say that ``done`` of ``total`` bytes of ``phase`` are through (at most every `MIN_INTERVAL_S`)."""
    current = _sink.get()
    if current is None:
        return
    sink, last = current
    now = time.perf_counter()
    if done < total and now - last[0] < MIN_INTERVAL_S:
        return
    last[0] = now
    try:
        sink(phase, int(done), int(total))
    except Exception:  # noqa: BLE001 - showing progress must never break reading the trace
        pass
