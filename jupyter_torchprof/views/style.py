"""Colours, number formatters and stylesheets shared by the bokeh views.

Bokeh draws plots on a canvas and tables inside a shadow root, so JupyterLab's
stylesheet does not reach them. Two things keep them in tune with the light
and dark themes: CSS custom properties *do* cross the shadow boundary (the
table stylesheet below is written with ``--jp-*`` variables), and a small
script run when the document is ready copies the theme's colours onto the
canvas-drawn axes and grids.

Every JavaScript snippet here is a fixed string written by us; trace data
reaches them only as numbers. Names are never formatted by a template.
"""

from __future__ import annotations

import colorsys
import zlib
from collections.abc import Sequence
from typing import Any

#: Number of hue colours that names are hashed onto.
HUES = 20
#: Fixed colours for kinds that should not look like an op or a kernel.
KIND_COLOURS = {
    "memcpy": (0.94, 0.38, 0.57),
    "memset": (0.68, 0.84, 0.51),
    "gpu_annotation": (0.69, 0.75, 0.77),
    "runtime": (0.80, 0.74, 0.66),
}
#: Alpha of merged glyphs by density level (share of the glyph that is busy).
MERGED_ALPHA = (0.85, 0.6, 0.4)
#: Accent for selection and highlights (reads on light and dark backgrounds).
ACCENT = "#ff3d00"


def _hue_colours() -> list[tuple[float, float, float]]:
    # Golden-angle hues so that neighbouring codes get distant colours; light
    # enough for dark label text, saturated enough to read on a dark page.
    out = []
    for i in range(HUES):
        h = (i * 0.618033988749895) % 1.0
        out.append(colorsys.hls_to_rgb(h, 0.7, 0.55))
    return out


BASE_COLOURS: list[tuple[float, float, float]] = _hue_colours() + list(KIND_COLOURS.values())
KIND_INDEX = {kind: HUES + i for i, kind in enumerate(KIND_COLOURS)}


def _css(rgb: tuple[float, float, float], alpha: float = 1.0) -> str:
    r, g, b = (round(255 * c) for c in rgb)
    return f"rgba({r},{g},{b},{alpha})"


#: Palette indexed by ``base + len(BASE_COLOURS) * level`` (level 0 = a single
#: event, 1..3 = merged glyphs from dense to sparse).
PALETTE: list[str] = [_css(c) for c in BASE_COLOURS] + [
    _css(c, a) for a in MERGED_ALPHA for c in BASE_COLOURS
]


def name_colour(name: str) -> int:
    """Stable hue index of a name (the same op has the same colour everywhere)."""
    return zlib.crc32(name.encode("utf-8", "replace")) % HUES


def device_colour(device: int) -> str:
    """A line colour for a device in the memory plot."""
    return _css(BASE_COLOURS[(device * 7) % HUES])


#: ``fmt(us)``: µs → "812 ns", "12.3 µs", "4.56 ms", "1.2 s" (as `format.fmt_time`).
FMT_TIME_JS = """
function fmt_time(us) {
  if (us == null || !isFinite(us)) return "–";
  const a = Math.abs(us);
  const g = (v) => (Math.abs(v) < 100 ? String(parseFloat(v.toPrecision(3))) : v.toFixed(0));
  if (a === 0) return "0";
  if (a < 1) return (us * 1e3).toFixed(0) + " ns";
  if (a < 1e3) return g(us) + " µs";
  if (a < 1e6) return g(us / 1e3) + " ms";
  return g(us / 1e6) + " s";
}
"""

FMT_BYTES_JS = """
function fmt_bytes(b) {
  if (b == null || !isFinite(b)) return "–";
  const a = Math.abs(b);
  const units = [["GiB", 1073741824], ["MiB", 1048576], ["KiB", 1024]];
  for (const [u, s] of units) {
    if (a >= s) return String(parseFloat((b / s).toPrecision(3))) + " " + u;
  }
  return b.toFixed(0) + " B";
}
"""

#: CSS for bokeh DataTables (inside their shadow root), in theme variables.
TABLE_CSS = """
:host {
  --bokeh-font-size: var(--jp-ui-font-size1, 13px);
  font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  color: var(--jp-content-font-color1, #222);
  background: transparent;
}
.slick-header-columns, .slick-header-column, .slick-header-column.ui-state-default {
  background: var(--jp-layout-color2, #f2f2f2) !important;
  color: var(--jp-ui-font-color1, #222);
  font-weight: 600;
  border-color: var(--jp-border-color2, #e0e0e0) !important;
}
.slick-header-column:hover, .slick-header-column-active {
  background: var(--jp-layout-color3, #e6e6e6) !important;
}
.slick-header-column-sorted { font-style: normal; color: var(--jp-brand-color1, #1976d2); }
.slick-row, .slick-row.odd {
  background: var(--jp-layout-color0, #fff);
  color: var(--jp-content-font-color1, #222);
}
.slick-row.odd { background: var(--jp-layout-color1, #fafafa); }
.slick-row:hover { background: var(--jp-layout-color2, #f0f0f0); }
.slick-row.selected, .slick-cell.selected {
  /* A translucent accent reads with the theme's own text colour. */
  background: rgba(33, 150, 243, 0.28) !important;
}
.slick-cell {
  border-color: transparent !important;
  border-bottom: 1px solid var(--jp-border-color3, #eee) !important;
  font-variant-numeric: tabular-nums;
}
.slick-cell.active { border-color: var(--jp-brand-color2, #64b5f6) !important; }
.slick-viewport { background: var(--jp-layout-color0, #fff); }
"""

