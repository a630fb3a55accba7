"""What a person sees in every view and state, in a real JupyterLab in Chromium.

One notebook runs a CPU capture (ops, timeline, memory), loads a real GPU
trace (kernels), and compares eager with compiled (``--compare --backend
aot_eager``: eager, compiled and diff); then the sidebar's run and compare
panels and the standalone HTML report are opened. Every table must be
drawn wider than 50 px with at least three rows on screen whose numbers are
the ones the Python objects hold (written by the kernel to a JSON file);
every tool button of the timeline must move the visible range as it says.
The ``page`` fixture fails the test on any console error and any request
leaving this machine. Screenshots of each state go to test-results/.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from labkit import open_notebook, run_all, with_page_helpers, write_notebook
from tracefiles import real_trace

SHOTS = Path(
    os.environ.get("TORCHPROF_SCREENSHOTS", Path(__file__).parents[2] / "test-results" / "every-view")
)

SETUP = (
    "%load_ext jupyter_torchprof\nimport json, torch\n"
    "m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))\n"
    "x = torch.randn(32, 64)"
)
CPU_RUN = "%%torchprof --steps 3 --record-shapes --memory --name every-cpu -o run\ny = m(x).sum()"
COMPARE = (
    "%%torchprof --compare --backend aot_eager --steps 3 --name every-compare -o cmp\n"
    "h = m(x)\nprint('break')\ny = h.sum()"
)
# What the Python objects hold, for the page to be checked against.
EXPECTED = """
def _by(frame, key, cols):
    out = {}
    for _, r in frame.iterrows():
        out.setdefault(str(r[key]), []).append([float(r[c]) for c in cols])
    return out
json.dump({
    "ops": _by(run.ops, "name", ["calls", "self_cpu_us"]),
    "kernels": _by(gpu.kernels, "short_name", ["calls", "total_us"]),
    "diff": _by(cmp.diff_ops, "name", ["calls_a", "calls_b", "self_cpu_us_a", "self_cpu_us_b"]),
    "eager": _by(cmp.eager.ops, "name", ["calls", "self_cpu_us"]),
    "compiled": _by(cmp.compiled.ops, "name", ["calls", "self_cpu_us"]),
    "breaks": [[b.location, b.code] for b in cmp.compile_stats.graph_breaks],
    "break_cell": _ih.index(next(c for c in _ih if c.startswith("get_ipython().run_cell_magic('torchprof', '--compare"))),
}, open("every_view_expected.json", "w"))
run.export("every_view_report.html", force=True)
"""

# Every bokeh DataTable under ``root`` (through shadow roots): its box, its
# headers (frozen pane first) and the cells of the rows fully on screen.
_TABLES_JS = with_page_helpers(
    """
