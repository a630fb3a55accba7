"""Reading the timeline in a real JupyterLab: legend, lane heights, labels after pan and zoom, launch arrows.

A ``%torchprof --load`` of the real A100 trace; everything is checked by
what the page draws: the legend's swatches are on the canvas, glyph heights
are measured in screen pixels through bokeh's own data → screen mapping,
labels are counted in the visible range after a drag and after a zoom, and
a click on a kernel draws one arrow (its pixels on the canvas) from the
launch to the kernel.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest
from labkit import open_notebook, run_all, write_notebook
from tracefiles import real_trace

# Helpers on the timeline figure under ``root`` (bokeh views in the page).
_READ_JS = """
([root, what]) => {
  const views = [...((window.Bokeh && window.Bokeh.index) || [])].filter(v => v.model.name === 'torchprof-timeline' && root.contains(v.el));
  if (!views.length) return null;
  const pv = views[0], model = pv.model, frame = pv.frame;
  const src = (name) => model.document.get_model_by_name(name);
  const rect = pv.canvas_view.el.getBoundingClientRect();
  const sx = (x) => rect.left + frame.x_scale.compute(x);
  const sy = (y) => rect.top + frame.y_scale.compute(y);
  const start = model.x_range.start, end = model.x_range.end;
  if (what === 'range') return {start, end, left: rect.left + frame.bbox.left, right: rect.left + frame.bbox.right,
                                top: rect.top + frame.bbox.top, bottom: rect.top + frame.bbox.bottom};
  if (what === 'heights') {
    // Screen height of the glyphs of each renderer, through the renderer's own glyph geometry.
    const px = (name) => {
      const r = model.renderers.find(r => r.name === name);
      const gv = pv.views.find_one(r).glyph;  // the glyph's own screen geometry, as drawn
      if (!gv.stop || !gv.stop.length) return {missing: Object.keys(gv)};
      return Math.abs(gv.sbottom[0] - gv.stop[0]);
    };
    return {host: px('torchprof-host-glyphs'), device: px('torchprof-device-glyphs')};
  }
  if (what === 'legend') {
    const legend = src('torchprof-legend');
    const v = (p) => (p !== null && typeof p === 'object' && 'value' in p) ? p.value : p;
    const lv = pv.views.find_one(legend);
    const bb = lv && lv.bbox;
    const box = bb ? {left: rect.left + bb.left, right: rect.left + bb.right, top: rect.top + bb.top,
                      bottom: rect.top + bb.bottom} : null;
    return {box, items: legend.items.map(it => ({label: v(it.label), colour: v(it.renderers[0].glyph.fill_color)}))};
  }
  if (what === 'labels') {
    // Labels with text whose anchor lies in the visible range.
    const d = src('torchprof-labels').data;
    let n = 0;
    for (let i = 0; i < d.x.length; i++) if (d.text[i] && d.x[i] >= start && d.x[i] <= end) n++;
    return n;
  }
  if (what === 'kernel') {
    // Screen point of the widest kernel in view that an op launched (drawn as itself).
    const d = src('torchprof-device').data;
    let best = -1;
    for (let i = 0; i < d.x.length; i++) {
      const c = d.x[i] + d.w[i] / 2;
      if (c < start || c > end || d.o[i] < 0 || d.k[i] !== 1) continue;
      if (best < 0 || d.w[i] > d.w[best]) best = i;
    }
    if (best < 0) return null;
    return {x: sx(d.x[best] + d.w[best] / 2), y: sy(d.y[best]) + 2, left: sx(d.x[best]), top: sy(d.y[best] - 0.4)};
  }
  if (what === 'arrows') {
    const a = src('torchprof-arrows').data;
    const host = src('torchprof-host').data;
    const out = [];
    for (let i = 0; i < a.x0.length; i++) {
      // The host glyph the arrow leaves: the one on its row that holds its start.
      const row = Math.round(a.y0[i] - 0.4);
      let launch = null;
      for (let j = 0; j < host.x.length; j++) {
        if (host.y[j] === row && host.x[j] <= a.x0[i] && a.x0[i] <= host.x[j] + host.w[j]) {
          launch = {left: sx(host.x[j]), right: sx(host.x[j] + host.w[j]), top: sy(row - 0.4), bottom: sy(row + 0.4)};
        }
      }
      out.push({x0: sx(a.x0[i]), y0: sy(a.y0[i]), x1: sx(a.x1[i]), y1: sy(a.y1[i]), launch});
    }
    return out;
  }
  return null;
}
"""


def _shot(page, lab, name: str, locator) -> None:
    path = Path(os.environ.get("TORCHPROF_SCREENSHOTS", lab.root.parent / "screenshots"))
    path.mkdir(parents=True, exist_ok=True)
    locator.screenshot(path=str(path / f"{name}.png"))


def _read(page, view, what):
    return page.evaluate("(args) => (" + _READ_JS + ")(args)", [view.element_handle(), what])


def _png_rgb(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and RGB(A) rows of an 8-bit, non-interlaced PNG (what Playwright's screenshots are)."""
    width, height = struct.unpack(">II", png[16:24])
    channels = {2: 3, 6: 4}[png[25]]
    pos, idat = 8, b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        if png[pos + 4 : pos + 8] == b"IDAT":
            idat += png[pos + 8 : pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b, c = prev[x], prev[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def _pixels(page, rgb, box) -> int:
    """Pixels of the screen inside ``box`` (CSS px) within a few levels of colour ``rgb``."""
    clip = {
        "x": box["left"],
        "y": box["top"],
        "width": box["right"] - box["left"],
        "height": box["bottom"] - box["top"],
    }
    width, height, rows = _png_rgb(page.screenshot(clip=clip))
    channels = len(rows[0]) // width
    n = 0
    for row in rows:
        for x in range(0, len(row), channels):
            if all(abs(row[x + k] - rgb[k]) < 12 for k in range(3)):
                n += 1
    return n


def _rgb(css: str) -> tuple[int, int, int]:
    r, g, b = css[css.index("(") + 1 : css.index(")")].split(",")[:3]
    return int(r), int(g), int(b)


def _wait(page, view, what, predicate_js, timeout=30_000):
    page.wait_for_function(
        "([root, what, js, pred]) => { const v = (eval(js))([root, what]); return (eval(pred))(v); }",
        arg=[view.element_handle(), what, _READ_JS, predicate_js],
        timeout=timeout,
    )


def test_timeline_reads_categories_heights_labels_and_arrows(page, lab):
    trace = real_trace("a100_nccl_rank0.pt.trace.json.gz")
    write_notebook(
        lab.root, "timeline_reading.ipynb", ["%load_ext jupyter_torchprof", f"%torchprof --load {trace}"]
    )
    open_notebook(page, lab, "timeline_reading.ipynb")
    run_all(page)
    view = page.locator(".jp-OutputArea-output .jp-TorchProf-view").first
    view.wait_for(timeout=90_000)
    view.locator(".jp-TorchProf-tab", has_text="Timeline").first.click()
    _wait(page, view, "labels", "(n) => n !== null && n > 0", timeout=60_000)
    view.locator(".jp-TorchProf-timeline").scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    frame = _read(page, view, "range")

    # The legend names the categories drawn, and each swatch is on the canvas above the lanes.
    _shot(page, lab, "timeline_reading", view)
    drawn = _read(page, view, "legend")
    legend, box = drawn["items"], drawn["box"]
    labels = [item["label"] for item in legend]
    assert {
        "GEMM",
        "convolution",
        "communication",
        "memcpy",
        "host op",
        "profiler/runtime",
        "device idle",
    } <= set(labels), labels
    assert "attention" not in labels
    # Each swatch's colour is drawn on the canvas in the strip between the toolbar and the lanes
    # (screen positions read again: the screenshot scrolled the page).
    frame = _read(page, view, "range")
    strip = {"left": frame["left"], "right": frame["right"], "top": frame["top"] - 40, "bottom": frame["top"]}
    for item in legend:
        if item["label"] != "device idle":  # translucent: its colour depends on the page behind
            assert _pixels(page, _rgb(item["colour"]), strip) >= 20, (item, strip, box)

    # A device row is at least as tall on screen as a host row (here taller: two threads of nested ops).
    heights = _read(page, view, "heights")
    assert heights["device"] >= heights["host"] > 0, heights
    assert heights["device"] > 1.5 * heights["host"], heights

    # Zoom in with the toolbar: labels are drawn in the new window.
    zoom_in = view.locator(".bk-tool-icon-zoom-in").first
    for _ in range(5):
        zoom_in.click()
        page.wait_for_timeout(400)
    _wait(page, view, "labels", "(n) => n > 0", timeout=60_000)
    zoomed = _read(page, view, "range")
    assert zoomed["end"] - zoomed["start"] < (frame["end"] - frame["start"]) / 10

    # Drag the plot by most of its width: what comes into view carries labels.
    frame = _read(page, view, "range")
    y = (frame["top"] + frame["bottom"]) / 2
    x_from = frame["right"] - 20
    x_to = frame["left"] + 0.2 * (frame["right"] - frame["left"])
    page.mouse.move(x_from, y)
    page.mouse.down()
    page.mouse.move(x_to, y, steps=12)
    page.mouse.up()
    page.wait_for_timeout(800)
    panned = _read(page, view, "range")
    assert panned["start"] > zoomed["start"] + 0.5 * (zoomed["end"] - zoomed["start"]), (zoomed, panned)
    new_part = page.evaluate(
        "([root, js, from]) => { const views = [...((window.Bokeh && window.Bokeh.index) || [])].filter(v => v.model.name === 'torchprof-timeline'"
        " && root.contains(v.el)); const d = views[0].model.document.get_model_by_name('torchprof-labels').data;"
        " const end = views[0].model.x_range.end; let n = 0;"
        " for (let i = 0; i < d.x.length; i++) if (d.text[i] && d.x[i] > from && d.x[i] <= end) n++; return n; }",
        [view.element_handle(), _READ_JS, zoomed["end"]],
    )
    assert new_part > 0
    assert _read(page, view, "labels") > 0

    # Click a kernel: one arrow, from inside its launch to the kernel's top-left corner, drawn on the canvas.
    kernel = _read(page, view, "kernel")
    assert kernel is not None
    page.mouse.click(kernel["x"], kernel["y"])
    _wait(page, view, "arrows", "(a) => a && a.length === 1", timeout=20_000)
    (arrow,) = _read(page, view, "arrows")
    launch = arrow["launch"]
    assert launch is not None, arrow
    assert launch["left"] - 1 <= arrow["x0"] <= launch["right"] + 1
    assert abs(arrow["y0"] - launch["bottom"]) <= 1.5
    assert abs(arrow["x1"] - kernel["left"]) <= 1.5 and abs(arrow["y1"] - kernel["top"]) <= 1.5
    mid = {"x": (arrow["x0"] + arrow["x1"]) / 2, "y": (arrow["y0"] + arrow["y1"]) / 2}
    box = {"left": mid["x"] - 4, "right": mid["x"] + 4, "top": mid["y"] - 4, "bottom": mid["y"] + 4}
    page.wait_for_timeout(300)
    assert _pixels(page, (255, 61, 0), box) > 0  # the accent line at the arrow's middle
    _shot(page, lab, "timeline_reading_arrow", view)


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
