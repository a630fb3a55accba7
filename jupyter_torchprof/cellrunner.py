"""Running a notebook cell's code as ``%%torchprof`` does: compiled once, run once per call.

IPython glue (the shell's cell transforms, its compile cache, output capture),
used by `session` for every warm-up run and profiled step.
"""

from __future__ import annotations

import ast
import copy
import functools
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from IPython.core.error import UsageError


def default_name(code: str) -> str:
    """A run's name from its cell: the first line that is not a comment, at most 60 characters."""
    for line in code.splitlines():
        text = line.strip()
        if text and not text.startswith("#"):
            return text if len(text) <= 60 else text[:59] + "…"
    return "cell"


def running_cell_number(shell: Any) -> int:
    """The number of the notebook cell running now (``In[4]``).

    IPython 9 moves ``execution_count`` on to the next cell before the
    current one runs, so it is one too high here; the cell's own code object
    has a file name IPython mapped to the right number, so the first caller
    frame with such a name tells it.
    """
    import sys

    fmap = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
    frame = sys._getframe(1)
    while frame is not None:
        number = fmap.get(frame.f_code.co_filename)
        if number is not None:
            return int(number)
        frame = frame.f_back
    return int(shell.execution_count)


class _KeptInterrupt:
    """Whether a SIGINT arrived while `interrupts_kept` was active (``pending``)."""

    def __init__(self) -> None:
        self.pending = False


_KEPT: _KeptInterrupt | None = None
_F = TypeVar("_F", bound=Callable[..., Any])


@contextmanager
def interrupts_kept() -> Iterator[None]:
    """Note every Ctrl-C while a run is set up and runs, so that none is lost.

    CPython discards a KeyboardInterrupt raised inside a garbage-collector
    or weakref callback ("Exception ignored in ..."): a SIGINT whose handler
    ran in ``WeakSet._remove`` (called by the collector during the deep copy
    of the cell's tree) vanished, and the cell ran to completion. While the
    block runs, SIGINT's handler notes the signal and hands it on unchanged
    (Python's handler raises, as before); `raise_kept_interrupt` raises a
    noted one before the cell's code runs, and the block raises one still
    noted when it ends. A Ctrl-C the cell's own code catches is noted too:
    the next run of the cell does not start.

    Only on the main thread, and only when the current handler is Python's
    (nothing to hand on to otherwise); nested blocks share the outer note.
    """
    global _KEPT
    previous = (
        signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    )
    if _KEPT is not None or not callable(previous):
        yield
        return
    kept = _KeptInterrupt()

    def note(signum: int, frame: Any) -> None:
        kept.pending = True
        previous(signum, frame)

    signal.signal(signal.SIGINT, note)
    _KEPT = kept
    try:
        yield
    finally:
        _KEPT = None
        if signal.getsignal(signal.SIGINT) is note:
            signal.signal(signal.SIGINT, previous)
    if kept.pending:
        raise KeyboardInterrupt


def keeping_interrupts(fn: _F) -> _F:
    """``fn`` run inside `interrupts_kept` (for the session's entry points)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # noqa: F841
        with interrupts_kept():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def raise_kept_interrupt() -> None:
    """Raise KeyboardInterrupt if a Ctrl-C was noted by `interrupts_kept` (once: the note is cleared).

    Called where raising is safe and the interrupt can still stop the
    run: just before the cell's code runs.
    """
    kept = _KEPT
    if kept is not None and kept.pending:
        kept.pending = False
        raise KeyboardInterrupt


class CellRunner:
    """Runs the cell's code once per call, in the user namespace.

    The code is compiled once. The first call runs with its output visible;
    later calls (more warm-up runs, profiled steps) run with stdout, stderr
    and rich display captured and dropped, so the cell's output appears once.
    The value of a trailing expression is kept in ``value``.
    """

    def __init__(self, shell: Any, code: str, show_output: bool = True) -> None:
        self.shell = shell
        self.value: Any = None
        self.calls = 0
        self.show_output = show_output
        self.first_call_s: float | None = None
        self._code = code
        transformed = shell.transform_cell(code)
        filename = shell.compile.cache(transformed, running_cell_number(shell), raw_code=code)
        try:
            tree = ast.parse(transformed, filename=filename)
        except SyntaxError as exc:
            raise UsageError(f"the cell has a syntax error: {exc.msg} (line {exc.lineno})") from None
        from .capture.cellcheck import top_level_await

        if top_level_await(tree) is not None:
            raise UsageError(
                "top-level await is not supported inside %%torchprof; "
                "wrap the async code in a function and call it with asyncio"
            )
        if not tree.body:
            raise UsageError("nothing to profile: the cell has no statements (only comments or blank lines)")
        # Kept for --compare, which builds a function out of the same cell.
        self.tree = copy.deepcopy(tree)
        self.filename = filename
        last: ast.expr | None = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = tree.body.pop().value
        self._body = compile(tree, filename, "exec")
        self._last = compile(ast.Expression(last), filename, "eval") if last is not None else None
        self._ns = shell.user_ns

    @property
    def namespace(self) -> dict[str, Any]:
        """The notebook namespace the cell runs in (``--modules`` names modules after its variables)."""
        return self._ns

    def compiled(self, settings: Any, show_output: bool = False) -> tuple[Any, Any]:
        """The runner of the compiled run (``--compare``/``--compile``) and the context it runs in.

        With ``--compile-names`` the same cell runs while those notebook
        objects are swapped for compiled ones; otherwise the whole cell is
        compiled as one function (`capture.compile.CompiledCell`).
        """
        from contextlib import nullcontext

        from .capture.compile import CompiledCell, compiled_names

        if settings.names:
            return CellRunner(self.shell, self._code, show_output=show_output), compiled_names(
                self._ns, settings
            )
        return CompiledCell(self.tree, self.filename, self._ns, settings), nullcontext()

    def _once(self) -> Any:
        __tracebackhide__ = True  # noqa: F841
        raise_kept_interrupt()  # a Ctrl-C lost in a callback during setup, or between runs
        exec(self._body, self._ns)
        if self._last is not None:
            return eval(self._last, self._ns)
        return None

    def __call__(self) -> None:
        """Run the cell once (its output shown on the first call only)."""
        __tracebackhide__ = True  # noqa: F841
        self.calls += 1
        t0 = time.perf_counter()
        if self.calls == 1 and self.show_output:
            self.value = self._once()
        else:
            from IPython.utils.capture import capture_output

            with capture_output(stdout=True, stderr=True, display=True):
                value = self._once()
            if self.calls == 1:
                self.value = value
        if self.calls == 1:
            # With --compile-names the first call includes compilation.
            self.first_call_s = time.perf_counter() - t0
