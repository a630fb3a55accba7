"""The package's imports, lazy ones included, go one way and never in a circle.

The rule (README, Layout): ``errors/format/columns ← trace ← analysis ←
results ← {views, runs} ← {export, session, server} ← {magics, presentation}``,
with ``capture`` using only what is below results and used only by the
session layer; views see results only for typing and never import export
(export renders reports with the views; the view's Export menu is passed
in); ``runs`` (the one owner of the run folder) is imported only by the
session, the server, export and the front door (magics, api, the
package's ``__init__``), and imports no views. No module imports another's
private (underscore) name.

A result shows and writes itself (``Profile._repr_mimebundle_``, ``table()``,
``export()`` ...), which is the one place ``results/`` reaches up: each such
method imports `jupyter_torchprof.presentation` when called and only
delegates there. `PRESENTATION_HOOKS` names every one of them; any other
upward import fails, and nothing registers modules at run time.

Every ``import`` statement of every module is read with `ast`, wherever it
stands: at the top, inside a function, under ``if TYPE_CHECKING:``. A
function-level import is an edge like any other (it runs, just later); an
import under ``TYPE_CHECKING`` never runs, so it does not count towards a
cycle (``results.profile_diff`` names `Profile` in its annotations while
``Profile.diff`` builds a `ProfileDiff`), but it must still point down.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "jupyter_torchprof"
NAME = "jupyter_torchprof"

#: Layer of each top-level part of the package, lowest first (a module may import its own layer or below).
LAYERS: dict[str, int] = {
    "_version": 0, "errors": 0, "format": 0, "columns": 0, "safe_files": 0,
    "trace": 1,
    "analysis": 2,
    "capture": 2,  # imports what analysis may; who imports it is checked apart
    "results": 3,
    "views": 4,
    "runs": 4,  # the run folder (store, caches, load): who imports it is checked apart
    "export": 5, "export_menu": 5,  # export renders reports with the views: above them
    "session": 5, "server": 5, "cellrunner": 5, "run_options": 5,
    "magics": 6, "api": 6, "presentation": 6,
    "": 7,  # the package's __init__: the front door that wires the layers
}  # fmt: skip
SESSION_LAYER = LAYERS["session"]

#: The methods through which a result value reaches the code that shows and
#: writes it (Python's display protocol asks the value): each imports
#: `presentation` when called and only delegates to it.
PRESENTATION_HOOKS: dict[str, set[str]] = {
    "results.profile": {
        "Profile.export", "Profile.table", "Profile._repr_html_static", "Profile._repr_mimebundle_",
        "Profile._display_", "Profile.view",
    },
    "results.comparison": {"Comparison.export", "Comparison._repr_mimebundle_", "Comparison._display_"},
    "results.ranks": {"RankSet.text", "RankSet._repr_mimebundle_", "RankSet._display_", "RankSet.view"},
    "results.profile_diff": {"ProfileDiff._repr_mimebundle_"},
}  # fmt: skip
PRESENTATION = f"{NAME}.presentation"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    typing_only: bool
    names: tuple[str, ...]
    #: ``Class.method`` (or ``function``) the import stands in; "" at module level.
    where: str = ""

    @property
    def is_presentation_hook(self) -> bool:
        """An import of `presentation` inside one of `PRESENTATION_HOOKS` (see the module docstring)."""
        hooks = PRESENTATION_HOOKS.get(_short(self.source), set())
        return self.target == PRESENTATION and self.where in hooks


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = modules()


def part_of(module: str) -> str:
    """``trace`` for ``jupyter_torchprof.trace.files``; "" for the package itself."""
    rest = module.removeprefix(NAME).lstrip(".")
    return rest.split(".")[0]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, bool, str]]:
    """Every import statement, with whether it stands under ``if TYPE_CHECKING:`` and where (``Class.method``)."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool, str]] = []

    def visit(node: ast.AST, typing_only: bool, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, typing_only, where))
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), True, where)
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), typing_only, where)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, typing_only, f"{where}.{child.name}" if where else child.name)
            else:
                visit(child, typing_only, where)

    visit(tree, False, "")
    return found


