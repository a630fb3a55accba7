"""Sortable bokeh tables of ops and kernels, with filtering and top-N.

A bokeh ``DataTable`` sorts on a header click in the browser, but it hangs
on sort beyond some tens of thousands of rows, so the tables here send the
top rows only (by the chosen metric, after the name filter) and say how many
were left out; the totals they show are always taken over every row.

`OpTable` and `KernelTable` hold the state (filter, grouping, limit) and the
bokeh model; the `views.ui` controls of `widget` drive them, and
`build_op_table` / `build_kernel_table` give the bare bokeh table for use
without a kernel.

Names go through bokeh's ``StringFormatter``, which renders text; templates
only ever see numbers, but for the notes' chips (`notes_view`), whose
template escapes the text it is given.
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .. import columns as catalog
from ..analysis import modules as modules_mod
from ..analysis import ops as ops_mod
from ..columns import STATUS_LABELS, Column
from ..format import fmt_count, fmt_time, per_step_label, totals_label
from ..trace import categories as K
from .notes_view import NOTE_KEY, note_chip_formatter
from .style import FMT_BYTES_JS, FMT_TIME_JS, table_stylesheet

if TYPE_CHECKING:  # pragma: no cover
    from ..results.profile import Profile

#: Rows sent by default; "show all" sends up to `MAX_ROWS`.
DEFAULT_ROWS = 100
MAX_ROWS = 5000
#: Characters that make a filter a regular expression rather than a substring.
_REGEX_CHARS = set("^$*+?()[]{}|\\")

# --------------------------------------------------------------------------- #
# cell formatters


def _template(body: str) -> str:
    # One fixed template per column kind; ``value`` is always a number here.
    return "<% if (value == null || isNaN(value)) { %>–<% } else { %>" + body + "<% } %>"


#: `format.fmt_flops` in the browser (same prefixes, digits and "–"), so a
#: bokeh table's FLOPs read as the text and HTML tables' do.
FMT_FLOPS_JS = """
function fmt_flops(f, unit) {
  if (f == null || !isFinite(f) || f === 0) return "\u2013";
  const three = (v) => Math.abs(v) >= 99.95 ? v.toFixed(0) : String(Number(v.toPrecision(3)));
  const a = Math.abs(f);
  const si = [["P", 1e15], ["T", 1e12], ["G", 1e9], ["M", 1e6], ["k", 1e3]];
  for (const [p, s] of si) { if (a >= 0.9995 * s) return three(f / s) + " " + p + unit; }
  return three(f) + " " + unit;
}
"""

#: Thousands separators in the whole part of a number written by toFixed (``1234.5`` -> ``1,234.5``).
_SEP_JS = """
function sep(t) { return t.replace(/^(-?)(\\d+)/, (m, s, d) => s + d.replace(/\\B(?=(\\d{3})+(?!\\d))/g, ",")); }
"""
#: The other kinds of `columns.format_cell` in the browser: shares, counts
#: (per step: up to two decimals), plain numbers, ratios, signed times.
_PCT_JS = """
function fmt_pct(p) { return (p == null || !isFinite(p)) ? "\u2013" : p.toFixed(1) + "%"; }
"""
_CALLS_JS = """
function fmt_calls(n) {
  if (n == null || !isFinite(n)) return "\u2013";
  const t = sep(n.toFixed(2)).replace(/0+$/, "").replace(/\\.$/, "");
  return t === "-0" ? "0" : t;
}
"""
_NUMBER_JS = """
function fmt_number(x) { return (x == null || !isFinite(x)) ? "\u2013" : sep(x.toFixed(1)); }
"""
_RATIO_JS = """
function fmt_ratio(r) {
  if (r == null || isNaN(r)) return "\u2013";
  if (!isFinite(r)) return r > 0 ? "new" : "\u2013";
  return r.toFixed(2) + "\u00d7";
}
"""
_DELTA_JS = """
function fmt_delta(x) {
  if (x == null || !isFinite(x)) return "\u2013";
  if (x === 0) return "0";
  return (x > 0 ? "+" : "\u2212") + fmt_time(Math.abs(x));
}
"""

#: Per numeric kind: the JavaScript functions its cells need (each template
#: carries only its own) and the call that writes a cell (``unit``: a FLOPs column's).
KIND_JS = {
    "time": ((FMT_TIME_JS,), "fmt_time(value)"),
    "delta": ((FMT_TIME_JS, _DELTA_JS), "fmt_delta(value)"),
    "pct": ((_PCT_JS,), "fmt_pct(value)"),
    "bytes": ((FMT_BYTES_JS,), "fmt_bytes(value)"),
    "count": ((_SEP_JS, _CALLS_JS), "fmt_calls(value)"),
    "calls": ((_SEP_JS, _CALLS_JS), "fmt_calls(value)"),
    "flops": ((FMT_FLOPS_JS,), "fmt_flops(value, {unit})"),
    "number": ((_SEP_JS, _NUMBER_JS), "fmt_number(value)"),
    "ratio": ((_RATIO_JS,), "fmt_ratio(value)"),
}


def kind_js(kind: str, unit: str = "") -> tuple[str, str]:
    """The JavaScript functions a numeric kind's cells need and the expression that writes one from ``value``."""
    import json

    functions, call = KIND_JS[kind]
    return "".join(functions), call.format(unit=json.dumps(unit or catalog.KIND_UNITS["flops"]))


