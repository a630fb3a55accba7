"""Checks of the magic's options, made before anything runs.

A bad ``--sort`` or ``-o`` used to be reported after the cell had run (and
been stored), and ``--steps 99999999999999999999999`` was accepted; each
check here names the option and the accepted values in one line. The single
checks raise `OptionError`; the entry points the magic calls (`check_run`,
`check_load`, `check_compile`) raise IPython's `UsageError` with its text.
"""

from __future__ import annotations

import functools
import keyword
from collections.abc import Callable
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError

from .analysis.ops import OP_TABLE_COLUMNS
from .errors import TorchProfError

#: Upper bounds of ``--steps`` and ``--warmup``: a notebook cell profiled more
#: often than this yields a trace too large to read back in one go.
MAX_STEPS = 10_000
MAX_WARMUP = 10_000

#: Op table columns present in every capture, for checking ``--sort`` early.
_OP_COLUMNS = OP_TABLE_COLUMNS
_MEMORY_COLUMNS = ("self_cpu_mem_bytes", "cpu_mem_bytes", "self_device_mem_bytes", "device_mem_bytes")


class OptionError(TorchProfError):
    """An option of the magic has a value it cannot use."""


def _usage_errors(check: Callable[..., None]) -> Callable[..., None]:
    """Make ``check`` raise IPython's `UsageError`, which the shell shows as one line.

    (Only that exact class is shown so: a subclass would print a traceback.)
    """

    @functools.wraps(check)
    def checked(*args: Any, **kwargs: Any) -> None:
        try:
            check(*args, **kwargs)
        except OptionError as exc:
            raise UsageError(str(exc)) from None

    return checked


def check_counts(steps: Any, warmup: Any) -> None:
    """``--steps`` in 1..MAX_STEPS and ``--warmup`` in 0..MAX_WARMUP."""
    for name, value, low, high in (("--steps", steps, 1, MAX_STEPS), ("--warmup", warmup, 0, MAX_WARMUP)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise OptionError(f"{name} must be a whole number from {low} to {high}, not {_short(value)}")


def check_row_limit(row_limit: Any) -> None:
    """``--row-limit``: -1 (all rows) or a number of rows."""
    if isinstance(row_limit, bool) or not isinstance(row_limit, int) or row_limit < -1:
        raise OptionError(f"--row-limit must be -1 (all rows) or a number of rows, not {_short(row_limit)}")


def check_output(name: str | None) -> None:
    """``-o``: a Python variable name (not a keyword)."""
    if name is None:
        return
    if not name.isidentifier() or keyword.iskeyword(name):
        raise OptionError(f"-o needs a variable name, not {_short(name)}")


def check_sort(sort: str | None, *, flops: bool = True, memory: bool = True) -> None:
    """``--sort``: a key the op table will have.

    ``flops`` and ``memory``: whether the run records them (a loaded trace
    may have both, so they default to allowed).
    """
    if not sort:
        return
    from .columns import sort_column

    try:
        column = sort_column(sort, [*_OP_COLUMNS, "flops", *_MEMORY_COLUMNS])
    except ValueError as exc:
        raise OptionError(f"--sort: {exc}") from None
    if column == "flops" and not flops:
        raise OptionError(f"--sort {sort} needs --flops (FLOPs are estimated only then)")
    if column in _MEMORY_COLUMNS and not memory:
        raise OptionError(f"--sort {sort} needs --memory (allocations are recorded only then)")


def check_export(path: str | None, *, force: bool, table: str, sides: tuple[str, ...] = ()) -> None:
    """``--export``: everything `export.plan` can tell before writing.

    ``sides``: for ``--compare``/``--compile``, the profiles that will be
    written (``eager``, ``compiled``) beside the comparison's report.
    """
    if not path:
        return
    from .export import ExportError, plan

    p = Path(path).expanduser()
    try:
        if not sides:
            plan(p, force=force, table=table)
        elif p.is_dir():
            plan(p / "comparison.html", force=force)
            for side in sides:
                if (p / side).is_dir():
                    plan(p / side, force=force, table=table)
        elif p.name.lower().endswith(".html"):
            plan(p, force=force)
        else:
            stem, dot, rest = p.name.partition(".")
            for side in sides:
                plan(p.with_name(f"{stem}.{side}{dot}{rest}"), force=force, table=table)
    except ExportError as exc:
        raise OptionError(f"export: {exc}") from None


@_usage_errors
def check_compile(settings: Any) -> None:
    """``--backend``, ``--mode``, ``--dynamic``: as torch.compile itself checks them.

    ``torch.compile`` validates its arguments when called and compiles
    only on the first call of what it returns, so wrapping a no-op costs
    no compilation.
    """
    import torch

    try:
        torch.compile(_noop, **settings.kwargs())
    except Exception as exc:  # noqa: BLE001 - torch's own message, on one line
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OptionError(f"torch.compile options: {text}") from None


def _noop() -> None:
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


@_usage_errors
def check_run(args: Any, options: Any, *, sort: str | None, row_limit: Any) -> None:
    """Every option of a ``%%torchprof`` run that can be checked before the cell runs.

    ``options`` is the `CaptureOptions` built from the options and the
    ``%config`` defaults; ``sort`` and ``row_limit`` are resolved the same way.
    """
    check_counts(options.steps, options.warmup)
    check_row_limit(row_limit)
    check_output(args.output)
    check_sort(sort, flops=options.flops, memory=options.memory)
    sides: tuple[str, ...] = ()
    if args.compile:
        sides = ("compiled",)
    elif args.compare or args.compile_names:
        sides = ("eager", "compiled")
    check_export(args.export, force=args.force, table=args.export_table, sides=sides)


@_usage_errors
def check_load(args: Any, *, sort: str | None, row_limit: Any) -> None:
    """The options of ``%torchprof --load`` that can be checked before reading the trace."""
    check_row_limit(row_limit)
    check_output(args.output)
    check_sort(sort)
    if args.load and not Path(args.load).expanduser().is_dir():
        check_export(args.export, force=args.force, table=args.export_table)
