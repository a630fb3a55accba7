"""The timeline: host threads and device streams, zoomable, with level of detail.

Lanes, top to bottom: each host thread's ops (nested by their depth among
ops, so Python frames recorded with ``with_stack`` do not push ops off the
screen), the thread's Python frames when recorded, then one lane per device
stream (kernels, copies, memsets, device-side annotations, nested by their
depth on the stream); `timeline_lanes` decides which event goes where. Step
ranges shade the background.

What travels to the browser is small by construction:

* glyphs come from `analysis.lod.LodIndex`: at most ``max_glyphs`` for any
  window, events narrower than a pixel merged per row;
* strings (names, shapes, grids, launching ops) travel once per payload as a
  lookup table, and glyphs carry integer codes into it; hover text is looked
  up in the browser by a fixed script and shown as text; a name's notes
  (`analysis.notes`, as its table row shows them) travel beside it in that
  table, once per distinct name, not per glyph;
* numbers are typed arrays (float32 widths, int16 rows, uint8 colours).

`Timeline` keeps the Python side: when the view is zoomed in a live kernel
(a bokeh ``RangesUpdate`` event through the view's widget, `views.bokeh_sync`) it sends the
detail for the new window; clicking a kernel highlights the op that launched
it and clicking an op highlights the kernels it launched. `build_timeline`
gives the bare bokeh model (no kernel needed: zoom, pan and hover work in
the browser alone).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..analysis.categories import CATEGORIES, event_categories
from ..analysis.links import linked_events
from ..analysis.lod import Glyphs, LodIndex, idle_gaps
from ..format import ellipsize, fmt_bytes, fmt_time
from ..trace import categories as K
from .notes_view import notes_by_name
from .style import ACCENT, FMT_TIME_JS, follow_theme, time_tick_formatter
from .timeline_lanes import hidden_frames, layout
from .timeline_style import BASE, IDLE_COLOUR, IDLE_LABEL, PALETTE

if TYPE_CHECKING:  # pragma: no cover
    from ..results.profile import Profile

#: Device kinds whose time is "device activity" (linked to launching ops).
ACTIVITY_KINDS = K.DEVICE_ACTIVITY
#: Below this many drawable events every event is sent as itself.
DETAIL_LIMIT = 30_000
#: Events highlighted at most (more are merged like the main glyphs).
HIGHLIGHT_MAX = 20_000
#: Labels drawn on the widest glyphs at most.
LABEL_MAX = 1500
#: Device idle gaps sent at most per fetch (the widest).
IDLE_MAX = 20_000
#: Launch → kernel arrows drawn at most for one selection (the first in time).
ARROW_MAX = 200
ROW_PX = 18
#: Legend entries per row.
LEGEND_COLUMNS = 8
#: Level-of-detail bins per pixel of the visible window.
BINS_PER_PX = 4
#: Share of the visible span the zoom-in button takes away per click; the
#: zoom-out button multiplies the span by ``1 / (1 - ZOOM_FACTOR)``.
ZOOM_FACTOR = 0.45


# --------------------------------------------------------------------------- #
# string lookup tables


class StringTable:
    """Strings of one payload, each sent once; glyphs carry codes into it."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self._index: dict[str, int] = {}

    def codes(self, column: pd.Series, rows: np.ndarray) -> np.ndarray:
        """int32 codes (-1 = none) for the values of categorical ``column`` at ``rows``."""
        out = np.full(len(rows), -1, dtype=np.int32)
        ok = rows >= 0
        if not ok.any():
            return out
        cat = column.cat
        raw = cat.codes.to_numpy()[rows[ok]]
        used = np.unique(raw[raw >= 0])
        cats = cat.categories
        mapping = np.full(len(cats) + 1, -1, dtype=np.int32)  # position -1 stays -1
        for u in used.tolist():
            s = str(cats[u])
            code = self._index.get(s)
            if code is None:
                code = self._index[s] = len(self.strings)
                self.strings.append(s)
            mapping[u] = code
        out[ok] = mapping[raw]
        return out


# --------------------------------------------------------------------------- #
# the timeline


_HOST_TOOLTIP = """
<div style="max-width:520px;font-size:12px;line-height:1.35">
<div style="font-weight:600;word-break:break-all">@n{str}</div>
<div>@d{time} · at @x{time}</div>
<div style="word-break:break-all">@s{shapes}</div>
<div style="color:#b36b00">@n{note}</div>
<div style="opacity:0.8">@k{merged}</div>
</div>
"""

_DEVICE_TOOLTIP = """
<div style="max-width:520px;font-size:12px;line-height:1.35">
<div style="font-weight:600;word-break:break-all">@n{str}</div>
<div>@d{time} · at @x{time}</div>
<div>@g{grid}@b{block}</div>
<div style="word-break:break-all">@o{launcher}</div>
<div style="color:#b36b00">@n{note}</div>
<div style="opacity:0.8">@k{merged}</div>
</div>
"""


