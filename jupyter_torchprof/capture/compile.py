"""torch.compile for ``--compare`` / ``--compile``: what gets compiled, and what the compiler did.

Two ways to compile a cell:

* the whole cell (default): its statements become the body of a function that
  ``torch.compile`` wraps. Every name the cell assigns at top level becomes a
  parameter of that function and part of its return value, so reading a name
  before assigning it sees the notebook's current value, and every name the
  cell assigns still lands in the notebook namespace afterwards. (Declaring
  them ``global`` instead makes Dynamo break the graph after each resume.)
* ``--compile-names model,fn``: those objects are replaced by compiled
  versions for the compiled run only, and restored afterwards.

While the compiled run warms up, a `CompileRecorder` listens to Dynamo's
graph-break and recompile logs (silently: nothing is printed) and to its
counters, so the view can say how many graphs there were, where the graph
breaks are and why.
"""

from __future__ import annotations

import ast
import atexit
import builtins
import contextlib
import functools
import linecache
import logging
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..analysis.compile_stats import CompileStats, GraphBreak

#: Placeholder for a name the cell assigns but the notebook does not have yet.
UNSET = type("Unset", (), {"__repr__": lambda self: "<unset>"})()
_FUNCTION_NAME = "__torchprof_compiled_cell__"


def reset_dynamo() -> None:
    """Clear Dynamo's caches and take its helper globals out of the namespaces it wrote them to."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:
        return
    try:
        dynamo.reset()
        # Code that outlives the reset (resume functions after a graph break,
        # held by the notebook's own functions) would run its hooks only
        # during interpreter teardown, after IPython emptied the namespace.
        # Run them now, while the names are there, and drop them.
        manager = dynamo.utils.CleanupManager.instance
        for hooks in list(manager.values.values()):
            for hook in hooks:
                with contextlib.suppress(KeyError):
                    hook()
        manager.clear()
    except Exception:  # noqa: BLE001 - the interpreter is exiting, and these are Dynamo internals (torch 2.13)
        pass


@functools.cache  # register once per process
def reset_dynamo_before_ipython_exits() -> None:
    """Clear Dynamo's caches at exit, before IPython empties the notebook namespace.

    Dynamo stores helper globals (``__builtins_dict___0``) in the namespace of
    every function it compiles, with a hook that deletes them when the compiled
    code dies. For code defined in the notebook (a cell that defines functions,
    see `_function_globals`; a notebook class under ``--compile-names``) that
    namespace is IPython's ``user_ns``, which IPython clears at exit first, so
    the hook later fails with an "Exception ignored ... KeyError" on the way
    out (plain ``torch.compile`` in IPython does the same, torch 2.13). atexit
    runs hooks last-registered first, so registering here, after IPython
    registered its own, lets Dynamo clean up while the names are still there.
    """
    atexit.register(reset_dynamo)


@dataclass
class CompileSettings:
    """Options passed through to ``torch.compile``.

    Attributes
    ----------
    backend, mode, fullgraph, dynamic
        As in ``torch.compile``.
    names
        With ``--compile-names``: the notebook names to compile instead of
        the whole cell.
    """

    backend: str = "inductor"
    mode: str | None = None
    fullgraph: bool = False
    dynamic: bool | None = None
    names: list[str] = field(default_factory=list)

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``torch.compile``."""
        out: dict[str, Any] = {"backend": self.backend, "fullgraph": self.fullgraph}
        if self.mode:
            out["mode"] = self.mode
        if self.dynamic is not None:
            out["dynamic"] = self.dynamic
        return out


# --------------------------------------------------------------------------- #
# whole-cell compilation