def number_formatter(kind: str, unit: str = "") -> Any:
    """A numeric kind's cells as `columns.format_cell` writes them, right-aligned (sorting uses the number)."""
    from bokeh.models import HTMLTemplateFormatter

    functions, call = kind_js(kind, unit)
    js = functions.replace("\n", " ")
    return HTMLTemplateFormatter(
        template=_template(
            '<div style="text-align:right"><%= (function(){ ' + js + f" return {call};" + " })() %></div>"
        )
    )


def share_formatter() -> Any:
    """A percentage drawn as a bar in the cell with its value on top."""
    from bokeh.models import HTMLTemplateFormatter

    functions, call = kind_js("pct")
    js = functions.replace("\n", " ")
    bar = (
        '<div style="position:relative;height:100%;min-height:16px">'
        '<div style="position:absolute;left:0;top:3px;bottom:3px;border-radius:2px;'
        "background:var(--jp-brand-color2,#90caf9);opacity:0.75;"
        'width:<%= Math.max(0, Math.min(100, value)).toFixed(1) %>%"></div>'
        '<div style="position:relative;text-align:right;padding-right:2px">'
        "<%= (function(){ " + js + f" return {call};" + " })() %></div></div>"
    )
    return HTMLTemplateFormatter(template=_template(bar))


def text_formatter() -> Any:
    """User-controlled text (names): rendered as text, never markup."""
    from bokeh.models import StringFormatter

    return StringFormatter(nan_format="", null_format="")


def column_formatter(column: Column) -> Any:
    """The bokeh formatter of one catalog column (a FLOPs column's unit says count or rate; notes as chips).

    Text goes through `text_formatter`; shares are bars; every other number
    is written by `KIND_JS`, the rules of `columns.format_cell`.
    """
    if column.key == NOTE_KEY:
        return note_chip_formatter()
    if not column.numeric:
        return text_formatter()
    if column.kind == "pct":
        return share_formatter()
    return number_formatter(column.kind, column.unit)


def _column_data(frame: pd.DataFrame, columns: list[Column]) -> dict[str, Any]:
    """The ColumnDataSource dict for ``columns`` (numbers as float arrays)."""
    data: dict[str, Any] = {}
    for c in columns:
        if c.field in data:
            continue
        col = frame[c.field] if c.field in frame.columns else pd.Series([np.nan] * len(frame))
        if not c.numeric:
            text = ["" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v) for v in col]
            # A diff row's side as a reader says it (gone / new).
            data[c.field] = [STATUS_LABELS.get(t, t) for t in text] if c.kind == "status" else text
        else:
            data[c.field] = pd.to_numeric(col, errors="coerce").to_numpy(np.float64)
    return data


#: Installed once per page when a table is shown: a cell whose text does not
#: fit gets that text as its tooltip (``title``, set as an attribute, never
#: markup). Cells live in the tables' shadow roots; ``composedPath`` reaches them.
CELL_TIPS_JS = """
if (!window.__torchprofCellTips) {
  window.__torchprofCellTips = true;
  document.addEventListener("mouseover", (ev) => {
    const target = ev.composedPath()[0];
    if (!(target instanceof Element)) return;
    const cell = target.closest(".slick-cell, .slick-header-column");
    if (!cell) return;
    const root = cell.getRootNode();
    if (!root.host || !root.host.classList.contains("jp-TorchProf-table")) return;
    const inner = cell.querySelector(".slick-column-name") || cell;
    const text = (inner.textContent || "").trim();
    if (inner.scrollWidth > inner.clientWidth + 1 || cell.scrollWidth > cell.clientWidth + 1) {
      cell.setAttribute("title", text);
    } else {
      cell.removeAttribute("title");
    }
  }, true);
}
"""

