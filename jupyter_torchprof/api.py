"""Profile a callable or a block without IPython magics: scripts, marimo, any Python host.

``profile(fn, *args, **options)`` runs the very recipe of ``%%torchprof``
(warm-up runs, synchronised profiled steps, the run kept in the store, the
same `Profile`) on a callable instead of a cell; ``compare=True`` gives the
`Comparison` of ``fn`` and ``torch.compile(fn)``. ``with profiling() as run:``
profiles a block, once. Both go through `session.RunSession`, as the magic
does, and need no IPython shell.

The options are the magic's, spelled as keyword arguments
(``--record-shapes`` → ``record_shapes=True``). Their names, help and
defaults are read from the magic's own argument table and traits, so they
are written once; the docstrings below list them.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import io
import linecache
import os
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from types import FrameType, SimpleNamespace
from typing import Any

from .errors import TorchProfError
from .session import RunSession

__all__ = ["BlockRun", "Option", "ProfileError", "option_table", "profile", "profiling"]

#: Options of the magic that `profile` does not take, and what to do instead.
_NOT_FOR_CALLS = {
    "load": "open a saved trace with jupyter_torchprof.load(path)",
    "output": "the result is returned",
    "compile_names": "pass the object to compile as fn: compare=True or compile=True compiles fn",
}
_BLOCK_ONLY_ONCE = "a with block runs once; profile a function with profile(fn, compare=True) instead"
#: Options of `profile` that a ``with profiling()`` block does not take.
_NOT_FOR_BLOCKS = {
    **_NOT_FOR_CALLS,
    **dict.fromkeys(("compare", "compile", "backend", "mode", "fullgraph", "dynamic"), _BLOCK_ONLY_ONCE),
}


class ProfileError(TorchProfError):
    """A profile could not be taken as asked (a bad option value, a busy profiler ...).

    The message is the one line ``%%torchprof`` prints for the same problem.
    """


@dataclass(frozen=True)
class Option:
    """One keyword option: a ``%%torchprof`` option under its Python name.

    Attributes
    ----------
    name
        The keyword (``record_shapes``).
    flag
        The magic's spelling (``--record-shapes``).
    kind
        ``bool``, ``int``, ``str`` or ``choice``.
    default
        What an unset option means: the configured trait's default, else the magic's.
    help
        The magic's help line.
    choices
        The accepted values of a ``choice``.
    """

    name: str
    flag: str
    kind: str
    default: Any
    help: str
    choices: tuple[str, ...] = ()


def _parser() -> argparse.ArgumentParser:
    from .magics import TorchProf

    return TorchProf.torchprof.parser


def _trait_defaults() -> dict[str, Any]:
    from .magics import TorchProf

    return {name: trait.default_value for name, trait in TorchProf.class_traits(config=True).items()}


@functools.cache
def option_table() -> dict[str, Option]:
    """Every option of the magic a call takes, by keyword, read from the magic's argument table."""
    defaults = _trait_defaults()
    out: dict[str, Option] = {}
    for action in _parser()._actions:
        if not action.option_strings or action.dest in _NOT_FOR_CALLS or action.dest == "help":
            continue
        if action.nargs == 0:  # a switch: store_true or --x/--no-x
            kind = "bool"
        elif action.choices:
            kind = "choice"
        elif action.type is int:
            kind = "int"
        else:
            kind = "str"
        flag = max(action.option_strings, key=len)
        default = defaults.get(action.dest, action.default)
        choices = tuple(action.choices or ())
        out[action.dest] = Option(action.dest, flag, kind, default, action.help or "", choices)
    return out


def _block_options() -> dict[str, Option]:
    return {name: opt for name, opt in option_table().items() if name not in _NOT_FOR_BLOCKS}


def _host() -> tuple[Any, Any]:
    """(the running IPython shell or None, the defaults).

    In IPython the run records its notebook and shows its progress there,
    and ``%config TorchProf.*`` sets the defaults; anywhere else (a script,
    marimo) there is no shell and the defaults are the magic's own.
    """
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    registry = getattr(getattr(shell, "magics_manager", None), "registry", None) or {}
    configured = registry.get("TorchProf")
    return shell, configured if configured is not None else SimpleNamespace(**_trait_defaults())


