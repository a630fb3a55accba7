"""A folder of rank traces in a real JupyterLab: a row and a bar per rank, the verdict, a click into a rank.

The folder holds copies of real traces, each told its rank: two V100 DDP
ranks and an A100 rank whose steps take ~2.8x as long (the straggler).
"""

from __future__ import annotations

import re

from labkit import open_notebook, run_all, write_notebook
from test_views_in_lab import _shot, _table_rows, _wait_rows
from tracefiles import write_rank_folder

SOURCES = {
    0: "v100_ddp_ns_timestamps.pt.trace.json.gz",
    1: "v100_ddp_ns_timestamps.pt.trace.json.gz",
    2: "a100_nccl_rank0.pt.trace.json.gz",
}

# The bars of the rank chart under ``root``: its labels, as BokehJS holds them
# for the drawn glyphs (one bar per label and series).
_BARS_JS = """
(root) => {
  const views = [...((window.Bokeh && window.Bokeh.index) || [])].filter(v => v.model.name === 'torchprof-rankchart' && root.contains(v.el));
  if (!views.length) return null;
  const out = [];
  for (const r of views[0].model.renderers) {
    if (r.glyph && r.glyph.type === 'HBar') out.push([...r.data_source.data.label]);
  }
  return out;
}
"""


def _job(root):
    return write_rank_folder(root / "rankjob", SOURCES)


def test_rank_folder_view_shows_every_rank_the_verdict_and_opens_a_rank(page, lab):
    folder = _job(lab.root)
    write_notebook(lab.root, "ranks.ipynb", ["%load_ext jupyter_torchprof", f"%torchprof --load {folder}"])
    open_notebook(page, lab, "ranks.ipynb")
    run_all(page)
    view = page.locator(".jp-OutputArea-output .jp-TorchProf-ranks").first
    view.wait_for(timeout=90_000)

    # One row per rank in the table, in rank order.
    rows = _wait_rows(page, view, lambda r: len(r) == len(SOURCES))
    assert [cells[0] for cells in rows] == [str(r) for r in sorted(SOURCES)]
    # One bar per rank (step time; device busy beside it on these GPU ranks).
    page.wait_for_function(
        f"(root) => ({_BARS_JS})(root) !== null", arg=view.element_handle(), timeout=30_000
    )
    bars = page.evaluate(_BARS_JS, view.element_handle())
    assert bars and all(labels == [f"rank {r}" for r in sorted(SOURCES)] for labels in bars)
    # The verdict, in words, at the top.
    verdict = view.locator(".jp-TorchProf-verdict").first.inner_text()
    assert "Rank 2 is a straggler" in verdict and "× the median rank" in verdict
    assert "Rank 0" not in verdict
    # No rank opened yet.
    assert view.locator(".jp-TorchProf-rankdetail .jp-TorchProf-view").count() == 0
    _shot(page, lab, "ranks", view)

    # Click rank 2's row: its full view opens below, with its op table.
    view.locator(".slick-cell.l0").filter(has_text=re.compile(r"^\s*2\s*$")).first.click()
    opened = view.locator(".jp-TorchProf-rankdetail .jp-TorchProf-view").first
    opened.wait_for(timeout=90_000)
    ops = _wait_rows(page, opened, lambda r: len(r) >= 5)
    names = [cells[0] for cells in ops]
    assert any(n.startswith("aten::") for n in names), names[:10]
    assert "rank 2" in view.locator(".jp-TorchProf-rankstatus").first.inner_text()
    # The rank table above still shows every rank.
    assert len(_table_rows(page, view)) >= len(SOURCES)
    _shot(page, lab, "ranks_opened", view)
