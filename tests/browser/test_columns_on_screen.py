"""The columns that matter are on screen at 1000, 1400 and 1920 px, and FLOPs read with SI units.

One JupyterLab, one notebook (file browser open, as in a default JupyterLab):
a ``--load`` of the real A100 trace (op and kernel tables) and a
``%%torchprof --compare --flops`` of a small CPU model (the diff table, and
the eager side's op table with FLOPs and FLOP/s). For each window width the
page is resized, and in each table the header cell of the column the rows
are sorted by, and of every time column, must lie inside the table's box,
not scrolled off to the side; the name column is what gives way.
"""

from __future__ import annotations

import re

import pytest
from labkit import open_notebook, run_all, with_page_helpers, write_notebook
from tracefiles import real_trace

WIDTHS = (1000, 1400, 1920)
SI_FLOPS = re.compile(r"^(\d+(\.\d+)? [kMGTP]?FLOP|–)$")
SI_RATE = re.compile(r"^(\d+(\.\d+)? [kMGTP]?FLOP/s|–)$")

# Every bokeh DataTable under ``root`` (through shadow roots): its box, its
# visible headers (frozen pane first) with their boxes, and the text of the
# drawn cells of each column (SlickGrid's "lN" class is the column).
_TABLES_JS = with_page_helpers(
    """
(root) => {
  const tables = bokehTables(root);
  const left = (el) => (el.closest('.slick-pane-left') ? 0 : 1);
  return tables.filter((t) => t.getBoundingClientRect().width > 0).map((t) => {
    const box = t.getBoundingClientRect();
    const heads = [...t.querySelectorAll('.slick-header-column')].sort((a, b) => left(a) - left(b));
    const headers = heads.map((h) => {
      const r = h.getBoundingClientRect();
      const name = h.querySelector('.slick-column-name') || h;
      return {text: name.textContent.trim(), left: r.left, right: r.right, width: r.width};
    });
    const cells = headers.map(() => []);
    for (const c of t.querySelectorAll('.slick-cell')) {
      const m = [...c.classList].map((k) => /^l(\\d+)$/.exec(k)).find((x) => x);
      if (m && Number(m[1]) < cells.length) cells[Number(m[1])].push(c.textContent.trim());
    }
    return {left: box.left, right: box.right, headers, cells};
  });
}
"""
)

_SCROLL_RIGHT_JS = """
(root) => {
  const walk = (node) => {
    for (const el of node.querySelectorAll('*')) {
      if (el.classList && el.classList.contains('slick-viewport')) {
        const v = el; v.scrollLeft = v.scrollWidth; v.dispatchEvent(new Event('scroll'));
      }
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(root);
}
"""


def _tables(page, root):
    return page.evaluate(_TABLES_JS, root.element_handle())


def _views(page):
    return page.locator(".jp-OutputArea-output .jp-TorchProf-view")


def _tab(view, title: str):
    return view.locator(".jp-TorchProf-tab", has_text=title).first


def _on_screen(table: dict, titles: list[str]) -> list[str]:
    """The titles among ``titles`` whose header is not wholly inside the table's box."""
    by_title = {h["text"]: h for h in table["headers"]}
    bad = []
    for title in titles:
        h = by_title.get(title)
        if h is None or h["width"] < 20 or h["left"] < table["left"] - 1 or h["right"] > table["right"] + 1:
            bad.append(f"{title}: {h}")
    return bad


def _wait_on_screen(page, root, titles: list[str], pick=lambda ts: ts[0], timeout=20_000):
    """The table once every header of ``titles`` is inside its box (the view fits itself after a resize)."""
    deadline = page.evaluate("Date.now()") + timeout
    table, bad = None, ["no table"]
    while page.evaluate("Date.now()") < deadline:
        tables = _tables(page, root)
        if tables:
            table = pick(tables)
            bad = _on_screen(table, titles)
            if not bad:
                return table
        page.wait_for_timeout(250)
    headers = table and [(h["text"], round(h["left"]), round(h["right"])) for h in table["headers"]]
    box = table and (round(table["left"]), round(table["right"]))
    raise AssertionError(f"off screen: {bad}; table box {box}; headers {headers}")