def _checked(opt: Option, value: Any) -> Any:
    """``value`` for ``opt``, in the type the magic's parser would give; None means the default."""
    if value is None:
        return None
    if opt.kind == "bool":
        if not isinstance(value, bool):
            raise ProfileError(f"{opt.name} takes True or False, not {value!r}")
        return value
    if opt.kind == "choice":
        if value not in opt.choices:
            raise ProfileError(
                f"{opt.name} must be one of {', '.join(map(repr, opt.choices))}, not {value!r}"
            )
        return value
    if opt.kind == "int":
        return value  # the session checks the range, with the magic's message
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if opt.name == "device" and type(value).__name__ == "device":  # a torch.device
        return str(value)
    if not isinstance(value, str):
        raise ProfileError(f"{opt.name} takes a string, not {value!r}")
    return value


def _namespace(given: dict[str, Any], table: dict[str, Option], caller: str, refused: dict[str, str]) -> Any:
    """The magic's parsed options (an argparse Namespace) with ``given`` set; unknown keywords are a TypeError."""
    for name in given:
        if name in refused:
            raise TypeError(f"{caller} does not take {name}=: {refused[name]}")
        if name not in table:
            import difflib

            close = difflib.get_close_matches(name, list(table), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(
                f"{caller} got an unexpected keyword argument {name!r}{hint}; "
                f"its options are: {', '.join(table)}"
            )
    args = _parser().parse_args([])  # every option at the magic's "not given" value
    for name, value in given.items():
        setattr(args, name, _checked(table[name], value))
    return args


@contextmanager
def _plain_errors(runner: Any = None) -> Iterator[None]:
    """The magic's one-line errors (IPython's ``UsageError``) as `ProfileError`; what ``fn`` raised passes."""
    __tracebackhide__ = True  # noqa: F841
    from IPython.core.error import UsageError

    try:
        yield
    except UsageError as exc:
        if runner is not None and exc is runner.raised:
            raise
        raise ProfileError(str(exc)) from None


class _CallSession(RunSession):
    """The magic's session with no notebook to show in: the result is kept, not displayed."""

    result: Any = None

    def _publish(self, result: Any, args: argparse.Namespace) -> None:
        self.result = result
        self._keep_tables(result)


class _Names:
    """The variables around a call, to name its ``nn.Module`` ranges (``modules=True``).

    The caller's names come first (``profile(model, x)`` names ``model``),
    then the callable's closure and globals.
    """

    def __init__(self, frame: FrameType | None, fn: Any = None) -> None:
        self.sources: list[dict[str, Any]] = []
        if frame is not None:
            self.sources += [dict(frame.f_locals), frame.f_globals]
        if fn is not None:
            try:
                self.sources.append(dict(inspect.getclosurevars(fn).nonlocals))
            except (TypeError, ValueError):  # a builtin, a module instance, a partial
                pass
            self.sources.append(getattr(fn, "__globals__", {}))

    def merged(self) -> dict[str, Any]:
        """One namespace, the first source winning a name."""
        out: dict[str, Any] = {}
        for source in self.sources:
            for key, value in source.items():
                out.setdefault(key, value)
        return out


class CallRunner:
    """Calls ``fn(*args, **kwargs)`` once per run, as `cellrunner.CellRunner` runs a cell.

    What ``fn`` prints shows on the first call only (with ``show_output``);
    later calls (more warm-up runs, profiled steps) run with stdout and
    stderr dropped. Its first return value is kept in ``value``; what it
    raised last, in ``raised``.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        names: _Names,
        show_output: bool = True,
        owner: CallRunner | None = None,
    ) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.names = names
        self.show_output = show_output
        self.owner = owner
        self.value: Any = None
        self.raised: BaseException | None = None
        self.calls = 0
        self.first_call_s: float | None = None

    @property
    def namespace(self) -> dict[str, Any]:
        """The variables that name the modules of a ``modules=True`` run."""
        return self.names.merged()

    def __call__(self) -> None:
        """Call ``fn`` once."""
        __tracebackhide__ = True  # noqa: F841
        self.calls += 1
        silent = self.calls > 1 or not self.show_output
        t0 = time.perf_counter()
        try:
            with _silenced() if silent else nullcontext():
                value = self.fn(*self.args, **self.kwargs)
        except BaseException as exc:
            for runner in (self, self.owner):
                if runner is not None:
                    runner.raised = exc
            raise
        if self.calls == 1:
            self.value = value
            self.first_call_s = time.perf_counter() - t0

    def compiled(self, settings: Any, show_output: bool = False) -> tuple[CallRunner, Any]:
        """The runner of ``torch.compile(fn)`` for the compiled run, and the context it runs in (none)."""
        import torch

        fn = torch.compile(self.fn, **settings.kwargs())
        return CallRunner(fn, self.args, self.kwargs, self.names, show_output, owner=self), nullcontext()


@contextmanager
def _silenced() -> Iterator[None]:
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        yield


def _describe(fn: Any) -> tuple[str, str]:
    """A run's default name (the callable's) and its source, kept as the run's cell."""
    target = fn
    while isinstance(target, functools.partial):
        target = target.func
    name = getattr(target, "__qualname__", None) or type(target).__name__
    name = name.rsplit("<locals>.", 1)[-1]  # ``step``, not ``main.<locals>.step``
    try:
        code = textwrap.dedent(inspect.getsource(target))
    except (OSError, TypeError):  # no source: a builtin, a module instance, code typed at a prompt
        code = repr(fn)
    return ("lambda" if name == "<lambda>" else name), code


