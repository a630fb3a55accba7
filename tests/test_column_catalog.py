"""One column catalog: every renderer shows the titles, tooltips and kinds of `jupyter_torchprof.columns`.

Each table (ops, kernels, steps, streams, memory, the diffs) is rendered from
real traces (tests/tracefiles.py) or a real ``%%torchprof --memory`` capture
by each renderer that shows it: the text table, the static HTML, the report,
the bokeh tables and the server's JSON, which the sidebar renders as sent
(the jest test ``tablesection.test.ts`` checks that side). Titles are read
back from what each renderer produced (the text's header line, the HTML's
``<th>``, bokeh's ``TableColumn``, the JSON specs), never from our own lists.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from shellruns import shell_runs
from tracefiles import raw_events, real_trace

from jupyter_torchprof import columns, load
from jupyter_torchprof.columns import STATUS_LABELS

pytest_plugins = ("pytest_jupyter.jupyter_server",)

GPU = "a100_nccl_rank0.pt.trace.json.gz"
CPU = "cpu_only.pt.trace.json.gz"
#: The kernel columns the sidebar lacked before it took the server's specs.
ONCE_MISSING = ("median_us", "grid", "block", "launch_delay_us")


def titles_of(cols) -> dict[str, str]:
    return {c.key: c.title for c in cols}


@pytest.fixture(scope="module")
def gpu():
    return load(str(real_trace(GPU)))


@pytest.fixture(scope="module")
def cpu():
    return load(str(real_trace(CPU)))


class _Tables(HTMLParser):
    """Each ``<table>``'s id and header cells (text and ``title``), in order."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict] = []
        self._th: dict | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.tables.append({"id": a.get("id"), "heads": []})
        elif tag == "th" and self.tables:
            self._th = {"text": "", "tip": a.get("title") or ""}

    def handle_endtag(self, tag):
        if tag == "th" and self._th is not None:
            self.tables[-1]["heads"].append(self._th)
            self._th = None

    def handle_data(self, data):
        if self._th is not None:
            self._th["text"] += data


def html_tables(page: str) -> list[dict]:
    parser = _Tables()
    parser.feed(page)
    return parser.tables


def text_headers(text: str) -> list[str]:
    """The header line of a fixed-width table (cells are two or more spaces apart)."""
    return re.split(r"\s{2,}", text.splitlines()[1].strip())


# --------------------------------------------------------------------- text


@pytest.mark.parametrize("name", [GPU, CPU])
def test_text_tables_show_the_catalog_titles(name):
    from jupyter_torchprof.views.text import (
        TEXT_KERNEL_EXTRA_KEYS,
        TEXT_KERNEL_KEYS,
        TEXT_OP_EXTRA_KEYS,
        TEXT_OP_KEYS,
        kernel_table_text,
        op_table_text,
    )

    p = load(str(real_trace(name)))
    device = bool(p.summary["device_traced"])
    heads = text_headers(op_table_text(p.ops, device, row_limit=5))
    catalog = titles_of(columns.OPS)
    assert heads[0] == catalog["name"]
    # every title shown is the catalog's, in the text table's order
    wanted = [catalog[k] for k in TEXT_OP_KEYS + TEXT_OP_EXTRA_KEYS if k in p.ops.columns]
    assert heads[1:] == [t for t in wanted if t in heads[1:]]
    assert "Calls" in heads and "Self CPU" in heads and "# Calls" not in heads
    assert ("Self device" in heads) == device and "Self Device" not in heads
    if device:
        kheads = text_headers(kernel_table_text(p.kernels, row_limit=5))
        ktitles = titles_of(columns.KERNELS)
        # The fixed columns, then the notes where a row shown has one.
        assert kheads[: len(TEXT_KERNEL_KEYS)] == [ktitles[k] for k in TEXT_KERNEL_KEYS]
        assert kheads[len(TEXT_KERNEL_KEYS) :] == [
            ktitles[k] for k in TEXT_KERNEL_EXTRA_KEYS if ktitles[k] in kheads
        ]
        assert "Share" in kheads and "%" not in kheads


# --------------------------------------------------------------------- static HTML


