"""Checks made on a cell's syntax tree before it runs under the profiler.

* `top_level_await`: an ``await`` (or ``async for`` / ``async with`` / async
  comprehension) that the cell itself would run, not one inside a function
  it defines (``asyncio.run(main())`` of an ``async def`` is fine).
* `profiler_call`: a call that starts a torch profiler
  (``torch.profiler.profile(...)``, ``torch.autograd.profiler.profile``,
  ``emit_nvtx``, ``emit_itt``), which cannot run inside ours; the runtime
  guard in `guards` catches the ones hidden in called functions.
"""

from __future__ import annotations

import ast
import sys
import types
from typing import Any

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def top_level_await(tree: ast.AST) -> ast.AST | None:
    """The first await-like node the cell runs itself, or None.

    The body of a function (or lambda) runs only when it is called, so
    awaits there are not top level; its decorators and default values run
    when it is defined, so they are.
    """
    stack: list[ast.AST] = list(ast.iter_child_nodes(tree))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith)):
            return node
        if isinstance(node, ast.comprehension) and node.is_async:
            return node
        if isinstance(node, _FUNCTIONS):
            stack.extend(_evaluated_at_definition(node))
            continue
        stack.extend(ast.iter_child_nodes(node))
    return None


def _evaluated_at_definition(node: ast.AST) -> list[ast.AST]:
    parts: list[ast.AST] = list(getattr(node, "decorator_list", []))
    args = node.args  # type: ignore[attr-defined]
    parts += list(args.defaults) + [d for d in args.kw_defaults if d is not None]
    return parts


def _profiler_classes() -> tuple[type, ...]:
    """The torch profilers a cell must not start."""
    import torch.autograd.profiler  # noqa: F401 - loaded with torch; named here to be sure
    import torch.profiler  # noqa: F401

    found: list[type] = []
    kineto = sys.modules.get("torch.profiler.profiler")
    if kineto is not None:
        found += [getattr(kineto, n) for n in ("profile", "_KinetoProfile") if hasattr(kineto, n)]
    autograd = sys.modules.get("torch.autograd.profiler")
    if autograd is not None:
        found += [getattr(autograd, n) for n in ("profile", "emit_nvtx", "emit_itt") if hasattr(autograd, n)]
    legacy = sys.modules.get("torch.autograd.profiler_legacy")
    if legacy is not None and hasattr(legacy, "profile"):
        found.append(legacy.profile)
    return tuple(c for c in found if isinstance(c, type))


def _dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything else (calls, subscripts)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _imported_names(tree: ast.AST) -> dict[str, list[str]]:
    """Names the cell's own imports bind, as the dotted path they stand for."""
    names: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name.split(".")
                else:
                    top = alias.name.split(".")[0]
                    names[top] = [top]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = [*node.module.split("."), alias.name]
    return names


_MISSING = object()


def _resolve(path: list[str], imports: dict[str, list[str]], namespace: dict[str, Any]) -> Any:
    """The object a dotted name stands for, without running any user code.

    The first name comes from the cell's imports (through modules already
    loaded) or the notebook's namespace; attributes are followed only on
    modules, whose attribute lookup runs nothing.
    """
    head, rest = path[0], path[1:]
    if head in imports:
        full = imports[head]
        obj = sys.modules.get(full[0], _MISSING)
        rest = full[1:] + rest
    else:
        obj = namespace.get(head, _MISSING)
    for name in rest:
        if not isinstance(obj, types.ModuleType):
            return _MISSING
        # a submodule may be loaded but not yet bound as an attribute
        obj = getattr(obj, name, sys.modules.get(f"{obj.__name__}.{name}", _MISSING))
    return obj


def profiler_call(tree: ast.AST, namespace: dict[str, Any]) -> str | None:
    """The dotted name of the first call that starts a torch profiler, or None.

    ``record_function`` and other annotations are fine: they add ranges to
    our profile. Names are resolved through the cell's imports and the
    notebook namespace, so ``from torch.profiler import profile as p; p()``
    is found too.
    """
    classes = _profiler_classes()
    if not classes:
        return None
    imports = _imported_names(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        path = _dotted(node.func)
        if path is None:
            continue
        obj = _resolve(path, imports, namespace)
        if isinstance(obj, type) and issubclass(obj, classes):
            return ".".join(path)
    return None
