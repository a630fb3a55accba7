"""The notes on rows as a person meets them: in JupyterLab (Chromium) and in the exported report.

A ``%torchprof --load`` of the real A100 trace. In the Ops table the
``aten::t`` row's Note chips read what `Profile.ops` says (the oracle, loaded
here in the test's own process); clicking the row shows each note's
explanation; "note's event in timeline" opens the timeline on the event that
showed the note (its time from `Profile.events`); hovering that event's box
says the note. The report of the same trace, opened offline, shows the note
in the op table as a link, and following it lands on the explanation under
"What the notes mean".
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import pandas as pd
import pytest
from labkit import open_notebook, run_all, with_page_helpers, write_notebook
from tracefiles import real_trace

from jupyter_torchprof.analysis.notes import SEPARATOR

TRACE = "a100_nccl_rank0.pt.trace.json.gz"
OP = "aten::t"


@pytest.fixture(scope="module")
def oracle():
    from jupyter_torchprof import load

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = load(str(real_trace(TRACE)))
    hits = p.annotations
    mine = hits[(hits["table"] == "ops") & (hits["key"] == OP)]
    assert len(mine), f"{OP} has a note in {TRACE}"
    event = int(mine["event"].iloc[0])
    ev = p.events
    note = str(p.ops.loc[p.ops["name"] == OP, "note"].iloc[0])
    return {
        "profile": p,
        "note": note,
        "whys": mine["why"].tolist(),
        "ids": mine["id"].tolist(),
        "ts": float(ev["ts"].iloc[event]),
        "end": float(ev["ts"].iloc[event] + ev["dur"].iloc[event]),
        "span": float((ev["ts"] + ev["dur"].fillna(0)).max() - ev["ts"].min()),
        # Each GEMM kernel's Tensor cores cell (the kernel table matches "gemm" in either name).
        "gemm": {
            str(s): ("" if pd.isna(t) else str(t))
            for s, n, t in zip(
                p.kernels["short_name"], p.kernels["name"], p.kernels["tensor_cores"], strict=True
            )
            if "gemm" in str(s).lower() or "gemm" in str(n).lower()
        },
    }


# The note chips of each drawn row of the first bokeh table under ``root``,
# keyed by the row's name (the frozen pane holds the name; rows are joined by
# their offset).
_CHIPS_JS = with_page_helpers(
    """
(root) => {
  const tables = bokehTables(root);
  const visible = tables.filter((t) => t.getBoundingClientRect().width > 0);
  if (!visible.length) return null;
  const byTop = new Map();
  for (const r of visible[0].querySelectorAll('.slick-row')) {
    const top = r.style.top;
    const entry = byTop.get(top) || {name: null, chips: []};
    if (r.closest('.slick-viewport-left') || r.closest('.slick-pane-left')) {
      entry.name = r.querySelector('.slick-cell').textContent.trim();
    }
    for (const c of r.querySelectorAll('.torchprof-note-chip')) {
      const box = c.getBoundingClientRect();
      entry.chips.push({text: c.textContent, width: box.width, height: box.height});
    }
    byTop.set(top, entry);
  }
  return [...byTop.values()].filter((e) => e.name !== null);
}
"""
)

# The timeline under ``root``: its x range, and the screen position of the
# host box named ``name`` whose middle is in view.
_TIMELINE_JS = """
([root, name]) => {
  const views = [...((window.Bokeh && window.Bokeh.index) || [])].filter(v => v.model.name === 'torchprof-timeline' && root.contains(v.el));
  if (!views.length) return null;
  const pv = views[0];
  const model = pv.model;
  const doc = model.document;
  const out = {start: model.x_range.start, end: model.x_range.end, at: null};
  const strings = doc.get_model_by_name('torchprof-strings').data.s;
  const code = strings.indexOf(name);
  const d = doc.get_model_by_name('torchprof-host').data;
  for (let i = 0; i < d.x.length; i++) {
    const mid = d.x[i] + d.w[i] / 2;
    if (d.n[i] !== code || d.k[i] !== 1 || mid < out.start || mid > out.end) continue;
    const rect = pv.canvas_view.el.getBoundingClientRect();
    out.at = {x: rect.left + pv.frame.x_scale.compute(mid), y: rect.top + pv.frame.y_scale.compute(d.y[i])};
    break;
  }
  return out;
}
"""


# Headers and drawn rows of the first visible bokeh table under ``root``; a
# row's cells by SlickGrid's column class (``lN``: null where not drawn). With
# ``reveal``, first scroll sideways to that column, as a person does.
_TABLE_JS = with_page_helpers(
    """