def test_static_html_shows_the_catalog_titles(gpu):
    from jupyter_torchprof.views.html import HTML_KERNEL_KEYS, profile_html
    from jupyter_torchprof.views.text import op_table_text

    page = profile_html(gpu.summary, gpu.ops, gpu.kernels, [])
    ops, kernels = html_tables(page)
    text = text_headers(op_table_text(gpu.ops, True, 20))  # the same rows as the static view
    assert [h["text"] for h in ops["heads"]] == text  # the static view and the terminal agree
    tips = {c.title: c.tip for c in columns.OPS}
    assert [h["tip"] for h in ops["heads"]] == [tips[t] for t in text]
    assert set(text) <= set(titles_of(columns.OPS).values())
    kheads = [h["text"] for h in kernels["heads"]]
    assert kheads[: len(HTML_KERNEL_KEYS)] == [titles_of(columns.KERNELS)[k] for k in HTML_KERNEL_KEYS]
    assert kheads[len(HTML_KERNEL_KEYS) :] in ([], ["Note"])  # the notes where a row shown has one


def test_rank_table_shows_the_catalog_titles(tmp_path):
    from jupyter_torchprof.views.display import rankset_bundle

    folder = tmp_path / "job"
    folder.mkdir()
    for name in (GPU, "diff_pair/test.pt.trace.json.gz", "diff_pair/control.pt.trace.json.gz"):
        src = real_trace(name)
        (folder / f"{src.parent.name}_{src.name}").symlink_to(src)
    bundle = rankset_bundle(load(str(folder)))
    wanted = [c.title for c in columns.RANKS]
    assert text_headers(bundle["text/plain"].split("\n", 1)[1]) == wanted
    (table,) = html_tables(bundle["text/html"])
    assert [h["text"] for h in table["heads"]] == wanted


# --------------------------------------------------------------------- report


def _expected_report(frame, catalog, device):
    """The catalog's (title, tip) of the columns a report table of ``frame`` shows, judged here."""
    out = []
    for c in catalog:
        if c.key not in frame.columns or (c.device and not device):
            continue
        values = frame[c.key]
        if c.when == "nonzero" and not (values.fillna(0) != 0).any():
            continue
        if c.when == "any" and not values.replace("", None).notna().any():
            continue
        out.append((c.title, c.tip))
    return out


def test_report_tables_show_the_catalog_titles_and_tips(gpu):
    from jupyter_torchprof.views.report import REPORT_OP_KEYS, report_html

    tables = {t["id"]: t["heads"] for t in html_tables(report_html(gpu))}
    shown = {k: [(h["text"], h["tip"]) for h in heads] for k, heads in tables.items()}
    ops_catalog = [c for c in columns.OPS if c.key in REPORT_OP_KEYS]
    assert shown["ops"] == _expected_report(gpu.ops, ops_catalog, True)
    assert shown["kernels"] == _expected_report(gpu.kernels, columns.KERNELS, True)
    assert shown["steps"] == _expected_report(gpu.steps, columns.STEPS, True)
    assert shown["streams"] == _expected_report(gpu.streams, columns.STREAMS, True)
    kernel_titles = [t for t, _ in shown["kernels"]]
    assert {"Median", "Grid", "Block", "Launch delay", "Share"} <= set(kernel_titles)


def test_report_of_a_cpu_trace_has_no_device_titles(cpu):
    from jupyter_torchprof.views.report import report_html

    tables = {t["id"]: [h["text"] for h in t["heads"]] for t in html_tables(report_html(cpu))}
    device_titles = {c.title for c in (*columns.OPS, *columns.STEPS) if c.device}
    assert tables["ops"] and not device_titles & set(tables["ops"])
    assert tables["steps"] == ["Step", "Wall", "CPU busy"]


