"""The FLOPs format, one table of cases for Python and TypeScript.

`tests/data/format_cases/flops.json` is read here for `format.fmt_flops` and
by `labextension/src/__tests__/format.test.ts` for the sidebar's `fmtFlops`,
so the notebook view and the sidebar cannot drift apart on a FLOPs cell.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from jupyter_torchprof.format import fmt_flops

CASES = json.loads((Path(__file__).parent / "data" / "format_cases" / "flops.json").read_text("utf-8"))[
    "cases"
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['value']}-{c['unit']}")
def test_fmt_flops_reads_as_the_shared_table_says(case: dict) -> None:
    value = math.nan if case["value"] is None else case["value"]
    assert fmt_flops(value, case["unit"]) == case["text"]


def test_the_shared_table_covers_every_prefix_both_units_and_the_missing_mark() -> None:
    texts = [c["text"] for c in CASES]
    for prefix in ("k", "M", "G", "T", "P"):
        assert any(t.endswith(f" {prefix}FLOP") for t in texts)
        assert any(t.endswith(f" {prefix}FLOP/s") for t in texts)
    assert "–" in texts
