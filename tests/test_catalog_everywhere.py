"""A column added to the catalog shows in every renderer, with no renderer touched.

The package is copied to a temporary folder; in the copy one derived column
is added to the op table (`analysis/ops.py`) and to the catalog
(`columns.OPS`: ``Self CPU ns``, self CPU time in ns, a ``number`` marked
for diffs). A child process imports the copy and renders a real trace with
every renderer: `Profile.table()` (text), the static ``text/html``, the HTML
report (`Profile.export`), the widget's op table (its bokeh model), the diff
(`ProfileDiff.ops`, its bokeh table and the comparison report) and the
server's JSON that the sidebar renders (rows and the catalog specs sent
beside them). Each must show the new column's header and, where it formats
numbers itself, the top row's value as the catalog formats it.

The same for the kernel diff: a kernel-table column (``Total ns``, device
time in ns, marked for diffs with its own diff title ``Device ns``) added to
the copy's `Profile.kernels` and `columns.KERNELS` is compared by
`ProfileDiff.kernels` on a pair of GPU traces and shows, titled from the
catalog, in the bokeh kernel diff table, the comparison report and the
server's compare JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tracefiles import real_trace

ROOT = Path(__file__).resolve().parents[1]
TRACE = "cpu_only.pt.trace.json.gz"
KEY, TITLE = "self_cpu_ns", "Self CPU ns"

#: The new catalog entry, inserted after self CPU time.
NEW_COLUMN = (
    f'    Column("{KEY}", "{TITLE}", "number", 110, "self CPU time in ns", role="self", diff=True),\n'
)
#: Where it goes in the copy of columns.py, and where the op table computes it in the copy of analysis/ops.py.
COLUMN_ANCHOR = '    Column("self_cpu_us", "Self CPU", "time",'
OPS_ANCHOR = '    table["cpu_mean_us"] = table["cpu_total_us"] / table["calls"]\n'
NEW_VALUE = f'    table["{KEY}"] = table["self_cpu_us"] * 1000.0\n'

#: The kernel column: its catalog entry (after the kernel's total time) and where Profile.kernels computes it.
GPU_PAIR = ("diff_pair/control.pt.trace.json.gz", "diff_pair/test.pt.trace.json.gz")
KKEY, KTITLE, KDIFF = "total_ns", "Total ns", "Device ns"
NEW_KERNEL_COLUMN = (
    f'    Column("{KKEY}", "{KTITLE}", "number", 110, "device time in ns", plain="none", diff=True, '
    f'diff_title="{KDIFF}"),\n'
)
KERNEL_ANCHOR = '    Column("total_us", "Total", "time", diff=True, diff_title="Device"),\n'
KERNELS_ANCHOR = "        return self._with_notes(table, notes_mod.KERNELS)\n"
NEW_KERNEL_VALUE = f'        table["{KKEY}"] = table["total_us"] * 1000.0\n'

CHILD = r"""
import json, sys
from pathlib import Path

import jupyter_torchprof as tp
from jupyter_torchprof import columns
from jupyter_torchprof.analysis.compile_stats import CompileStats
from jupyter_torchprof.results.comparison import Comparison
from jupyter_torchprof.server.runs import COMPARE_TABLE_COLUMNS, RUN_TABLE_COLUMNS, frame_json, with_specs
from jupyter_torchprof.views.compare import diff_columns
from jupyter_torchprof.views.report import report_html
from jupyter_torchprof.views.tables import OpTable, make_table

KEY, TITLE = sys.argv[1], sys.argv[2]
a_path, b_path, out = Path(sys.argv[3]), Path(sys.argv[4]), Path(sys.argv[5])
assert Path(tp.__file__).parent.parent == Path(sys.argv[6]), tp.__file__  # the copy, not the tree
spec = {c.key: c for c in columns.OPS}[KEY]
p = tp.load(str(a_path))
top = p.ops.sort_values("self_cpu_us", ascending=False, kind="stable").iloc[0]
value = columns.format_cell(spec, top[KEY])
seen = {"value": value, "raw": float(top[KEY])}

seen["text"] = p.table(width=0, findings=False)
seen["static_html"] = p._repr_mimebundle_(include=["text/plain", "text/html"])["text/html"]
p.export(out / "report.html")
seen["report"] = (out / "report.html").read_text(encoding="utf-8")

table = OpTable(p)
cols = {c.field: c for c in table.model.columns}
seen["widget"] = {
    "title": cols[KEY].title if KEY in cols else None,
    "visible": bool(cols[KEY].visible) if KEY in cols else None,
    "values": [float(v) for v in table.source.data.get(KEY, [])],
    "template": getattr(cols[KEY].formatter, "template", "") if KEY in cols else "",
}
# The JavaScript the widget's cell runs on the top row's value (views.tables.kind_js): run by the parent in node.
from jupyter_torchprof.views.tables import kind_js
seen["widget_js"] = kind_js(spec.kind, spec.unit)

