"""The inline view of a `RankSet`: every rank side by side, the straggler verdict, a click into any rank.

Top to bottom: the folder's name and the verdict in words (which rank
straggles, by how much, in its whole step or in its work); a bar per rank
(step time and device busy time per step, stragglers in the accent colour);
the sortable cross-rank table; then the rank picked, by a click on its row or
bar or from the menu, as its full `views.widget.ProfileView`. A rank's
`Profile` is parsed from its file only when it is first opened, so showing a
folder of many ranks costs what its cross-rank table costs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .. import columns
from ..analysis.findings.thresholds import THRESHOLDS
from ..columns import Column
from ..format import esc, fmt_count
from . import ui as W
from .ranks import straggler_verdict
from .tables import make_table, table_height
from .widget import OneWidget, ProfileView

if TYPE_CHECKING:  # pragma: no cover
    from ..results.ranks import RankSet
    from .export_control import ExportMenu

#: The columns of the view's table: the catalog's cross-rank columns, with the
#: two ratios apart (the text table writes them in one cell).
RANK_VIEW_COLUMNS: tuple[Column, ...] = (
    *columns.RANKS[:-1],
    Column("vs_median", "Step vs median", "ratio", 110, "step time over the median rank's"),
    Column(
        "work_vs_median",
        "Work vs median",
        "ratio",
        110,
        "work (step outside communication) over the median's",
    ),
    Column("worker", "Worker", "text", 160, "the host and process the trace file names"),
)

#: Device busy bars: a blue apart from the step bars' grey and the stragglers' accent.
BUSY_COLOUR = "#4c78a8"
#: Pixels per rank in the bar chart, and its bounds (axis and legend take 90 more).
BAR_PX, CHART_MIN_PX, CHART_MAX_PX = 26, 120, 900


def view_frame(ranks: RankSet) -> pd.DataFrame:
    """The rows the view shows: `RankSet.table` as it is (one row per rank, in rank order)."""
    return ranks.table.reset_index(drop=True)


def header_html(ranks: RankSet) -> str:
    """Title, the straggler verdict and the folder's notes."""
    verdict = straggler_verdict(ranks.table, THRESHOLDS.straggler_ratio)
    word = "straggler" if len(ranks.stragglers) else "even"
    parts = ['<div class="jp-TorchProf-header">']
    parts.append(f'<div class="jp-TorchProf-title">{esc(ranks.name)}: {fmt_count(len(ranks))} ranks</div>')
    parts.append(f'<div class="jp-TorchProf-verdict jp-TorchProf-rankverdict-{word}">{esc(verdict)}</div>')
    for note in ranks.notes:
        parts.append(f'<div class="jp-TorchProf-note">{esc(note)}</div>')
    parts.append("</div>")
    return "".join(parts)


def rank_chart(frame: pd.DataFrame) -> tuple[Any, Any]:
    """A bar per rank: step time (and device busy time, when traced) per step.

    Returns the figure and its source (a tap on a bar selects that rank's row).
    """
    from bokeh.models import ColumnDataSource, CustomJSHover, HoverTool, TapTool

    from .style import ACCENT, FMT_TIME_JS, NEUTRAL, follow_theme, static_chart, time_tick_formatter

    labels = [f"rank {r}" for r in frame["rank"]]
    device = bool(np.nansum(frame["device_busy_per_step_us"].to_numpy(np.float64)) > 0)
    data = {
        "label": labels,
        "step": frame["wall_per_step_us"].to_numpy(np.float64),
        "busy": np.nan_to_num(frame["device_busy_per_step_us"].to_numpy(np.float64)),
        "colour": [ACCENT if s else NEUTRAL for s in frame["straggler"]],
    }
    source = ColumnDataSource(data)
    height = int(min(max(BAR_PX * len(frame) + 90, CHART_MIN_PX), CHART_MAX_PX))
    fig = static_chart("torchprof-rankchart", height, y_range=list(reversed(labels)))
    fig.xaxis.formatter = time_tick_formatter()
    fig.xaxis.axis_label = "per step"
    fig.x_range.start = 0
    # Step bars fill the row; device busy bars sit inside them, narrower.
    step = fig.hbar(
        y="label", right="step", height=0.7, source=source, fill_color="colour", line_color=None,
        fill_alpha=0.55, legend_label="step (stragglers in colour)",
    )  # fmt: skip
    renderers = [step]
    if device:
        busy = fig.hbar(
            y="label", right="busy", height=0.3, source=source, fill_color=BUSY_COLOUR, line_color=None,
            legend_label="device busy",
        )  # fmt: skip
        renderers.append(busy)
    # Above the bars: the straggler's bar runs the plot's whole width.
    legend = fig.legend[0]
    legend.orientation = "horizontal"
    legend.background_fill_alpha = 0.0
    legend.border_line_color = None
    fig.add_layout(legend, "above")
    fmt = CustomJSHover(code=FMT_TIME_JS + "return fmt_time(value);")
    tips = [("", "@label"), ("step", "@step{time}")] + ([("device busy", "@busy{time}")] if device else [])
    fig.add_tools(HoverTool(renderers=renderers, tooltips=tips, formatters={"@step": fmt, "@busy": fmt}))
    fig.add_tools(TapTool(renderers=renderers))
    follow_theme([fig])
    return fig, source


