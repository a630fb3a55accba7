"""The roofline in a real JupyterLab, as a person meets it on the Kernels page.

A ``%torchprof --load`` of the real A100 trace (shapes recorded: mm, addmm,
bmm). Open the Kernels tab, click "Roofline": one point per top kernel
(`views.roofline.roofline_points`, in the Python order), the device's roofs
in the legend, and hovering each point shows the kernel with its FLOP/s, %
of peak and FLOP/byte exactly as the kernel table's cells format them. A
second click hides the plot. A trace of a device the peak table does not
know (GP100) says why there is no roofline instead of a button.
"""

from __future__ import annotations

import re
from collections import Counter

from labkit import open_notebook, run_all, write_notebook
from test_breakdown_in_lab import _TOOLTIP_TEXT_JS
from test_notes_in_lab import _TABLE_JS
from test_views_in_lab import _shot, _tab, _views
from tracefiles import real_trace

from jupyter_torchprof.columns import KERNELS, format_cell
from jupyter_torchprof.format import fmt_flops
from jupyter_torchprof.results.profile import Profile
from jupyter_torchprof.views.roofline import roofline_points, unavailable_reason

A100 = "diff_pair/control.pt.trace.json.gz"
UNKNOWN = "gp100_sgd_step_user_annotation.pt.trace.json.gz"

# The roofline under ``root``: its points (kernel, screen x/y), roof renderers and legend labels.
_PLOT_JS = """
(root) => {
  const v = [...((window.Bokeh && window.Bokeh.index) || [])].find(v => v.model.name === 'torchprof-roofline' && root.contains(v.el));
  if (!v) return null;
  const rect = v.canvas_view.el.getBoundingClientRect(), f = v.frame, p = v.model;
  const dots = p.renderers.find(r => r.name === 'kernels');
  const d = dots.data_source.data;
  const points = [...d.kernel].map((k, i) => ({kernel: k,
      x: rect.left + f.x_scale.compute(d.x[i]), y: rect.top + f.y_scale.compute(d.y[i])}));
  const v_ = (x) => (x !== null && typeof x === 'object' && 'value' in x) ? x.value : x;
  const legend = p.center.find(m => m.type === 'Legend');
  return {points, roofs: p.renderers.filter(r => r.name === 'roof').length,
          legend: legend ? legend.items.map(it => v_(it.label)) : [], width: rect.width, height: rect.height};
}
"""


def _plot(page, view):
    return page.evaluate(_PLOT_JS, view.element_handle())


def _hover(page, x: float, y: float, kernel: str) -> str:
    page.mouse.move(x - 6, y - 6)
    page.mouse.move(x, y, steps=3)
    page.wait_for_function(
        f"() => {{ const t = ({_TOOLTIP_TEXT_JS})(); return t !== null && t.includes({kernel!r}); }}",
        timeout=10_000,
    )
    return re.sub(r"\s+", " ", page.evaluate(_TOOLTIP_TEXT_JS))


