r"""A progress line for long warm-ups and compiles.

In a notebook it is one output updated in place (a display handle with an HTML
``<progress>`` bar and a plain-text fallback), so no widget manager is needed.
In a terminal it is a single line on stderr rewritten with ``\r``. When the
run ends the line is replaced by a short account of where the time went.

The terminal line goes to a duplicate of descriptor 2 taken when the run
starts: while the profiler changes state, capture points descriptor 2 at a
file to sift Kineto's log lines out, and a line written there would come back
later as a line of its own instead of being rewritten in place.
"""

from __future__ import annotations

import html
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..format import fmt_bytes
from ..trace.progress import reporting

_PHASE_LABEL = {
    "warm-up": "warming up",
    "compiling": "compiling",
    "profiling": "profiling step",
    "exporting": "exporting trace",
    "parsing": "reading trace",
    "inflating": "inflating trace",
    "tables": "computing the tables",
    "view": "building the view",
}
#: Phases whose units are bytes (reported by `trace.progress`), shown as "x of y (z %)".
_BYTE_PHASES = frozenset({"inflating", "parsing"})


class Progress:
    """Progress of one ``%%torchprof`` run.

    Parameters
    ----------
    enabled
        False for ``--quiet``: nothing is shown.
    notebook
        True in a Jupyter kernel (updates one output in place), False in a
        terminal (rewrites a line on stderr).
    delay_s
        Nothing is shown until the run has taken this long, so quick cells
        do not flicker.
    """

    def __init__(self, enabled: bool = True, notebook: bool = True, delay_s: float = 0.4) -> None:
        self.enabled = enabled
        self.notebook = notebook
        self.delay_s = delay_s
        self._start = time.perf_counter()
        self._handle: Any = None
        self._last_text = ""
        self._shown = ""
        self._terminal_dirty = False
        self._pending: tuple[str, int, int] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._terminal: Any = None
        if enabled and not notebook:
            self._terminal = _terminal_stream()
        if enabled:
            # A single warm-up run (a cold torch.compile) can take a minute
            # without reaching the next update() call: a ticker keeps the
            # elapsed time moving and shows the line once the delay passed.
            self._ticker = threading.Thread(target=self._tick, name="torchprof-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(0.5):
            pending = self._pending
            if pending is not None and time.perf_counter() - self._start >= self.delay_s:
                self._show(*pending)

    def update(self, phase: str, done: int, total: int) -> None:
        """Report that ``done`` of ``total`` units of ``phase`` are finished."""
        if not self.enabled:
            return
        self._pending = (phase, done, total)
        if time.perf_counter() - self._start < self.delay_s:
            return
        self._show(phase, done, total)

    def _text(self, phase: str, done: int, total: int) -> str:
        label = _PHASE_LABEL.get(phase, phase)
        elapsed = time.perf_counter() - self._start
        if phase in _BYTE_PHASES and total > 1:
            count = f" {fmt_bytes(done)} of {fmt_bytes(total)} ({100 * done / total:.0f} %)"
        else:
            count = f" {done + 1}/{total}" if total > 1 else ""
        return f"torchprof: {label}{count} … ({elapsed:.1f} s)"

    def _show(self, phase: str, done: int, total: int) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            self._render(phase, done, total)

    def _render(self, phase: str, done: int, total: int) -> None:
        text = self._text(phase, done, total)
        if text == self._last_text:
            return
        self._last_text = text
        if self.notebook:
            bundle = {
                "text/plain": text,
                "text/html": (
                    f'<div class="jp-TorchProf-progress">{html.escape(text)} '
                    f'<progress value="{done}" max="{max(total, 1)}"></progress></div>'
                ),
            }
            from IPython.display import display

            if self._handle is None:
                self._handle = display(bundle, raw=True, display_id=True)
            else:
                self._handle.update(bundle, raw=True)
        else:
            out = self._terminal or sys.stderr
            # Pad over the previous text, and stay within the terminal's
            # width: a wrapped line cannot be rewritten with \r.
            width = _columns() - 1
            out.write("\r" + text[:width].ljust(min(max(len(self._shown), len(text)), width)))
            out.flush()
            self._shown = text[:width]
            self._terminal_dirty = True

    def finish(self, summary: str | None = None) -> None:
        """Replace the progress line with ``summary`` (or remove it); again: replace it again."""
        if not self.enabled:
            return
        with self._lock:
            self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2)
        if self.notebook:
            if self._handle is not None:
                text = summary or ""
                self._handle.update(
                    {
                        "text/plain": text,
                        "text/html": f'<div class="jp-TorchProf-progress">{html.escape(text)}</div>',
                    },
                    raw=True,
                )
        else:
            out = self._terminal or sys.stderr
            if self._terminal_dirty:
                out.write("\r" + " " * len(self._shown) + "\r")
                out.flush()
                self._terminal_dirty = False  # finished twice: cleared once
            if self._terminal is not None:
                self._terminal.close()
                self._terminal = None


def _terminal_stream() -> Any:
    """A stream on a duplicate of descriptor 2 (see the module docstring), or None."""
    try:
        if sys.stderr is None or sys.stderr.fileno() != 2:
            return None
        sys.stderr.flush()
        return os.fdopen(
            os.dup(2), "w", encoding=getattr(sys.stderr, "encoding", None) or "utf-8", errors="replace"
        )
    except (OSError, ValueError, AttributeError):
        return None


def _columns() -> int:
    """The terminal's width (80 when unknown)."""
    try:
        columns = os.get_terminal_size(2).columns
    except (OSError, ValueError):
        return 80
    # A terminal that reports no size (a fresh pseudo-terminal says 0) is
    # taken for the usual 80 columns, not cut to nothing.
    return columns if columns >= 20 else 80


@contextmanager
def showing_trace_progress(enabled: bool = True) -> Iterator[None]:
    """Show how far the traces read inside this block have got, when that takes a while.

    In a Jupyter kernel one output is updated in place, then left saying how
    long the read took; in a terminal a line on stderr is rewritten, then
    cleared. A script whose stderr is not a terminal (a batch job's log)
    shows nothing, and neither does a read quicker than the progress delay.
    """
    shell = None
    if enabled and "IPython" in sys.modules:
        from IPython import get_ipython

        shell = get_ipython()
    notebook = type(shell).__name__ == "ZMQInteractiveShell"
    interactive = notebook or (
        sys.stderr is not None and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    )
    progress = Progress(enabled=enabled and interactive, notebook=notebook, delay_s=1.0)
    started = time.perf_counter()
    ok = False
    try:
        with reporting(progress.update if progress.enabled else None):
            yield
        ok = True
    finally:
        took = time.perf_counter() - started
        progress.finish(f"torchprof: trace read in {took:.1f} s" if ok else None)
