"""The Steps tab in a real JupyterLab: a stacked bar per step, read as a person reads it.

A ``%torchprof --load`` of the real A100 trace (3 steps, compute beside NCCL
collectives). Opening the tab draws one bar per counted step; hovering each
part of a bar shows a tooltip whose step and time are the Python tables'
(`Profile.kernel_families`, `Profile.idle_breakdown`, formatted with the
tables' `fmt_time`); the pixel at each family's part is the timeline's colour
for that family; the legend gives each part's total over the steps.
"""

from __future__ import annotations

import io
import re

from labkit import open_notebook, run_all, write_notebook
from PIL import Image
from test_views_in_lab import _shot, _tab, _views
from tracefiles import real_trace

from jupyter_torchprof.analysis import breakdown as B
from jupyter_torchprof.format import fmt_time
from jupyter_torchprof.results.profile import Profile
from jupyter_torchprof.views.timeline_style import CATEGORY_RGB

TRACE = "a100_nccl_rank0.pt.trace.json.gz"

# The step chart under ``root``: its x factors, its bar parts (renderer name,
# the label of each bar) and the screen point at the middle of each part.
_CHART_JS = """
(root) => {
  const v = [...((window.Bokeh && window.Bokeh.index) || [])].find(v => v.model.name === 'torchprof-stepchart' && root.contains(v.el));
  if (!v) return null;
  const rect = v.canvas_view.el.getBoundingClientRect(), f = v.frame, p = v.model;
  const bars = p.renderers.filter(r => r.glyph && r.glyph.type === 'VBar');
  if (!bars.length) return null;
  const data = bars[0].data_source.data, labels = [...data.label];
  const below = labels.map(() => 0);
  const parts = [];
  for (const r of bars) {
    const values = [...data[r.name]];
    const points = labels.map((l, i) => {
      const mid = below[i] + values[i] / 2;
      below[i] += values[i];
      return {x: rect.left + f.x_scale.compute(p.x_range.synthetic(l)), y: rect.top + f.y_scale.compute(mid),
              h: Math.abs(f.y_scale.compute(values[i]) - f.y_scale.compute(0))};
    });
    parts.push({name: r.name, labels: [...r.data_source.data.label], points});
  }
  const v_ = (x) => (x !== null && typeof x === 'object' && 'value' in x) ? x.value : x;
  const legend = p.above.find(m => m.type === 'Legend');
  return {factors: [...p.x_range.factors], parts, legend: legend.items.map(it => v_(it.label))};
}
"""

# The text of the bokeh tooltip on screen (through shadow roots), or null.
_TOOLTIP_TEXT_JS = """
() => {
  const walk = (node) => {
    for (const el of node.querySelectorAll('*')) {
      if (el.classList && [...el.classList].some((c) => /tooltip/i.test(c))) {
        const r = el.getBoundingClientRect();
        if (r.width > 0 && r.height > 0 && getComputedStyle(el).display !== 'none' && el.innerText.trim())
          return el.innerText;
      }
      if (el.shadowRoot) { const t = walk(el.shadowRoot); if (t) return t; }
    }
    return null;
  };
  return walk(document);
}
"""


def _chart(page, view):
    return page.evaluate(_CHART_JS, view.element_handle())


def _hover_text(page, x: float, y: float, label: str) -> str:
    page.mouse.move(x - 4, y - 4)
    page.mouse.move(x, y, steps=3)
    page.wait_for_function(
        f"() => {{ const t = ({_TOOLTIP_TEXT_JS})(); return t !== null && t.includes({label!r}); }}",
        timeout=10_000,
    )
    return re.sub(r"\s+", " ", page.evaluate(_TOOLTIP_TEXT_JS))


def _pixel(page, x: float, y: float) -> tuple[int, int, int]:
    png = page.screenshot(clip={"x": x - 1, "y": y - 1, "width": 3, "height": 3})
    return Image.open(io.BytesIO(png)).convert("RGB").getpixel((1, 1))