def _tooltip(template: str, has: bool, field: str) -> str:
    """``template`` without its line of ``field`` when the glyphs do not carry it (bokeh would write ``???``)."""
    if has:
        return template
    return "\n".join(line for line in template.splitlines() if field not in line)


_STRINGS_JS = """
if (format === "note") {
  const notes = strings.data.t || [];
  const n = (value >= 0 && value < notes.length) ? notes[value] : "";
  return n ? "note: " + n : "";
}
const s = strings.data.s;
const t = (value >= 0 && value < s.length) ? s[value] : "";
if (!t) return "";
if (format === "shapes") return "input shapes " + t;
if (format === "grid") return "grid " + t;
if (format === "block") return " · block " + t;
if (format === "launcher") return "launched by " + t;
return t;
"""

_MERGED_JS = (
    FMT_TIME_JS
    + """
if (value <= 1) return "";
const busy = source.data.d[special_vars.index];
return value.toLocaleString() + " events merged (busy " + fmt_time(busy) + "); longest shown · zoom in for detail";
"""
)


class Timeline:
    """A zoomable timeline of a profile, with level of detail and linking.

    Parameters
    ----------
    profile
        The profile to draw.
    window
        ``(start_us, end_us)`` shown first (default: the whole trace).
    max_glyphs
        Most glyphs sent for any window (host and device together).
    width_px
        Expected plot width, for the level of detail and labels.
    all_frames
        Also draw the Python frames of the kernel machinery (see `layout`).
    """

    def __init__(
        self,
        profile: Profile,
        window: tuple[float, float] | None = None,
        max_glyphs: int = 100_000,
        width_px: int = 1100,
        all_frames: bool = False,
    ) -> None:
        self.profile = profile
        self.max_glyphs = int(max_glyphs)
        self.width_px = int(width_px)
        self.on_pick: Callable[[list[tuple[str, str]]], None] | None = None
        ev = profile.events
        self._ev = ev
        machinery = hidden_frames(profile, all_frames)
        self.lanes, self.row, self.lane_of = layout(profile, all_frames, machinery)
        # Masks from the kind's codes (`categories.kind_mask`): its strings,
        # one Python object per event, took a third of a first view.
        is_dev = K.kind_mask(ev, K.DEVICE_KINDS)
        self._is_activity = K.kind_mask(ev, ACTIVITY_KINDS)
        ts = ev["ts"].to_numpy(np.float64)
        dur = np.nan_to_num(ev["dur"].to_numpy(np.float64), nan=0.0)
        self._ts, self._dur = ts, dur
        drawn = self.row >= 0
        #: Python frames of the kernel machinery left out on purpose.
        self.machinery_hidden = int(machinery.sum())
        #: Events not drawn because they nest deeper than a lane shows.
        self.hidden = int((K.kind_mask(ev, K.HOST_KINDS + K.DEVICE_KINDS) & ~drawn & ~machinery).sum())
        self._host_rows = np.flatnonzero(drawn & ~is_dev)
        self._dev_rows = np.flatnonzero(drawn & is_dev)
        self._dev_row_set = np.unique(self.row[self._dev_rows])
        self._host_index = LodIndex(ts[self._host_rows], dur[self._host_rows], self.row[self._host_rows])
        self._dev_index = LodIndex(ts[self._dev_rows], dur[self._dev_rows], self.row[self._dev_rows])
        self.detailed = len(self._host_rows) + len(self._dev_rows) <= min(DETAIL_LIMIT, self.max_glyphs)
        self._colour = self._colours()
        #: Timeline rows per device nesting level (`timeline_lanes.device_row_scale`).
        self.device_scale = max((ln.scale for ln in self.lanes if ln.side == "device"), default=1)
        #: Categories of the drawn events, in legend order.
        self.categories = [CATEGORIES[i] for i in np.unique(self._colour[drawn]).tolist()]
        self._has_shapes = bool(ev["input_dims"].notna().any())
        self._has_launch = bool(ev["grid"].notna().any())
        spans = [i.span for i in (self._host_index, self._dev_index) if i.size]
        lo = min(s[0] for s in spans) if spans else 0.0
        hi = max(s[1] for s in spans) if spans else 1.0
        if hi <= lo:
            hi = lo + 1.0
        self.span = (lo, hi)
        self._dev_activity = np.flatnonzero(self._is_activity & (ev["op"].to_numpy() >= 0))
        self.idle = self._idle()
        #: Each noted op or kernel name's notes, for the hover (`notes_view.notes_by_name`).
        self._notes = notes_by_name(profile)
        self._fetched: tuple[float, float, float] | None = None  # (t0, t1, visible span)
        self._host_reps = np.array([], dtype=np.int64)
        self._dev_reps = np.array([], dtype=np.int64)
        self._last_pick: tuple[str, tuple[int, ...]] | None = None
        self.highlighted = np.array([], dtype=np.int64)
        self._build(window)

    # -- colours -----------------------------------------------------------

    def _colours(self) -> np.ndarray:
        """Colour (category index, `analysis.categories`) of every event: kernel family, copy, host op ..."""
        return event_categories(self._ev).astype(np.uint8)

    def _idle(self) -> tuple[np.ndarray, ...]:
        """Gaps of every device lane with no kernel, copy or memset in the trace's span.

        Per stream, from every activity event of it (also those nested too
        deep to draw): (start, end, top, bottom) with the lane's y extent.
        """
        ev, lo, hi = self._ev, self.span[0], self.span[1]
        act = np.flatnonzero(self._is_activity)
        dev, stream = ev["device"].to_numpy()[act], ev["stream"].to_numpy()[act]
        parts: list[tuple[np.ndarray, ...]] = []
        for ln in self.lanes:
            if ln.side != "device":
                continue
            mine = act[(dev == ln.key[0]) & (stream == ln.key[1])]
            gs, ge = idle_gaps(self._ts[mine], self._ts[mine] + self._dur[mine], lo, hi)
            parts.append(
                (gs, ge, np.full(len(gs), ln.first - 0.45), np.full(len(gs), ln.first + ln.rows - 0.55))
            )
        if not parts:
            return tuple(np.array([], dtype=np.float64) for _ in range(4))
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(4))

    # -- payloads ------------------------------------------------------------

    def _query(self, t0: float, t1: float, visible: float) -> tuple[Glyphs, Glyphs]:
        # A few bins per pixel of the visible span, over the fetched window:
        # the browser can zoom in that far on its own before detail runs out.
        res = max(64, int(BINS_PER_PX * self.width_px * (t1 - t0) / max(visible, 1e-9)))
        merge = not self.detailed
        budget = self.max_glyphs
        h = self._host_index.query(t0, t1, budget, res, merge)
        d = self._dev_index.query(t0, t1, budget, res, merge)
        total = len(h) + len(d)
        if total > budget:
            share = len(h) / total
            h = self._host_index.query(t0, t1, max(1, int(budget * share)), res, True)
            d = self._dev_index.query(t0, t1, max(1, budget - len(h)), res, True)
        return h, d

    def _glyph_data(
        self, g: Glyphs, rows: np.ndarray, strings: StringTable, min_w: float, device: bool
    ) -> tuple[dict[str, Any], np.ndarray]:
        ev = self._ev
        rep = rows[g.rep] if len(g) else np.array([], dtype=np.int64)
        colour = self._colour[rep].astype(np.int64)
        merged = g.count > 1
        if merged.any():
            density = g.busy[merged] / np.maximum(g.dur[merged], min_w)
            level = np.where(density >= 0.66, 1, np.where(density >= 0.33, 2, 3))
            colour[merged] += len(CATEGORIES) * level
        data: dict[str, Any] = {
            "x": g.start.astype(np.float64),
            "w": np.maximum(g.dur, min_w).astype(np.float32),
            "d": g.busy.astype(np.float32),
            "y": g.row.astype(np.int16),
            "k": g.count.astype(np.int32),
            "c": colour.astype(np.uint8),
            "n": strings.codes(ev["name"], rep),
        }
        if device:
            op = ev["op"].to_numpy()[rep] if len(rep) else rep
            data["o"] = strings.codes(ev["name"], op)
            if self._has_launch:
                data["g"] = strings.codes(ev["grid"], rep)
                data["b"] = strings.codes(ev["block"], rep)
        elif self._has_shapes:
            data["s"] = strings.codes(ev["input_dims"], rep)
        return data, rep

    def _labels(
        self,
        datas: Iterable[tuple[dict[str, Any], np.ndarray, float]],
        visible: tuple[float, float],
        fetched: tuple[float, float],
    ) -> dict[str, Any]:
        """Names written on the glyphs wide enough to hold them, over the whole fetched window.

        Over the fetched window, not just the visible one: a pan inside it
        asks Python for nothing, and glyphs that come into view must carry
        their names already (labels made for the visible window alone left
        every glyph panned into view blank). Widths are taken at the visible
        zoom; a glyph that covers the visible window's left edge starts its
        label there, so a step that began before the window still shows its
        name. ``datas``: (glyph data, event rows, y offset of a label).
        """
        (v0, v1), (t0, t1) = visible, fetched
        px_per_us = self.width_px / max(v1 - v0, 1e-9)
        xs, ys, texts, prio = [], [], [], []
        names = self._ev["name"]
        cats, codes = names.cat.categories, names.cat.codes.to_numpy()
        for data, rep, dy in datas:
            x = data["x"]
            right = np.minimum(x + data["w"].astype(np.float64), t1)
            anchor = np.where((x < v0) & (right > v0), v0, np.maximum(x, t0))
            px = (right - anchor) * px_per_us
            shown = (np.minimum(right, v1) - np.maximum(anchor, v0)) * px_per_us
            ok = (px >= 48) & (data["k"] == 1)
            for i in np.flatnonzero(ok):
                # Glyphs in view first, then the widest.
                prio.append(px[i] + (1e12 if shown[i] > 0 else 0.0))
                xs.append(float(anchor[i]))
                ys.append(float(data["y"][i]) + dy)
                c = codes[rep[i]]
                chars = int(px[i] / 6.6) - 1
                texts.append(ellipsize(str(cats[c]) if c >= 0 else "", chars) if chars >= 4 else "")
        if len(xs) > LABEL_MAX:
            keep = np.sort(np.argsort(-np.asarray(prio), kind="stable")[:LABEL_MAX])
            xs = [xs[i] for i in keep]
            ys = [ys[i] for i in keep]
            texts = [texts[i] for i in keep]
        return {"x": np.asarray(xs, dtype=np.float64), "y": np.asarray(ys, dtype=np.float32), "text": texts}

    def _idle_data(self, t0: float, t1: float, min_w: float) -> dict[str, Any]:
        """The device idle gaps in ``[t0, t1]`` at least a pixel wide (the widest `IDLE_MAX`)."""
        gs, ge, top, bottom = self.idle
        keep = np.flatnonzero((ge >= t0) & (gs <= t1) & (ge - gs >= min_w))
        if len(keep) > IDLE_MAX:
            keep = np.sort(keep[np.argsort(-(ge - gs)[keep], kind="stable")[:IDLE_MAX]])
        return {"left": gs[keep], "right": ge[keep], "top": top[keep], "bottom": bottom[keep]}

    def fetch(self, start: float | None = None, end: float | None = None) -> None:
        """Send the glyphs for the visible window ``[start, end]`` (default: all).

        Detail is fetched for one more window on each side, so short pans
        need no round trip.
        """
        lo, hi = self.span
        v0 = lo if start is None else max(float(start), lo - (hi - lo))
        v1 = hi if end is None else min(float(end), hi + (hi - lo))
        if v1 <= v0:
            v1 = v0 + 1e-3
        visible = v1 - v0
        t0, t1 = max(lo, v0 - visible), min(hi, v1 + visible)
        if start is None and end is None:
            t0, t1 = lo, hi
        self._fetched = (t0, t1, visible)
        h, d = self._query(t0, t1, visible)
        strings = StringTable()
        min_w = visible / self.width_px
        host_data, self._host_reps = self._glyph_data(h, self._host_rows, strings, min_w, device=False)
        dev_data, self._dev_reps = self._glyph_data(d, self._dev_rows, strings, min_w, device=True)
        self.strings_source.data = {
            "s": strings.strings,
            "t": [self._notes.get(t, "") for t in strings.strings],
        }
        self.host_source.selected.indices = []
        self.dev_source.selected.indices = []
        self.host_source.data = host_data
        self.dev_source.data = dev_data
        self.idle_source.data = self._idle_data(t0, t1, min_w)
        self.label_source.data = self._labels(
            [(host_data, self._host_reps, 0.0), (dev_data, self._dev_reps, (self.device_scale - 1) / 2)],
            (v0, v1),
            (t0, t1),
        )
        if len(self.highlighted):
            self._draw_highlight(min_w)

    def needs_fetch(self, start: float, end: float) -> bool:
        """True when the window ``[start, end]`` needs new detail from Python."""
        if self._fetched is None:
            return True
        t0, t1, visible = self._fetched
        span = end - start
        lo, hi = self.span
        inside = start >= t0 - 1e-9 or start <= lo
        inside &= end <= t1 + 1e-9 or end >= hi
        # Labels and merged glyphs were sized for the fetched zoom level.
        return not (inside and 0.67 < span / visible < 1.5)

    @property
    def glyph_count(self) -> int:
        """Glyphs currently sent (host and device)."""
        return len(self.host_source.data["x"]) + len(self.dev_source.data["x"])

    # -- figure --------------------------------------------------------------

    def _build(self, window: tuple[float, float] | None) -> None:
        """The bokeh figure: axes and lanes, glyph renderers, tools; then the first fetch."""
        fig = self._new_figure(window)
        host_r, dev_r = self._add_glyphs(fig)
        self._add_tools(fig, host_r, dev_r)
        follow_theme([fig])
        self.figure = fig
        self.model = fig
        self.fetch(*(window if window is not None else (None, None)))

    def _new_figure(self, window: tuple[float, float] | None) -> Any:
        """The figure with its ranges, lane labels, bands and step markers, and the (empty) data sources."""
        from bokeh.models import ColumnDataSource, CustomJSTickFormatter, FixedTicker, Range1d
        from bokeh.plotting import figure

        lo, hi = self.span
        pad = (hi - lo) * 0.01
        rows = sum(ln.rows for ln in self.lanes) or 1
        steps = self.profile.steps
        top = -1.6 if not steps.empty else -0.6
        row_px = int(min(ROW_PX, max(9, 640 / rows)))
        legend_rows = -(-(len(self.categories) + 1) // LEGEND_COLUMNS)
        height = int((rows - top) * row_px + 60 + 18 * legend_rows)
        self.strings_source = ColumnDataSource({"s": [], "t": []}, name="torchprof-strings")
        self.host_source = ColumnDataSource(name="torchprof-host")
        self.dev_source = ColumnDataSource(name="torchprof-device")
        self.label_source = ColumnDataSource({"x": [], "y": [], "text": []}, name="torchprof-labels")
        self.highlight_source = ColumnDataSource(
            {"x": [], "w": [], "y": [], "h": []}, name="torchprof-highlight"
        )
        self.idle_source = ColumnDataSource(
            {"left": [], "right": [], "top": [], "bottom": []}, name="torchprof-idle"
        )
        self.arrow_source = ColumnDataSource(
            {"x0": [], "y0": [], "x1": [], "y1": []}, name="torchprof-arrows"
        )

        x0, x1 = window if window is not None else (lo - pad, hi + pad)
        fig = figure(
            x_range=Range1d(x0, x1, bounds=(lo - pad, hi + pad), min_interval=0.01),
            y_range=Range1d(rows - 0.4, top),
            height=height,
            sizing_mode="stretch_width",
            output_backend="webgl",
            tools=[],
            # Above, not beside: a plot of two or three lanes is too short
            # for ten tools in a column, and bokeh folds the rest (Reset
            # among them) behind a "⋯" button.
            toolbar_location="above",
            min_border_left=10,
            min_border_right=10,
            min_border_top=4,
            min_border_bottom=4,
            background_fill_alpha=0.0,
            border_fill_alpha=0.0,
            outline_line_color=None,
            name="torchprof-timeline",
        )
        fig.xaxis.formatter = time_tick_formatter()
        fig.xaxis.axis_label = None
        fig.ygrid.grid_line_color = None
        fig.xgrid.grid_line_alpha = 0.5
        # A lane's name sits at the middle of its first level (a device level spans `scale` rows).
        ticks = [ln.first + (ln.scale - 1) / 2 for ln in self.lanes]
        labels = {f"{t:g}": ln.label for t, ln in zip(ticks, self.lanes, strict=True)}
        fig.yaxis.ticker = FixedTicker(ticks=ticks, minor_ticks=[])
        fig.yaxis.formatter = CustomJSTickFormatter(
            args={"labels": labels}, code="const t = labels[String(tick)]; return t === undefined ? '' : t;"
        )
        fig.yaxis.major_tick_line_color = None
        fig.yaxis.major_label_text_font_size = "11px"
        fig.xaxis.major_label_text_font_size = "11px"
        self._decorate(fig, rows, top)

        return fig

    def _add_glyphs(self, fig: Any) -> tuple[Any, Any]:
        """Idle shading, host and device blocks, their labels, the highlight, arrows and the legend.

        Returns the (host, device) renderers.
        """
        from bokeh.models import Arrow, VeeHead
        from bokeh.transform import dodge, linear_cmap

        fig.quad(
            left="left",
            right="right",
            top="top",
            bottom="bottom",
            source=self.idle_source,
            fill_color=IDLE_COLOUR,
            line_color=None,
            level="underlay",
            name="torchprof-idle-glyphs",
        )
        cmap = linear_cmap("c", PALETTE, low=-0.5, high=len(PALETTE) - 0.5)
        glyph_kw = {"x": "x", "width": "w", "fill_color": cmap, "line_color": None}
        host_r = fig.block(
            source=self.host_source, name="torchprof-host-glyphs", y=dodge("y", -0.4), height=0.8, **glyph_kw
        )
        # A device level spans `device_scale` rows: its block fills them but for the same margin.
        dev_h = self.device_scale - 0.2
        dev_r = fig.block(
            source=self.dev_source,
            name="torchprof-device-glyphs",
            y=dodge("y", -0.4),
            height=dev_h,
            **glyph_kw,
        )
        for r in (host_r, dev_r):
            r.selection_glyph = r.glyph.clone(line_color=ACCENT, line_width=2)
            r.nonselection_glyph = r.glyph.clone()
        fig.text(
            x="x",
            y="y",
            text="text",
            source=self.label_source,
            x_offset=3,
            text_baseline="middle",
            text_font_size="10px",
            text_color="#1b1b1b",
            name="torchprof-label-glyphs",
        )
        fig.block(
            x="x",
            y="y",
            width="w",
            height="h",
            source=self.highlight_source,
            fill_color=ACCENT,
            fill_alpha=0.25,
            line_color=ACCENT,
            line_width=2,
            name="torchprof-highlight-glyphs",
        )
        fig.add_layout(
            Arrow(
                x_start="x0",
                y_start="y0",
                x_end="x1",
                y_end="y1",
                source=self.arrow_source,
                line_color=ACCENT,
                line_width=2,
                end=VeeHead(size=8, fill_color=ACCENT, line_color=ACCENT),
                name="torchprof-arrow-glyphs",
            )
        )
        self._add_legend(fig)
        return host_r, dev_r

    def _add_legend(self, fig: Any) -> None:
        """One entry per category drawn, and device idle (swatches of empty renderers)."""
        from bokeh.models import Block, ColumnDataSource, GlyphRenderer, Legend, LegendItem

        # Blocks, whose swatch fills the legend's glyph box (a marker's takes
        # 40 % of it). Bare renderers, not `figure.block` (which makes four more glyphs
        # each for selection, hover and muting: a tenth of the figure's cost).
        # One point at NaN: never drawn on the plot, but BokehJS draws no
        # legend swatch for a renderer without data.
        empty = ColumnDataSource({"x": [float("nan")], "y": [float("nan")]})
        items = []
        entries = [(c, BASE[CATEGORIES.index(c)]) for c in self.categories]
        if len(self.idle[0]):
            entries.append((IDLE_LABEL, IDLE_COLOUR))
        for label, colour in entries:
            glyph = Block(x="x", y="y", width=1, height=1, fill_color=colour, line_color=None)
            swatch = GlyphRenderer(data_source=empty, glyph=glyph)
            fig.renderers.append(swatch)
            items.append(LegendItem(label=label, renderers=[swatch]))
        legend = Legend(
            items=items,
            orientation="horizontal",
            ncols=min(LEGEND_COLUMNS, max(1, len(items))),
            label_text_font_size="10px",
            glyph_width=12,
            glyph_height=10,
            spacing=8,
            padding=2,
            margin=2,
            border_line_color=None,
            background_fill_alpha=0.0,
            click_policy="none",
            name="torchprof-legend",
        )
        fig.add_layout(legend, "above")

    def _add_tools(self, fig: Any, host_r: Any, dev_r: Any) -> None:
        """Hover for host and device glyphs, pan, zooms, tap, reset and save."""
        from bokeh.models import (
            BoxZoomTool,
            CustomJSHover,
            HoverTool,
            PanTool,
            ResetTool,
            SaveTool,
            TapTool,
            WheelZoomTool,
            ZoomInTool,
            ZoomOutTool,
        )

        time_hover = CustomJSHover(code=FMT_TIME_JS + "return fmt_time(value);")
        strings_hover = CustomJSHover(args={"strings": self.strings_source}, code=_STRINGS_JS)
        formatters_common = {"@n": strings_hover, "@d": time_hover, "@x": time_hover}
        host_hover = HoverTool(
            renderers=[host_r],
            tooltips=_tooltip(_HOST_TOOLTIP, self._has_shapes, "@s{"),
            formatters={
                **formatters_common,
                "@s": strings_hover,
                "@k": CustomJSHover(args={"source": self.host_source}, code=_MERGED_JS),
            },
            point_policy="follow_mouse",
            description="Hover: host events",
        )
        dev_hover = HoverTool(
            renderers=[dev_r],
            tooltips=_tooltip(_DEVICE_TOOLTIP, self._has_launch, "@g{"),
            formatters={
                **formatters_common,
                "@g": strings_hover,
                "@b": strings_hover,
                "@o": strings_hover,
                "@k": CustomJSHover(args={"source": self.dev_source}, code=_MERGED_JS),
            },
            point_policy="follow_mouse",
            description="Hover: device work",
        )
        pan = PanTool(dimensions="width")
        wheel = WheelZoomTool(dimensions="width", modifiers={"ctrl": True}, description="Ctrl + wheel: zoom")
        fig.add_tools(
            pan,
            wheel,
            BoxZoomTool(dimensions="width"),
            # Almost twice as close per click, and zoom-out undoes it exactly
            # (bokeh asks for a factor below 0.5: zoom-out scales by 1/(1 - f),
            # and f = 0.5 fails an assertion and does nothing).
            ZoomInTool(dimensions="width", factor=ZOOM_FACTOR),
            ZoomOutTool(dimensions="width", factor=ZOOM_FACTOR),
            TapTool(renderers=[host_r, dev_r]),
            host_hover,
            dev_hover,
            ResetTool(),
            SaveTool(),
        )
        fig.toolbar.active_drag = pan
        fig.toolbar.active_scroll = wheel
        fig.toolbar.logo = None

    def _decorate(self, fig: Any, rows: int, top: float) -> None:
        """Lane bands and step markers (underlay, not hoverable)."""
        from bokeh.models import BoxAnnotation, ColumnDataSource

        for i, ln in enumerate(self.lanes):
            if i % 2 == 1:
                fig.add_layout(
                    BoxAnnotation(
                        top=ln.first - 0.5,
                        bottom=ln.first + ln.rows - 0.5,
                        fill_color="#808080",
                        fill_alpha=0.06,
                        line_color=None,
                        level="underlay",
                    )
                )
        steps = self.profile.steps
        if steps.empty:
            return
        start = steps["start_us"].to_numpy(np.float64)
        end = start + steps["wall_us"].to_numpy(np.float64)
        odd = np.arange(len(steps)) % 2 == 1
        bands = ColumnDataSource(
            {
                "left": start[odd],
                "right": end[odd],
                "top": np.full(odd.sum(), top),
                "bottom": np.full(odd.sum(), rows),
            }
        )
        fig.quad(
            left="left",
            right="right",
            top="top",
            bottom="bottom",
            source=bands,
            fill_color="#808080",
            fill_alpha=0.07,
            line_color=None,
            level="underlay",
        )
        marks = ColumnDataSource(
            {
                "x": start,
                "y0": np.full(len(start), top),
                "y1": np.full(len(start), rows - 0.4),
                "label": [f"step {int(s)}" for s in steps["step"]],
            }
        )
        fig.segment(
            x0="x",
            x1="x",
            y0="y0",
            y1="y1",
            source=marks,
            line_color="#808080",
            line_alpha=0.6,
            line_dash="dashed",
        )
        fig.text(
            x="x",
            y=top / 2 - 0.2,
            text="label",
            source=marks,
            x_offset=4,
            text_baseline="middle",
            text_font_size="11px",
            text_color="#808080",
        )

    # -- highlighting and picking -------------------------------------------

    def highlight(self, rows: np.ndarray) -> int:
        """Outline the events at ``rows`` of `Profile.events`; returns how many are drawn."""
        rows = np.asarray(rows, dtype=np.int64)
        rows = rows[(rows >= 0) & (rows < len(self.row))]
        self.highlighted = np.unique(rows[self.row[rows] >= 0])
        visible = self._fetched[2] if self._fetched else (self.span[1] - self.span[0])
        self._draw_highlight(visible / self.width_px)
        return len(self.highlighted)

    def _draw_highlight(self, min_w: float) -> None:
        rows = self.highlighted
        if len(rows) > HIGHLIGHT_MAX:
            g = LodIndex(self._ts[rows], self._dur[rows], self.row[rows]).query(max_glyphs=HIGHLIGHT_MAX)
            x, w, y = g.start, g.dur, g.row
        else:
            x, w, y = self._ts[rows], self._dur[rows], self.row[rows]
        y = np.asarray(y, dtype=np.int64)
        h = np.where(np.isin(y, self._dev_row_set), self.device_scale - 0.2, 0.8)
        self.highlight_source.data = {
            "x": np.asarray(x, dtype=np.float64),
            "w": np.maximum(np.asarray(w, dtype=np.float64), min_w).astype(np.float32),
            "y": (y - 0.4).astype(np.float32),
            "h": h.astype(np.float32),
        }
        self.arrow_source.data = self._arrows(rows)

    def _arrows(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Launch → device work arrows for the highlighted ``rows`` (both ends drawn).

        From the middle of the runtime call's bottom edge to the start of
        the top edge of what it launched.
        """
        work = rows[self._is_activity[rows]]
        launch = self._ev["launch"].to_numpy()[work] if len(work) else work
        ok = launch >= 0
        work, launch = work[ok], launch[ok]
        ok = (self.row[launch] >= 0) & (self.row[work] >= 0)
        work, launch = work[ok][:ARROW_MAX], launch[ok][:ARROW_MAX]
        return {
            "x0": self._ts[launch] + self._dur[launch] / 2,
            "y0": (self.row[launch] + 0.4).astype(np.float64),
            "x1": self._ts[work],
            "y1": (self.row[work] - 0.4).astype(np.float64),
        }

    def extent(self, rows: np.ndarray) -> tuple[float, float] | None:
        """(start, end) covering the first of ``rows`` and the work it links to."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) == 0:
            return None
        first = rows[np.argmin(self._ts[rows])]
        group = np.concatenate([[first], self.linked(np.array([first]))])
        s = float(self._ts[group].min())
        e = float((self._ts[group] + self._dur[group]).max())
        pad = max((e - s) * 0.25, 1.0)
        return s - pad, e + pad

    def zoom_to(self, start: float, end: float) -> None:
        """Show the window ``[start, end]`` and send its detail."""
        self.figure.x_range.start = start
        self.figure.x_range.end = end
        self.fetch(start, end)

    def linked(self, rows: np.ndarray) -> np.ndarray:
        """Events linked to ``rows``.

        For host ops: the kernels, copies and memsets launched at any depth
        below them, and their launches. For device work: its launch and the
        op that launched it.
        """
        return linked_events(self._ev, rows, self._dev_activity)

    def describe(self, row: int) -> list[tuple[str, str]]:
        """What to say about event ``row`` (label, value), plain text."""
        ev = self._ev
        rec = ev.iloc[row]
        kind = str(rec["kind"])
        lane = self.lanes[self.lane_of[row]].label if self.lane_of[row] >= 0 else ""
        out = [("name", str(rec["name"])), ("kind", kind.replace("_", " ")), ("lane", lane)]
        out.append(("start", fmt_time(float(rec["ts"]))))
        out.append(("duration", fmt_time(float(rec["dur"]))))
        if kind in K.DEVICE_KINDS:
            for col, label in (("grid", "grid"), ("block", "block")):
                if pd.notna(rec[col]):
                    out.append((label, str(rec[col])))
            if pd.notna(rec.get("registers")):
                out.append(("registers", f"{rec['registers']:.0f}"))
            if pd.notna(rec.get("bytes")):
                out.append(("bytes", fmt_bytes(float(rec["bytes"]))))
            op = int(rec["op"])
            if op >= 0:
                out.append(("launched by", str(ev["name"].iloc[op])))
            launch = int(rec["launch"])
            if launch >= 0:
                delay = rec.get("launch_delay_us")
                extra = f" (queued {fmt_time(float(delay))})" if pd.notna(delay) else ""
                out.append(
                    (
                        "launch",
                        f"{ev['name'].iloc[launch]} at {fmt_time(float(ev['ts'].iloc[launch]))}{extra}",
                    )
                )
        else:
            out.append(("self CPU", fmt_time(float(rec["self_cpu_us"]))))
            if pd.notna(rec["input_dims"]):
                out.append(("input shapes", str(rec["input_dims"])))
            if float(rec["device_total_us"]) > 0:
                out.append(("device time", fmt_time(float(rec["device_total_us"]))))
            kernels = self.linked(np.array([row]))
            kernels = kernels[self._is_activity[kernels]]
            if len(kernels):
                out.append(("launched", f"{len(kernels)} kernel/copy/memset call(s), highlighted"))
        return out

    def pick(self, side: str, index: int) -> None:
        """Handle a click on glyph ``index`` of the ``host`` or ``device`` source."""
        reps = self._host_reps if side == "host" else self._dev_reps
        if not 0 <= index < len(reps):
            return
        row = int(reps[index])
        self.highlight(np.concatenate([[row], self.linked(np.array([row]))]))
        if self.on_pick is not None:
            self.on_pick(self.describe(row))

    # -- live kernel ----------------------------------------------------------

    def attach(self) -> None:
        """Answer zooms and clicks from the browser (needs the view shown in a live kernel)."""
        from bokeh.events import RangesUpdate

        def on_ranges(event: Any) -> None:
            if event.x0 is None or event.x1 is None:
                return
            if self.needs_fetch(float(event.x0), float(event.x1)):
                self.fetch(float(event.x0), float(event.x1))

        self.figure.on_event(RangesUpdate, on_ranges)
        for side, source in (("host", self.host_source), ("device", self.dev_source)):
            source.selected.on_change("indices", self._selection_handler(side))

    def _selection_handler(self, side: str) -> Callable[[str, Any, Any], None]:
        def handler(attr: str, old: Any, new: Any) -> None:
            key = (side, tuple(new or ()))
            # the page may deliver one change twice, and echo changes
            # made from Python: act once per distinct selection.
            if key == self._last_pick or not new:
                return
            self._last_pick = key
            self.pick(side, int(new[0]))

        return handler


def build_timeline(
    profile: Profile, window: tuple[float, float] | None = None, max_glyphs: int = 100_000
) -> Any:
    """A bokeh timeline of ``profile`` (host threads and device streams).

    Usable without a kernel, e.g. with ``bokeh.embed.json_item``: zoom, pan
    and hover run in the browser; detail beyond the level of detail needs
    the live `Timeline` (see `views.widget`).

    Parameters
    ----------
    profile
        The profile to draw.
    window
        ``(start_us, end_us)`` to show (default: the whole trace).
    max_glyphs
        Upper bound on the glyphs included.

    Returns
    -------
    bokeh.plotting.figure
    """
    return Timeline(profile, window=window, max_glyphs=max_glyphs).model
