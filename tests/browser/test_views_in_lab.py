"""The inline interactive view in a real JupyterLab: tables, timeline, linking, escaping.

Everything here is what a person does: run a ``%%torchprof`` cell and a
``%torchprof --load`` cell, click a column header, type in the filter, open
the timeline, click a kernel, zoom in. The ``page`` fixture fails the test on
any console error or any request leaving this machine.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from labkit import open_notebook, run_all, with_page_helpers, write_notebook
from tracefiles import real_trace

EVIL = "<img src=x onerror=alert(1)>"

# Every element inside ``root``, through open shadow roots (bokeh renders
# tables and plots inside shadow DOM).
_ALL_ELEMENTS_JS = """
(root) => {
  const out = [];
  const walk = (node) => {
    for (const el of node.querySelectorAll('*')) {
      out.push(el);
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(root);
  return out.map(e => e.tagName.toLowerCase());
}
"""

# Visible rows of the first bokeh DataTable under ``root``: cell texts in
# display order. SlickGrid positions rows absolutely (sort by offset) and
# draws a frozen name column in a pane of its own (join the panes by row).
_TABLE_ROWS_JS = with_page_helpers(
    """
(root) => {
  const tables = bokehTables(root);
  if (!tables.length) return null;
  const byTop = new Map();
  const panes = [...tables[0].querySelectorAll('.slick-viewport')];
  panes.sort((a, b) => (a.classList.contains('slick-viewport-left') ? 0 : 1) - (b.classList.contains('slick-viewport-left') ? 0 : 1));
  for (const pane of panes) {
    for (const r of pane.querySelectorAll('.slick-row')) {
      const top = parseFloat(r.style.top || '0');
      const cells = [...r.querySelectorAll('.slick-cell')].map(c => c.textContent);
      byTop.set(top, [...(byTop.get(top) || []), ...cells]);
    }
  }
  return [...byTop.entries()].sort((a, b) => a[0] - b[0]).map(e => e[1]);
}
"""
)

# Header texts of the first bokeh DataTable under ``root``, frozen pane first
# (the order `_TABLE_ROWS_JS` joins the cells in).
_HEADER_TEXTS_JS = with_page_helpers(
    """
(root) => {
  const tables = bokehTables(root);
  const left = (el) => (el.closest('.slick-pane-left') ? 0 : 1);
  const heads = [...tables[0].querySelectorAll('.slick-header-column')].sort((a, b) => left(a) - left(b));
  return heads.map((h) => (h.querySelector('.slick-column-name') || h).textContent.trim());
}
"""
)

# Coloured pixels on the canvases of the timeline plot under ``root``.
_COLOURED_PIXELS_JS = """
(root) => {
  let best = 0;
  const walk = (node) => {
    for (const el of node.querySelectorAll('*')) {
      if (el.tagName === 'CANVAS' && el.width > 200) {
        const ctx = el.getContext('2d');
        if (!ctx) continue;
        const d = ctx.getImageData(0, 0, el.width, el.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) {
          const r = d[i], g = d[i + 1], b = d[i + 2], a = d[i + 3];
          if (a > 200 && Math.max(r, g, b) - Math.min(r, g, b) > 40) n++;
        }
        best = Math.max(best, n);
      }
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(root);
  return best;
}
"""

# The bokeh views of the timeline figure that lives under ``root``.
_TIMELINE_JS = """
(root, what) => {
  const views = [...((window.Bokeh && window.Bokeh.index) || [])].filter(v => v.model.name === 'torchprof-timeline' && root.contains(v.el));
  if (!views.length) return null;
  const pv = views[0];
  const model = pv.model;
  const src = (name) => model.document.get_model_by_name(name);
  const host = src('torchprof-host'), dev = src('torchprof-device');
  if (what === 'stats') {
    const k = [...host.data.k, ...dev.data.k];
    return {host: host.data.x.length, device: dev.data.x.length, merged: k.filter(v => v > 1).length,
            highlighted: src('torchprof-highlight').data.x.length,
            start: model.x_range.start, end: model.x_range.end};
  }
  if (what.startsWith('named:')) {
    // Screen position of the first host glyph showing the given name.
    const strings = src('torchprof-strings').data.s;
    const code = strings.indexOf(what.slice(6));
    const d = host.data;
    const i = d.n.findIndex(v => v === code);
    if (code < 0 || i < 0) return null;
    const frame = pv.frame;
    const left = Math.max(d.x[i], model.x_range.start);
    const right = Math.min(d.x[i] + d.w[i], model.x_range.end);
    const rect = pv.canvas_view.el.getBoundingClientRect();
    return {x: rect.left + frame.x_scale.compute((left + right) / 2), y: rect.top + frame.y_scale.compute(d.y[i])};
  }
  if (what === 'kernel') {
    // Screen position of the widest kernel glyph in view.
    const d = dev.data;
    let best = -1;
    for (let i = 0; i < d.x.length; i++) {
      const c = d.x[i] + d.w[i] / 2;
      if (c < model.x_range.start || c > model.x_range.end) continue;
      if (d.o[i] < 0 || d.k[i] !== 1) continue;  // a kernel with a launching op
      if (best < 0 || d.w[i] > d.w[best]) best = i;
    }
    if (best < 0) return null;
    const frame = pv.frame;
    const sx = frame.x_scale.compute(d.x[best] + d.w[best] / 2);
    const sy = frame.y_scale.compute(d.y[best]);
    const rect = pv.canvas_view.el.getBoundingClientRect();
    return {x: rect.left + sx, y: rect.top + sy};
  }
  return null;
}
"""


def _shots_dir(lab) -> Path:
    path = Path(os.environ.get("TORCHPROF_SCREENSHOTS", lab.root.parent / "screenshots"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _shot(page, lab, name: str, locator=None) -> None:
    target = locator if locator is not None else page
    target.screenshot(path=str(_shots_dir(lab) / f"{name}.png"))


def _views(page):
    return page.locator(".jp-OutputArea-output .jp-TorchProf-view")


def _tab(view, title: str):
    return view.locator(".jp-TorchProf-tab", has_text=title).first


def _table_rows(page, container):
    handle = container.element_handle()
    return page.evaluate(_TABLE_ROWS_JS, handle)


def _wait_rows(page, container, predicate, timeout=30_000):
    deadline = page.evaluate("Date.now()") + timeout
    rows = None
    while page.evaluate("Date.now()") < deadline:
        rows = _table_rows(page, container)
        if rows and predicate(rows):
            return rows
        page.wait_for_timeout(250)
    raise AssertionError(f"table never reached the expected state; last rows: {rows and rows[:5]}")


def _number(cell: str) -> float:
    text = cell.replace(",", "").strip()
    m = re.match(r"^(-?[\d.]+)\s*(ns|µs|ms|s)?$", text)
    if not m:
        return float("nan")
    scale = {"ns": 1e-3, "µs": 1.0, "ms": 1e3, "s": 1e6, None: 1.0}[m.group(2)]
    return float(m.group(1)) * scale


def _timeline(page, view, what: str):
    return page.evaluate(
        "([root, what]) => (" + _TIMELINE_JS + ")(root, what)", [view.element_handle(), what]
    )


def test_cpu_run_view_shows_names_as_text(page, lab):
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    write_notebook(
        lab.root,
        "views_cpu.ipynb",
        [
            "%load_ext jupyter_torchprof\nimport torch\nfrom torch.profiler import record_function\n"
            "m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))\n"
            "x = torch.randn(32, 64)",
            f"%%torchprof --steps 2 --record-shapes --memory\nwith record_function({EVIL!r}):\n    y = m(x).sum()",
        ],
    )
    open_notebook(page, lab, "views_cpu.ipynb")
    run_all(page)
    view = _views(page).first
    view.wait_for(timeout=60_000)
    # The op table drew rows, and the evil name is one of them, as text.
    rows = _wait_rows(page, view, lambda r: len(r) >= 3)
    assert any(EVIL in cells[0] for cells in rows), [c[0] for c in rows]
    tags = page.evaluate(_ALL_ELEMENTS_JS, page.locator(".jp-Notebook").element_handle())
    assert "img" not in tags
    # Header chips: device and time per step.
    header = view.locator(".jp-TorchProf-header")
    assert "CPU" in header.inner_text()
    assert "step" in header.inner_text()
    _shot(page, lab, "cpu_ops", view)

    # The timeline draws glyphs; the evil name never becomes markup there either.
    _tab(view, "Timeline").click()
    page.wait_for_function(
        "([root, js]) => (eval(js))(root) > 200",
        arg=[view.element_handle(), _COLOURED_PIXELS_JS],
        timeout=30_000,
    )
    stats = _timeline(page, view, "stats")
    assert stats["host"] > 0
    # Hovering the annotation shows its name in the tooltip, as text.
    pos = _timeline(page, view, "named:" + EVIL)
    assert pos is not None
    page.mouse.move(pos["x"] - 3, pos["y"])
    page.mouse.move(pos["x"], pos["y"], steps=3)
    # The tooltip is the one visible element whose whole text is the name
    # (the op table holding it too is on the hidden Ops tab).
    page.get_by_text(EVIL, exact=True).filter(visible=True).first.wait_for(timeout=20_000)
    _shot(page, lab, "cpu_hover", view)
    _shot(page, lab, "cpu_timeline", view)

    # The memory tab is there because --memory was on.
    _tab(view, "Memory").click()
    page.wait_for_function(
        "([root, js]) => (eval(js))(root) > 50",
        arg=[view.element_handle(), _COLOURED_PIXELS_JS],
        timeout=30_000,
    )
    _shot(page, lab, "cpu_memory", view)

    tags = page.evaluate(_ALL_ELEMENTS_JS, page.locator(".jp-Notebook").element_handle())
    assert "img" not in tags
    assert not dialogs, dialogs


def test_loaded_trace_view_sorts_filters_links_and_zooms(page, lab):
    trace = real_trace("a100_nccl_rank0.pt.trace.json.gz")
    write_notebook(
        lab.root,
        "views_load.ipynb",
        [
            "%load_ext jupyter_torchprof",
            f"%torchprof --load {trace}",
            "_torchprof.view(max_glyphs=400)",
        ],
    )
    open_notebook(page, lab, "views_load.ipynb")
    run_all(page)
    views = _views(page)
    views.nth(1).wait_for(timeout=90_000)
    view = views.first
    rows = _wait_rows(page, view, lambda r: len(r) >= 10)
    _shot(page, lab, "load_ops", view)

    # Click a header: the rows are re-ordered by that column, largest first.
    before = [c[0] for c in rows]
    view.locator(".slick-header-column", has_text="Calls").first.click()
    rows = _wait_rows(page, view, lambda r: [c[0] for c in r] != before)
    # Calls' place among the headers (the sorted and time columns come first).
    calls_idx = page.evaluate(_HEADER_TEXTS_JS, view.element_handle()).index("Calls")
    calls = [_number(c[calls_idx]) for c in rows]
    assert calls == sorted(calls, reverse=True), calls[:10]

    # Type in the filter: only matching names stay, and the status says so.
    view.locator(".jp-TorchProf-filter input").first.fill("conv")
    rows = _wait_rows(page, view, lambda r: r and all("conv" in c[0].lower() for c in r))
    assert len(rows) >= 2
    assert "match" in view.locator(".jp-TorchProf-status").first.inner_text()
    # A regex works too.
    view.locator(".jp-TorchProf-filter input").first.fill("^aten::(mm|addmm)$")
    rows = _wait_rows(page, view, lambda r: sorted(c[0] for c in r) == ["aten::addmm", "aten::mm"])

    # Selecting an op outlines its events and kernels in the timeline.
    view.locator(".slick-cell", has_text="aten::addmm").first.click()
    page.wait_for_function(
        "(el) => el.textContent.includes('outlined in the timeline')",
        arg=view.locator(".jp-TorchProf-selection").first.element_handle(),
        timeout=20_000,
    )
    _shot(page, lab, "load_ops_selected", view)
    # The timeline is drawn when its tab is first shown, with the outline already in it.
    _tab(view, "Timeline").click()
    page.wait_for_function(
        "([root, js]) => { const s = (eval(js))(root, 'stats'); return s && s.highlighted > 0; }",
        arg=[view.element_handle(), _TIMELINE_JS],
        timeout=60_000,
    )

    # Kernels tab.
    _tab(view, "Kernels").click()
    krows = _wait_rows(page, view.locator(".jp-TorchProf-kerneltable"), lambda r: len(r) >= 5)
    assert any("nccl" in c[0].lower() for c in krows)
    _shot(page, lab, "load_kernels", view)

    # Timeline: glyphs drawn; clicking a kernel names the op that launched it.
    _tab(view, "Timeline").click()
    page.wait_for_function(
        "([root, js]) => (eval(js))(root) > 500",
        arg=[view.element_handle(), _COLOURED_PIXELS_JS],
        timeout=30_000,
    )
    view.locator(".jp-TorchProf-timeline").scroll_into_view_if_needed()
    pos = _timeline(page, view, "kernel")
    assert pos is not None
    page.mouse.click(pos["x"], pos["y"])
    detail = view.locator(".jp-TorchProf-detail")
    detail.locator("text=launched by").wait_for(timeout=20_000)
    assert "grid" in detail.inner_text()
    _shot(page, lab, "load_timeline_kernel_clicked", view)

    # The second view keeps at most 400 glyphs, merging narrow events; zooming
    # in fetches the detail of the new window from the kernel.
    small = views.nth(1)
    small.scroll_into_view_if_needed()
    _tab(small, "Timeline").click()
    page.wait_for_function(
        "([root, js]) => (eval(js))(root) > 100",
        arg=[small.element_handle(), _COLOURED_PIXELS_JS],
        timeout=30_000,
    )
    stats = _timeline(page, small, "stats")
    assert stats["host"] + stats["device"] <= 400
    assert stats["merged"] > 0
    _shot(page, lab, "load_timeline_lod", small)
    zoom_in = small.locator(".bk-tool-icon-zoom-in").first
    for _ in range(8):
        zoom_in.click()
        # one zoom at a time: each asks the kernel for the new window's detail
        page.wait_for_timeout(400)
    page.wait_for_function(
        "([root, js, before]) => { const s = (eval(js))(root, 'stats'); return s && s.merged < before; }",
        arg=[small.element_handle(), _TIMELINE_JS, stats["merged"]],
        timeout=90_000,
    )
    zoomed = _timeline(page, small, "stats")
    assert zoomed["end"] - zoomed["start"] < (stats["end"] - stats["start"]) / 10
    _shot(page, lab, "load_timeline_zoomed", small)

    # Dark theme: the same views, for the screenshots.
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_timeout(1500)
    _tab(view, "Ops").click()
    view.scroll_into_view_if_needed()
    _shot(page, lab, "dark_ops", view)
    _tab(view, "Timeline").click()
    page.wait_for_timeout(800)
    _shot(page, lab, "dark_timeline", view)
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])


# The widget manager's own report when a saved output's widget no longer
# exists in the kernel: expected when reopening a notebook saved without
# widget state, and the reason the fallback exists.
_MODEL_NOT_FOUND = (
    "widget model not found",
    "model not found",
    "Could not create a model",
    "Could not create view",
)


def test_reopened_notebook_shows_the_static_table(browser, lab, tmp_path):
    """A notebook saved without widget state shows the static table, not an error."""
    import nbformat
    from nbclient import NotebookClient

    trace = real_trace("cpu_only.pt.trace.json.gz")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext jupyter_torchprof"),
        nbformat.v4.new_code_cell(f"%torchprof --load {trace}"),
    ]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    NotebookClient(nb, timeout=300, kernel_name="python3").execute(
        env=dict(os.environ, TORCHPROF_RUN_DIR=str(tmp_path / "runs"))
    )
    outputs = [
        o for o in nb.cells[1].outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    assert outputs, "the executed cell has no widget output"
    # What JupyterLab saves by default: outputs, but no widget state; and the
    # notebook is trusted, as the user's own saved notebooks are (an untrusted
    # one never renders widgets, so JupyterLab shows its HTML anyway).
    nb.metadata.pop("widgets", None)
    from nbformat.sign import NotebookNotary

    NotebookNotary().sign(nb)
    nbformat.write(nb, lab.root / "reopened.ipynb")

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    errors: list[str] = []
    outside: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(f"page error: {e}"))

    def on_route(route):
        from urllib.parse import urlparse

        from labkit import LOCAL_HOSTS

        url = urlparse(route.request.url)
        if url.scheme in ("http", "https", "ws", "wss") and (url.hostname or "") not in LOCAL_HOSTS:
            outside.append(route.request.url)
            return route.abort()
        return route.continue_()

    context.route("**/*", on_route)
    try:
        open_notebook(pg, lab, "reopened.ipynb")
        fallback = pg.locator(".jp-TorchProf-fallback")
        fallback.wait_for(timeout=60_000)
        text = fallback.inner_text()
        assert "aten::empty" in text and "Ops" in text
        assert pg.locator("text=Error displaying widget").count() == 0
        _shot(pg, lab, "reopened_static", pg.locator(".jp-Notebook"))
    finally:
        _shot(pg, lab, "reopened_page")
        context.close()
    assert not outside, outside
    unexpected = [e for e in errors if not any(s in e for s in _MODEL_NOT_FOUND)]
    from labkit import IGNORED_CONSOLE

    unexpected = [e for e in unexpected if not any(s in e for s in IGNORED_CONSOLE)]
    assert not unexpected, unexpected