def test_steps_tab_draws_a_bar_per_step_whose_parts_are_the_tables(page, lab):
    profile = Profile.from_file(real_trace(TRACE))
    families = profile.kernel_families
    idle = profile.idle_breakdown
    counted = families[families["counted"]]
    steps = counted["label"].tolist()
    assert len(steps) == 3
    write_notebook(
        lab.root, "steps_tab.ipynb", ["%load_ext jupyter_torchprof", f"%torchprof --load {real_trace(TRACE)}"]
    )
    open_notebook(page, lab, "steps_tab.ipynb")
    run_all(page)
    view = _views(page).first
    view.wait_for(timeout=90_000)
    # Not built until its tab is opened.
    assert view.locator(".jp-TorchProf-stepchart").count() == 0
    _tab(view, "Steps").click()
    page.wait_for_function(
        f"(root) => ({_CHART_JS})(root) !== null", arg=view.element_handle(), timeout=60_000
    )
    view.locator(".jp-TorchProf-stepchart").scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    chart = _chart(page, view)

    # One bar per step, in step order, each part drawn for every step.
    assert chart["factors"] == steps
    assert all(part["labels"] == steps for part in chart["parts"])
    names = [part["name"] for part in chart["parts"]]
    used = [c for c in B.FAMILY_COLUMNS.values() if counted[c].sum() > 0]
    causes = [c for c in B.IDLE_CAUSES.values() if idle.loc[idle["counted"], c].sum() > 0]
    assert names == used + causes
    assert {"gemm_us", "convolution_us", "communication_us", "host_wait_us"} <= set(names)

    # Hover: every part of the first bar, and the communication part of each bar.
    to_hover = [(p, 0) for p in chart["parts"]]
    to_hover += [
        (p, i) for p in chart["parts"] if p["name"] == "communication_us" for i in range(1, len(steps))
    ]
    table = counted.merge(idle.drop(columns=["counted", "label"]), on="step").set_index("label")
    family_of = {col: fam for fam, col in B.FAMILY_COLUMNS.items()}
    _shot(page, lab, "steps_tab", view)
    checked: list[tuple[str, int]] = []
    for part, i in to_hover:
        point = part["points"][i]
        if point["h"] < 6:  # too thin to put the mouse on (a memset's sliver)
            continue
        # Read positions again: a screenshot may have scrolled the page.
        point = next(p for p in _chart(page, view)["parts"] if p["name"] == part["name"])["points"][i]
        # The colour there (mouse away: no tooltip over it) is the timeline's for that family.
        if part["name"] in family_of:
            page.mouse.move(0, 0)
            got = _pixel(page, point["x"], point["y"])
            rgb = CATEGORY_RGB[family_of[part["name"]]]
            assert all(abs(a - b) < 12 for a, b in zip(got, rgb, strict=True)), (part["name"], got, rgb)
        text = _hover_text(page, point["x"], point["y"], steps[i])
        want = fmt_time(float(table.loc[steps[i], part["name"]]))
        assert f"step: {steps[i]}" in text, text
        assert f": {want}" in text, (part["name"], want, text)
        assert f"device busy: {fmt_time(float(table.loc[steps[i], 'busy_us']))}" in text, text
        assert f"device idle: {fmt_time(float(table.loc[steps[i], 'idle_us']))}" in text, text
        checked.append((part["name"], i))
    # The thick parts: every bar's communication, the first bar's convolution, elementwise and host wait.
    assert {("convolution_us", 0), ("elementwise_us", 0), ("host_wait_us", 0)} <= set(checked), checked
    assert [i for name, i in checked if name == "communication_us"] == list(range(len(steps))), checked

    # The legend names each part with its total over the steps, as the tables sum it.
    legend = chart["legend"]
    for col in used:
        assert f"{family_of[col]} {fmt_time(float(counted[col].sum()))}" in legend, (col, legend)
    for cause, col in B.IDLE_CAUSES.items():
        if col in causes:
            total = float(idle.loc[idle["counted"], col].sum())
            assert f"idle: {cause} {fmt_time(total)}" in legend, (col, legend)