def assigned_names(body: list[ast.stmt]) -> list[str]:
    """Names bound at the top level of a block (not inside defs, classes, lambdas)."""
    names: list[str] = []

    def add(name: str) -> None:
        if name not in names:
            names.append(name)

    def targets(node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            add(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                targets(elt)
        elif isinstance(node, ast.Starred):
            targets(node.value)

    def visit(stmts: list[ast.stmt]) -> None:
        for st in stmts:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                add(st.name)
            elif isinstance(st, ast.Assign):
                for t in st.targets:
                    targets(t)
            elif isinstance(st, (ast.AugAssign, ast.AnnAssign)):
                targets(st.target)
            elif isinstance(st, (ast.For, ast.AsyncFor)):
                targets(st.target)
                visit(st.body)
                visit(st.orelse)
            elif isinstance(st, (ast.With, ast.AsyncWith)):
                for item in st.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars)
                visit(st.body)
            elif isinstance(st, (ast.Import, ast.ImportFrom)):
                for alias in st.names:
                    add((alias.asname or alias.name).split(".")[0])
            elif isinstance(st, ast.If):
                visit(st.body)
                visit(st.orelse)
            elif isinstance(st, ast.While):
                visit(st.body)
                visit(st.orelse)
            elif isinstance(st, ast.Try):
                visit(st.body)
                for h in st.handlers:
                    if h.name:
                        add(h.name)
                    visit(h.body)
                visit(st.orelse)
                visit(st.finalbody)
            for node in ast.walk(st):
                if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
                    add(node.target.id)

    visit(body)
    return names


def cell_function(
    tree: ast.Module, filename: str, namespace: dict[str, Any]
) -> tuple[Callable[..., Any], list[str]]:
    """Turn a parsed cell into a function of the names it assigns.

    Returns the function and those names. Calling it with the names' current
    values returns ``(value of the last expression or None, tuple of the
    names' new values)``.
    """
    body = list(tree.body)
    last: ast.expr = ast.Constant(None)
    if body and isinstance(body[-1], ast.Expr):
        last = body.pop().value
    names = assigned_names(body)
    ret = ast.Return(
        ast.Tuple(
            [last, ast.Tuple([ast.Name(n, ast.Load()) for n in names], ast.Load())],
            ast.Load(),
        )
    )
    fields: dict[str, Any] = {
        "name": _FUNCTION_NAME,
        "args": ast.arguments(
            posonlyargs=[], args=[ast.arg(n) for n in names], kwonlyargs=[], kw_defaults=[], defaults=[]
        ),
        "body": body + [ret],
        "decorator_list": [],
        "returns": None,
    }
    if "type_params" in ast.FunctionDef._fields:  # Python >= 3.12
        fields["type_params"] = []
    fn = ast.FunctionDef(**fields)
    module = ast.Module(body=[fn], type_ignores=[])
    ast.fix_missing_locations(module)
    scope: dict[str, Any] = {}
    exec(compile(module, filename, "exec"), _function_globals(tree, namespace), scope)
    return scope[_FUNCTION_NAME], names


def _function_globals(tree: ast.Module, namespace: dict[str, Any]) -> dict[str, Any]:
    """The globals the cell's function runs with.

    Dynamo writes helpers (``__compiled_fn_1_...``, ``__resume_at_...``,
    ``__builtins_dict___0``) into the globals of the function it compiles and
    deletes them again through weak-reference hooks. In the notebook namespace
    they would clutter ``dir()`` and, when IPython empties that namespace at
    exit, the hooks fail ("Exception ignored ... KeyError"). So the function
    gets its own dict holding the notebook objects the cell reads: the same
    objects, so reading them and mutating them behave as in the cell.

    A cell that defines functions, classes or lambdas, or declares names
    ``global``, keeps the notebook namespace itself: what it defines lands in
    the notebook and must see the notebook's later changes, not a copy.
    """
    nodes = list(ast.walk(tree))
    defines = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Global, ast.Nonlocal)
    if any(isinstance(node, defines) for node in nodes):
        return namespace
    reads = {node.id for node in nodes if isinstance(node, ast.Name)}
    own = {name: namespace[name] for name in reads if name in namespace}
    own["__builtins__"] = namespace.get("__builtins__", builtins)
    own["__name__"] = namespace.get("__name__", "__main__")
    return own