(root) => {
  const tables = bokehTables(root);
  const left = (el) => (el.closest('.slick-pane-left') ? 0 : 1);
  // Where a header's text would end if drawn whole (its own glyphs, not its box).
  const textRight = (el) => {
    const range = document.createRange();
    range.selectNodeContents(el);
    return range.getBoundingClientRect().right;
  };
  return tables.map((t) => {
    const box = t.getBoundingClientRect();
    const heads = [...t.querySelectorAll('.slick-header-column')].sort((a, b) => left(a) - left(b));
    const headers = heads.map((h) => {
      const r = h.getBoundingClientRect();
      const name = h.querySelector('.slick-column-name') || h;
      return {text: name.textContent.trim(), left: r.left, right: r.right,
              cut: textRight(name) > r.right - parseFloat(getComputedStyle(h).paddingRight || '0') + 0.5, offscreen: r.right > box.right + 1};
    });
    const byTop = new Map();
    for (const pane of [...t.querySelectorAll('.slick-viewport')].sort((a, b) => left(a) - left(b))) {
      const vp = pane.getBoundingClientRect();
      for (const row of pane.querySelectorAll('.slick-row')) {
        const r = row.getBoundingClientRect();
        if (r.top < vp.top - 1 || r.bottom > vp.bottom + 1 || r.height === 0) continue;
        // SlickGrid draws only the columns in view; a cell's "lN" class is its column.
        const key = Math.round(r.top);
        const cells = byTop.get(key) || new Array(heads.length).fill(null);
        for (const c of row.querySelectorAll('.slick-cell')) {
          const m = [...c.classList].map((k) => /^l(\\d+)$/.exec(k)).find((x) => x);
          if (m) cells[Number(m[1])] = c.textContent;
        }
        byTop.set(key, cells);
      }
    }
    const rows = [...byTop.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1]);
    return {width: box.width, height: box.height, headers, rows,
            scrollable: [...t.querySelectorAll('.slick-viewport')].some((v) => v.scrollWidth > v.clientWidth + 1)};
  });
}
"""
)

# True when a bokeh tooltip is on screen under ``root`` (through shadow roots).
_TOOLTIP_SHOWN_JS = """
(root) => {
  const walk = (node) => {
    for (const el of node.querySelectorAll('*')) {
      if (el.classList && [...el.classList].some((c) => /tooltip/i.test(c))) {
        const r = el.getBoundingClientRect();
        if (r.width > 0 && r.height > 0 && getComputedStyle(el).display !== 'none') return true;
      }
      if (el.shadowRoot && walk(el.shadowRoot)) return true;
    }
    return false;
  };
  return walk(root);
}
"""

# The first name cell of the first table under ``root``.
_FIRST_NAME_CELL_JS = """
(root) => {
  const walk = (node) => {
    for (const el of node.querySelectorAll('*')) {
      if (el.classList && el.classList.contains('slick-cell') && el.classList.contains('l0')) return el;
      if (el.shadowRoot) { const found = walk(el.shadowRoot); if (found) return found; }
    }
    return null;
  };
  return walk(root);
}
"""

# The timeline figure under ``root``: its visible x range, and the labels its
# axis gives the ticks of that range.
_RANGE_JS = """
(root) => {
  const views = [...((window.Bokeh && window.Bokeh.index) || [])].filter((v) => v.model.name === 'torchprof-timeline' && root.contains(v.el));
  if (!views.length) return null;
  const v = views[0], p = v.model;
  const rect = v.canvas_view.el.getBoundingClientRect();
  const f = v.frame;
  const axis = p.below[0];
  const ticks = axis.ticker.get_ticks(p.x_range.start, p.x_range.end, p.x_range, 0).major;
  const labels = axis.formatter.doFormat(ticks, {loc: 0});
  const drag = p.toolbar.active_drag;
  // The widest device glyph in view: where a hover shows a tooltip.
  const d = p.document.get_model_by_name('torchprof-device').data;
  let best = -1;
  for (let i = 0; i < d.x.length; i++) {
    const c = d.x[i] + d.w[i] / 2;
    if (c > p.x_range.start && c < p.x_range.end && (best < 0 || d.w[i] > d.w[best])) best = i;
  }
  const glyph = best < 0 ? null : {x: rect.left + f.x_scale.compute(d.x[best] + d.w[best] / 2),
                                   y: rect.top + f.y_scale.compute(d.y[best])};
  return {start: p.x_range.start, end: p.x_range.end, labels, drag: drag && drag.type, glyph,
          frame: {x: rect.left + f.bbox.left, y: rect.top + f.bbox.top, w: f.bbox.width, h: f.bbox.height}};
}
"""

# Sets the timeline's visible x range (as a drag or a zoom would).
_SET_RANGE_JS = """
([root, start, end]) => {
  const v = [...((window.Bokeh && window.Bokeh.index) || [])].find((v) => v.model.name === 'torchprof-timeline' && root.contains(v.el));
  v.model.x_range.setv({start, end});
}
"""

_UNIT = {"ns": 1e-3, "µs": 1.0, "ms": 1e3, "s": 1e6, None: 1.0}


def _number(cell: str) -> float:
    m = re.match(r"^(-?[\d.]+)\s*(ns|µs|ms|s)?$", cell.replace(",", "").strip())
    return float(m.group(1)) * _UNIT[m.group(2)] if m else math.nan


def _close(shown: str, value: float) -> bool:
    """A cell shows ``value`` to its display precision (3 significant digits)."""
    got = _number(shown)
    return math.isclose(got, value, rel_tol=6e-3, abs_tol=1e-3)


def _shot(target, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(SHOTS / f"{name}.png"))


def _tables(page, locator) -> list[dict]:
    return page.evaluate(_TABLES_JS, locator.element_handle())


def _wait_table(page, locator, rows: int = 3, timeout: float = 30_000, until=None) -> dict:
    """The first table under ``locator`` once it is drawn with ``rows`` rows on screen.

    ``until(table)``, when given, must hold too (a state the table changes to).
    """
    deadline = page.evaluate("Date.now()") + timeout
    tables: list[dict] = []
    while page.evaluate("Date.now()") < deadline:
        tables = _tables(page, locator)
        if tables and tables[0]["width"] > 50 and len(tables[0]["rows"]) >= rows:
            if until is None or until(tables[0]):
                return tables[0]
        page.wait_for_timeout(250)
    raise AssertionError(f"no table drawn with {rows} rows: {[(t['width'], len(t['rows'])) for t in tables]}")


def _column(table: dict, title: str) -> int:
    titles = [h["text"].replace(" /step", "") for h in table["headers"]]
    return titles.index(title)


def _check_rows(table: dict, expected: dict, columns: dict[str, int]) -> None:
    """At least three rows on screen show the numbers Python holds for their name.

    ``columns`` maps a header to the index of the value in ``expected[name]``.
    """
    idx = {title: _column(table, title) for title in columns}
    matched = 0
    for cells in table["rows"]:
        candidates = expected.get(cells[0])
        assert candidates, f"{cells[0]!r} is not a row of the Python table"
        assert all(cells[idx[t]] is not None for t in columns), (cells, "a checked column is not drawn")
        ok = any(all(_close(cells[idx[t]], values[i]) for t, i in columns.items()) for values in candidates)
        assert ok, (table["headers"], cells, candidates)
        matched += 1
    assert matched >= 3, table["rows"]


def _check_headers(table: dict) -> None:
    """Every header reads whole; those past the right edge are reached by scrolling."""
    assert not [h["text"] for h in table["headers"] if h["cut"]], table["headers"]
    assert table["scrollable"] or not any(h["offscreen"] for h in table["headers"]), table["headers"]


def _cell(page, i: int):
    return page.locator(".jp-Notebook .jp-CodeCell").nth(i)


def _tab(view, title: str):
    return view.locator(".jp-TorchProf-tab", has_text=title).first


def test_every_view_shows_its_numbers(page, lab):
    trace = real_trace("a100_nccl_rank0.pt.trace.json.gz")
    cells = [SETUP, CPU_RUN, f"%torchprof --load {trace} -o gpu", COMPARE, EXPECTED]
    write_notebook(lab.root, "every_view.ipynb", cells)
    open_notebook(page, lab, "every_view.ipynb")
    run_all(page, timeout_ms=400_000)
    path = lab.root / "every_view_expected.json"
    if not path.exists():
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        raise AssertionError(f"the notebook did not finish: {errors.all_inner_texts()}")
    expected = json.loads(path.read_text())

    _check_cpu_run(page, expected)
    _check_kernels(page, expected)
    _check_timeline_tools(page, _cell(page, 2).locator(".jp-TorchProf-view").first)
    _check_compare(page, expected)
    _check_sidebar(page, lab)
    _check_report(page, lab, expected)


def _check_cpu_run(page, expected: dict) -> None:
    view = _cell(page, 1).locator(".jp-TorchProf-view").first
    view.wait_for(timeout=60_000)
    table = _wait_table(page, view.locator(".jp-TorchProf-optable"))
    _check_rows(table, expected["ops"], {"Calls": 0, "Self CPU": 1})
    # The name column takes the room there is: no wide empty area to the right.
    assert table["headers"][-1]["right"] > table["width"] * 0.8 + table["headers"][0]["left"] - 20, table
    _shot(view, "cpu-ops-self")
    # Total mode: every header readable, the last one too.
    view.locator(".jp-TorchProf-togglebutton", has_text="total").first.click()
    has_avg = lambda t: "CPU avg" in [h["text"] for h in t["headers"]]  # noqa: E731
    table = _wait_table(page, view.locator(".jp-TorchProf-optable"), until=has_avg)
    page.wait_for_timeout(500)  # the name column is refitted to the new columns
    table = _wait_table(page, view.locator(".jp-TorchProf-optable"), until=has_avg)
    _check_headers(table)
    _shot(view, "cpu-ops-total")
    view.locator(".jp-TorchProf-togglebutton", has_text="self").first.click()

    _tab(view, "Timeline").click()
    page.wait_for_function(
        f"(root) => ({_RANGE_JS})(root) !== null", arg=view.element_handle(), timeout=30_000
    )
    _shot(view, "cpu-timeline")
    _tab(view, "Memory").click()
    memory = view.locator(".jp-TorchProf-memory")
    memory.wait_for(state="visible", timeout=30_000)
    assert memory.bounding_box()["width"] > 50
    _shot(view, "cpu-memory")


def _check_kernels(page, expected: dict) -> None:
    view = _cell(page, 2).locator(".jp-TorchProf-view").first
    view.scroll_into_view_if_needed()
    _tab(view, "Kernels").click()
    pane = view.locator(".jp-TorchProf-kerneltable")
    table = _wait_table(page, pane)
    _check_rows(table, expected["kernels"], {"Calls": 0, "Total": 1})
    _check_headers(table)
    titles = [h["text"] for h in table["headers"]]
    assert "Launched by" in titles and "Grid" in titles, titles
    # Unknown occupancy reads "–", never "0.0".
    if "Occupancy %" in titles:
        occ = _column(table, "Occupancy %")
        assert all(r[occ] != "0.0" for r in table["rows"]), [r[occ] for r in table["rows"]]
    # Columns past the right edge are reached by scrolling sideways.
    assert table["scrollable"], "the kernel table's wide columns cannot be reached"
    # A name cut short tells the whole name on hover (squeeze one cell as a
    # narrow window would, then move the mouse onto it).
    cell = page.evaluate_handle(_FIRST_NAME_CELL_JS, pane.element_handle())
    cell.evaluate("(c) => { c.style.width = '60px'; }")
    cell.hover()
    page.wait_for_function("(c) => c.getAttribute('title') === c.textContent", arg=cell, timeout=10_000)
    assert cell.evaluate("(c) => c.textContent") == table["rows"][0][0]
    _shot(view, "gpu-kernels")


def _range(page, view) -> dict:
    return page.evaluate(_RANGE_JS, view.element_handle())


def _tool(view, icon: str):
    return view.locator(f".bk-tool-icon-{icon}").first


def _check_timeline_tools(page, view) -> None:
    """Zoom in, zoom out, reset, pan and Ctrl + wheel each move the range as they say."""
    view.scroll_into_view_if_needed()
    _tab(view, "Timeline").click()
    page.wait_for_function(
        f"(root) => ({_RANGE_JS})(root) !== null", arg=view.element_handle(), timeout=30_000
    )
    page.wait_for_timeout(500)
    for icon in ("zoom-in", "zoom-out", "reset", "x-pan"):
        assert _tool(view, icon).is_visible(), f"the {icon} tool is not on screen"
    first = _range(page, view)
    span = first["end"] - first["start"]
    _tool(view, "zoom-in").click()
    page.wait_for_timeout(300)
    r = _range(page, view)
    assert math.isclose(r["end"] - r["start"], span * 0.55, rel_tol=1e-3), (first, r)
    assert math.isclose((r["end"] + r["start"]) / 2, (first["end"] + first["start"]) / 2, rel_tol=1e-6)
    _tool(view, "zoom-in").click()
    _tool(view, "zoom-out").click()
    page.wait_for_timeout(300)
    r = _range(page, view)
    assert math.isclose(r["end"] - r["start"], span * 0.55, rel_tol=1e-3), (first, r)
    _shot(view, "timeline-zoomed")

    # Pan (the active drag tool): drag left by 200 px, the window moves later, same width.
    assert _range(page, view)["drag"] == "PanTool"
    before = _range(page, view)
    f = before["frame"]
    page.mouse.move(f["x"] + f["w"] / 2, f["y"] + 5)
    page.mouse.down()
    page.mouse.move(f["x"] + f["w"] / 2 - 200, f["y"] + 5, steps=8)
    page.mouse.up()
    page.wait_for_timeout(300)
    r = _range(page, view)
    width = before["end"] - before["start"]
    assert math.isclose(r["end"] - r["start"], width, rel_tol=1e-6), (before, r)
    assert math.isclose(r["start"] - before["start"], width * 200 / f["w"], rel_tol=0.05), (before, r)

    # Ctrl + wheel right after a hover over a glyph (its tooltip under the mouse) still zooms.
    g = _range(page, view)["glyph"]
    page.mouse.move(g["x"] - 2, g["y"])
    page.mouse.move(g["x"], g["y"], steps=3)
    # (BokehJS puts the tooltip outside the view's element.)
    page.wait_for_function(_TOOLTIP_SHOWN_JS, arg=page.locator("body").element_handle(), timeout=10_000)
    before = _range(page, view)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -200)
    page.keyboard.up("Control")
    page.wait_for_timeout(400)
    r = _range(page, view)
    assert r["end"] - r["start"] < (before["end"] - before["start"]) * 0.95, (before, r)

    # Reset: back to the whole trace.
    _tool(view, "reset").click()
    page.wait_for_timeout(300)
    r = _range(page, view)
    assert math.isclose(r["start"], first["start"], abs_tol=1e-6) and math.isclose(r["end"], first["end"])

    # Deep zoom: 40 µs at 60 ms into the trace; every tick label differs.
    page.evaluate(_SET_RANGE_JS, [view.element_handle(), first["start"] + 60_000, first["start"] + 60_040])
    page.wait_for_timeout(500)
    labels = _range(page, view)["labels"]
    assert len(labels) >= 3 and len(set(labels)) == len(labels), labels
    _shot(view, "timeline-deep-zoom")
    _tool(view, "reset").click()


def _check_compare(page, expected: dict) -> None:
    view = _cell(page, 3).locator(".jp-TorchProf-compare").first
    view.scroll_into_view_if_needed()
    # diff (the default state): the table is drawn, wide, with Python's numbers.
    table = _wait_table(page, view.locator(".jp-TorchProf-difftable"))
    _check_rows(table, expected["diff"], {"Calls eager": 0, "Calls compiled": 1, "Self CPU eager": 2})
    _check_headers(table)
    box = view.bounding_box()
    assert table["width"] > box["width"] * 0.8, (table["width"], box)
    breaks = _wait_table(page, view.locator(".jp-TorchProf-breaktable"), rows=1)
    assert breaks["width"] > box["width"] * 0.8, (breaks["width"], box)
    shown = [(r[0], r[1]) for r in breaks["rows"]]
    assert (f"Cell In[{expected['break_cell']}], line 3", "print('break')") in shown, (
        shown,
        expected["breaks"],
    )
    _shot(view, "compare-diff")
    for state in ("eager", "compiled"):
        view.locator(".jp-TorchProf-toggle .jp-TorchProf-togglebutton", has_text=state).first.click()
        title = page.locator(".jp-TorchProf-title", has_text=f"[{state}]")
        inner = view.locator(".jp-TorchProf-view", has=title).filter(visible=True).first
        inner.wait_for(timeout=30_000)
        inner = inner.locator(".jp-TorchProf-optable")
        table = _wait_table(page, inner)
        _check_rows(table, expected[state], {"Calls": 0, "Self CPU": 1})
        _shot(view, f"compare-{state}")
    # Back to the diff, after a resize: still drawn.
    view.locator(".jp-TorchProf-toggle .jp-TorchProf-togglebutton", has_text="diff").first.click()
    page.set_viewport_size({"width": 1100, "height": 1000})
    page.wait_for_timeout(800)
    table = _wait_table(page, view.locator(".jp-TorchProf-difftable"))
    assert table["width"] > view.bounding_box()["width"] * 0.8
    page.set_viewport_size({"width": 1400, "height": 1000})


def _html_table(page, scope: str) -> dict:
    """A plain HTML table of the sidebar panels: its width and the rows on screen by column key."""
    return page.evaluate(
        """(scope) => {
            const t = document.querySelector(scope + ' table');
            const keys = [...t.tHead.rows[0].cells].map((th) => th.dataset.key);
            const vp = {top: 0, bottom: window.innerHeight};
            const rows = [...t.tBodies[0].rows].filter((r) => {
              const b = r.getBoundingClientRect();
              return b.height > 0 && b.top >= vp.top && b.bottom <= vp.bottom;
            }).map((r) => Object.fromEntries(keys.map((k, i) => [k, r.cells[i].textContent])));
            return {width: t.getBoundingClientRect().width, rows};
        }""",
        scope,
    )


def _check_sidebar(page, lab) -> None:
    page.locator('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="jupyter-torchprof-runs"]').click()
    sidebar = page.locator("#jupyter-torchprof-runs")
    cpu = sidebar.locator(
        ".jp-TorchProf-run", has=page.locator(".jp-TorchProf-runName", has_text="every-cpu")
    )
    cpu.first.wait_for(timeout=30_000)
    cpu.first.locator(".jp-TorchProf-runMain").click()
    scope = ".jp-TorchProf-runView .jp-TorchProf-ops"
    page.wait_for_selector(f"{scope} table", timeout=60_000)
    expected = json.loads((lab.root / "every_view_expected.json").read_text())["ops"]
    table = _html_table(page, scope)
    assert table["width"] > 50 and len(table["rows"]) >= 3, table
    for row in table["rows"]:
        calls = expected[row["name"]][0][0]
        assert float(row["calls"].replace(",", "")) == calls, (row, calls)
    _shot(page, "sidebar-run-panel")
    # Compare the CPU run with the eager side of the compare.
    eager = sidebar.locator(".jp-TorchProf-run", has=page.locator(".jp-TorchProf-runName", has_text="eager"))
    eager.first.locator(".jp-TorchProf-runSelect").check()
    cpu.first.locator(".jp-TorchProf-runSelect").check()
    sidebar.locator(".jp-TorchProf-compare").click()
    scope = ".jp-TorchProf-diffView .jp-TorchProf-opDiff"
    page.wait_for_selector(f"{scope} table", timeout=60_000)
    table = _html_table(page, scope)
    assert table["width"] > 50 and len(table["rows"]) >= 3, table
    names = page.locator(".jp-TorchProf-diffView .jp-TorchProf-diffName").all_inner_texts()
    assert any("every-cpu" in n for n in names), names
    side = "calls_a" if "every-cpu" in names[0] else "calls_b"
    for row in table["rows"]:
        if row["name"] in expected and row[side].strip() not in ("", "–"):
            assert float(row[side].replace(",", "")) == expected[row["name"]][0][0] / 3, row
    _shot(page, "sidebar-compare-panel")


def _check_report(page, lab, expected: dict) -> None:
    page.goto((lab.root / "every_view_report.html").as_uri())
    page.locator("#ops tbody tr").first.wait_for(state="visible", timeout=30_000)
    box = page.locator("#ops").bounding_box()
    assert box["width"] > 50
    heads = [h.strip() for h in page.locator("#ops thead th").all_inner_texts()]
    name_i, calls_i = heads.index("Name"), heads.index("Calls")
    rows = page.evaluate(
        "([n, c]) => [...document.querySelectorAll('#ops tbody tr')].filter(r => r.getBoundingClientRect().height > 0)"
        ".slice(0, 5).map(r => [r.cells[n].textContent, r.cells[c].getAttribute('data-v')])",
        [name_i, calls_i],
    )
    assert len(rows) >= 3
    for name, calls in rows:
        assert float(calls) == expected["ops"][name][0][0], (name, calls)
    _shot(page, "report")