def _resolve(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[tuple[str, tuple[str, ...]]]:
    """(target module inside the package, names imported from it) for one statement."""
    if isinstance(node, ast.Import):
        return [(a.name, ()) for a in node.names if a.name == NAME or a.name.startswith(NAME + ".")]
    if node.level:
        base = module.split(".")
        if path.name != "__init__.py":
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
        if not (target == NAME or target.startswith(NAME + ".")):
            return []
    out = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        if sub in MODULES:  # ``from . import display``: the submodule itself
            out.append((sub, ()))
        else:
            out.append((target, (alias.name,)))
    return out


def edges() -> list[Edge]:
    out = []
    for module, path in MODULES.items():
        for node, typing_only, where in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            for target, names in _resolve(module, path, node):
                while target not in MODULES and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in MODULES and target != module:
                    out.append(Edge(module, target, node.lineno, typing_only, names, where))
    return out


EDGES = edges()


def _short(module: str) -> str:
    return module.removeprefix(NAME + ".") or NAME


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_walk_sees_the_lazy_imports() -> None:
    """The walk finds function-level and TYPE_CHECKING imports, not only top-level ones."""
    lazy = [e for e in EDGES if e.source == NAME and e.target == f"{NAME}.magics"]
    assert lazy, "load_ipython_extension imports the magics inside a function"
    typing = [e for e in EDGES if e.typing_only and e.source.startswith(f"{NAME}.views.")]
    assert typing, "views import results under TYPE_CHECKING"
    assert len(MODULES) > 60


def test_no_import_cycle_counting_function_level_imports() -> None:
    # A presentation hook runs only when a value is shown or written, long after
    # every module is imported; it is the one edge back up (see the docstring).
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for e in EDGES:
        if not e.typing_only and not e.is_presentation_hook:
            graph[e.source].add(e.target)
    found = cycles(graph)
    detail = [
        " ↔ ".join(_short(m) for m in c)
        + ": "
        + "; ".join(
            f"{_short(e.source)}:{e.line} → {_short(e.target)}"
            for e in EDGES
            if not e.typing_only and not e.is_presentation_hook and e.source in c and e.target in c
        )
        for c in found
    ]
    assert not found, "import cycles:\n" + "\n".join(detail)


def test_every_part_of_the_package_has_a_layer() -> None:
    assert {part_of(m) for m in MODULES} <= set(LAYERS)


def test_imports_point_down_the_layers() -> None:
    upward = [
        f"{_short(e.source)}:{e.line} imports {_short(e.target)}" + (" (for typing)" if e.typing_only else "")
        for e in EDGES
        if LAYERS[part_of(e.source)] < LAYERS[part_of(e.target)] and not e.is_presentation_hook
    ]
    assert not upward, "imports that point up the layers:\n" + "\n".join(upward)


def test_views_never_import_export() -> None:
    """Export renders reports with the views; the views get the Export menu passed in."""
    found = [
        f"{_short(e.source)}:{e.line} imports {_short(e.target)}" + (" (for typing)" if e.typing_only else "")
        for e in EDGES
        if part_of(e.source) == "views" and part_of(e.target) in ("export", "export_menu")
    ]
    assert not found, "views importing export:\n" + "\n".join(found)


def _function(module: str, where: str) -> ast.FunctionDef:
    node: ast.AST = ast.parse(MODULES[f"{NAME}.{module}"].read_text(encoding="utf-8"))
    for name in where.split("."):
        node = next(c for c in ast.iter_child_nodes(node) if getattr(c, "name", None) == name)
    assert isinstance(node, ast.FunctionDef)
    return node


@pytest.mark.parametrize(
    "module, where", sorted((m, w) for m, hooks in PRESENTATION_HOOKS.items() for w in hooks)
)
def test_each_presentation_hook_imports_presentation_and_only_delegates(module: str, where: str) -> None:
    """A hook is a docstring, ``from .. import presentation`` and ``return presentation.f(self, ...)``."""
    body = [s for s in _function(module, where).body if not isinstance(s, ast.Expr)]  # docstring
    assert len(body) == 2, f"{module}.{where}: more than the import and the call"
    imp, ret = body
    assert isinstance(imp, ast.ImportFrom) and [a.name for a in imp.names] == ["presentation"]
    assert isinstance(ret, ast.Return) and isinstance(ret.value, ast.Call)
    func = ret.value.func
    assert isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
    assert func.value.id == "presentation", f"{module}.{where} calls {ast.unparse(func)}"
    first = ret.value.args[0]
    assert isinstance(first, ast.Name) and first.id == "self"


def test_every_upward_import_from_results_is_a_listed_hook() -> None:
    """The hooks are all there is: every import of `presentation` below it stands in a listed hook."""
    stray = [
        f"{_short(e.source)}:{e.line} ({e.where or 'module level'}) imports {_short(e.target)}"
        for e in EDGES
        if e.target == PRESENTATION
        and LAYERS[part_of(e.source)] < LAYERS["presentation"]
        and not e.is_presentation_hook
    ]
    assert not stray, "imports of presentation outside a listed hook:\n" + "\n".join(stray)
    listed = {(m, w) for m, hooks in PRESENTATION_HOOKS.items() for w in hooks}
    seen = {(_short(e.source), e.where) for e in EDGES if e.is_presentation_hook}
    assert listed == seen, f"listed hooks that do not import presentation: {sorted(listed - seen)}"


def _outside(name: str) -> bool:
    return not (name.startswith(".") or name.split(".")[0] == NAME)


def _own_or_outside(arg: ast.expr, tree: ast.Module) -> bool:
    """An ``import_module`` argument that names a third-party module or the caller's own submodules.

    A variable passes when every string the module assigns at its top level
    (the list it loops over) names a third-party module.
    """
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return _outside(arg.value)
    if isinstance(arg, ast.Name):
        top = [n for s in tree.body if isinstance(s, (ast.Assign, ast.AnnAssign)) for n in ast.walk(s)]
        return all(_outside(n.value) for n in top if isinstance(n, ast.Constant) and isinstance(n.value, str))
    if isinstance(arg, ast.JoinedStr) and arg.values:  # f"{__name__}.{sub}": a submodule of the caller
        head = arg.values[0]
        return isinstance(head, ast.FormattedValue) and ast.unparse(head.value) == "__name__"
    return False


def _dynamic_imports(path: Path) -> list[int]:
    """Lines that import by name at run time something other than a third-party or own submodule."""
    lines = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if name == "__import__" or (
            name.endswith("import_module") and not (node.args and _own_or_outside(node.args[0], tree))
        ):
            lines.append(node.lineno)
    return lines


def test_no_run_time_registry_reaches_up() -> None:
    """Nothing below the views imports by name at run time, and the package's ``__init__`` wires nothing.

    An import this walk cannot see (``importlib``, ``__import__``), or a lower
    module told at import time which module plays a role above it (the
    provider registry ``results.seams`` was), is an upward edge no test sees.
    """
    dynamic = [
        f"{_short(m)}:{line}"
        for m, path in MODULES.items()
        if part_of(m) and LAYERS[part_of(m)] < LAYERS["views"]
        for line in _dynamic_imports(path)
    ]
    assert not dynamic, "dynamic imports below the views:\n" + "\n".join(dynamic)
    init = ast.parse(MODULES[NAME].read_text(encoding="utf-8"))
    calls = [
        f"__init__:{stmt.lineno}: {ast.unparse(stmt)[:80]}"
        for stmt in init.body
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
    ]
    assert not calls, "the package's __init__ runs calls at import (a registry?):\n" + "\n".join(calls)


def test_capture_is_used_by_the_session_only() -> None:
    users = [
        f"{_short(e.source)}:{e.line} imports {_short(e.target)}"
        for e in EDGES
        if part_of(e.target) == "capture"
        and part_of(e.source) != "capture"
        and LAYERS[part_of(e.source)] < SESSION_LAYER
    ]
    assert not users, "capture used below the session:\n" + "\n".join(users)


#: The parts that may import ``runs`` (the one owner of the run folder): those that keep, open, serve or export runs.
RUNS_USERS = {"runs", "session", "server", "export", "export_menu", "api", "magics", ""}


def test_only_the_session_server_export_and_front_door_import_runs() -> None:
    """Views, results and everything below never reach the run folder, not even for typing; runs sees no views."""
    users = [
        f"{_short(e.source)}:{e.line} imports {_short(e.target)}"
        for e in EDGES
        if part_of(e.target) == "runs" and part_of(e.source) not in RUNS_USERS
    ]
    users += [
        f"{_short(e.source)}:{e.line} imports {_short(e.target)}"
        for e in EDGES
        if part_of(e.source) == "runs" and part_of(e.target) == "views"
    ]
    assert not users, (
        "runs imported by a part that must not know the run folder, or importing views:\n" + "\n".join(users)
    )


def test_views_see_results_only_for_typing() -> None:
    runtime = [
        f"{_short(e.source)}:{e.line} imports {_short(e.target)}"
        for e in EDGES
        if part_of(e.source) == "views" and part_of(e.target) == "results" and not e.typing_only
    ]
    assert not runtime, "views importing results at run time:\n" + "\n".join(runtime)


def test_no_private_name_imported_across_modules() -> None:
    private = [
        f"{_short(e.source)}:{e.line} imports {name} from {_short(e.target)}"
        for e in EDGES
        for name in e.names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert not private, "private names imported across modules:\n" + "\n".join(private)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from .x import y", [("jupyter_torchprof.views.x", ("y",))]),
        ("from ..results.profile import Profile", [("jupyter_torchprof.results.profile", ("Profile",))]),
        ("from . import display", [("jupyter_torchprof.views.display", ())]),
        ("import jupyter_torchprof.trace.files", [("jupyter_torchprof.trace.files", ())]),
        ("import os", []),
    ],
)
def test_resolve_reads_relative_imports_as_python_does(source: str, expected: list) -> None:
    node = ast.parse(source).body[0]
    assert isinstance(node, (ast.Import, ast.ImportFrom))
    got = _resolve("jupyter_torchprof.views.report", PACKAGE / "views" / "report.py", node)
    assert got == expected