def _time_titles(table: dict, extra: tuple[str, ...] = ()) -> list[str]:
    """Headers of the time columns the table shows (their titles, as the catalog names them)."""
    from jupyter_torchprof import columns

    time_titles = set()
    for cols in (columns.OPS, columns.KERNELS, columns.diff_ops("eager", "compiled")):
        for c in cols:
            if c.kind in ("time", "delta"):
                time_titles |= {c.title, f"{c.title} /step"}
    return [h["text"] for h in table["headers"] if h["text"] in time_titles] + list(extra)


def _column(table: dict, title: str) -> list[str]:
    i = [h["text"] for h in table["headers"]].index(title)
    return table["cells"][i]


@pytest.fixture
def notebook(page, lab):
    trace = real_trace("a100_nccl_rank0.pt.trace.json.gz")
    write_notebook(
        lab.root,
        "columns_on_screen.ipynb",
        [
            "%load_ext jupyter_torchprof\nimport torch\n"
            "m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))\n"
            "x = torch.randn(32, 64)",
            f"%torchprof --load {trace}",
            "%%torchprof --compare --backend aot_eager --steps 2 --flops\ny = m(x).sum()",
        ],
    )
    open_notebook(page, lab, "columns_on_screen.ipynb")
    # A default JupyterLab shows the file browser beside the notebook.
    page.evaluate("window.jupyterapp.commands.execute('filebrowser:activate')")
    page.locator("#filebrowser").wait_for(state="visible", timeout=20_000)
    run_all(page)
    views = _views(page)
    views.nth(1).wait_for(timeout=120_000)
    return views


def test_sorted_and_time_columns_stay_on_screen_and_flops_read_in_si(page, lab, notebook):
    load, compare = notebook.nth(0), notebook.nth(1)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 1000})
        assert page.locator("#filebrowser").is_visible()

        # The A100 op table is sorted by self device time.
        _tab(load, "Ops").click()
        load.scroll_into_view_if_needed()
        ops = load.locator(".jp-TorchProf-optable").first
        table = _wait_on_screen(page, ops, ["Self device"])
        _wait_on_screen(page, ops, _time_titles(table, ("Self device",)))

        # The kernel table by total time.
        _tab(load, "Kernels").click()
        kernels = load.locator(".jp-TorchProf-kerneltable").first
        table = _wait_on_screen(page, kernels, ["Total"])
        times = _time_titles(table, ("Total",))
        assert {"Total", "Mean", "Max"} <= set(times), times
        _wait_on_screen(page, kernels, times)
        _tab(load, "Ops").click()

        # The diff: sorted by the size of the change in CPU total time.
        compare.scroll_into_view_if_needed()
        compare.locator(".jp-TorchProf-sides .jp-TorchProf-togglebutton", has_text="diff").first.click()
        diff = compare.locator(".jp-TorchProf-difftable").first
        table = _wait_on_screen(page, diff, ["Δ CPU total"])
        times = _time_titles(table, ("Δ CPU total",))
        assert len(set(times)) == 6, times
        _wait_on_screen(page, diff, times)

        # The eager side's op table: FLOPs and FLOP/s in SI units.
        compare.locator(".jp-TorchProf-sides .jp-TorchProf-togglebutton", has_text="eager").first.click()
        eager = compare.locator(".jp-TorchProf-optable").first
        _wait_on_screen(page, eager, ["Self CPU"])
        # SlickGrid draws the cells of the columns in view: scroll to the last ones.
        page.evaluate(_SCROLL_RIGHT_JS, eager.element_handle())
        page.wait_for_timeout(300)
        table = _tables(page, eager)[0]
        flops, rates = _column(table, "FLOPs"), _column(table, "FLOP/s")
        page.evaluate(_SCROLL_RIGHT_JS.replace("v.scrollWidth", "0"), eager.element_handle())
        assert flops and all(SI_FLOPS.match(c) for c in flops), flops
        assert rates and all(SI_RATE.match(c) for c in rates), rates
        assert any(c != "–" for c in flops) and any(c != "–" for c in rates), (flops, rates)
