"""Size rules of the house (issue 15): the magic stays glue, functions stay readable.

A function longer than `MAX_FUNCTION_LINES` must say why at its top with a
comment containing ``long because``; ``magics.py`` stays IPython glue.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jupyter_torchprof"
MAX_FUNCTION_LINES = 80
MAX_MAGICS_LINES = 350


def long_functions(root: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            length = node.end_lineno - node.lineno + 1
            head = "\n".join(lines[node.lineno - 1 : node.lineno + 15])
            if length > MAX_FUNCTION_LINES and "long because" not in head:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_over_80_lines_without_saying_why() -> None:
    found = long_functions()
    assert not found, "functions over 80 lines with no 'long because' comment:\n" + "\n".join(found)


def test_the_rule_sees_a_long_function_and_its_reason(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text(f"def f():\n{body}\n\n\ndef g():\n    return 1\n")
    assert long_functions(pkg) == ["pkg/a.py:1 f (81 lines)"]
    (pkg / "a.py").write_text(f"def f():\n    # long because: one table, one pass\n{body}\n")
    assert long_functions(pkg) == []


def test_magics_is_glue() -> None:
    n = len((PACKAGE / "magics.py").read_text(encoding="utf-8").splitlines())
    assert n <= MAX_MAGICS_LINES, f"magics.py has {n} lines; keep it IPython glue (≤ {MAX_MAGICS_LINES})"