class CompiledCell:
    """Runs a cell through ``torch.compile``, one call per run.

    Parameters
    ----------
    tree
        The parsed (IPython-transformed) cell.
    filename
        Name under which the cell's source is registered for tracebacks and
        for Dynamo's graph-break locations.
    namespace
        The notebook namespace.
    settings
        ``torch.compile`` options.
    """

    def __init__(
        self, tree: ast.Module, filename: str, namespace: dict[str, Any], settings: CompileSettings
    ) -> None:
        import torch

        self.namespace = namespace
        _register_body(filename)
        fn, self.names = cell_function(tree, filename, namespace)
        reset_dynamo_before_ipython_exits()
        self.compiled = torch.compile(fn, **settings.kwargs())
        self.calls = 0
        self.first_call_s: float | None = None

    def __call__(self) -> Any:
        """Run the compiled cell once (output silenced) and store what it assigned."""
        __tracebackhide__ = True  # noqa: F841
        from IPython.utils.capture import capture_output

        ns = self.namespace
        args = {n: ns.get(n, UNSET) for n in self.names}
        t0 = time.perf_counter()
        with capture_output(stdout=True, stderr=True, display=True):
            value, values = self.compiled(**args)
        if self.calls == 0:
            self.first_call_s = time.perf_counter() - t0
        self.calls += 1
        for name, v in zip(self.names, values, strict=True):
            if v is not UNSET:
                ns[name] = v
        return value


@contextmanager
def compiled_names(namespace: dict[str, Any], settings: CompileSettings) -> Iterator[None]:
    """Swap the named objects for compiled versions, and restore them after."""
    import torch

    missing = [n for n in settings.names if n not in namespace]
    if missing:
        raise KeyError(f"--compile-names: {', '.join(missing)} not defined in the notebook")
    originals = {n: namespace[n] for n in settings.names}
    reset_dynamo_before_ipython_exits()
    compiled = {n: torch.compile(obj, **settings.kwargs()) for n, obj in originals.items()}
    namespace.update(compiled)
    try:
        yield
    finally:
        for n, obj in originals.items():
            # Only restore what we put there: the cell may have rebound it.
            if namespace.get(n) is compiled[n]:
                namespace[n] = obj


# --------------------------------------------------------------------------- #
# listening to Dynamo


_LOCATION = re.compile(r"in user code at (?P<loc>\S+)")
_REASON_SKIP = ("Graph Break Reason:", "Encountered graph break", "")


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _artifact_loggers() -> list[logging.Logger]:
    # Importing these modules registers their artifact loggers.
    import torch._dynamo.convert_frame  # noqa: F401
    import torch._dynamo.guards  # noqa: F401
    import torch._dynamo.symbolic_convert  # noqa: F401

    names = [
        n
        for n in logging.root.manager.loggerDict
        if n.startswith("torch.") and n.endswith(("__graph_breaks", "__recompiles"))
    ]
    return [logging.getLogger(n) for n in names]


def _counter_snapshot() -> dict[str, dict[str, int]]:
    from torch._dynamo.utils import counters

    return {k: dict(v) for k, v in counters.items()}


