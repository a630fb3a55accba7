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
only ever see numbers.
"""

from __future__ import annotations

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


def time_formatter() -> Any:
    """µs → ``12.3 µs`` / ``4.5 ms``, right-aligned (sorting uses the number)."""
    from bokeh.models import HTMLTemplateFormatter

    js = FMT_TIME_JS.replace("\n", " ")
    return HTMLTemplateFormatter(
        template=_template(
            '<div style="text-align:right"><%= (function(){ ' + js + " return fmt_time(value); })() %></div>"
        )
    )


def bytes_formatter() -> Any:
    """Bytes → ``1.5 MiB``, right-aligned."""
    from bokeh.models import HTMLTemplateFormatter

    js = FMT_BYTES_JS.replace("\n", " ")
    return HTMLTemplateFormatter(
        template=_template(
            '<div style="text-align:right"><%= (function(){ ' + js + " return fmt_bytes(value); })() %></div>"
        )
    )


def share_formatter() -> Any:
    """A percentage drawn as a bar in the cell with its value on top."""
    from bokeh.models import HTMLTemplateFormatter

    bar = (
        '<div style="position:relative;height:100%;min-height:16px">'
        '<div style="position:absolute;left:0;top:3px;bottom:3px;border-radius:2px;'
        "background:var(--jp-brand-color2,#90caf9);opacity:0.75;"
        'width:<%= Math.max(0, Math.min(100, value)).toFixed(1) %>%"></div>'
        '<div style="position:relative;text-align:right;padding-right:2px">'
        "<%= value.toFixed(1) %>%</div></div>"
    )
    return HTMLTemplateFormatter(template=_template(bar))


def count_formatter() -> Any:
    """Integers with thousands separators (and up to two decimals: calls per step)."""
    from bokeh.models import NumberFormatter

    return NumberFormatter(format="0,0.[00]", text_align="right")


def float_formatter(fmt: str = "0.0") -> Any:
    """A plain number."""
    from bokeh.models import NumberFormatter

    return NumberFormatter(format=fmt, text_align="right", nan_format="–")


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


def flops_formatter(unit: str = "FLOP") -> Any:
    """FLOP counts (or rates, ``unit="FLOP/s"``) with SI prefixes, right-aligned; sorting uses the number."""
    import json

    from bokeh.models import HTMLTemplateFormatter

    js = FMT_FLOPS_JS.replace("\n", " ")
    call = f"return fmt_flops(value, {json.dumps(unit)});"
    return HTMLTemplateFormatter(
        template=_template('<div style="text-align:right"><%= (function(){ ' + js + call + " })() %></div>")
    )


def text_formatter() -> Any:
    """User-controlled text (names): rendered as text, never markup."""
    from bokeh.models import StringFormatter

    return StringFormatter(nan_format="", null_format="")


#: The bokeh formatter of each kind of the catalog (`columns.KINDS`).
_FORMATTERS = {
    "name": text_formatter,
    "text": text_formatter,
    "status": text_formatter,
    "time": time_formatter,
    "delta": time_formatter,
    "bytes": bytes_formatter,
    "pct": share_formatter,
    "count": count_formatter,
    "calls": count_formatter,
    "number": float_formatter,
    "ratio": lambda: float_formatter("0.00"),
    "flops": flops_formatter,
}


def column_formatter(column: Column) -> Any:
    """The bokeh formatter of one catalog column (a FLOPs column's unit says count or rate)."""
    if column.kind == "flops":
        return flops_formatter(column.unit or catalog.KIND_UNITS["flops"])
    return _FORMATTERS[column.kind]()


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

#: Widens a table's first (name) column to the room its view has beside the
#: other visible columns, never below the width its content needs (the
#: table's ``tags[0]``); run when the view is first drawn, when it is resized
#: and when columns are shown or hidden. ``args``: ``table``.
FIT_NAME_JS = """
if (!window.__torchprofFitName) {
  window.__torchprofFitName = (table) => {
    let view = null;
    for (const v of window.Bokeh.index) { if (v.model === table) { view = v; break; } }
    if (view == null) return null;
    const width = view.el.getBoundingClientRect().width;
    const cols = table.columns.filter((c) => c.visible);
    if (!(width > 50) || !cols.length) return view;
    const base = table.tags.length ? table.tags[0] : cols[0].width;
    let others = 0;
    for (const c of cols.slice(1)) others += c.width;
    const want = Math.max(base, Math.floor(width - others - 24));
    if (Math.abs(want - cols[0].width) > 2) cols[0].width = want;
    return view;
  };
}
const fit = window.__torchprofFitName;
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

#: Pixels per character of the table font, and the name column's bounds.
CHAR_PX = 7.2
NAME_MIN_PX, NAME_MAX_PX = 180, 620
#: Pixels per character of the bold header font.
HEADER_CHAR_PX = 8.0


def text_width(values: Any, title: str, base: int, cap: int = NAME_MAX_PX) -> int:
    """Width (px) for a text column: its longest value, within bounds.

    A name column sized by its content shows whole names when there is room
    (the table scrolls sideways when the columns do not fit; a tooltip tells
    the rest of a name cut at ``cap``).
    """
    longest = max((len(str(v)) for v in values), default=0)
    longest = max(longest, len(title))
    return int(min(max(CHAR_PX * longest + 18, min(base, NAME_MIN_PX)), max(base, cap)))


def header_width(column: Column) -> int:
    """Pixels the header needs in the table's bold font (with ``/step`` where it may appear)."""
    title = column.title + (" /step" if column.field in ops_mod.ADDITIVE_COLUMNS else "")
    return int(HEADER_CHAR_PX * len(title) + 28)


def make_table(frame: pd.DataFrame, columns: list[Column], height: int = 380) -> tuple[Any, Any]:
    """A themed, sortable bokeh DataTable and its source.

    The first column (the name, frozen while scrolling sideways) is as wide
    as its longest value needs, within bounds (see `text_width`).

    Returns
    -------
    (DataTable, ColumnDataSource)
    """
    from bokeh.events import DocumentReady
    from bokeh.models import ColumnDataSource, CustomJS, DataTable, TableColumn

    data = _column_data(frame, columns)
    source = ColumnDataSource(data)
    widths = [
        max(
            header_width(c),
            text_width(data[c.field], c.title, c.width, NAME_MAX_PX if i == 0 else 2 * c.width)
            if not c.numeric
            else c.width,
        )
        for i, c in enumerate(columns)
    ]
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
        # Columns keep their widths and the table scrolls sideways when
        # they do not fit: squeezing them would cut the names off.
        autosize_mode="none",
        frozen_columns=1,
        row_height=24,
        height=height,
        sizing_mode="stretch_width",
        stylesheets=[table_stylesheet()],
        css_classes=["jp-TorchProf-table"],
    )
    table.js_on_event(DocumentReady, CustomJS(code=CELL_TIPS_JS))
    if cols:
        # The width the names need; the browser widens it to the room there is.
        table.tags = [widths[0]]
        fit = CustomJS(args={"table": table}, code=FIT_NAME_JS)
        table.js_on_event(DocumentReady, fit)
        for col in cols:
            col.js_on_change("visible", fit)
    return table, source


