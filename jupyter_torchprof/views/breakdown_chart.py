"""The Steps page: one stacked bar per step, its device time by family and its idle time by cause.

Like the overview of TensorBoard's profiler plugin: each bar is a step's
device span, busy time split into kernel families (`Profile.kernel_families`)
under its idle time split into Holistic Trace Analysis's causes
(`Profile.idle_breakdown`). Families take the timeline's colours
(`timeline_style.CATEGORY_RGB`), so a GEMM is the same blue in both; idle
causes are greys, as device idle is in the timeline. Only the families some
step used are drawn. The legend gives each part's total over the steps
shown, the hover a bar part's own time: both formatted here, in Python, with
the tables' `fmt_time`, so what the page says is what the tables hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..analysis import breakdown as B
from ..format import fmt_time
from .timeline_style import CATEGORY_RGB

if TYPE_CHECKING:
    from ..results.profile import Profile

#: Idle causes: greys from dark to light, apart from every family's colour.
IDLE_RGB = {"host wait": (97, 97, 97), "kernel wait": (158, 158, 158), "other": (206, 206, 206)}
#: Legend and hover names of the idle causes.
IDLE_TITLES = {"host wait": "idle: host wait", "kernel wait": "idle: kernel wait", "other": "idle: other"}
CHART_NAME = "torchprof-stepchart"


def chart_rows(profile: Profile) -> pd.DataFrame:
    """The rows the chart draws: the counted steps (or the whole-recording row), families and idle side by side."""
    fam = profile.kernel_families
    idle = profile.idle_breakdown
    both = fam.merge(idle.drop(columns=["counted", "label"]), on="step", how="left", validate="one_to_one")
    return both[both["counted"].to_numpy(bool)].reset_index(drop=True)


def chart_parts(rows: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(column, legend name, colour) of each part drawn, bottom first: families used, then idle causes."""
    out = []
    for family, col in B.FAMILY_COLUMNS.items():
        if (rows[col].to_numpy(np.float64) > 0).any():
            r, g, b = CATEGORY_RGB[family]
            out.append((col, family, f"rgb({r},{g},{b})"))
    for cause, col in B.IDLE_CAUSES.items():
        if (rows[col].to_numpy(np.float64) > 0).any():
            r, g, b = IDLE_RGB[cause]
            out.append((col, IDLE_TITLES[cause], f"rgb({r},{g},{b})"))
    return out


def legend_label(name: str, total_us: float) -> str:
    """A legend entry: the part's name and its time over the steps shown."""
    return f"{name} {fmt_time(total_us)}"


def build_step_chart(profile: Profile) -> Any:
    """The bokeh figure of the Steps page (one bar per counted step)."""
    from bokeh.models import ColumnDataSource, HoverTool, Legend, LegendItem

    from .style import follow_theme, static_chart, time_tick_formatter

    rows = chart_rows(profile)
    parts = chart_parts(rows)
    labels = rows["label"].astype(str).tolist()
    data: dict[str, Any] = {"label": labels}
    for col, _, _ in parts:
        values = rows[col].to_numpy(np.float64)
        data[col] = values
        data[col + "_text"] = [fmt_time(v) for v in values]
    data["busy_text"] = [fmt_time(v) for v in rows["busy_us"].to_numpy(np.float64)]
    data["idle_text"] = [fmt_time(v) for v in rows["idle_us"].to_numpy(np.float64)]
    source = ColumnDataSource(data)
    fig = static_chart(CHART_NAME, 320, x_range=labels)
    fig.yaxis.formatter = time_tick_formatter()
    fig.yaxis.axis_label = "device time"
    fig.y_range.start = 0
    fig.xaxis.major_label_orientation = 0.6 if len(labels) > 8 else 0.0
    items = []
    if parts:
        bars = fig.vbar_stack(
            [c for c, _, _ in parts], x="label", width=0.7, source=source,
            color=[colour for _, _, colour in parts], line_color=None,
        )  # fmt: skip
        for bar, (col, name, _) in zip(bars, parts, strict=True):
            bar.name = col
            items.append(LegendItem(label=legend_label(name, float(rows[col].sum())), renderers=[bar]))
            # One hover per part: the step, the part's own time, and the bar's totals.
            fig.add_tools(
                HoverTool(
                    renderers=[bar],
                    tooltips=[
                        ("step", "@label"),
                        (name, f"@{{{col}_text}}"),
                        ("device busy", "@busy_text"),
                        ("device idle", "@idle_text"),
                    ],
                )
            )
    # The legend above the plot, last part (top of the stack) first, as the bars read.
    legend = Legend(items=list(reversed(items)), orientation="horizontal", ncols=4, background_fill_alpha=0.0)
    legend.border_line_color = None
    legend.label_text_font_size = "11px"
    fig.add_layout(legend, "above")
    follow_theme([fig])
    return fig