class _StatusCells(HTMLParser):
    """The text of each table's second column (a diff's status), by table id."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[str, list[str]] = {}
        self._table = None
        self._col = -1
        self._in = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = dict(attrs).get("id")
            self.cells[self._table] = []
        elif tag == "tr":
            self._col = -1
        elif tag == "td":
            self._col += 1
            self._in = self._col == 1
            if self._in:
                self.cells[self._table].append("")

    def handle_endtag(self, tag):
        if tag == "td":
            self._in = False

    def handle_data(self, data):
        if self._in:
            self.cells[self._table][-1] += data


def test_comparison_report_diff_tables_show_the_catalog_titles_and_gone_new():
    from jupyter_torchprof.analysis.compile_stats import CompileStats
    from jupyter_torchprof.results.comparison import Comparison
    from jupyter_torchprof.views.report import REPORT_DIFF_OP_KEYS, report_html

    eager = load(str(real_trace("diff_pair/control.pt.trace.json.gz")))
    compiled = load(str(real_trace("diff_pair/test.pt.trace.json.gz")))
    comparison = Comparison(eager, compiled, CompileStats())
    page = report_html(comparison)
    tables = {t["id"]: [h["text"] for h in t["heads"]] for t in html_tables(page)}
    ops = [c for c in columns.diff_ops("eager", "compiled") if c.key in REPORT_DIFF_OP_KEYS]
    assert tables["diff-ops"] == [c.title for c in ops if c.key in comparison.diff_ops.columns]
    assert tables["diff-kernels"] == [c.title for c in columns.diff_kernels("eager", "compiled")]
    status = _StatusCells()
    status.feed(page)
    for key, frame in (("diff-ops", comparison.diff_ops), ("diff-kernels", comparison.diff_kernels)):
        assert Counter(status.cells[key]) == Counter(STATUS_LABELS[s] for s in frame["status"])
    assert {"gone", "new"} & set(status.cells["diff-kernels"])  # the pair's kernels differ


# --------------------------------------------------------------------- bokeh tables


def _bokeh_titles(model) -> dict[str, str]:
    return {c.field: c.title.removesuffix(" /step") for c in model.columns}


@pytest.mark.parametrize("per_step", [False, True])
def test_bokeh_op_and_kernel_tables_show_the_catalog_titles(gpu, per_step):
    from jupyter_torchprof.views.tables import KernelTable, OpTable

    ops = OpTable(gpu, per_step=per_step)
    shown = _bokeh_titles(ops.model)
    catalog = titles_of(columns.OPS)
    assert shown and all(catalog[k] == t for k, t in shown.items())
    assert {"name", "calls", "self_cpu_us", "self_device_us", "device_total_pct"} <= set(shown)
    kernels = KernelTable(gpu, per_step=per_step)
    shown = _bokeh_titles(kernels.model)
    assert shown == {c.key: c.title for c in columns.KERNELS if c.key in shown}
    assert set(ONCE_MISSING) | {"pct"} <= set(shown) and shown["pct"] == "Share"
    if per_step:
        marked = [c.title for c in kernels.model.columns if c.title.endswith(" /step")]
        assert "Total /step" in marked


def test_bokeh_diff_table_shows_the_catalog_titles_and_gone_new(tmp_path):
    from jupyter_torchprof.views.compare import diff_columns
    from jupyter_torchprof.views.tables import make_table

    a = load(str(real_trace("diff_pair/control.pt.trace.json.gz")))
    b = load(str(real_trace("diff_pair/test.pt.trace.json.gz")))
    d = a.diff(b, labels=("eager", "compiled"))
    for level, frame, catalog in (
        ("op", d.ops, columns.diff_ops("eager", "compiled")),
        ("kernel", d.kernels, columns.diff_kernels("eager", "compiled")),
    ):
        table, source = make_table(frame, diff_columns(level, True))
        assert _bokeh_titles(table) == titles_of(catalog)
        # the status cells read as the catalog's labels, one per row of the diff
        assert Counter(source.data["status"]) == Counter(STATUS_LABELS[s] for s in frame["status"])


def test_memory_view_shows_the_catalog_titles(shell):
    from bokeh.models import DataTable

    from jupyter_torchprof.views.memory import build_memory

    shell.run_cell("import torch\nkeep = [torch.randn(256, 256) for _ in range(4)]")
    shell.run_cell_magic(
        "torchprof",
        "--memory --steps 2 -q -o r",
        "keep.pop()\ny = torch.randn(64, 64) @ torch.randn(64, 64)\n",
    )
    layout = build_memory(shell.user_ns["r"])
    table = next(m for m in layout.references() if isinstance(m, DataTable))
    shown = _bokeh_titles(table)
    assert shown == {c.key: c.title for c in columns.MEMORY_OPS if c.key in shown}
    assert {"name", "calls", "self_cpu_mem_bytes"} <= set(shown)


# --------------------------------------------------------------------- server JSON


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    root = tmp_path_factory.mktemp("catalog") / "runs"
    shell_runs(
        root,
        [
            f"%torchprof --load {real_trace(GPU)} -q --name gpu",
            f"%torchprof --load {real_trace('diff_pair/control.pt.trace.json.gz')} -q --name control",
            f"%torchprof --load {real_trace('diff_pair/test.pt.trace.json.gz')} -q --name test",
            "%%torchprof --memory --steps 2 -q --name memory\nkeep.pop()\ny = torch.randn(64, 64) @ torch.randn(64, 64)",
        ],
        "import torch\nkeep = [torch.randn(128, 128) for _ in range(4)]",
    )
    return root


@pytest.fixture
def run_root(tmp_path, monkeypatch, stored):
    root = tmp_path / "store" / "runs"
    shutil.copytree(stored, root)
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(root))
    return root


async def _get(jp_fetch, *parts, **params):
    resp = await jp_fetch("jupyter-torchprof", *parts, params=params or None)
    assert resp.code == 200
    return json.loads(resp.body)


def _check_specs(table: dict, catalog) -> list[str]:
    """Every spec the server sent is the catalog's column of that key, for a column it sent."""
    by_key = {c.key: c for c in catalog}
    for spec in table["specs"]:
        c = by_key[spec["key"]]
        assert spec["key"] in table["columns"]
        assert (spec["title"], spec["kind"], spec["tip"]) == (c.title, c.kind, c.tip), spec
        assert spec["unit"] == (c.unit or columns.KIND_UNITS.get(c.kind, ""))
    keys = [s["key"] for s in table["specs"]]
    assert keys == [c.key for c in catalog if c.key in keys]  # in the catalog's order
    return keys