class RankView(OneWidget):
    """The interactive view of a `RankSet` (see the module docstring); one widget, like `ProfileView`."""

    def __init__(self, ranks: RankSet, export_menu: ExportMenu | None = None) -> None:
        self.ranks = ranks
        self._export_menu = export_menu  # each rank's view has its own Export control
        self._surface: Any = None
        self._views: dict[int, ProfileView] = {}
        self.frame = view_frame(ranks)
        self.header = W.HTML(header_html(ranks), cls=["jp-TorchProf-headerbox"])
        chart, self.bar_source = rank_chart(self.frame)
        self.chart = W.Figure(chart, cls=["jp-TorchProf-rankchart"])
        cols = list(RANK_VIEW_COLUMNS)
        model, self.source = make_table(self.frame, cols, height=table_height(len(self.frame)))
        self.table = W.Figure(model, cls=["jp-TorchProf-ranktable"])
        self.picker = W.Dropdown(
            options=[("choose a rank", -1)] + [(f"rank {r}", i) for i, r in enumerate(self.frame["rank"])],
            value=-1,
            description="open",
            cls=["jp-TorchProf-rankpicker"],
        )
        self.hint = W.HTML(
            '<div class="jp-TorchProf-hint">click a rank (its row or its bar) to open its full view below</div>'
        )
        self.status = W.HTML(cls=["jp-TorchProf-status", "jp-TorchProf-rankstatus"])
        self.detail = W.VBox(cls=["jp-TorchProf-rankdetail"])
        self.picker.observe(lambda ch: self.open_rank(ch["new"]), "value")
        self.source.selected.on_change("indices", self._selected)
        self.bar_source.selected.on_change("indices", self._selected)
        controls = W.HBox([self.picker, self.hint], cls=["jp-TorchProf-controls"])
        self.root = W.VBox(
            [self.header, self.chart, self.table, controls, self.status, self.detail],
            cls=["jp-TorchProf-view", "jp-TorchProf-ranks"],
        )

    def _shown(self) -> Any:
        return self.ranks

    def _selected(self, attr: str, old: Any, new: Any) -> None:
        # A row of the table or a bar of the chart: both list the ranks in the same order.
        if new:
            self.open_rank(int(new[0]))

    def open_rank(self, position: int) -> None:
        """Show the full view of the rank at ``position`` below (its profile parsed on first use)."""
        if position is None or position < 0 or position >= len(self.frame):
            return
        rank = self.frame["rank"].iloc[position]
        if self.picker.value != position:
            self.picker.value = position  # observed: comes back here, where it is shown already
            return
        if position not in self._views:
            self.status.value = esc(f"loading rank {rank}…")
            try:
                self._views[position] = ProfileView(
                    self.ranks.profile_at(position), export_menu=self._export_menu
                )
            except Exception as exc:  # noqa: BLE001 - a rank that cannot be read must not break the view
                self.status.value = esc(f"rank {rank} cannot be shown: {type(exc).__name__}: {exc}")
                return
        self.status.value = esc(f"rank {rank}: {self.frame['file'].iloc[position] or 'its profile'}")
        self.detail.children = [self._views[position].root]

    def close(self) -> None:
        """Close the widget (its page turns static) and every rank view it opened."""
        for v in self._views.values():
            v.close()
        super().close()