b = tp.load(str(b_path))
d = p.diff(b, labels=("eager", "compiled"))
row = d.ops.iloc[0]
diff_keys = [f"{KEY}_a", f"{KEY}_b", f"{KEY}_delta"]
seen["diff_frame"] = [k for k in diff_keys if k in d.ops.columns]
dcols = {c.key: c for c in columns.diff_ops("eager", "compiled")}
seen["diff_values"] = [columns.format_cell(dcols[k], row[k]) for k in diff_keys if k in dcols and k in d.ops]
model, source = make_table(d.ops, diff_columns("op", False))
seen["diff_widget"] = [[c.field, c.title] for c in model.columns if c.field.startswith(KEY)]
seen["diff_report"] = report_html(Comparison(p, b, CompileStats()))

run = with_specs({"ops": frame_json(p.ops)}, RUN_TABLE_COLUMNS, False)["ops"]
cmp = with_specs({"ops": frame_json(d.ops)}, COMPARE_TABLE_COLUMNS, False)["ops"]
seen["server"] = {
    "specs": [s for s in run["specs"] if s["key"] == KEY],
    "values": [r[run["columns"].index(KEY)] for r in run["rows"]] if KEY in run["columns"] else [],
    "diff_specs": [s for s in cmp["specs"] if s["key"].startswith(KEY)],
}

