"""The standalone HTML report and the view's Export control, checked from outside.

The report is read back with the standard library's HTML parser (not with
our code), and its numbers are compared with sums taken straight from the
trace file (`tracefiles.raw_events`).
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

import pytest
from tracefiles import key_averages_calls, raw_events, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.export import CHROME_TRACING_LIMIT, ExportError

EVIL = "<img src=x onerror=alert(1)>"
EVIL_SCRIPT = "</script><script>alert(1)</script>"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


class Page(HTMLParser):
    """Tables (cells with their data-v and title), tags, scripts and links of a page."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.tables: dict[str, dict] = {}
        self.scripts: list[str] = []
        self.urls: list[str] = []
        self.meta: list[dict] = []
        self.ids: list[str] = []
        self._table: dict | None = None
        self._cell: dict | None = None
        self._row: list | None = None
        self._in_head = False
        self._script: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if "id" in a:
            self.ids.append(a["id"])
        for key in ("src", "href", "action", "data", "poster"):
            if a.get(key):
                self.urls.append(a[key])
        if tag == "meta":
            self.meta.append(a)
        if tag == "script":
            self._script = []
        if tag == "table" and "tp-sortable" in (a.get("class") or ""):
            self._table = {"headers": [], "rows": []}
            self.tables[a["id"]] = self._table
        elif self._table is not None:
            if tag == "thead":
                self._in_head = True
            elif tag == "tbody":
                self._in_head = False
            elif tag == "tr" and not self._in_head:
                self._row = []
            elif tag in ("th", "td"):
                self._cell = {"text": "", "v": a.get("data-v"), "title": a.get("title")}

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.scripts.append("".join(self._script))
            self._script = None
        if self._table is None:
            return
        if tag in ("th", "td") and self._cell is not None:
            if self._in_head:
                self._table["headers"].append(self._cell["text"].strip())
            elif self._row is not None:
                self._row.append(self._cell)
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self._table["rows"].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._script is not None:
            self._script.append(data)
        if self._cell is not None:
            self._cell["text"] += data

    def column(self, table: str, header: str, key: str = "v") -> list:
        t = self.tables[table]
        i = t["headers"].index(header)
        return [row[i][key] for row in t["rows"]]


def _raw_device_totals(path: Path) -> tuple[dict[str, float], dict[str, int]]:
    totals: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for e in raw_events(path):
        if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS:
            totals[e["name"]] += float(e.get("dur", 0))
            calls[e["name"]] += 1
    return totals, calls


@pytest.fixture(scope="module")
def a100_report(tmp_path_factory):
    path = real_trace("a100_nccl_rank0.pt.trace.json.gz")
    out = tmp_path_factory.mktemp("report") / "a100.html"
    load(str(path)).export(out)
    return path, out, Page(out.read_text(encoding="utf-8"))


def test_report_kernel_table_matches_the_trace(a100_report):
    path, _, page = a100_report
    totals, calls = _raw_device_totals(path)
    # Every kernel, copy and memset name is a row; the full name is the row's tooltip.
    names = page.column("kernels", "Kernel", "title")
    assert sorted(names) == sorted(totals)
    report_total = dict(zip(names, map(float, page.column("kernels", "Total")), strict=True))
    report_calls = dict(zip(names, map(float, page.column("kernels", "Calls")), strict=True))
    for name in totals:
        assert report_total[name] == pytest.approx(totals[name], rel=1e-9, abs=1e-6), name
        assert report_calls[name] == calls[name], name
    # Rows come largest first, as the header marks.
    shown = [float(v) for v in page.column("kernels", "Total")]
    assert shown == sorted(shown, reverse=True)
    top = max(totals, key=totals.get)
    assert names[0] == top
    # The share column is the row's share of all device time.
    share = float(page.column("kernels", "Share")[0])
    assert share == pytest.approx(100 * totals[top] / sum(totals.values()), rel=1e-6)


def test_report_op_and_step_tables_match_the_trace(a100_report):
    path, _, page = a100_report
    events = raw_events(path)
    # Calls as key_averages() counts them (a lone same-name child is part of
    # its parent: aten::div -> aten::div here), from the raw file in plain Python.
    op_calls = key_averages_calls(events)
    names = page.column("ops", "Name", "title")
    calls = dict(zip(names, map(float, page.column("ops", "Calls")), strict=True))
    cpu_only = [n for n in op_calls if n in calls]
    assert len(cpu_only) > 20
    for name in cpu_only:
        assert calls[name] == op_calls[name], name
    # Step wall times are the ProfilerStep ranges' durations.
    steps = sorted(
        (int(e["name"].split("#")[1]), float(e["dur"]))
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") == "user_annotation"
        and re.fullmatch(r"ProfilerStep#\d+", e["name"])
    )
    assert [float(v) for v in page.column("steps", "Step")] == [s for s, _ in steps]
    assert [float(v) for v in page.column("steps", "Wall")] == pytest.approx([d for _, d in steps], rel=1e-9)