#: Fits a table's text columns (the name first) to the room its view has.
#: ``table.tags`` is ``[{field: [wanted, soft, floor]} of the text columns,
#: [fields that must stay on screen]]``. With room to spare every column
#: shows whole and the first text column takes the rest; short of room the
#: text columns give way together, in proportion, down to their soft width
#: (the number columns have fixed widths); if even then not every column
#: fits, the text columns before the last must-stay column give way down to
#: their floor, so that the sorted and time columns stay on screen and the
#: rest is reached by scrolling sideways. A cut name ends in "…" and tells
#: itself on hover (`CELL_TIPS_JS`). Run when the view is first drawn, when
#: it is resized and when columns are shown, hidden or resized. ``args``: ``table``.
FIT_COLUMNS_JS = """
if (!window.__torchprofFitColumns) {
  // Widths for ``flex`` (text columns) sharing ``room`` px, each between ``low(f)`` and ``f.want``.
  const share = (flex, room, low) => {
    const want = flex.reduce((a, f) => a + f.want, 0);
    const floors = flex.reduce((a, f) => a + low(f), 0);
    for (const f of flex) {
      if (room >= want) f.width = f.want;
      else if (room <= floors) f.width = low(f);
      else f.width = Math.floor(low(f) + (f.want - low(f)) * (room - floors) / (want - floors));
    }
  };
  window.__torchprofFitColumns = (table) => {
    let view = null;
    for (const v of window.Bokeh.index) { if (v.model === table) { view = v; break; } }
    if (view == null) return null;
    // 18 px: the vertical scrollbar and the borders.
    const avail = view.el.getBoundingClientRect().width - 18;
    const cols = table.columns.filter((c) => c.visible);
    const spec = table.tags.length ? table.tags[0] : {};
    const keep = new Set(table.tags.length > 1 ? table.tags[1] : []);
    if (!(avail > 50) || !cols.length) return view;
    const items = cols.map((c) => {
      const s = spec[c.field];
      return s ? {col: c, want: s[0], soft: Math.min(s[0], s[1]), floor: Math.min(s[0], s[1], s[2])}
               : {col: c, fixed: c.width};
    });
    const flex = items.filter((f) => f.fixed === undefined);
    if (!flex.length) return view;
    const fixed = items.reduce((a, f) => a + (f.fixed || 0), 0);
    share(flex, avail - fixed, (f) => f.soft);
    const total = items.reduce((a, f) => a + (f.fixed !== undefined ? f.fixed : f.width), 0);
    if (total < avail) flex[0].width += Math.floor(avail - total);
    if (total > avail) {
      let last = -1;
      items.forEach((f, i) => { if (keep.has(f.col.field)) last = i; });
      const head = items.slice(0, last + 1);
      const hflex = head.filter((f) => f.fixed === undefined);
      const used = head.reduce((a, f) => a + (f.fixed !== undefined ? f.fixed : f.width), 0);
      if (hflex.length && used > avail) {
        for (const f of hflex) f.want = f.width;
        share(hflex, avail - (used - hflex.reduce((a, f) => a + f.width, 0)), (f) => f.floor);
      }
    }
    for (const f of flex) { if (Math.abs(f.width - f.col.width) > 2) f.col.width = f.width; }
    return view;
  };
}
const fit = window.__torchprofFitColumns;
// Column changes come from a TableColumn; the document's ready event from the table.
const from_column = cb_obj != null && cb_obj.formatter !== undefined && cb_obj.field !== undefined;
if (!from_column) {
  let tries = 0;
  const start = () => {
    const view = fit(table);
    if (view == null) { if (tries++ < 50) setTimeout(start, 100); return; }
    if (view.__torchprofObserved) return;
    view.__torchprofObserved = true;
    let pending = false;
    new ResizeObserver(() => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; fit(table); });
    }).observe(view.el);
  };
  start();
} else {
  fit(table);
}
"""

#: Pixels per character of the table font, and the bounds of the width a text
#: column asks for. Short of room it gives way to its soft width, and the
#: ones left of the sorted and time columns down to their floor.
CHAR_PX = 7.2
NAME_MIN_PX, NAME_MAX_PX = 180, 620
NAME_SOFT_PX, TEXT_SOFT_PX = 260, 120
NAME_FLOOR_PX, TEXT_FLOOR_PX = 56, 60
#: Pixels per character of the bold header font, and its padding with the sort arrow.
HEADER_CHAR_PX, HEADER_PAD_PX = 8.0, 24
#: The same for wrapped headers (`WRAP_HEADERS_CSS`: 12 px, up to three
#: lines); the sort arrow goes under the title where the column is narrow.
WRAP_CHAR_PX, WRAP_PAD_PX, WRAP_LINES = 8.2, 11, 3
#: Characters the widest value of each numeric kind takes (``+1.23 ms``,
#: ``1.23 GiB``); counts and plain numbers are measured on the rows.
_VALUE_CHARS = {"time": 7, "delta": 8, "bytes": 8, "ratio": 7}
#: Share columns draw a bar under the number: room for it.
SHARE_PX = 84
#: Lets headers wrap onto up to three lines, a little smaller than the cells
#: (`make_table`'s ``wrap_headers``): "Self CPU" over "compiled".
WRAP_HEADERS_CSS = """
.slick-header-column.ui-state-default { height: 42px; line-height: 14px; font-size: 12px; white-space: normal; }
.slick-column-name { white-space: normal; max-width: 100%; }
"""
#: Extra height of a table with wrapped headers.
WRAP_EXTRA_PX = 26


def text_width(values: Any, title: str, base: int, cap: int = NAME_MAX_PX) -> int:
    """Width (px) a text column wants: its longest value, within bounds.

    A name column sized by its content shows whole names when there is
    room; when there is not it gives way (`FIT_COLUMNS_JS`), and a cut
    name tells itself on hover.
    """
    longest = max((len(str(v)) for v in values), default=0)
    longest = max(longest, len(title))
    return int(min(max(CHAR_PX * longest + 18, min(base, NAME_MIN_PX)), max(base, cap)))


def header_lines(title: str, lines: int = 1) -> list[str]:
    """``title`` on up to ``lines`` lines, split at the spaces that make the longest line shortest."""
    words = title.split(" ")
    best = [title]
    for cuts in itertools.chain.from_iterable(
        itertools.combinations(range(1, len(words)), k) for k in range(1, min(lines, len(words)))
    ):
        bounds = (0, *cuts, len(words))
        split = [" ".join(words[a:b]) for a, b in itertools.pairwise(bounds)]
        if max(map(len, split)) < max(map(len, best)):
            best = split
    return best