def profile(
    fn: Callable[..., Any], /, *args: Any, kwargs: dict[str, Any] | None = None, **options: Any
) -> Any:
    """Profile ``fn(*args, **kwargs)`` as ``%%torchprof`` profiles a cell.

    ``fn`` runs ``warmup + 1 + steps`` times: ``warmup`` unprofiled runs,
    the profiler's own warm-up step, then ``steps`` profiled runs, each
    followed by a device synchronisation. What it prints shows once. The run
    is kept in the run store (the JupyterLab sidebar lists it), as the
    magic's are. Needs no IPython shell: a script, marimo, any host.

    Parameters
    ----------
    fn
        What to profile: a function, an ``nn.Module``, a lambda.
    *args
        Positional arguments of ``fn``.
    kwargs
        Keyword arguments of ``fn`` (its own, apart from the options below);
        or pass ``lambda: fn(x, name=...)``.
    **options
        The magic's options, as keywords (None: the default). Listed below.

    Returns
    -------
    Profile or Comparison
        The `Profile` (``.ops``, ``.kernels``, ``.steps``, ``.findings``);
        with ``compare=True`` or ``compile=True`` the `Comparison` of ``fn``
        and ``torch.compile(fn)`` (``.eager``, ``.compiled``, ``.diff``).

    Raises
    ------
    TypeError
        An option that does not exist (the message lists those that do).
    ProfileError
        A bad option value, a busy profiler, a run that produced no trace:
        the one line the magic prints.
    Exception
        Whatever ``fn`` raised, unchanged, after the profiler was stopped
        (the partial profile is kept in the store).

    Other Parameters
    ----------------
    {options}

    Examples
    --------
    >>> import jupyter_torchprof as tp
    >>> prof = tp.profile(model, x, steps=5, record_shapes=True)  # doctest: +SKIP
    >>> prof.ops.head()  # doctest: +SKIP
    >>> cmp = tp.profile(model, x, compare=True, backend="aot_eager")  # doctest: +SKIP
    """
    __tracebackhide__ = True  # noqa: F841
    if not callable(fn):
        raise TypeError(
            f"profile() needs a callable to profile (a function, a module), not {type(fn).__name__}"
        )
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(
            f"profile(kwargs=...) takes a dict of fn's keyword arguments, not {type(kwargs).__name__}"
        )
    args_ns = _namespace(options, option_table(), "profile()", _NOT_FOR_CALLS)
    name, code = _describe(fn)
    args_ns.name = args_ns.name or name
    runner = CallRunner(fn, args, dict(kwargs or {}), _Names(sys._getframe(1), fn))
    session = _CallSession(*_host())
    with _plain_errors(runner):
        session.run(args_ns, code, make_runner=lambda: runner)
    return session.result


def profiling(**options: Any) -> BlockRun:
    """Profile the block of a ``with`` statement: ``with profiling() as run: ...``, then ``run.profile``.

    A block runs once, so it is one profiled step with no warm-up run and
    no profiler warm-up step: the step includes the profiler's first-use
    costs and whatever the block does for the first time (lazy
    initialisation, compilation). Warm the code up before the block, or use
    `profile` on a function, which repeats it. ``steps`` can only be 1 and
    ``warmup`` only 0; there is no ``compare``.

    If the block raises, the profiler is stopped, the partial profile is
    kept (``run.profile``) and the exception propagates.

    Parameters
    ----------
    **options
        The magic's options, as keywords (None: the default). Listed below.

    Returns
    -------
    BlockRun
        The context manager; its ``profile`` is the `Profile` once the block ended.

    Other Parameters
    ----------------
    {options}

    Examples
    --------
    >>> with jupyter_torchprof.profiling(record_shapes=True) as run:  # doctest: +SKIP
    ...     loss = model(x).sum()
    ...     loss.backward()
    >>> run.profile.ops.head()  # doctest: +SKIP
    """
    table = _block_options()
    args_ns = _namespace(options, table, "profiling()", _NOT_FOR_BLOCKS)
    for key, only in (("steps", 1), ("warmup", 0)):
        value = getattr(args_ns, key)
        if value is not None and (isinstance(value, bool) or value != only):
            raise ProfileError(f"{key} can only be {only} in a with block, not {value!r}: {_BLOCK_ONLY_ONCE}")
    args_ns.steps, args_ns.warmup = 1, 0
    return BlockRun(args_ns, sys._getframe(1))