def test_report_is_one_offline_file(a100_report):
    _, out, page = a100_report
    # No external resource of any kind: every link is an in-page anchor.
    assert [u for u in page.urls if not u.startswith("#")] == []
    assert all(u[1:] in page.ids for u in page.urls)
    csp = [m for m in page.meta if m.get("http-equiv", "").lower() == "content-security-policy"]
    assert csp and "default-src 'none'" in csp[0]["content"] and "connect-src 'none'" in csp[0]["content"]
    # BokehJS is inlined (the timeline), with the figure's document.
    assert any("Bokeh" in s and len(s) > 500_000 for s in page.scripts)
    assert any("torchprof-timeline" in s for s in page.scripts)
    assert {"findings-section", "ops-section", "kernels-section", "steps-section", "timeline-section"} <= set(
        page.ids
    )
    # Size: BokehJS (~1.5 MB) plus the tables and the timeline's glyphs.
    assert out.stat().st_size < 8 * 1024**2


def test_report_says_when_the_timeline_is_reduced(tmp_path):
    big = load(str(real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz")))
    small = load(str(real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")))
    big.export(tmp_path / "big.html")
    small.export(tmp_path / "small.html")
    big_page = Page((tmp_path / "big.html").read_text(encoding="utf-8"))
    small_page = Page((tmp_path / "small.html").read_text(encoding="utf-8"))
    assert "timeline-lod" in big_page.ids
    assert "Reduced level of detail" in (tmp_path / "big.html").read_text(encoding="utf-8")
    assert "timeline-lod" not in small_page.ids
    assert (tmp_path / "big.html").stat().st_size < 8 * 1024**2


SETUP = """
import torch
from torch.profiler import record_function
m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
x = torch.randn(16, 32)
"""


def test_report_shows_names_as_text(shell, tmp_path):
    shell.run_cell(SETUP)
    cell = (
        f"%%torchprof --steps 2 --quiet --export {tmp_path / 'evil.html'}\n"
        f"with record_function({EVIL!r}):\n    y = m(x)\n"
        f"with record_function({EVIL_SCRIPT!r}):\n    z = m(x)"
    )
    res = shell.run_cell(cell)
    assert res.error_in_exec is None
    text = (tmp_path / "evil.html").read_text(encoding="utf-8")
    page = Page(text)
    assert "img" not in page.tags
    assert all(s.strip() != "alert(1)" for s in page.scripts)
    names = page.column("ops", "Name", "title")
    assert EVIL in names and EVIL_SCRIPT in names
    shown = page.column("ops", "Name", "text")
    assert EVIL in shown and EVIL_SCRIPT in shown
    # In the timeline the names travel inside bokeh's JSON, where they cannot close the script.
    assert text.count("</script>") == len(page.scripts)


def test_comparison_exports_one_report(shell, tmp_path, capsys):
    shell.run_cell(SETUP)
    capsys.readouterr()
    target = tmp_path / "pair.html"
    res = shell.run_cell(
        f"%%torchprof --compare --backend aot_eager --steps 1 --quiet --export {target}\ny = m(x)"
    )
    assert res.error_in_exec is None
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".html") == ["pair.html"]
    page = Page(target.read_text(encoding="utf-8"))
    assert {"diff-ops", "eager-ops", "compiled-ops"} <= set(page.tables)
    assert {
        "eager-section",
        "compiled-section",
        "eager-timeline-section",
        "compiled-timeline-section",
    } <= set(page.ids)
    comp = shell.user_ns["_torchprof"]
    # Eager's per-step calls of aten::addmm, counted from the eager trace itself.
    eager_events = raw_events(comp.eager.trace_path)
    n = sum(1 for e in eager_events if e.get("cat") == "cpu_op" and e.get("name") == "aten::addmm")
    steps = sum(
        1
        for e in eager_events
        if e.get("cat") == "user_annotation" and str(e.get("name")).startswith("ProfilerStep#")
    )
    names = page.column("diff-ops", "Name", "title")
    calls = dict(zip(names, map(float, page.column("diff-ops", "Calls eager")), strict=True))
    assert calls["aten::addmm"] == pytest.approx(n / steps)
    # A folder gets both sides and the comparison report.
    folder = tmp_path / "both"
    folder.mkdir()
    shell.run_cell(f"%%torchprof --compare --backend aot_eager --steps 1 --quiet --export {folder}\ny = m(x)")
    assert (folder / "comparison.html").exists()
    for side in ("eager", "compiled"):
        assert (folder / side / "trace.json.gz").exists() and (folder / side / "report.html").exists()
    # A second export to the same file is refused, and the file is kept.
    before = target.read_bytes()
    shell.run_cell(f"%%torchprof --compare --backend aot_eager --steps 1 --quiet --export {target}\ny = m(x)")
    assert "already exists" in "".join(capsys.readouterr())
    assert target.read_bytes() == before


def test_folder_export_includes_the_report(tmp_path):
    path = real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    load(str(path)).export(tmp_path)
    page = Page((tmp_path / "report.html").read_text(encoding="utf-8"))
    totals, _ = _raw_device_totals(path)
    assert sum(map(float, page.column("kernels", "Total"))) == pytest.approx(sum(totals.values()), rel=1e-9)


# --------------------------------------------------------------------------- #
# the Export control of the inline view


@pytest.fixture
def gp100():
    return load(str(real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")))


def _html(control) -> str:
    return control.result.value


def test_export_control_writes_into_the_working_folder(gp100, tmp_path, monkeypatch):
    from jupyter_torchprof import export_menu
    from jupyter_torchprof.views.export_control import ExportControl

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    control = ExportControl(gp100, export_menu)
    # gzip-compressed trace by default; the size is said before writing.
    assert control.choice.suffix == ".json.gz"
    src = real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    json_mb = len(gzip.open(src).read()) / 1e6
    assert (
        f"{json_mb:.1f} MB of JSON" in control.hint.value
        or f"{json_mb * 1e3:.1f} kB of JSON" in control.hint.value
    )
    first = control.run()
    assert first == tmp_path / "torchprof-exports" / "gp100_sgd_step_user_annotation.json.gz"
    assert first.read_bytes() == src.read_bytes()
    html = _html(control)
    assert re.search(r'data-download="[0-9a-f]{16}"', html)
    assert 'download="gp100_sgd_step_user_annotation.json.gz"' in html
    assert "JSON" in html
    # Never overwrites: the second file gets a counter.
    second = control.run()
    assert second.name == "gp100_sgd_step_user_annotation-2.json.gz"
    assert first.exists() and second.read_bytes() == src.read_bytes()
    # Every format of the menu writes a file that its own reader opens.
    written = {}
    for choice in control.choices:
        control.menu.value = choice.key
        written[choice.key] = control.run()
        assert written[choice.key] is not None, _html(control)
    import pandas as pd

    assert list(pd.read_csv(written["kernels-csv"])["name"]) == list(gp100.kernels["name"])
    assert len(pd.read_parquet(written["ops-parquet"])) == len(gp100.ops)
    assert json.loads(written["trace"].read_text())["traceEvents"]
    assert "<table" in written["html"].read_text(encoding="utf-8")
    assert sorted(p.name for p in (tmp_path / "torchprof-exports").iterdir() if p.name.startswith(".")) == []


def test_export_link_downloads_through_the_view_widget(gp100, tmp_path, monkeypatch):
    """The link asks the kernel for the file over the widget's messages: any host can save it."""
    from jupyter_torchprof.views import surface as surface_module

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(surface_module, "CHUNK", 1000)  # several pieces, as a big trace would be
    view = gp100.view()
    widget = view.widget()
    sent = []
    widget.send = lambda content, buffers=None: sent.append((content, buffers or []))
    try:
        view.export.menu.value = "text"
        widget._on_page_message(widget, {"t": "click", "id": view.export.button.id}, [])
        path = tmp_path / "torchprof-exports" / "gp100_sgd_step_user_annotation.txt"
        assert path.is_file()
        # The page was sent the new line with the link.
        html = next(
            c["node"]["html"]
            for c, _ in sent
            if c["t"] == "node" and c["node"]["id"] == view.export.result.id
        )
        token = re.search(r'data-download="([0-9a-f]{16})"', html).group(1)
        sent.clear()
        widget._on_page_message(widget, {"t": "download", "token": token}, [])
        pieces = [(c, b) for c, b in sent if c["t"] == "file"]
        assert len(pieces) > 1 and pieces[-1][0]["last"] and not any(c["last"] for c, _ in pieces[:-1])
        assert [c["seq"] for c, _ in pieces] == list(range(len(pieces)))
        assert b"".join(bytes(b[0]) for _, b in pieces) == path.read_bytes()
        assert pieces[0][0]["name"] == path.name
        # A token nobody offered (a stale page, or a made-up one) reads no file.
        sent.clear()
        widget._on_page_message(widget, {"t": "download", "token": "0" * 16}, [])
        assert [c.get("error", "") for c, _ in sent] and "export again" in sent[0][0]["error"]
    finally:
        view.close()


def test_export_control_errors_are_one_line(gp100, tmp_path, monkeypatch):
    from jupyter_torchprof import export_menu
    from jupyter_torchprof.views.export_control import ExportControl

    monkeypatch.chdir(tmp_path)
    (tmp_path / "torchprof-exports").write_text("a file where the folder should be")
    control = ExportControl(gp100, export_menu)
    assert control.run() is None
    out = {"text/plain": control.plain, "text/html": control.result.value}
    assert out["text/plain"].count("\n") == 0
    assert out["text/plain"].startswith("export failed: ") and "is a file, not a folder" in out["text/plain"]
    assert "Traceback" not in out["text/plain"]
    assert "jp-TorchProf-export-error" in out["text/html"]
    # An unwritable folder (root ignores modes; /sys refuses new files even to root).
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    folder = locked if not os.access(locked, os.W_OK) else Path("/sys")
    try:
        control = ExportControl(gp100, export_menu, folder=folder)
        assert control.run() is None
        line = control.plain
        assert line.count("\n") == 0 and re.search("(?i)permission denied|cannot", line), line
    finally:
        locked.chmod(0o700)
    assert list(locked.iterdir()) == []
    # A profile without a trace file: the trace cannot be exported, and says so.
    gp100.meta.path = None
    control = ExportControl(gp100, export_menu, folder=tmp_path)
    assert control.run() is None
    assert "no trace file" in control.plain


def test_export_control_warns_about_chrome_tracing(tmp_path, monkeypatch):
    """A trace above ~256 MB of JSON: the size and the warning come before and after writing."""
    from jupyter_torchprof import export_menu
    from jupyter_torchprof.views.export_control import ExportControl

    src = real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    doc = gzip.open(src).read()
    padding = CHROME_TRACING_LIMIT + 8 * 1024**2 - len(doc)
    big = tmp_path / "big.pt.trace.json.gz"
    # JSON allows whitespace anywhere between tokens: the same trace, padded.
    with gzip.open(big, "wb", compresslevel=1) as fh:
        fh.write(doc[:-1])
        chunk = b" " * (16 * 1024**2)
        for _ in range(padding // len(chunk)):
            fh.write(chunk)
        fh.write(b" " * (padding % len(chunk)))
        fh.write(doc[-1:])
    profile = load(str(big))
    monkeypatch.chdir(tmp_path)
    control = ExportControl(profile, export_menu)
    assert "chrome://tracing" in control.hint.value
    path = control.run()
    assert path is not None and path.read_bytes() == big.read_bytes()
    html = _html(control)
    assert "jp-TorchProf-export-warn" in html and "chrome://tracing" in html and "Perfetto" in html


def test_view_has_the_export_control(gp100, tmp_path, monkeypatch):
    from jupyter_torchprof.views.widget import ProfileView

    monkeypatch.chdir(tmp_path)
    view = gp100.view()  # what a user gets: the view with the export menu passed in
    try:
        assert view.export.box in view.root.children
        assert view.export.run().exists()
    finally:
        view.close()
    # Built without an export menu (views never import export), a view has no Export control.
    bare = ProfileView(gp100)
    try:
        assert bare.export is None
        assert not any("jp-TorchProf-export" in n.classes for n in bare.root.children)
    finally:
        bare.close()


def test_export_into_refuses_to_overwrite(gp100, tmp_path):
    from jupyter_torchprof.export_menu import choices, export_into

    html = next(c for c in choices(gp100) if c.key == "html")
    a, _ = export_into(gp100, html, tmp_path)
    b, _ = export_into(gp100, html, tmp_path)
    assert a != b and a.exists() and b.exists()
    with pytest.raises(ExportError):
        from jupyter_torchprof.export import write_report

        write_report(gp100, a)