class CompileRecorder:
    """Collects graph breaks, recompiles and graph counts while active.

    The Dynamo loggers are switched to DEBUG and detached from their parents
    for the duration, so nothing is printed; their previous state is restored
    on exit.
    """

    def __init__(self, settings: CompileSettings) -> None:
        self.settings = settings
        self.stats = CompileStats(backend=settings.backend, mode=settings.mode)
        self._handler = _Capture()
        self._saved: list[tuple[logging.Logger, int, bool]] = []
        self._before: dict[str, dict[str, int]] = {}

    def __enter__(self) -> CompileRecorder:
        self._before = _counter_snapshot()
        for lg in _artifact_loggers():
            self._saved.append((lg, lg.level, lg.propagate))
            lg.setLevel(logging.DEBUG)
            lg.propagate = False
            lg.addHandler(self._handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        for lg, level, propagate in self._saved:
            lg.removeHandler(self._handler)
            lg.setLevel(level)
            lg.propagate = propagate
        self._saved.clear()
        self._collect()

    def _collect(self) -> None:
        after = _counter_snapshot()

        def delta(group: str, key: str) -> int:
            return after.get(group, {}).get(key, 0) - self._before.get(group, {}).get(key, 0)

        self.stats.graphs = delta("stats", "unique_graphs")
        self.stats.frames = delta("frames", "ok")
        breaks: dict[tuple[str, str], GraphBreak] = {}
        for rec in self._handler.records:
            msg = rec.getMessage()
            if rec.name.endswith("__recompiles"):
                self.stats.recompiles.append(_first_lines(msg, 3))
                continue
            m = _LOCATION.search(msg)
            location, code = cell_location(m.group("loc")) if m else ("?", "")
            reason = _break_reason(msg)
            key = (location, reason)
            if key in breaks:
                breaks[key].count += 1
            else:
                breaks[key] = GraphBreak(location=location, reason=reason, code=code)
        if not breaks:
            # No log records (e.g. an older torch): fall back to the counters,
            # which know the reasons but not the lines.
            before = self._before.get("graph_break", {})
            for reason, n in after.get("graph_break", {}).items():
                d = n - before.get(reason, 0)
                if d > 0:
                    breaks[("?", reason)] = GraphBreak(location="?", reason=_first_lines(reason, 2), count=d)
        self.stats.graph_breaks = list(breaks.values())

    def failed(self, exc: BaseException) -> None:
        """Record a compilation failure."""
        self.stats.error = f"{type(exc).__name__}: {_first_lines(str(exc), 1)}"
        self.stats.traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


#: Files holding the body of a ``%%torchprof`` cell (registered by
#: `CompiledCell`) and the number of the cell they came from.
_MAGIC_BODIES: dict[str, int] = {}


def _register_body(filename: str) -> None:
    """Remember that ``filename`` holds a ``%%torchprof`` cell's body, and its cell number.

    The number is the highest IPython gave any other compiled code: the cell
    running the magic (a re-run cell keeps its file name, so the order of the
    map says nothing). The body's own number is not used: the magic caches
    it under ``shell.execution_count``, which IPython 9 has already moved on
    to the next cell while one runs.
    """
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        return
    fmap = getattr(getattr(get_ipython(), "compile", None), "_filename_map", None)
    if not fmap:
        return
    others = [n for name, n in fmap.items() if name != filename]
    _MAGIC_BODIES[filename] = max(others) if others else fmap.get(filename, 0)


def cell_location(location: str, shell: Any = None) -> tuple[str, str]:
    """A Dynamo ``file:line`` as the notebook shows it, and that line's source.

    Cells run under names IPython makes up (``/tmp/ipykernel_<pid>/<hash>.py``
    in a kernel, ``<ipython-input-N-...>`` in a terminal) and remembers in its
    compiler's filename map, with the source in `linecache`. The body of a
    cell magic (``%%torchprof``) is registered on its own, one line below the
    magic line, so its lines are shifted by one to match the line numbers
    the notebook shows. Anything IPython does not know stays as it is.

    Parameters
    ----------
    location
        ``path:line`` from Dynamo's graph-break log.
    shell
        The IPython shell (default: the running one, if any).

    Returns
    -------
    (location, code)
        ``("Cell In[5], line 3", "print(h)")``, or the input and ``""``.
    """
    path, sep, line_text = location.rpartition(":")
    if not sep or not line_text.isdigit():
        return location, ""
    line = int(line_text)
    cached = linecache.getline(path, line).strip()
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover - IPython is a dependency
            return location, cached
        shell = get_ipython()
    number = getattr(getattr(shell, "compile", None), "_filename_map", {}).get(path)
    if path in _MAGIC_BODIES:
        # The cell as typed starts with the magic line; the file holds what follows it.
        return f"Cell In[{_MAGIC_BODIES[path]}], line {line + 1}", cached
    if number is None:
        return location, cached
    return f"Cell In[{number}], line {line}", cached


def _first_lines(text: str, n: int) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " ".join(lines[:n])


def _break_reason(msg: str) -> str:
    # Dynamo's message: "Graph break in user code at FILE:LINE\nGraph Break Reason: ...\n\n<title>\n  Explanation: ..."
    lines = [ln.strip() for ln in msg.splitlines()]
    title = next((ln for ln in lines[1:] if ln and not ln.startswith(_REASON_SKIP[:2])), "")
    explanation = next(
        (ln[len("Explanation:") :].strip() for ln in lines if ln.startswith("Explanation:")), ""
    )
    return (
        f"{title}: {explanation}" if title and explanation else (title or explanation or _first_lines(msg, 2))
    )


@contextmanager
def cpu_kernel_ranges() -> Iterator[None]:
    """Make Inductor's C++ kernels appear in the profile as named ranges.

    Without ``cpp.enable_kernel_profile`` the fused C++ kernels that Inductor
    generates for the CPU are invisible inside the compiled region.
    """
    try:
        import torch._inductor.config as inductor_config
    except Exception:  # noqa: BLE001 - inductor unavailable: nothing to enable
        yield
        return
    with inductor_config.patch({"cpp.enable_kernel_profile": True}):
        yield