def header_width(column: Column, title: str | None = None, lines: int = 1) -> int:
    """Pixels the header ``title`` (the column's own by default) needs: on one line, or wrapped (``lines`` > 1)."""
    text = column.title if title is None else title
    longest = max(len(line) for line in header_lines(text, lines))
    if lines > 1:
        return int(WRAP_CHAR_PX * longest + WRAP_PAD_PX)
    return int(HEADER_CHAR_PX * longest + HEADER_PAD_PX)


def value_width(column: Column, values: Any) -> int:
    """Pixels the widest value of a numeric column needs (its kind's widest, or the widest of ``values``)."""
    if column.kind == "pct":
        return SHARE_PX
    if column.kind == "flops":
        chars = 7 + len(column.unit or catalog.KIND_UNITS["flops"])
    elif column.kind in _VALUE_CHARS:
        chars = _VALUE_CHARS[column.kind]
    else:
        # Counts: per step they gain up to three characters (".33").
        shown = [catalog.format_cell(column, v) for v in np.asarray(values)[:MAX_ROWS]]
        chars = max((len(t) for t in shown), default=1) + (3 if column.kind in ("count", "calls") else 0)
    return int(CHAR_PX * max(chars, 4) + 16)


def numeric_width(column: Column, values: Any, title: str | None = None, lines: int = 1) -> int:
    """Width (px) of a numeric column: its header (on ``lines`` lines) and its values, whichever needs more."""
    return max(header_width(column, title, lines), value_width(column, values))


def screen_order(
    columns: list[Column], first: tuple[str, ...] = (), then: tuple[str, ...] = ()
) -> list[Column]:
    """The order a bokeh table shows ``columns`` in: what must stay on screen first.

    The name (the first column) leads; then the columns of ``first`` (the
    one the rows are sorted by), the time columns in catalog order, those of
    ``then`` (an op table's grouping) and the rest. When the room is short,
    what comes last is what one scrolls sideways to.
    """
    if not columns:
        return []
    lead, rest = columns[:1], columns[1:]
    head = [c for f in first for c in rest if c.field == f]
    times = [c for c in rest if c.kind in ("time", "delta") and c not in head]
    mid = [c for f in then for c in rest if c.field == f and c not in head]
    tail = [c for c in rest if c not in head and c not in times and c not in mid]
    return lead + head + times + mid + tail


def _fitted_widths(
    data: dict[str, Any], columns: list[Column], lines: int
) -> tuple[list[int], dict[str, list[int]]]:
    """Each column's starting width, and for the text columns ``[wanted, soft, floor]`` (`FIT_COLUMNS_JS`)."""
    widths, flex = [], {}
    for i, c in enumerate(columns):
        if c.numeric:
            widths.append(numeric_width(c, data[c.field], lines=lines))
            continue
        head = header_width(c, lines=lines)
        want = max(head, text_width(data[c.field], c.title, c.width, NAME_MAX_PX if i == 0 else 2 * c.width))
        soft, floor = (NAME_SOFT_PX, NAME_FLOOR_PX) if i == 0 else (TEXT_SOFT_PX, TEXT_FLOOR_PX)
        widths.append(want)
        flex[c.field] = [want, max(head, soft), max(head, floor)]
    return widths, flex


def make_table(
    frame: pd.DataFrame,
    columns: list[Column],
    height: int = 380,
    keep: tuple[str, ...] | None = None,
    wrap_headers: bool = False,
) -> tuple[Any, Any]:
    """A themed, sortable bokeh DataTable and its source.

    Numeric columns are as wide as their header and values need; the text
    columns (the first one, the name, frozen while scrolling sideways) take
    the room that is left and give way when it is short (`FIT_COLUMNS_JS`),
    so that the columns of ``keep`` (default: the time columns) stay on
    screen: pass ``columns`` in `screen_order`. ``wrap_headers`` lets long
    headers take two lines (the diff's "Self CPU compiled"), for narrower
    columns.

    Returns
    -------
    (DataTable, ColumnDataSource)
    """
    from bokeh.events import DocumentReady
    from bokeh.models import ColumnDataSource, CustomJS, DataTable, InlineStyleSheet, TableColumn

    data = _column_data(frame, columns)
    source = ColumnDataSource(data)
    widths, flex = _fitted_widths(data, columns, WRAP_LINES if wrap_headers else 1)
    if keep is None:
        keep = tuple(c.field for c in columns if c.kind in ("time", "delta"))
    sheets = [table_stylesheet()] + ([InlineStyleSheet(css=WRAP_HEADERS_CSS)] if wrap_headers else [])
    cols = [
        TableColumn(
            field=c.field,
            title=c.title,
            formatter=column_formatter(c),
            width=width,
            # Numbers sort largest first on the first click: that is what
            # one looks for in a profile.
            default_sort="descending" if c.numeric else "ascending",
        )
        for c, width in zip(columns, widths, strict=True)
    ]
    table = DataTable(
        source=source,
        columns=cols,
        index_position=None,
        sortable=True,
        selectable=True,
        reorderable=False,
        # Numbers keep their widths and the text columns give way
        # (`FIT_COLUMNS_JS`); past their floors the table scrolls sideways.
        autosize_mode="none",
        frozen_columns=1,
        row_height=24,
        height=height,
        sizing_mode="stretch_width",
        stylesheets=sheets,
        css_classes=["jp-TorchProf-table"],
    )
    table.js_on_event(DocumentReady, CustomJS(code=CELL_TIPS_JS))
    if cols:
        # What each text column wants and its bounds, and what must stay on
        # screen; the browser fits them to the room there is.
        table.tags = [flex, list(keep)]
        fit = CustomJS(args={"table": table}, code=FIT_COLUMNS_JS)
        table.js_on_event(DocumentReady, fit)
        for col in cols:
            col.js_on_change("visible", fit)
            if col.field not in flex:
                # A number's width changes with its title (``/step``): refit the names.
                col.js_on_change("width", fit)
    return table, source