async def test_server_sends_each_table_with_the_catalog_specs(jp_fetch, store, run_root):
    ids = {r["name"]: r["id"] for r in store.list()}
    data = await _get(jp_fetch, "runs", ids["gpu"], "tables")
    ops = _check_specs(data["ops"], columns.OPS)
    kernels = _check_specs(data["kernels"], columns.KERNELS)
    steps = _check_specs(data["steps"], columns.STEPS)
    assert ops[0] == "name" and {"calls", "self_cpu_us", "self_device_us"} <= set(ops)
    assert set(ONCE_MISSING) <= set(kernels)
    # the columns the trace file holds for its kernels are the columns sent
    raw = [e for e in raw_events(real_trace(GPU)) if e.get("cat") == "kernel" and e.get("ph") == "X"]
    assert all("grid" in e.get("args", {}) for e in raw) and "grid" in kernels
    assert "device_busy_us" in steps
    title_key = next(s for s in data["kernels"]["specs"] if s["key"] == "short_name")["title_key"]
    assert title_key == "name" and "name" in data["kernels"]["columns"]

    mem = await _get(jp_fetch, "runs", ids["memory"], "tables")
    assert _check_specs(mem["memory"], columns.MEMORY_PEAKS)[:2] == ["device", "peak_bytes"]
    cpu_ops = _check_specs(mem["ops"], columns.OPS)
    assert "self_cpu_mem_bytes" in cpu_ops and not {"self_device_us", "device_total_us"} & set(cpu_ops)


async def test_server_sends_the_diff_tables_with_the_catalog_specs(jp_fetch, store, run_root):
    ids = {r["name"]: r["id"] for r in store.list()}
    data = await _get(jp_fetch, "compare", a=ids["control"], b=ids["test"])
    _check_specs(data["headline"], columns.HEADLINE)
    ops = _check_specs(data["ops"], columns.diff_ops("A", "B"))
    _check_specs(data["kernels"], columns.diff_kernels("A", "B"))
    assert "self_device_us_delta" in ops
    status = next(s for s in data["ops"]["specs"] if s["key"] == "status")
    assert status["labels"] == STATUS_LABELS and status["labels"]["only_a"] == "gone"


# --------------------------------------------------------------------- no second catalog


def test_no_renderer_keeps_titles_of_its_own():
    """The catalog's distinctive titles are written in columns.py only (Python and TypeScript)."""
    root = Path(__file__).resolve().parents[1]
    distinctive = [
        "Self device",
        "Self CPU %",
        "Launch delay",
        "Occupancy %",
        "Peak allocated",
        "Idle in window",
    ]
    files = [
        *(root / "jupyter_torchprof" / "views").glob("*.py"),
        root / "jupyter_torchprof" / "server" / "runs.py",
    ]
    files += [p for p in (root / "labextension" / "src").glob("*.ts")]
    for path in files:
        text = path.read_text(encoding="utf-8")
        for title in distinctive:
            for quote in ('"', "'"):
                assert f"{quote}{title}{quote}" not in text, (path.name, title)