def table_height(rows: int) -> int:
    """Height that shows up to ~14 rows without an empty tail."""
    return int(min(max(rows, 3), 14) * 24 + 34)


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


_GROUP_FIELD = {"shape": "input_shapes", "stack": "stack", "module": "module"}


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
    """Mark additive columns ``/step`` in their headers while per-step mode is on."""
    for col, spec in zip(table.model.columns, table.columns, strict=True):
        additive = spec.field in ops_mod.ADDITIVE_COLUMNS
        col.title = f"{spec.title} /step" if additive and table.per_step else spec.title


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
        self.model, self.source = make_table(frame, self.columns, table_height(len(frame)))
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
        return cols

    def _visible(self, field: str) -> bool:
        group_field = _GROUP_FIELD.get(self.group_by)
        if field in _GROUP_FIELD.values():
            return field == group_field
        self_only = {"self_cpu_us", "self_cpu_pct", "self_device_us", "self_device_pct"}
        self_only |= {"self_cpu_mem_bytes", "self_device_mem_bytes"}
        total_only = {"cpu_total_us", "cpu_total_pct", "device_total_us", "device_total_pct"}
        total_only |= {"cpu_mem_bytes", "device_mem_bytes", "cpu_mean_us", "device_mean_us"}
        if field in self_only:
            return self.mode == "self"
        if field in total_only:
            return self.mode == "total"
        return True

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
        self.model, self.source = make_table(frame, self.columns, table_height(len(frame)))
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
        return [c for c in catalog.KERNELS if c.key in keys]

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
        self.model.height = table_height(len(frame))

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
]
