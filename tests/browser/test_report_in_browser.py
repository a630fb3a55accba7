"""Real clients: the exported report in Chromium offline, and the Export control in JupyterLab.

The report is opened from a file:// URL in Debian's headless Chromium with
every other request aborted (and the test failed if one is attempted): its
tables must show rows and sort on a header click, the timeline must be
drawn by BokehJS, and nothing may log a console error.

The Export control is used the way a person does in a real JupyterLab: pick
a format, click Export, click the download link; the file comes through the
Jupyter server (Playwright's download event) and loads back with
``jupyter_torchprof.load``.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from urllib.parse import urlparse

import pytest
from labkit import CHROMIUM, open_notebook, run_all, write_notebook
from tracefiles import raw_events, real_trace

EVIL = "<img src=x onerror=alert(1)>"

# Coloured pixels on the largest canvas of the page (the timeline's), through
# bokeh's nested shadow roots.
_COLOURED_PIXELS_JS = """
() => {
  let best = 0;
  const walk = (node) => {
    for (const el of node.querySelectorAll('*')) {
      if (el.tagName === 'CANVAS' && el.width > 200) {
        const ctx = el.getContext('2d');
        if (ctx) {
          const d = ctx.getImageData(0, 0, el.width, el.height).data;
          let n = 0;
          for (let i = 0; i < d.length; i += 4) {
            if (d[i + 3] > 200 && Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 40) n++;
          }
          best = Math.max(best, n);
        }
      }
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(document);
  return best;
}
"""

# What BokehJS says about the timeline: its document, view and glyph data.
_BOKEH_JS = """
() => {
  if (!window.Bokeh || !window.Bokeh.documents) return null;
  const views = [...((window.Bokeh && window.Bokeh.index) || [])].filter(v => v.model.name === 'torchprof-timeline');
  if (!views.length) return {documents: window.Bokeh.documents.length, views: 0};
  const v = views[0];
  const doc = v.model.document;
  const host = doc.get_model_by_name('torchprof-host');
  const dev = doc.get_model_by_name('torchprof-device');
  return {documents: window.Bokeh.documents.length, views: views.length,
          finished: typeof v.has_finished === 'function' ? v.has_finished() : null,
          host: host.data.x.length, device: dev.data.x.length};
}
"""


def _shots(tmp_path: Path) -> Path:
    path = Path(os.environ.get("TORCHPROF_SCREENSHOTS", tmp_path / "screenshots"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def offline_page(browser):
    """A page that may load file:// only; anything else is aborted and fails the test."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    outside: list[str] = []
    dialogs: list[str] = []

    def local(url: str) -> bool:
        return urlparse(url).scheme in ("file", "data", "blob", "about")

    def on_route(route):
        if local(route.request.url):
            return route.continue_()
        outside.append(route.request.url)
        return route.abort()

    context.route("**/*", on_route)
    page.on("request", lambda r: None if local(r.url) else outside.append(r.url))
    page.on("websocket", lambda ws: outside.append(ws.url))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    yield page
    context.close()
    assert not outside, f"the report tried to reach: {sorted(set(outside))}"
    assert not errors, f"console errors: {errors}"
    assert not dialogs, f"dialogs opened: {dialogs}"


def _column(page, table: str, index: int) -> list[float]:
    return page.evaluate(
        "([t, i]) => [...document.querySelectorAll('#' + t + ' tbody tr')]"
        ".map(r => parseFloat(r.cells[i].getAttribute('data-v')))",
        [table, index],
    )


def _header_index(page, table: str, title: str) -> int:
    heads = page.locator(f"#{table} thead th").all_inner_texts()
    return [h.strip() for h in heads].index(title)


def _wait_timeline(page) -> dict:
    page.wait_for_function(f"() => {{ const s = ({_BOKEH_JS})(); return s && s.views > 0; }}", timeout=30_000)
    page.wait_for_function(f"() => ({_COLOURED_PIXELS_JS})() > 500", timeout=30_000)
    return page.evaluate(f"({_BOKEH_JS})()")


def test_report_renders_offline(offline_page, tmp_path):
    from jupyter_torchprof import load

    trace = real_trace("a100_nccl_rank0.pt.trace.json.gz")
    report = tmp_path / "a100.html"
    load(str(trace)).export(report)
    page = offline_page
    page.goto(report.as_uri())

    # Tables: every row is there, and the first ones are on screen.
    kernel_names = {
        e["name"] for e in raw_events(trace) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    }
    assert page.locator("#kernels tbody tr").count() == len(kernel_names)
    assert page.locator("#ops tbody tr").count() > 50
    page.locator("#ops tbody tr").first.wait_for(state="visible")
    assert page.locator("#ops tbody tr").nth(5).is_visible()

    # A header click sorts: numbers largest first, a second click reverses.
    calls = _header_index(page, "ops", "Calls")
    before = _column(page, "ops", calls)
    assert before != sorted(before, reverse=True)
    page.locator("#ops thead th", has_text="Calls").locator("button").click()
    after = _column(page, "ops", calls)
    assert after == sorted(before, reverse=True)
    assert page.locator("#ops thead th", has_text="Calls").get_attribute("aria-sort") == "descending"
    page.locator("#ops thead th", has_text="Calls").locator("button").click()
    assert _column(page, "ops", calls) == sorted(before)
    # Text columns sort A→Z on the first click.
    page.locator("#kernels thead th", has_text="Kernel").locator("button").click()
    assert page.locator("#kernels thead th", has_text="Kernel").get_attribute("aria-sort") == "ascending"
    in_order = page.evaluate(
        "() => { const n = [...document.querySelectorAll('#kernels tbody tr')]"
        ".map(r => r.cells[0].textContent.toLowerCase());"
        " return n.every((s, i) => i === 0 || n[i - 1].localeCompare(s) <= 0); }"
    )
    assert in_order
    page.screenshot(path=str(_shots(tmp_path) / "report_tables.png"))

    # The timeline: BokehJS rendered the document, and glyphs are on the canvas.
    page.locator("#timeline-section").scroll_into_view_if_needed()
    stats = _wait_timeline(page)
    assert stats["documents"] == 1 and stats["views"] == 1
    assert stats["host"] > 0 and stats["device"] > 0
    assert stats["finished"] in (True, None)
    page.locator("#timeline-section").screenshot(path=str(_shots(tmp_path) / "report_timeline.png"))


def test_report_of_a_cpu_run_shows_names_as_text(offline_page, tmp_path):
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from jupyter_torchprof import load

    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    x = torch.randn(16, 32)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function(EVIL):
            m(x)
    trace = tmp_path / "evil.pt.trace.json"
    prof.export_chrome_trace(str(trace))
    report = tmp_path / "evil.html"
    load(str(trace)).export(report)
    page = offline_page
    page.goto(report.as_uri())
    cell = page.locator("#ops td.tp-name", has_text=EVIL)
    assert cell.count() == 1 and cell.inner_text() == EVIL
    stats = _wait_timeline(page)
    assert stats["host"] > 0
    # No element was made from the name, on the page or in bokeh's shadow roots.
    tags = page.evaluate(
        "() => { const out = []; const walk = (n) => { for (const el of n.querySelectorAll('*')) {"
        " out.push(el.tagName.toLowerCase()); if (el.shadowRoot) walk(el.shadowRoot); } };"
        " walk(document); return out; }"
    )
    assert "img" not in tags
    page.screenshot(path=str(_shots(tmp_path) / "report_cpu_evil.png"), full_page=True)


# --------------------------------------------------------------------------- #
# the Export control in JupyterLab


def _view(page):
    return page.locator(".jp-OutputArea-output .jp-TorchProf-view").first


def _export(view, label: str | None = None):
    box = view.locator(".jp-TorchProf-export")
    if label is not None:
        box.locator("select").select_option(label=label)
    box.locator(".jp-TorchProf-export-button").click()
    return box


def test_export_control_downloads_through_the_view(page, lab, tmp_path):
    """The download link asks the kernel for the file over the view's own messages (any host)."""
    from jupyter_torchprof import load

    if CHROMIUM is None:  # pragma: no cover - the fixtures skip first
        pytest.skip("no chromium")
    folder = lab.root / "torchprof-exports"
    shutil.rmtree(folder, ignore_errors=True)
    write_notebook(
        lab.root,
        "export_ctl.ipynb",
        [
            "%load_ext jupyter_torchprof\nimport torch\n"
            "m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))\n"
            "x = torch.randn(16, 32)",
            "%%torchprof --steps 2 --name export-demo\ny = m(x)",
        ],
    )
    open_notebook(page, lab, "export_ctl.ipynb")
    run_all(page)
    view = _view(page)
    view.wait_for(timeout=60_000)
    box = view.locator(".jp-TorchProf-export")
    box.scroll_into_view_if_needed()
    # The trace, gzip-compressed, is the default; its size is said before the click.
    assert (
        ".json.gz" in box.locator("select").input_value() or "json.gz" in box.locator("select").inner_text()
    )
    assert "of JSON" in box.locator(".jp-TorchProf-export-hint").inner_text()

    _export(view)
    link = box.locator("a.jp-TorchProf-export-link")
    link.wait_for(timeout=30_000)
    # The link names a token the kernel offered, never a path or a server route.
    assert re.fullmatch(r"[0-9a-f]{16}", link.get_attribute("data-download") or "")
    # The run's name and its run id (two runs of one cell never share a name).
    m = re.fullmatch(r"(export-demo-[A-Za-z0-9_.-]+)\.json\.gz", link.get_attribute("download") or "")
    assert m, link.get_attribute("download")
    stem = m.group(1)
    written = folder / f"{stem}.json.gz"
    assert written.exists()
    text = box.locator(".jp-TorchProf-export-output").inner_text()
    assert f"wrote torchprof-exports/{stem}.json.gz" in text and "JSON" in text
    page.screenshot(path=str(_shots(tmp_path) / "export_control_trace.png"))

    with page.expect_download(timeout=30_000) as info:
        link.click()
    download = info.value
    assert download.suggested_filename == f"{stem}.json.gz"
    got = tmp_path / "downloaded.json.gz"
    download.save_as(str(got))
    assert got.read_bytes() == written.read_bytes()
    loaded = load(str(got))
    assert loaded.summary["steps"] == 2
    assert "aten::addmm" in set(loaded.ops["name"])

    # The report, through the same route; a second export never overwrites.
    _export(view, "report (.html) · opens offline")
    box.locator("a.jp-TorchProf-export-link", has_text=f"{stem}.html").wait_for(timeout=60_000)
    _export(view, "report (.html) · opens offline")
    box.locator("a.jp-TorchProf-export-link", has_text=f"{stem}-2.html").wait_for(timeout=60_000)
    with page.expect_download(timeout=30_000) as info:
        box.locator("a.jp-TorchProf-export-link").click()
    report = tmp_path / "report.html"
    info.value.save_as(str(report))
    assert report.read_bytes() == (folder / f"{stem}-2.html").read_bytes()
    assert (folder / f"{stem}.html").exists()

    # Bad input: the folder cannot be made (a file has its name): one line, in the control.
    shutil.rmtree(folder)
    folder.write_text("not a folder")
    try:
        _export(view, "text tables (.txt)")
        error = box.locator(".jp-TorchProf-export-error")
        error.wait_for(timeout=30_000)
        line = error.inner_text().strip()
        assert line.startswith("export failed: ") and "is a file, not a folder" in line and "\n" not in line
        page.screenshot(path=str(_shots(tmp_path) / "export_control_error.png"))
    finally:
        folder.unlink()