def table_height(rows: int, wrap_headers: bool = False) -> int:
    """Height that shows up to ~14 rows without an empty tail (and a second header line with ``wrap_headers``)."""
    return int(min(max(rows, 3), 14) * 24 + 34 + (WRAP_EXTRA_PX if wrap_headers else 0))


# --------------------------------------------------------------------------- #
# filtering


def match_names(names: pd.Series, pattern: str) -> tuple[np.ndarray, str]:
    """Rows whose name matches ``pattern``, and how it was read.

    A pattern with regex characters is a case-insensitive regular expression
    (``aten::(mm|addmm)``, ``^nccl``); anything else, or a pattern that does
    not compile, is a case-insensitive substring.

    Returns
    -------
    (mask, mode) with mode ``""`` (no filter), ``"text"``, ``"regex"`` or
    ``"text (invalid regex)"``.
    """
    text = pattern.strip()
    values = names.astype(object).fillna("").astype(str)
    if not text:
        return np.ones(len(values), dtype=bool), ""
    if set(text) & _REGEX_CHARS:
        try:
            rx = re.compile(text, re.IGNORECASE)
        except re.error:
            mode = "text (invalid regex)"
        else:
            return values.map(lambda s: rx.search(s) is not None).to_numpy(bool), "regex"
    else:
        mode = "text"
    needle = text.casefold()
    return values.map(lambda s: needle in s.casefold()).to_numpy(bool), mode


# --------------------------------------------------------------------------- #
# op table


#: The op-table column each grouping adds (`Column.group`), and each column's Self / Total mode (`Column.role`).
_GROUP_FIELD = {c.group: c.key for c in catalog.OPS if c.group}
_OP_ROLES = {c.key: c.role for c in catalog.OPS}


def _shown_parts(table: OpTable | KernelTable, what: str, by: str) -> list[str]:
    """The start of a table's status line: how many rows match the filter, and the top-N cut."""
    total = fmt_count(len(table.full))
    if not table.pattern.strip():
        parts = [f"{total} {what}"]
    else:
        parts = [f"{fmt_count(table.matched)} of {total} {what} match"]
        if table.filter_mode == "text (invalid regex)":
            parts.append("invalid regex, matched as text")
    if len(table.shown) < table.matched:
        parts.append(f"top {fmt_count(len(table.shown))} by {by}")
    return parts


