"""The bokeh tables' layout: names give way, the sorted and time columns stay on screen.

`views.tables.FIT_COLUMNS_JS` is run by node on a stand-in of a bokeh
table (columns with widths, one view of a given width), as the browser
would run it; the column order and widths come from the real op, kernel
and diff tables. tests/browser/test_columns_on_screen.py checks the same
in Chromium, in JupyterLab, at 1000, 1400 and 1920 px.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pandas as pd
import pytest
from tracefiles import real_trace

from jupyter_torchprof import load
from jupyter_torchprof.views.compare import diff_columns
from jupyter_torchprof.views.tables import (
    FIT_COLUMNS_JS,
    NAME_FLOOR_PX,
    KernelTable,
    OpTable,
    header_lines,
    make_table,
    screen_order,
)

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

# A bokeh table as FIT_COLUMNS_JS sees it; prints the visible columns' widths.
_HARNESS = """
const spec = %s;
const table = {tags: spec.tags, columns: spec.columns.map((c) => ({...c}))};
const view = {model: table, el: {getBoundingClientRect: () => ({width: spec.width})}};
globalThis.window = {Bokeh: {index: [view]}};
globalThis.ResizeObserver = class { observe() {} };
globalThis.requestAnimationFrame = () => 0;
const cb_obj = table;
(function () { %s })();
console.log(JSON.stringify(table.columns.filter((c) => c.visible).map((c) => [c.field, c.width])));
"""


def _fit(model, width: int) -> list[tuple[str, int]]:
    spec = {
        "width": width,
        "tags": model.tags,
        "columns": [{"field": c.field, "width": c.width, "visible": c.visible} for c in model.columns],
    }
    code = _HARNESS % (json.dumps(spec), FIT_COLUMNS_JS)
    out = subprocess.run(["node", "-e", code], capture_output=True, text=True, check=True, timeout=60)
    return [tuple(x) for x in json.loads(out.stdout)]


def _right_edge(fitted: list[tuple[str, int]], field: str) -> int:
    edge = 0
    for f, w in fitted:
        edge += w
        if f == field:
            return edge
    raise AssertionError(f"{field} is not shown")


@pytest.fixture(scope="module")
def a100():
    return load(str(real_trace("a100_nccl_rank0.pt.trace.json.gz")))


@pytest.mark.parametrize("width", [536, 800, 1100, 1700])
def test_op_table_keeps_self_device_and_times_on_screen(a100, width):
    table = OpTable(a100)
    fitted = _fit(table.model, width)
    assert fitted[0][0] == "name" and fitted[1][0] == "self_device_us"  # the sorted column next to the names
    for field in ("self_device_us", "self_cpu_us"):
        assert _right_edge(fitted, field) <= width - 18, (field, fitted)
    assert fitted[0][1] >= NAME_FLOOR_PX
    total = sum(w for _, w in fitted)
    if width >= 1100:
        # Room for every column: they all show and the names take the rest.
        assert total == width - 18, fitted


def test_names_give_way_before_numbers_scroll_off(a100):
    table = OpTable(a100)
    wide = dict(_fit(table.model, 1700))
    narrow = dict(_fit(table.model, 700))
    assert narrow["name"] < wide["name"]
    # The numbers keep their widths; the text columns (the name, the notes) give way.
    text = {c.field for c in table.columns if not c.numeric}
    assert {k: v for k, v in narrow.items() if k not in text} == {
        k: v for k, v in wide.items() if k not in text
    }
    # Total mode: the sorted column is the device total.
    table.update(mode="total")
    fitted = _fit(table.model, 536)
    assert fitted[1][0] == "device_total_us"
    for field in ("device_total_us", "cpu_total_us", "cpu_mean_us", "device_mean_us"):
        assert _right_edge(fitted, field) <= 536 - 18, (field, fitted)


@pytest.mark.parametrize("width", [536, 1000, 1600])
def test_kernel_table_keeps_its_times_on_screen(a100, width):
    table = KernelTable(a100)
    fitted = _fit(table.model, width)
    times = [c.field for c in table.columns if c.kind == "time"]
    assert [f for f, _ in fitted[1 : 1 + len(times)]] == times  # the times right after the names
    assert _right_edge(fitted, times[-1]) <= width - 18, fitted


def test_diff_table_keeps_every_time_and_delta_on_screen():
    cols = screen_order(diff_columns("op", device=False))
    frame = pd.DataFrame({c.field: [] for c in cols})
    model, _ = make_table(frame, cols, wrap_headers=True)
    times = [c.field for c in cols if c.kind in ("time", "delta")]
    assert len(times) == 6
    # 536 px: the table's width in a 1000 px JupyterLab with the file browser open.
    fitted = _fit(model, 536)
    assert _right_edge(fitted, times[-1]) <= 536 - 18, fitted
    # Wrapped headers: "Self CPU" over "compiled", on up to three lines.
    assert header_lines("Self CPU compiled", 2) == ["Self CPU", "compiled"]
    assert header_lines("CPU total compiled", 3) == ["CPU", "total", "compiled"]
    assert header_lines("Δ CPU total", 1) == ["Δ CPU total"]