# The kernel diff of a GPU pair: the kernel column marked for diffs, titled by its diff title.
KKEY = sys.argv[7]
ga, gb = tp.load(sys.argv[8]), tp.load(sys.argv[9])
gd = ga.diff(gb, labels=("eager", "compiled"))
kernels = gd.kernels
kkeys = [f"{KKEY}_a", f"{KKEY}_b", f"{KKEY}_delta"]
seen["kernel_frame"] = [k for k in kkeys if k in kernels.columns]
krow = kernels.iloc[0]
seen["kernel_raw"] = {
    k: float(krow[k]) for k in [*kkeys, "total_us_a", "total_us_b", "total_us_delta"] if k in kernels
}
seen["kernel_sorted"] = bool((kernels["total_us_delta"].abs().diff().dropna() <= 0).all())
kcols = {c.key: c for c in columns.diff_kernels("eager", "compiled")}
seen["kernel_values"] = [columns.format_cell(kcols[k], krow[k]) for k in kkeys if k in kcols and k in kernels]
model, _ = make_table(kernels, diff_columns("kernel", True))
seen["kernel_widget"] = [[c.field, c.title] for c in model.columns]
page = report_html(Comparison(ga, gb, CompileStats()))
start = page.find('<section id="diff-kernels-section">')
seen["kernel_report"] = page[start : page.index("</section>", start)] if start >= 0 else ""
kc = with_specs({"kernels": frame_json(kernels)}, COMPARE_TABLE_COLUMNS, True)["kernels"]
seen["kernel_server"] = {
    "specs": [[s["key"], s["title"], s["kind"]] for s in kc["specs"]],
    "top": [kc["rows"][0][kc["columns"].index(k)] for k in kkeys if k in kc["columns"]],
}
(out / "seen.json").write_text(json.dumps(seen), encoding="utf-8")
"""


def _patched_copy(tmp: Path) -> Path:
    """A copy of the package with the new column in the op table and the catalog."""
    pkg = tmp / "pkg" / "jupyter_torchprof"
    shutil.copytree(
        ROOT / "jupyter_torchprof", pkg, ignore=shutil.ignore_patterns("__pycache__", "labextension")
    )
    for rel, anchor, insert, after in (
        ("columns.py", COLUMN_ANCHOR, NEW_COLUMN, False),
        ("analysis/ops.py", OPS_ANCHOR, NEW_VALUE, True),
        ("columns.py", KERNEL_ANCHOR, NEW_KERNEL_COLUMN, True),
        ("results/profile.py", KERNELS_ANCHOR, NEW_KERNEL_VALUE, False),
    ):
        path = pkg / rel
        text = path.read_text(encoding="utf-8")
        assert text.count(anchor) == 1, f"{rel}: the anchor {anchor!r} moved; update this test"
        text = text.replace(anchor, anchor + insert if after else insert + anchor)
        path.write_text(text, encoding="utf-8")
    return pkg.parent


@pytest.fixture(scope="module")
def seen(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("catalog_everywhere")
    root = _patched_copy(tmp)
    # Copies of the trace: no table cache of the real tree's is read or written beside them.
    a = tmp / "a" / TRACE
    b = tmp / "b" / TRACE
    for target in (a, b):
        target.parent.mkdir()
        shutil.copyfile(real_trace(TRACE), target)
    pair = [tmp / "gpu" / Path(name).name for name in GPU_PAIR]
    for name, target in zip(GPU_PAIR, pair, strict=True):
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(real_trace(name), target)
    out = tmp / "out"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(root), "TORCHPROF_RUN_DIR": str(tmp / "runs")}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, KEY, TITLE, str(a), str(b), str(out), str(root), KKEY, *map(str, pair)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads((out / "seen.json").read_text(encoding="utf-8"))


def _header_line(text: str) -> str:
    # The op table's header: the line after the first rule of dashes.
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("---"))
    return lines[first + 1]


def test_the_value_is_a_distinctive_number(seen):
    # Thousands separators and one decimal: no other cell of this trace reads like it.
    assert seen["raw"] > 1000 and "," in seen["value"] and seen["value"].endswith(".0")


def test_profile_table_text_shows_the_new_column(seen):
    assert TITLE in _header_line(seen["text"])
    assert seen["value"] in seen["text"]


def test_static_html_shows_the_new_column(seen):
    page = seen["static_html"]
    assert f">{TITLE}</th>" in page
    assert f"<td>{seen['value']}</td>" in page


def test_html_report_shows_the_new_column(seen):
    page = seen["report"]
    assert f'<button type="button">{TITLE}</button>' in page
    assert f">{seen['value']}</td>" in page


def test_widget_table_has_the_new_column(seen):
    w = seen["widget"]
    assert w["title"] == TITLE and w["visible"]  # a self column: the default mode shows it
    assert seen["raw"] in w["values"]
    functions, call = seen["widget_js"]
    assert f"return {call};" in w["template"]  # the catalog kind's ("number") JavaScript
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the cell's text is not computed")
    script = f"const value = {seen['raw']!r};\n{functions}\nconsole.log({call});"
    out = subprocess.run(["node"], input=script, capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == seen["value"]  # the cell reads as the text table's


def test_diff_compares_the_new_column(seen):
    assert seen["diff_frame"] == [f"{KEY}_a", f"{KEY}_b", f"{KEY}_delta"]
    titles = dict(seen["diff_widget"])
    assert titles == {
        f"{KEY}_a": f"{TITLE} eager",
        f"{KEY}_b": f"{TITLE} compiled",
        f"{KEY}_delta": f"Δ {TITLE[0].lower()}{TITLE[1:]}",
    }
    page = seen["diff_report"]
    assert f"{TITLE} eager</button>" in page and f"{TITLE} compiled</button>" in page
    assert all(f">{v}</td>" in page for v in seen["diff_values"][:2])


def test_server_json_for_the_sidebar_has_the_new_column(seen):
    s = seen["server"]
    assert [(x["title"], x["kind"]) for x in s["specs"]] == [(TITLE, "number")]
    assert seen["raw"] in s["values"]
    assert {x["title"] for x in s["diff_specs"]} == {
        f"{TITLE} A",
        f"{TITLE} B",
        f"Δ {TITLE[0].lower()}{TITLE[1:]}",
    }


def _delta(title: str) -> str:
    return f"Δ {title[0].lower()}{title[1:]}"


def test_kernel_diff_compares_the_new_kernel_column(seen):
    assert seen["kernel_frame"] == [f"{KKEY}_a", f"{KKEY}_b", f"{KKEY}_delta"]
    raw = seen["kernel_raw"]
    for side in ("a", "b", "delta"):
        assert raw[f"{KKEY}_{side}"] == pytest.approx(1000.0 * raw[f"total_us_{side}"])
    assert raw[f"{KKEY}_a"] > 1000 and raw[f"{KKEY}_b"] > 1000  # the top kernel ran on both sides
    # Still sorted by the device time's change (columns.KERNEL_DIFF_SORT), not by the last column compared.
    assert seen["kernel_sorted"]


def test_kernel_diff_table_titles_come_from_the_catalog(seen):
    titles = dict(seen["kernel_widget"])
    expected = {
        f"{KKEY}_a": f"{KDIFF} eager",
        f"{KKEY}_b": f"{KDIFF} compiled",
        f"{KKEY}_delta": _delta(KDIFF),
        "total_us_a": "Device eager",
        "total_us_b": "Device compiled",
        "total_us_delta": "Δ device",
        "calls_a": "Calls eager",
        "calls_b": "Calls compiled",
    }
    assert {k: titles.get(k) for k in expected} == expected


def test_comparison_report_shows_the_new_kernel_column(seen):
    section = seen["kernel_report"]
    assert section, "the comparison report has no kernel diff"
    for title in (f"{KDIFF} eager", f"{KDIFF} compiled", _delta(KDIFF)):
        assert f"{title}</button>" in section
    assert len(seen["kernel_values"]) == 3
    assert all(f">{v}</td>" in section for v in seen["kernel_values"])


def test_server_compare_json_has_the_new_kernel_column(seen):
    s = seen["kernel_server"]
    specs = {key: (title, kind) for key, title, kind in s["specs"]}
    assert specs[f"{KKEY}_a"] == (f"{KDIFF} A", "number")
    assert specs[f"{KKEY}_b"] == (f"{KDIFF} B", "number")
    assert specs[f"{KKEY}_delta"] == (_delta(KDIFF), "number")
    assert specs["total_us_delta"] == ("Δ device", "delta")
    raw = seen["kernel_raw"]
    assert s["top"] == pytest.approx([raw[f"{KKEY}_a"], raw[f"{KKEY}_b"], raw[f"{KKEY}_delta"]])