def test_roofline_on_the_kernels_page(page, lab):
    profile = Profile.from_file(real_trace(A100))
    want = roofline_points(profile)
    assert len(want) >= 8 and profile.peaks is not None
    unknown = Profile.from_file(real_trace(UNKNOWN))
    reason = unavailable_reason(unknown)
    assert "no peak figures for Quadro GP100" in reason
    write_notebook(
        lab.root, "roofline.ipynb",
        ["%load_ext jupyter_torchprof", f"%torchprof --load {real_trace(A100)}", f"%torchprof --load {real_trace(UNKNOWN)}"],
    )  # fmt: skip
    open_notebook(page, lab, "roofline.ipynb")
    run_all(page)
    view = _views(page).first
    view.wait_for(timeout=120_000)
    _tab(view, "Kernels").click()
    toggle = view.locator(".jp-TorchProf-rooflinetoggle")
    toggle.wait_for(timeout=60_000)
    assert view.locator(".jp-TorchProf-rooflineplot").count() == 0  # made on the first click
    toggle.click()
    page.wait_for_function(
        f"(root) => ({_PLOT_JS})(root) !== null", arg=view.element_handle(), timeout=60_000
    )
    view.locator(".jp-TorchProf-rooflineplot").scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    plot = _plot(page, view)

    # Points drawn = the top kernels, in order; the roofs of the precisions they use.
    assert [p["kernel"] for p in plot["points"]] == want["short_name"].tolist()
    peaks = profile.peaks
    memory = f"memory {peaks.memory_bytes_per_s / 1e12:.2f} TB/s"
    precisions = list(dict.fromkeys(p.split(" ", 1)[0] for p in want["peak_precision"]))
    assert plot["roofs"] == len(precisions) == 2
    for prec in precisions:
        assert f"{prec} peak {fmt_flops(peaks.peak(prec), 'FLOP/s')} · {memory}" in plot["legend"], plot[
            "legend"
        ]
    _shot(page, lab, "roofline", view.locator(".jp-TorchProf-rooflineplot"))

    # Hover each point: its kernel with the Python numbers, as the kernel table's cells read.
    for i, row in want.iterrows():
        point = _plot(page, view)["points"][i]  # positions again: a screenshot may have scrolled
        text = _hover(page, point["x"], point["y"], row["short_name"])
        block = (
            f"kernel: {row['short_name']} FLOP/s: {row['est_flops_per_s_text']} "
            f"% of peak: {row['peak_pct_text']} % of {row['peak_precision']} FLOP/byte: {row['intensity_text']}"
        )
        assert block in text, (block, text)

    # A second click hides it.
    toggle.click()
    view.locator(".jp-TorchProf-rooflineplot").wait_for(state="detached", timeout=10_000)

    # The kernel table's own Est. FLOP/s and % of peak cells, scrolled to, read as the catalog formats them.
    _expect_rate_cells(page, lab, view, profile)

    # An unknown device: no toggle, one line saying why.
    other = _views(page).nth(1)
    other.scroll_into_view_if_needed()
    _tab(other, "Kernels").click()
    other.locator(".jp-TorchProf-roofline").wait_for(timeout=60_000)
    assert other.locator(".jp-TorchProf-rooflinetoggle").count() == 0
    assert other.locator(".jp-TorchProf-roofline").inner_text().strip() == reason


def _expect_rate_cells(page, lab, view, profile) -> None:
    """The GEMM rows' "Est. FLOP/s" and "% of peak" cells equal `format_cell` of `Profile.kernels`.

    Rows are matched as (short name, cell) pairs: two kernels may share a short name.
    """
    kernels = profile.kernels
    view.locator(".jp-TorchProf-filter input").filter(visible=True).first.fill("gemm")
    for column in ("est_flops_per_s", "peak_pct"):
        spec = next(c for c in KERNELS if c.key == column)
        want = Counter(
            (str(s), format_cell(spec, v))
            for s, v in zip(kernels["short_name"], kernels[column], strict=True)
        )
        names = {name for name, _ in want}
        table, at = None, -1
        deadline = page.evaluate("Date.now()") + 30_000
        while page.evaluate("Date.now()") < deadline:
            table = page.evaluate(_TABLE_JS, [view.element_handle(), spec.title])
            at = table["headers"].index(spec.title) if table and spec.title in table["headers"] else -1
            rows = table["rows"] if table else []
            if at >= 0 and rows and all(r[0] in names and r[at] is not None for r in rows):
                break
            page.wait_for_timeout(250)
        assert at >= 0, table and table["headers"]
        shown = Counter((r[0], r[at]) for r in table["rows"])
        assert sum(shown.values()) >= 3 and not shown - want, (spec.title, shown - want)
        assert sum(n for (_, v), n in shown.items() if v != "–") >= 3, (
            shown
        )  # the A100's GEMMs have estimates
        _shot(page, lab, f"roofline_table_{column}", view)
