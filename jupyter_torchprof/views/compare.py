"""The inline view of ``%%torchprof --compare``: eager | compiled | diff.

One row of toggle buttons above the content. "eager" and "compiled" are the
ordinary profile views (`views.widget.ProfileView`), built the first time they
are chosen; "diff" is the comparison itself: the headline, what the compiler
did (graphs, graph breaks with their cell line, recompiles, the kernels it
generated) and a sortable table of ops or kernels, eager vs compiled, per step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets as W
import pandas as pd

from .. import columns
from ..columns import Column
from ..format import esc, fmt_count
from .tables import make_table, match_names, table_height
from .widget import ProfileView, bokeh_pane

if TYPE_CHECKING:  # pragma: no cover
    from ..results.comparison import Comparison


def _wide(widget: W.Widget) -> W.Widget:
    """Give ``widget`` the full width of its parent.

    ipywidgets' ``Box`` lays its children out in a row and sizes each to its
    content; a bokeh model that stretches to its parent's width has none of
    its own, so without this it is drawn 0 px wide (and a page around it is
    only as wide as its widest fixed-size control).
    """
    widget.layout.width = "100%"
    widget.layout.min_width = "0"
    return widget


def _table_pane(model: Any, cls: str) -> W.Widget:
    pane = _wide(bokeh_pane(model))
    pane.add_class(cls)
    return pane


def diff_columns(level: str, device: bool) -> list[Column]:
    """Columns of the diff table for ``op`` or ``kernel`` rows (from the catalog)."""
    if level == "kernel":
        return columns.diff_kernels("eager", "compiled")
    return [c for c in columns.diff_ops("eager", "compiled") if device or not c.device]


def diff_rows(table: pd.DataFrame, pattern: str = "") -> tuple[pd.DataFrame, str]:
    """Rows of a diff table matching a name filter.

    Returns the rows and how the filter was read (see `tables.match_names`).
    The status reads as gone / new in the table itself (the catalog's
    ``status`` kind, `columns.STATUS_LABELS`).
    """
    if table.empty:
        return table, ""
    mask, mode = match_names(table["name"].astype(str), pattern)
    return table.loc[mask].copy(), mode


class ComparisonView(W.VBox):
    """Eager | compiled | diff for a `Comparison`."""

    def __init__(self, comparison: Comparison, **kwargs: Any) -> None:
        self.comparison = comparison
        self._views: dict[str, W.Widget] = {}
        options = []
        if comparison.eager is not None:
            options.append(("eager", "eager"))
        if comparison.compiled is not None:
            options.append(("compiled", "compiled"))
        if comparison.eager is not None and comparison.compiled is not None:
            options.append(("diff", "diff"))
        self.header = W.HTML(self._header_html())
        self.header.add_class("jp-TorchProf-headerbox")
        children: list[W.Widget] = [self.header]
        tb = comparison.compile_stats.traceback
        if tb:
            details = W.HTML(f'<pre class="jp-TorchProf-traceback">{esc(tb)}</pre>')
            self.traceback = W.Accordion(children=[details], titles=("full traceback",), selected_index=None)
            self.traceback.add_class("jp-TorchProf-tracebackbox")
            children.append(self.traceback)
        self.toggle = W.ToggleButtons(options=options, value=options[-1][1] if options else None)
        self.toggle.add_class("jp-TorchProf-toggle")
        self.body = _wide(W.VBox())
        if options:
            children += [self.toggle, self.body]
            self.toggle.observe(lambda ch: self._show(ch["new"]), "value")
            self._show(self.toggle.value)
        super().__init__(children=children, **kwargs)
        self.add_class("jp-TorchProf-view")
        self.add_class("jp-TorchProf-compare")
        self.layout.width = "100%"

    def _header_html(self) -> str:
        c = self.comparison
        lines = c.headline_lines()
        parts = ['<div class="jp-TorchProf-header">']
        parts.append(f'<div class="jp-TorchProf-title">{esc(c.name)}: eager vs compiled</div>')
        for line in lines:
            cls = "jp-TorchProf-error" if line.startswith("compilation failed") else "jp-TorchProf-line"
            parts.append(f'<div class="{cls}">{esc(line)}</div>')
        parts.append("</div>")
        return "".join(parts)

    def _show(self, which: str) -> None:
        if which not in self._views:
            if which == "eager":
                self._views[which] = ProfileView(self.comparison.eager)
            elif which == "compiled":
                self._views[which] = ProfileView(self.comparison.compiled)
            else:
                self._views[which] = self._diff_page()
        self.body.children = [self._views[which]]

    def _diff_page(self) -> W.Widget:
        c = self.comparison
        device = any(p is not None and p.summary["device_traced"] for p in (c.eager, c.compiled))
        has_kernels = not c.diff_kernels.empty
        self.level = W.ToggleButtons(
            options=[("ops", "op")] + ([("kernels", "kernel")] if has_kernels else []), value="op"
        )
        self.level.add_class("jp-TorchProf-toggle")
        self.level.layout.display = None if has_kernels else "none"
        self.diff_filter = W.Text(
            placeholder="filter: substring, or regex like ^aten::",
            continuous_update=True,
            layout=W.Layout(width="320px"),
        )
        self.diff_filter.add_class("jp-TorchProf-filter")
        self.diff_status = W.HTML()
        self.diff_status.add_class("jp-TorchProf-status")
        self.diff_pane = _wide(W.VBox())

        def refresh(*_: Any) -> None:
            level = self.level.value
            table = c.diff_ops if level == "op" else c.diff_kernels
            rows, mode = diff_rows(table, self.diff_filter.value)
            cols = diff_columns(level, device)
            model, self.diff_source = make_table(rows, cols, height=table_height(len(rows)))
            old = list(self.diff_pane.children)
            self.diff_pane.children = [_table_pane(model, "jp-TorchProf-difftable")]
            for w in old:
                w.close()
            gone = int((rows["status"] == "only_a").sum()) if len(rows) else 0
            new = int((rows["status"] == "only_b").sum()) if len(rows) else 0
            text = f"{fmt_count(len(rows))} {level}s per step · {gone} gone when compiled · {new} new"
            if mode:
                text += f" · filter read as {mode}"
            self.diff_status.value = esc(text)

        self.level.observe(refresh, "value")
        self.diff_filter.observe(refresh, "value")
        refresh()
        parts: list[W.Widget] = [W.HBox([self.level, self.diff_filter]), self.diff_pane, self.diff_status]
        parts += self._compiler_pages()
        page = _wide(W.VBox(parts))
        page.add_class("jp-TorchProf-page")
        return page

    def _compiler_pages(self) -> list[W.Widget]:
        """Graph breaks and generated kernels, as small tables."""
        s = self.comparison.compile_stats
        out: list[W.Widget] = []
        if s.graph_breaks:
            frame = pd.DataFrame(
                [
                    {"location": b.location, "code": b.code, "reason": b.reason, "count": b.count}
                    for b in s.graph_breaks
                ]
            )
            cols = [
                Column("location", "Graph break at", "text", 170),
                Column("code", "Code", "text", 220),
                Column("reason", "Reason", "text", 560),
                Column("count", "Hits", "count", 60),
            ]
            model, _ = make_table(frame, cols, height=table_height(len(frame)))
            out += [
                W.HTML('<div class="jp-TorchProf-subtitle">Graph breaks</div>'),
                _table_pane(model, "jp-TorchProf-breaktable"),
            ]
        if len(s.kernels):
            cols = [
                Column("name", "Generated kernel", "text", 320),
                Column("kind", "Kind", "text", 110),
                Column("fused_ops", "Fused ops", "text", 200),
                Column("calls", "Calls", "count", 70),
                Column("total_us", "Time", "time", 90),
                Column("source", "Source", "text", 240),
            ]
            model, _ = make_table(s.kernels, cols, height=table_height(len(s.kernels)))
            out += [
                W.HTML('<div class="jp-TorchProf-subtitle">Kernels generated by Inductor</div>'),
                _table_pane(model, "jp-TorchProf-generatedtable"),
            ]
        return out

    def close(self) -> None:
        """Close every view this comparison built."""
        for v in self._views.values():
            v.close()
        super().close()