def _per_step_rows(table: OpTable | KernelTable, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as shown: totals, or divided by the step count in per-step mode."""
    return ops_mod.per_step(frame, table.profile.step_count) if table.per_step else frame


def _per_step_titles(table: OpTable | KernelTable) -> None:
    """Mark additive columns ``/step`` in their headers while per-step mode is on (and widen them for it)."""
    data = table.source.data
    for col, spec in zip(table.model.columns, table.columns, strict=True):
        additive = spec.field in ops_mod.ADDITIVE_COLUMNS
        title = f"{spec.title} /step" if additive and table.per_step else spec.title
        if col.title != title:
            col.title = title
        if spec.numeric:
            width = numeric_width(
                spec, data[spec.field], title, lines=WRAP_LINES if table.wrap_headers else 1
            )
            if width != col.width:
                col.width = width


def _what_label(table: OpTable | KernelTable) -> str:
    steps = int(table.profile.summary["steps"])
    return per_step_label(steps) if table.per_step else totals_label(steps)


def available_groupings(profile: Profile) -> list[str]:
    """Group-by choices the trace supports (``name`` plus what was recorded)."""
    ev = profile.events
    out = ["name"]
    for key, col in (("shape", "input_dims"), ("stack", "stack")):
        if col in ev.columns and ev[col].notna().any():
            out.append(key)
    if modules_mod.has_modules(ev):
        out.append("module")
    return out


class OpTable:
    """The op table: state, filtered rows and the bokeh table showing them.

    Parameters
    ----------
    profile
        The profile to show.
    group_by
        ``name``, ``shape``, ``stack`` or ``module``.
    mode
        ``self`` (self times, shares of self time) or ``total``.
    pattern
        Name filter (see `match_names`).
    limit
        Rows sent to the browser (top by the mode's metric).
    per_step
        Show calls, times, memory and FLOPs per step instead of totals
        over the profiled steps.
    """

    #: Headers on one line: the op table's titles are short.
    wrap_headers = False

    def __init__(
        self,
        profile: Profile,
        group_by: str = "name",
        mode: str = "self",
        pattern: str = "",
        limit: int = DEFAULT_ROWS,
        per_step: bool = False,
    ) -> None:
        self.profile = profile
        self.per_step = per_step
        self.device = bool(profile.summary["device_traced"])
        self.group_by = group_by
        self.mode = mode
        self.pattern = pattern
        self.limit = limit
        self.filter_mode = ""
        self.shown = pd.DataFrame()
        self.matched = 0
        frame = self._rows()
        self.columns = self._columns()
        # The sorted column and the times stay on screen; the names give way.
        keep = self._sort_fields() + tuple(c.field for c in self.columns if c.kind == "time")
        self.model, self.source = make_table(frame, self.columns, table_height(len(frame)), keep=keep)
        self._apply_visibility()
        _per_step_titles(self)

    # -- state -------------------------------------------------------------

    @property
    def full(self) -> pd.DataFrame:
        """Every row of the current grouping (exact, unfiltered)."""
        return self.profile.op_table(self.group_by)

    @property
    def metric(self) -> str:
        """Column the top-N is taken by."""
        if self.mode == "total":
            return "device_total_us" if self.device else "cpu_total_us"
        return catalog.op_sort(self.profile.sort, self.device, self.full.columns)

    def _rows(self) -> pd.DataFrame:
        full = self.full
        mask, self.filter_mode = match_names(full["name"], self.pattern)
        matched = full.loc[mask]
        self.matched = len(matched)
        ordered = matched.sort_values(self.metric, ascending=False, kind="stable")
        shown = _per_step_rows(self, ordered.head(self.limit).copy())
        total_device = full["self_device_us"].sum()
        total_cpu = full["self_cpu_us"].sum()
        # Share of the total column relative to all self time: an op's
        # inclusive time as a fraction of everything that ran.
        totals = ordered.head(self.limit)
        shown["device_total_pct"] = (
            100 * totals["device_total_us"].to_numpy() / total_device if total_device else 0.0
        )
        shown["cpu_total_pct"] = 100 * totals["cpu_total_us"].to_numpy() / total_cpu if total_cpu else 0.0
        self.shown = shown.reset_index(drop=True)
        return self.shown

    def _columns(self) -> list[Column]:
        # Built once for every grouping the trace supports (`update` only
        # shows and hides them), so the group columns are judged by the
        # groupings, not by the frame of the current one; the shares of
        # inclusive time are computed per shown row (`_rows`).
        groups = {_GROUP_FIELD[k] for k in available_groupings(self.profile) if k in _GROUP_FIELD}
        full = self.full
        always = set(full.columns) | {"cpu_total_pct", "device_total_pct"}
        cols = []
        for c in catalog.OPS:
            if c.key in _GROUP_FIELD.values():
                keep = c.key in groups
            else:
                keep = (self.device or not c.device) and c.key in always
                keep = keep and (not c.when or bool(catalog.shown([c], full)))
            if keep:
                cols.append(c)
        # The columns the rows are sorted by (self and total mode) first, then
        # the other times, then the grouping: they stay on screen.
        return screen_order(cols, first=self._sort_fields(), then=tuple(_GROUP_FIELD.values()))

    def _sort_fields(self) -> tuple[str, str]:
        """The columns the rows are sorted by in self and in total mode."""
        sort_self = catalog.op_sort(self.profile.sort, self.device, self.full.columns)
        return sort_self, "device_total_us" if self.device else "cpu_total_us"

    def _visible(self, field: str) -> bool:
        group_field = _GROUP_FIELD.get(self.group_by)
        if field in _GROUP_FIELD.values():
            return field == group_field
        # The catalog says which mode shows a column (`Column.role`): self or total times, or both.
        role = _OP_ROLES.get(field, "")
        return not role or role == self.mode

    def _apply_visibility(self) -> None:
        for col in self.model.columns:
            col.visible = self._visible(col.field)

    def update(
        self,
        group_by: str | None = None,
        mode: str | None = None,
        pattern: str | None = None,
        limit: int | None = None,
        per_step: bool | None = None,
    ) -> None:
        """Change any of the settings and send the new rows."""
        if per_step is not None:
            self.per_step = bool(per_step)
        if group_by is not None:
            if group_by not in available_groupings(self.profile):
                raise ValueError(f"this trace cannot be grouped by {group_by!r}")
            self.group_by = group_by
        if mode is not None:
            if mode not in ("self", "total"):
                raise ValueError("mode must be 'self' or 'total'")
            self.mode = mode
        if pattern is not None:
            self.pattern = pattern
        if limit is not None:
            self.limit = max(1, min(int(limit), MAX_ROWS))
        frame = self._rows()
        self.source.selected.indices = []
        self.source.data = _column_data(frame, self.columns)
        self._apply_visibility()
        _per_step_titles(self)
        self.model.height = table_height(len(frame))

    # -- text --------------------------------------------------------------

    def status(self) -> str:
        """One line: what is shown, and exact totals over every row."""
        full = self.full
        what = "ops" if self.group_by == "name" else f"op × {self.group_by} groups"
        parts = _shown_parts(self, what, _METRIC_LABEL.get(self.metric, self.metric))
        parts.append(_what_label(self))
        per = self.profile.step_count if self.per_step else 1
        unit = "/step" if self.per_step else ""
        if self.mode == "total":
            # Inclusive times overlap (a parent holds its children), so their
            # sum means nothing; the self times add up to everything that ran.
            sums = f"CPU {fmt_time(full['self_cpu_us'].sum() / per)}{unit}"
            if self.device:
                sums += f" · device {fmt_time(full['self_device_us'].sum() / per)}{unit}"
            parts.append(f"all ops together: {sums}")
        else:
            sums = f"self CPU {fmt_time(full['self_cpu_us'].sum() / per)}{unit}"
            if self.device:
                sums += f" · self device {fmt_time(full['self_device_us'].sum() / per)}{unit}"
            parts.append(f"totals over all rows: {sums}")
        return " · ".join(parts)

    def event_rows(self, index: int) -> np.ndarray:
        """Rows of `Profile.events` behind the shown row ``index``."""
        if not 0 <= index < len(self.shown):
            return np.array([], dtype=np.int64)
        rec = self.shown.iloc[index]
        ev = self.profile.events
        names = ev["name"]
        if rec["name"] == ops_mod.STEP_ROW:
            cats = names.cat.categories.to_numpy(object)
            wanted = np.array([bool(ops_mod.STEP_PATTERN.match(str(c))) for c in cats] + [False])
            mask = wanted[names.cat.codes.to_numpy()]
        else:
            mask = _label_mask(names, rec["name"])
        mask &= K.kind_mask(ev, K.OP_KINDS + (K.PYTHON_FUNCTION,))
        group_col = {"shape": "input_dims", "stack": "stack", "module": "module"}.get(self.group_by)
        if group_col is not None:
            col = self.profile.module_of if self.group_by == "module" else ev[group_col]
            mask &= _label_mask(col, rec[_GROUP_FIELD[self.group_by]], missing_is_empty=True)
        return np.flatnonzero(mask)


_METRIC_LABEL = {
    "self_device_us": "self device time",
    "self_cpu_us": "self CPU time",
    "device_total_us": "device total",
    "cpu_total_us": "CPU total",
    "calls": "calls",
    "flops": "FLOPs",
    "total_us": "total time",
}


# --------------------------------------------------------------------------- #
# kernel table


class KernelTable:
    """The kernel table (kernels, copies, memsets by name): state and bokeh table.

    Parameters
    ----------
    profile
        The profile to show.
    pattern
        Filter on the full or short kernel name.
    limit
        Rows sent (top by total time).
    """

    #: Headers on two lines ("Launch" over "delay"): six time columns fit a narrow window.
    wrap_headers = True

    def __init__(
        self,
        profile: Profile,
        pattern: str = "",
        limit: int = DEFAULT_ROWS,
        per_step: bool = False,
        module: str = "",
    ) -> None:
        self.profile = profile
        self.per_step = per_step
        self.module = module
        self.pattern = pattern
        self.limit = limit
        self.filter_mode = ""
        self.matched = 0
        self.shown = pd.DataFrame()
        frame = self._rows()
        self.columns = self._columns()
        height = table_height(len(frame), self.wrap_headers)
        self.model, self.source = make_table(frame, self.columns, height, wrap_headers=self.wrap_headers)
        _per_step_titles(self)

    @property
    def full(self) -> pd.DataFrame:
        """Every kernel row (exact), or those launched inside ``module`` when one is chosen."""
        if self.module:
            return self.profile.module_kernels(self.module)
        return self.profile.kernels

    def _rows(self) -> pd.DataFrame:
        full = self.full
        m1, self.filter_mode = match_names(full["name"], self.pattern)
        m2, _ = match_names(full["short_name"], self.pattern)
        matched = full.loc[m1 | m2]
        self.matched = len(matched)
        top = matched.sort_values("total_us", ascending=False, kind="stable").head(self.limit).copy()
        if "occupancy" in top.columns:
            # Kineto writes 0 where it could not estimate occupancy: unknown, not zero.
            top["occupancy"] = top["occupancy"].where(top["occupancy"] > 0)
        for field, values in launch_summary(self.profile, top["name"]).items():
            top[field] = values
        self.shown = _per_step_rows(self, top).reset_index(drop=True)
        return self.shown

    def _columns(self) -> list[Column]:
        # Optional fields are judged on every kernel; who launched them on the
        # shown rows (`launch_summary` runs for those only).
        keys = {c.key for c in catalog.shown(catalog.KERNELS, self.full)}
        keys |= {c.key for c in catalog.shown(catalog.pick(catalog.KERNELS, ["launched_by"]), self.shown)}
        return screen_order([c for c in catalog.KERNELS if c.key in keys], first=("total_us",))

    def update(
        self,
        pattern: str | None = None,
        limit: int | None = None,
        per_step: bool | None = None,
        module: str | None = None,
    ) -> None:
        """Change the filter, the module, the row limit or totals / per step, and send the new rows."""
        if per_step is not None:
            self.per_step = bool(per_step)
        if module is not None:
            if module and module not in set(self.profile.modules["module"]):
                raise ValueError(f"no module {module!r} in this profile")
            self.module = module
        if pattern is not None:
            self.pattern = pattern
        if limit is not None:
            self.limit = max(1, min(int(limit), MAX_ROWS))
        frame = self._rows()
        self.source.selected.indices = []
        self.source.data = _column_data(frame, self.columns)
        _per_step_titles(self)
        self.model.height = table_height(len(frame), self.wrap_headers)

    def status(self) -> str:
        """One line: what is shown and the exact total over every kernel."""
        full = self.full
        parts = _shown_parts(self, "kernels", "total time")
        if self.module:
            parts.append(f"launched inside {self.module}")
        parts.append(_what_label(self))
        if self.per_step:
            n = self.profile.step_count
            parts.append(
                f"device time over all rows: {fmt_time(full['total_us'].sum() / n)}/step in "
                f"{full['calls'].sum() / n:,.1f} calls/step"
            )
        else:
            parts.append(
                f"device time over all rows: {fmt_time(full['total_us'].sum())} in "
                f"{fmt_count(full['calls'].sum())} calls"
            )
        return " · ".join(parts)

    def event_rows(self, index: int) -> np.ndarray:
        """Rows of `Profile.events` behind the shown row ``index``."""
        if not 0 <= index < len(self.shown):
            return np.array([], dtype=np.int64)
        rec = self.shown.iloc[index]
        ev = self.profile.events
        return np.flatnonzero(_label_mask(ev["name"], rec["name"]) & _label_mask(ev["kind"], rec["kind"]))


def _label_mask(col: pd.Series, value: Any, missing_is_empty: bool = False) -> np.ndarray:
    """Rows of ``col`` whose label is ``value`` (a missing one counts as ``""`` with ``missing_is_empty``).

    From the categorical codes: comparing a string per event takes seconds
    on a trace of millions of events.
    """
    if not isinstance(col.dtype, pd.CategoricalDtype):
        values = col.astype(object)
        return ((values.fillna("") if missing_is_empty else values) == value).to_numpy()
    cats = col.cat.categories.to_numpy(object)
    wanted = np.append(cats == value, missing_is_empty and value == "")
    return wanted[col.cat.codes.to_numpy()]


def _summary_labels(keys: np.ndarray, values: np.ndarray, categories: Any) -> dict[int, str]:
    """Per key: its one value, or the most common one with its count ("varies: … ×12/20")."""
    ok = values >= 0
    if not ok.any():
        return {}
    counts = pd.DataFrame({"k": keys[ok], "v": values[ok]}).groupby(["k", "v"]).size()
    out: dict[int, str] = {}
    for key, group in counts.groupby(level=0, sort=False):
        group = group.droplevel(0).sort_values(ascending=False, kind="stable")
        top = str(categories[group.index[0]])
        n, total = int(group.iloc[0]), int(group.sum())
        out[int(key)] = top if len(group) == 1 else f"varies: {top} ×{n:,}/{total:,}"
    return out


def launch_summary(profile: Profile, names: pd.Series) -> dict[str, list[str]]:
    """What an aggregated kernel row cannot show with one value, per name in ``names``.

    ``launched_by`` names the op that launched the kernel's calls, ``grid``
    and ``block`` its launch shape: the value when every call had the same,
    else ``varies:`` with the most common one and its share of the calls.
    Empty where the trace does not say.
    """
    ev = profile.events
    cats = ev["name"].cat.categories
    wanted = cats.get_indexer(names.astype(str))
    rows = np.flatnonzero(K.kind_mask(ev, K.DEVICE_ACTIVITY))
    codes = ev["name"].cat.codes.to_numpy()[rows]
    mine = np.isin(codes, wanted[wanted >= 0])
    rows, codes = rows[mine], codes[mine]
    op = ev["op"].to_numpy()[rows]
    op_names = np.where(op >= 0, ev["name"].cat.codes.to_numpy()[np.maximum(op, 0)], -1)
    out: dict[str, list[str]] = {}
    parts = {"launched_by": (op_names, cats)}
    for col in ("grid", "block"):
        if col in ev.columns:
            parts[col] = (ev[col].cat.codes.to_numpy()[rows], ev[col].cat.categories)
    for field, (values, categories) in parts.items():
        labels = _summary_labels(codes, values, categories)
        out[field] = [labels.get(int(w), "") for w in wanted]
    return out


# --------------------------------------------------------------------------- #
# public builders


def build_op_table(
    profile: Profile, group_by: str = "name", mode: str = "self", pattern: str = "", limit: int = DEFAULT_ROWS
) -> Any:
    """A sortable bokeh DataTable of the top ops (usable without a kernel).

    Parameters
    ----------
    profile
        The profile.
    group_by
        ``name``, ``shape``, ``stack`` or ``module`` (when recorded).
    mode
        ``self`` or ``total`` columns.
    pattern
        Name filter: substring, or a regex when it has regex characters.
    limit
        Rows included (top by self device time, else self CPU time).
    """
    return OpTable(profile, group_by, mode, pattern, limit).model


def build_kernel_table(profile: Profile, pattern: str = "", limit: int = DEFAULT_ROWS) -> Any:
    """A sortable bokeh DataTable of the top kernels (usable without a kernel)."""
    return KernelTable(profile, pattern, limit).model


__all__ = [
    "DEFAULT_ROWS",
    "MAX_ROWS",
    "Column",
    "KernelTable",
    "OpTable",
    "available_groupings",
    "build_kernel_table",
    "build_op_table",
    "make_table",
    "match_names",
    "screen_order",
]