#: Copies JupyterLab theme colours onto canvas-drawn parts of a plot when the
#: document is ready, and again whenever the theme changes (JupyterLab marks
#: the page's body with the theme's name). ``args``: ``plots``.
THEME_JS = """
const apply = () => {
  const cs = getComputedStyle(document.body);
  const v = (name, fallback) => (cs.getPropertyValue(name) || "").trim() || fallback;
  const fg = v("--jp-ui-font-color1", "#777");
  const fg2 = v("--jp-ui-font-color2", "#888");
  const line = v("--jp-border-color1", "#999");
  const grid = v("--jp-border-color2", "rgba(128,128,128,0.3)");
  for (const p of plots) {
    for (const ax of [...p.left, ...p.below, ...p.above, ...p.right]) {
      if (ax.major_label_text_color === undefined) continue;
      ax.major_label_text_color = fg;
      ax.axis_label_text_color = fg2;
      ax.axis_line_color = line;
      ax.major_tick_line_color = ax.major_tick_line_color == null ? null : line;
      ax.minor_tick_line_color = null;
    }
    for (const r of p.center) {
      if (r.grid_line_color !== undefined && r.grid_line_color != null) r.grid_line_color = grid;
    }
  }
};
apply();
const obs = new MutationObserver(() => { apply(); setTimeout(apply, 300); setTimeout(apply, 1500); });
obs.observe(document.body, {attributes: true, attributeFilter: ["data-jp-theme-name", "data-jp-theme-light"]});
"""

#: Axis and label colour before the page's theme is known: readable on
#: light and dark backgrounds alike.
NEUTRAL = "#8c8c8c"


def static_chart(name: str, height: int, **options: Any) -> Any:
    """A bokeh figure for a chart with no tools: stretched to the width, transparent, no outline.

    The page's theme colours show through (`follow_theme`); ``options`` go to
    ``figure`` (ranges, axis types).
    """
    from bokeh.plotting import figure

    return figure(
        height=height,
        sizing_mode="stretch_width",
        tools="",
        toolbar_location=None,
        background_fill_alpha=0.0,
        border_fill_alpha=0.0,
        outline_line_color=None,
        name=name,
        **options,
    )


def table_stylesheet() -> Any:
    """An `InlineStyleSheet` theming a DataTable with JupyterLab variables."""
    from bokeh.models import InlineStyleSheet

    return InlineStyleSheet(css=TABLE_CSS)


def follow_theme(plots: Sequence[Any]) -> None:
    """Make ``plots`` take the page's theme colours when shown and when it changes."""
    from bokeh.events import DocumentReady
    from bokeh.models import CustomJS

    for p in plots:
        for ax in (*p.xaxis, *p.yaxis):
            ax.major_label_text_color = NEUTRAL
            ax.axis_label_text_color = NEUTRAL
            ax.axis_line_color = NEUTRAL
        for g in (*p.xgrid, *p.ygrid):
            if g.grid_line_color is not None:
                g.grid_line_color = "rgba(128,128,128,0.25)"
    cb = CustomJS(args={"plots": list(plots)}, code=THEME_JS)
    plots[0].js_on_event(DocumentReady, cb)


#: Axis ticks in µs: one unit for the whole axis (from its largest tick) and
#: as many decimals as the tick spacing needs, so that deep in a long trace
#: neighbouring ticks still differ ("63.512 ms, 63.514 ms", not "63.5 ms"
#: twice). Bokeh passes every tick of the axis as ``ticks``.
TIME_TICKS_JS = """
let big = 0;
for (const t of ticks) big = Math.max(big, Math.abs(t));
let unit = 1, name = "µs";
if (big >= 1e6) { unit = 1e6; name = "s"; }
else if (big >= 1e3) { unit = 1e3; name = "ms"; }
else if (big > 0 && big < 1) { unit = 1e-3; name = "ns"; }
const step = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) / unit : 1;
let dec = 0;
while (dec < 9) {
  const v = step * Math.pow(10, dec);
  if (Math.abs(v - Math.round(v)) < 1e-6 * Math.max(1, v)) break;
  dec++;
}
if (tick === 0) return "0";
return (tick / unit).toFixed(dec) + " " + name;
"""


def ready_on_document(model: Any) -> Any:
    """Hand the ``document_ready`` callbacks of ``model`` and its parts to its document.

    BokehJS announces ``DocumentReady`` to the document's own callbacks
    only, never to a model's, so a ``js_on_event(DocumentReady, ...)`` on a
    plot or a table alone never runs. This gives ``model`` a document (when
    it has none yet) and registers every such callback there, once.
    Call it right before the model is shown (``views.bokeh_sync.DocumentSync``
    keeps a model's existing document).
    """
    from bokeh.document import Document

    doc = model.document
    if doc is None:
        doc = Document()
        doc.add_root(model)
    have = doc.callbacks.js_event_callbacks.get("document_ready", [])
    for part in model.references():
        for cb in part.js_event_callbacks.get("document_ready", []):
            if cb not in have:
                doc.js_on_event("document_ready", cb)
                have = doc.callbacks.js_event_callbacks.get("document_ready", [])
    return model


def time_tick_formatter() -> Any:
    """Axis ticks in µs shown with units (``250 µs``, ``1.5 ms``, ``63.514 ms``).

    The precision follows the tick spacing (see `TIME_TICKS_JS`).
    """
    from bokeh.models import CustomJSTickFormatter

    return CustomJSTickFormatter(code=TIME_TICKS_JS)


def bytes_tick_formatter() -> Any:
    """Axis ticks in bytes shown with binary units."""
    from bokeh.models import CustomJSTickFormatter

    return CustomJSTickFormatter(code=FMT_BYTES_JS + "return fmt_bytes(tick);")
