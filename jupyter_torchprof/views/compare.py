"""The inline view of ``%%torchprof --compare``: eager | compiled | diff.

One row of toggle buttons above the content. "eager" and "compiled" are the
ordinary profile views (`views.widget.ProfileView`), built the first time they
are chosen; "diff" is the comparison itself: the headline, what the compiler
did (graphs, graph breaks with their cell line, recompiles, the kernels it
generated) and a sortable table of ops or kernels, eager vs compiled, per step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from .. import columns
from ..columns import Column
from ..format import esc, fmt_count
from . import ui as W
from .tables import make_table, match_names, screen_order, table_height
from .widget import OneWidget, ProfileView

if TYPE_CHECKING:  # pragma: no cover
    from ..results.comparison import Comparison
    from .export_control import ExportMenu


def _table_pane(model: Any, cls: str) -> W.Node:
    return W.Figure(model, cls=[cls])


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


class ComparisonView(OneWidget):
    """Eager | compiled | diff for a `Comparison`: one widget, like `ProfileView`."""

    def __init__(self, comparison: Comparison, export_menu: ExportMenu | None = None) -> None:
        self.comparison = comparison
        self._export_menu = export_menu  # each side's view has its own Export control
        self._views: dict[str, Any] = {}
        self._surface: Any = None
        options = []
        if comparison.eager is not None:
            options.append(("eager", "eager"))
        if comparison.compiled is not None:
            options.append(("compiled", "compiled"))
        if comparison.eager is not None and comparison.compiled is not None:
            options.append(("diff", "diff"))
        self.header = W.HTML(self._header_html(), cls=["jp-TorchProf-headerbox"])
        children: list[W.Node] = [self.header]
        tb = comparison.compile_stats.traceback
        if tb:
            details = W.HTML(f'<pre class="jp-TorchProf-traceback">{esc(tb)}</pre>')
            self.traceback = W.Details(details, "full traceback", cls=["jp-TorchProf-tracebackbox"])
            children.append(self.traceback)
        self.toggle = W.ToggleButtons(options=options, value=options[-1][1] if options else None)
        self.toggle.add_class("jp-TorchProf-toggle")
        self.toggle.add_class("jp-TorchProf-sides")
        self.body = W.VBox(cls=["jp-TorchProf-comparebody"])
        if options:
            children += [self.toggle, self.body]
            self.toggle.observe(lambda ch: self._show(ch["new"]), "value")
            self._show(self.toggle.value)
        self.root = W.VBox(children, cls=["jp-TorchProf-view", "jp-TorchProf-compare"])

    def _shown(self) -> Any:
        return self.comparison

    def _header_html(self) -> str:
        c = self.comparison
        lines = c.headline_lines()
        parts = ['<div class="jp-TorchProf-header">']
        parts.append(f'<div class="jp-TorchProf-title">{esc(c.name)}: eager vs compiled</div>')
        word, sentence = c.verdict
        if sentence:
            # The one verdict, with the evidence it rests on (interleaved steps or separate runs).
            parts.append(
                f'<div class="jp-TorchProf-verdict jp-TorchProf-verdict-{esc(word.replace(" ", "-"))}">{esc(sentence)}</div>'
            )
        for line in lines:
            cls = "jp-TorchProf-error" if line.startswith("compilation failed") else "jp-TorchProf-line"
            parts.append(f'<div class="{cls}">{esc(line)}</div>')
        parts.append("</div>")
        return "".join(parts)

    def _show(self, which: str) -> None:
        if which not in self._views:
            if which == "eager":
                self._views[which] = ProfileView(self.comparison.eager, export_menu=self._export_menu)
            elif which == "compiled":
                self._views[which] = ProfileView(self.comparison.compiled, export_menu=self._export_menu)
            else:
                self._views[which] = self._diff_page()
        view = self._views[which]
        self.body.children = [view.root if isinstance(view, ProfileView) else view]

    def _diff_page(self) -> W.Node:
        c = self.comparison
        device = any(p is not None and p.summary["device_traced"] for p in (c.eager, c.compiled))
        has_kernels = not c.diff_kernels.empty
        self.level = W.ToggleButtons(
            options=[("ops", "op")] + ([("kernels", "kernel")] if has_kernels else []), value="op"
        )
        self.level.add_class("jp-TorchProf-toggle")
        self.level.add_class("jp-TorchProf-level")
        self.level.layout.display = None if has_kernels else "none"
        self.diff_filter = W.Text(
            placeholder="filter: substring, or regex like ^aten::", cls=["jp-TorchProf-filter"]
        )
        self.diff_status = W.HTML(cls=["jp-TorchProf-status"])
        self.diff_pane = W.VBox(cls=["jp-TorchProf-diffpane"])

        def refresh(*_: Any) -> None:
            level = self.level.value
            table = c.diff_ops if level == "op" else c.diff_kernels
            rows, mode = diff_rows(table, self.diff_filter.value)
            # Names give way and the times (the sorted Δ among them) come first.
            cols = screen_order(diff_columns(level, device))
            # Two-line headers ("Self CPU" over "compiled"): six time columns fit a narrow window.
            model, self.diff_source = make_table(
                rows, cols, height=table_height(len(rows), True), wrap_headers=True
            )
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
        parts: list[W.Node] = [W.HBox([self.level, self.diff_filter]), self.diff_pane, self.diff_status]
        parts += self._compiler_pages()
        return W.VBox(parts, cls=["jp-TorchProf-page"])

    def _compiler_pages(self) -> list[W.Node]:
        """Graph breaks and generated kernels, as small tables."""
        s = self.comparison.compile_stats
        out: list[W.Node] = []
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
        """Close the comparison's widget (its page turns static) and every view it built."""
        for v in self._views.values():
            if isinstance(v, ProfileView):
                v.close()
        super().close()
