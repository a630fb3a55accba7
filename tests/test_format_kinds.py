"""Every numeric kind of the column catalog reads the same in Python, the sidebar and the bokeh tables.

`tests/data/format_cases/kinds.json` is one table of values per kind
(durations, shares, counts, calls per step, bytes, FLOPs and FLOP/s, plain
numbers, ratios, signed times; unknown, NaN, ±inf, negatives, very large and
very small values, exact ties) with the text each must read as. It is read
here for the Python catalog (`columns.format_cell`: text, static HTML,
report) and, through node, for the JavaScript the bokeh tables' templates run
(`views.tables.kind_js`), and by `labextension/src/__tests__/formatkinds.test.ts`
for the sidebar's `formatCell`. The three are held to the one table.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from jupyter_torchprof import columns
from jupyter_torchprof.columns import Column, format_cell

DOC = json.loads((Path(__file__).parent / "data" / "format_cases" / "kinds.json").read_text("utf-8"))
CASES = DOC["cases"]
NUMERIC_KINDS = [k for k in columns.KINDS if k not in columns.TEXT_KINDS]


def _value(raw: float | str | None) -> float | None:
    return (
        {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(raw, raw) if isinstance(raw, str) else raw
    )


def _column(case: dict) -> Column:
    return Column("x", "x", case["kind"], unit=case.get("unit", ""))


@pytest.mark.parametrize(
    "case", CASES, ids=lambda c: f"{c['kind']}{c.get('unit', '')}-{c['value']}".replace("/", "per")
)
def test_python_catalog_reads_as_the_table_says(case: dict) -> None:
    assert format_cell(_column(case), _value(case["value"])) == case["text"]


def test_the_table_covers_every_numeric_kind_with_the_hard_values() -> None:
    for kind in NUMERIC_KINDS:
        values = [c["value"] for c in CASES if c["kind"] == kind]
        assert {None, "nan", "inf", "-inf"} <= set(values), kind
        numbers = [v for v in values if isinstance(v, (int, float))]
        assert any(v < 0 for v in numbers) and 0 in numbers, kind
        assert max(abs(v) for v in numbers) >= 1e6 or kind == "ratio", kind  # ratios stay small
    units = {c.get("unit") for c in CASES if c["kind"] == "flops"}
    assert units == {"FLOP", "FLOP/s"}
    assert len(CASES) >= 100


def _js_cells(cases: list[dict]) -> list[str]:
    """What each case's bokeh cell reads: the kind's template guard, then its function (views.tables)."""
    from jupyter_torchprof.views.tables import kind_js

    cells = []
    for c in cases:
        functions, call = kind_js(c["kind"], c.get("unit", ""))
        raw = c["value"]
        value = (
            "null" if raw is None else {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(raw, raw)
        )
        # Each cell in a scope of its own, with its kind's functions only, as its template runs it.
        cells.append(
            f"((value) => {{ if (value == null || isNaN(value)) return '\u2013'; {functions} return {call}; }})({value})"
        )
    script = "console.log(JSON.stringify([" + ",\n".join(cells) + "]));"
    out = subprocess.run(["node"], input=script, capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


@pytest.mark.skipif(
    shutil.which("node") is None, reason="node is not installed (scripts/setup.sh installs it)"
)
def test_bokeh_cells_read_as_the_table_says() -> None:
    got = _js_cells(CASES)
    wrong = [
        (c["kind"], c.get("unit", ""), c["value"], c["text"], g) for c, g in zip(CASES, got, strict=True)
    ]
    assert [w for w in wrong if w[3] != w[4]] == []


def test_each_bokeh_template_runs_its_kinds_function() -> None:
    from jupyter_torchprof.views.tables import column_formatter, kind_js

    for kind in NUMERIC_KINDS:
        for unit in ("FLOP", "FLOP/s") if kind == "flops" else ("",):
            _, call = kind_js(kind, unit)
            template = column_formatter(Column("x", "x", kind, unit=unit)).template
            assert f"return {call};" in template, (kind, unit)