([root, reveal]) => {
  const tables = bokehTables(root);
  const t = tables.find((x) => x.getBoundingClientRect().width > 0);
  if (!t) return null;
  const left = (el) => (el.closest('.slick-pane-left') ? 0 : 1);
  const heads = [...t.querySelectorAll('.slick-header-column')].sort((a, b) => left(a) - left(b));
  const headers = heads.map((h) => (h.querySelector('.slick-column-name') || h).textContent.trim());
  if (reveal) {
    const h = heads[headers.indexOf(reveal)];
    const vp = [...t.querySelectorAll('.slick-viewport')].find((v) => left(v) === 1 && v.scrollWidth > v.clientWidth);
    if (h && vp) { vp.scrollLeft = Math.max(0, h.offsetLeft - 40); vp.dispatchEvent(new Event('scroll')); }
  }
  const byTop = new Map();
  for (const r of t.querySelectorAll('.slick-row')) {
    const top = parseFloat(r.style.top || '0');
    const cells = byTop.get(top) || headers.map(() => null);
    for (const c of r.querySelectorAll('.slick-cell')) {
      const m = [...c.classList].map((k) => /^l(\\d+)$/.exec(k)).find((x) => x);
      if (m && Number(m[1]) < cells.length) cells[Number(m[1])] = c.textContent;
    }
    byTop.set(top, cells);
  }
  return {headers, rows: [...byTop.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1])};
}
"""
)


def _shot(page, lab, name: str, locator=None) -> None:
    path = Path(os.environ.get("TORCHPROF_SCREENSHOTS", lab.root.parent / "screenshots"))
    path.mkdir(parents=True, exist_ok=True)
    (locator or page).screenshot(path=str(path / f"{name}.png"))


def _views(page):
    return page.locator(".jp-OutputArea-output .jp-TorchProf-view")


def _tab(view, title: str):
    return view.locator(".jp-TorchProf-tab", has_text=title).first


def test_a_note_in_the_table_the_selection_the_timeline_and_its_hover(page, lab, oracle):
    trace = real_trace(TRACE)
    write_notebook(
        lab.root, "notes_load.ipynb", ["%load_ext jupyter_torchprof", f"%torchprof --load {trace}"]
    )
    page.set_viewport_size({"width": 1000, "height": 1000})
    open_notebook(page, lab, "notes_load.ipynb")
    run_all(page)
    view = _views(page).first
    view.wait_for(timeout=90_000)

    # The aten::t row alone (a filter a person types); its chips say what Profile.ops says.
    view.locator(".jp-TorchProf-filter input").first.fill(f"^{OP}$")
    deadline = page.evaluate("Date.now()") + 30_000
    rows = None
    while page.evaluate("Date.now()") < deadline:
        rows = page.evaluate(_CHIPS_JS, view.element_handle())
        if rows and [r["name"] for r in rows] == [OP] and rows[0]["chips"]:
            break
        page.wait_for_timeout(250)
    assert rows and [r["name"] for r in rows] == [OP], rows
    chips = rows[0]["chips"]
    assert SEPARATOR.join(c["text"] for c in chips) == oracle["note"]
    # Drawn as chips a person can read, not a zero-size box.
    assert all(c["width"] > 20 and 10 <= c["height"] <= 24 for c in chips), chips

    # Clicking the row: the selection line explains each note and names its event.
    view.locator(".slick-cell", has_text=OP).first.click()
    selection = view.locator(".jp-TorchProf-selection").first
    for why in oracle["whys"]:
        page.wait_for_function(
            "([el, why]) => el.textContent.includes(why)",
            arg=[selection.element_handle(), why.replace("`", "")],  # `names` are set as code
            timeout=20_000,
        )
    assert selection.locator(".jp-TorchProf-note-why").first.is_visible()
    assert f"seen at: {OP} at" in selection.inner_text()
    _shot(page, lab, "notes_ops_selected", view)

    # "note's event in timeline": the timeline opens on that event.
    goto = view.locator(".jp-TorchProf-notegoto").first
    goto.wait_for(state="visible", timeout=10_000)
    goto.click()
    state = None
    deadline = page.evaluate("Date.now()") + 60_000
    while page.evaluate("Date.now()") < deadline:
        state = page.evaluate(_TIMELINE_JS, [view.element_handle(), OP])
        if state and state["start"] <= oracle["ts"] and oracle["end"] <= state["end"] and state["at"]:
            break
        page.wait_for_timeout(250)
    assert state and state["start"] <= oracle["ts"] <= oracle["end"] <= state["end"], (state, oracle["ts"])
    assert state["end"] - state["start"] < oracle["span"] / 100, "zoomed in on the event"

    # Hovering the event's box: the tooltip says the note.
    at = state["at"]
    assert at is not None, "the event's box is drawn in the window"
    page.mouse.move(at["x"] - 3, at["y"])
    page.mouse.move(at["x"], at["y"], steps=3)
    page.get_by_text(f"note: {oracle['note']}", exact=True).filter(visible=True).first.wait_for(
        timeout=20_000
    )
    _shot(page, lab, "notes_hover", view)

    # The Kernels table: a "Tensor cores" column, and each GEMM row's value as Profile.kernels has it.
    _tab(view, "Kernels").click()
    kernels = view.locator(".jp-TorchProf-kerneltable")
    kernels.wait_for(timeout=60_000)
    view.locator(".jp-TorchProf-filter input").filter(visible=True).first.fill("gemm")
    expected = oracle["gemm"]
    table = None
    deadline = page.evaluate("Date.now()") + 30_000
    while page.evaluate("Date.now()") < deadline:
        table = page.evaluate(_TABLE_JS, [view.element_handle(), "Tensor cores"])
        at = table["headers"].index("Tensor cores") if table and "Tensor cores" in table["headers"] else -1
        rows = table["rows"] if table else []
        if at >= 0 and rows and all(r[0] in expected and r[at] is not None for r in rows):
            break
        page.wait_for_timeout(250)
    assert table and "Tensor cores" in table["headers"], table and table["headers"]
    seen = {r[0]: r[at] for r in table["rows"]}
    assert len(seen) >= 5 and set(seen) <= set(expected), (seen, expected)
    assert seen == {name: expected[name] for name in seen}
    assert "yes" in seen.values()
    _shot(page, lab, "notes_kernels_tensor_cores", view)


def test_the_report_links_each_note_to_its_explanation(page, oracle, tmp_path):
    report = tmp_path / "notes.html"
    oracle["profile"].export(report)
    page.goto(report.as_uri())
    # The op table's aten::t row shows its note as a link.
    row = page.locator(
        "#ops tbody tr", has=page.locator("td.tp-name", has_text=re.compile(rf"^{re.escape(OP)}$"))
    )
    assert row.count() == 1
    link = row.locator("a.tp-note").first
    assert SEPARATOR.join(row.locator("a.tp-note").all_inner_texts()) == oracle["note"]
    # "What the notes mean" lists it with its explanation; the link lands there.
    section = page.locator("#notes-section")
    assert "What the notes mean" in section.inner_text()
    link.click()
    page.wait_for_function(f"() => location.hash === '#note-{oracle['ids'][0]}'", timeout=10_000)
    target = page.locator(f"#note-{oracle['ids'][0]}")
    assert target.is_visible()
    # Scrolled into view and not under the page's sticky bar: what is drawn there is the explanation.
    on_top = page.evaluate(
        "(el) => { const r = el.getBoundingClientRect();"
        " const hit = document.elementFromPoint(r.left + 10, r.top + r.height / 2);"
        " return r.top >= 0 && r.bottom <= innerHeight && el.contains(hit); }",
        target.element_handle(),
    )
    assert on_top, "the explanation is on screen, not under the navigation bar"
    explanation = target.locator("xpath=following-sibling::dd[1]")
    assert explanation.inner_text() == oracle["whys"][0].replace("`", "")  # `names` are set as code
    assert explanation.is_visible()
