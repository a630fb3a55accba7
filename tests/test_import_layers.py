"""The package's imports, lazy ones included, go one way and never in a circle.

The rule (README, Layout): ``errors/format/columns ← trace ← analysis ←
results ← {views, export, store} ← {session, server} ← magics``, with
``capture`` using only what is below results and used only by the session
layer; views see results only for typing. No module imports another's
private (underscore) name.

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
    "views": 4, "export": 4, "store": 4,
    "session": 5, "server": 5, "cellrunner": 5, "run_options": 5, "unfinished": 5,
    "magics": 6, "api": 6,
    "": 7,  # the package's __init__: the front door that wires the layers
}  # fmt: skip
SESSION_LAYER = LAYERS["session"]


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    typing_only: bool
    names: tuple[str, ...]


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


def _imports(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement, with whether it stands under ``if TYPE_CHECKING:``."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, typing_only))
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit_stmt(stmt, True)
                for stmt in child.orelse:
                    visit_stmt(stmt, typing_only)
            else:
                visit(child, typing_only)

    def visit_stmt(stmt: ast.stmt, typing_only: bool) -> None:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            found.append((stmt, typing_only))
        else:
            visit(stmt, typing_only)

    visit(tree, False)
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
        if sub in MODULES:  # ``from . import seams``: the submodule itself
            out.append((sub, ()))
        else:
            out.append((target, (alias.name,)))
    return out


def edges() -> list[Edge]:
    out = []
    for module, path in MODULES.items():
        for node, typing_only in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            for target, names in _resolve(module, path, node):
                while target not in MODULES and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in MODULES and target != module:
                    out.append(Edge(module, target, node.lineno, typing_only, names))
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
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for e in EDGES:
        if not e.typing_only:
            graph[e.source].add(e.target)
    found = cycles(graph)
    detail = [
        " ↔ ".join(_short(m) for m in c)
        + ": "
        + "; ".join(
            f"{_short(e.source)}:{e.line} → {_short(e.target)}"
            for e in EDGES
            if not e.typing_only and e.source in c and e.target in c
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
        if LAYERS[part_of(e.source)] < LAYERS[part_of(e.target)]
    ]
    assert not upward, "imports that point up the layers:\n" + "\n".join(upward)


def test_capture_is_used_by_the_session_only() -> None:
    users = [
        f"{_short(e.source)}:{e.line} imports {_short(e.target)}"
        for e in EDGES
        if part_of(e.target) == "capture"
        and part_of(e.source) != "capture"
        and LAYERS[part_of(e.source)] < SESSION_LAYER
    ]
    assert not users, "capture used below the session:\n" + "\n".join(users)


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