class BlockRun:
    """A ``with profiling()`` block: profiles it; ``profile`` is the result once it ended.

    One `BlockRun` profiles one block; call `profiling` again for another.
    """

    def __init__(self, args: argparse.Namespace, frame: FrameType) -> None:
        self.profile: Any = None
        self._args = args
        self._where = (frame.f_code.co_filename, frame.f_lineno)
        self._names = _Names(frame)
        self._state: tuple[Any, ...] | None = None
        self._used = False

    def __enter__(self) -> BlockRun:
        __tracebackhide__ = True  # noqa: F841
        if self._used:
            raise ProfileError("this profiling() block already ran; call profiling() again for another block")
        self._used = True
        with _plain_errors():
            self._state = self._start()
        return self

    def _start(self) -> tuple[Any, ...]:
        from .capture.runner import BlockCapture
        from .runs import RAW_TRACE_NAME

        args = self._args
        session = _CallSession(*_host())
        options, target = session.prepare(args)
        store, progress = session.run_store(args), session.progress_line(args)
        module_names = None
        if options.modules:
            from .capture.modules import module_paths

            module_names = module_paths(self._names.merged())
        run_dir = session.new_run_dir(store)
        capture = BlockCapture(target, options, run_dir / RAW_TRACE_NAME, progress, module_names)
        try:
            capture.start()
        except BaseException:
            import shutil

            # Nothing was recorded: no run to list.
            shutil.rmtree(run_dir, ignore_errors=True)
            progress.finish()
            raise
        return session, options, target, store, progress, run_dir, capture, time.time()

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        __tracebackhide__ = True  # noqa: F841
        if self._state is None:
            return False
        session, options, target, store, progress, run_dir, capture, started = self._state
        self._state = None
        code = _block_source(*self._where)
        args = self._args
        name = args.name or _block_name(code, self._where)
        with _plain_errors():
            profile, result = session.collect(
                lambda: capture.finish(exc),
                run_dir,
                started,
                target,
                options,
                code,
                args,
                store,
                progress,
                name,
            )
            self.profile = profile
            session.show_run(args, result, profile, progress, reraise=result.error is not exc)
        return False  # the block's own exception, if any, propagates


def _block_source(filename: str, lineno: int) -> str:
    """The source of the block under the ``with`` line at ``filename:lineno``, if it can be read."""
    lines = linecache.getlines(filename)
    if not 0 < lineno <= len(lines):
        return ""
    head = lines[lineno - 1]
    indent = len(head) - len(head.lstrip())
    body = []
    for line in lines[lineno:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    return textwrap.dedent("".join(body)).strip("\n") or head.strip()


def _block_name(code: str, where: tuple[str, int]) -> str:
    from .cellrunner import default_name

    if code:
        return default_name(code)
    return f"block at {os.path.basename(where[0])}:{where[1]}"


def _options_doc(table: dict[str, Option]) -> str:
    """The options section of a docstring, from the magic's argument table."""
    lines = []
    for opt in table.values():
        kind = f"one of {', '.join(map(repr, opt.choices))}" if opt.kind == "choice" else opt.kind
        lines.append(f"{opt.name} : {kind}, default {opt.default!r}")
        lines.append(f"    {opt.help} (``%%torchprof {opt.flag}``)")
    return textwrap.indent("\n".join(lines), "    ").lstrip()


def _signature(head: list[inspect.Parameter], table: dict[str, Option], returns: Any) -> inspect.Signature:
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = head + [inspect.Parameter(o.name, keyword, default=o.default) for o in table.values()]
    return inspect.Signature(params, return_annotation=returns)


def _document() -> None:
    """Write the options into `profile`'s and `profiling`'s docstrings and signatures."""
    positional = inspect.Parameter.POSITIONAL_ONLY
    call_head = [
        inspect.Parameter("fn", positional),
        inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
        inspect.Parameter("kwargs", inspect.Parameter.KEYWORD_ONLY, default=None),
    ]
    for fn, table, head in ((profile, option_table(), call_head), (profiling, _block_options(), [])):
        fn.__doc__ = (fn.__doc__ or "").replace("{options}", _options_doc(table))
        fn.__signature__ = _signature(head, table, inspect.signature(fn).return_annotation)  # type: ignore[attr-defined]


_document()
