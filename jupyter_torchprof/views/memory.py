"""The memory view: allocated memory over time per device, and the ops that allocate most.

Shown when the run recorded memory (``--memory``). The curve is the
``total_allocated`` value Kineto writes with every allocation and free;
beyond ``max_points`` points per device it is reduced to the minimum and
maximum of each time bin, so peaks survive the reduction. The op list comes
from the op table's memory columns (exact sums).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .. import columns
from ..analysis.memory import CPU_DEVICE_TYPE
from ..format import fmt_bytes
from .style import FMT_BYTES_JS, FMT_TIME_JS, device_colour, follow_theme, time_tick_formatter
from .tables import make_table, table_height

if TYPE_CHECKING:  # pragma: no cover
    from ..results.profile import Profile


def legend_label(device: str, peak: float) -> str:
    """A memory curve's legend entry.

    The CPU curve counts only what was allocated while profiling (torch
    cannot size blocks allocated before it started), so it says so; device
    allocators report their own running total.
    """
    relative = " since profiling started" if device == "CPU" else ""
    return f"{device}{relative} (peak {fmt_bytes(peak)})"


def has_memory(profile: Profile) -> bool:
    """True when the profile recorded allocations."""
    return len(profile.memory_events) > 0


def device_series(profile: Profile) -> dict[str, pd.DataFrame]:
    """``ts`` and ``allocated`` per memory device, labelled ``CPU`` / ``device 0``."""
    mem = profile.memory_events
    out: dict[str, pd.DataFrame] = {}
    if mem.empty:
        return out
    for (dtype, did), part in mem.groupby(["device_type", "device_id"], sort=True):
        label = "CPU" if int(dtype) == CPU_DEVICE_TYPE else f"device {int(did)}"
        part = part.sort_values("ts", kind="stable")
        out[label] = pd.DataFrame(
            {"ts": part["ts"].to_numpy(np.float64), "allocated": part["total_allocated"].to_numpy(np.float64)}
        )
    return out


def envelope(ts: np.ndarray, value: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` points that keep each time bin's minimum and maximum."""
    n = len(ts)
    if n <= max_points:
        return ts, value
    bins = max(1, max_points // 2)
    lo, hi = float(ts[0]), float(ts[-1])
    width = (hi - lo) / bins or 1.0
    b = np.minimum(((ts - lo) / width).astype(np.int64), bins - 1)
    first = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    vmin = np.minimum.reduceat(value, first)
    vmax = np.maximum.reduceat(value, first)
    start = ts[first]
    x = np.repeat(start, 2)
    y = np.column_stack([vmin, vmax]).ravel()
    return x, y


def memory_ops(profile: Profile, top: int = 50) -> pd.DataFrame:
    """Ops with the largest self allocations (from the op table)."""
    ops = profile.ops
    cols = [c for c in ("self_cpu_mem_bytes", "self_device_mem_bytes") if c in ops.columns]
    if not cols:
        return ops.head(0)
    key = ops[cols].abs().max(axis=1)
    return ops.loc[key.sort_values(ascending=False, kind="stable").index].head(top).reset_index(drop=True)


def build_memory(profile: Profile, max_points: int = 20_000) -> Any:
    """A bokeh layout: memory over time per device and the ops allocating most.

    Parameters
    ----------
    profile
        A profile that recorded memory (see `has_memory`).
    max_points
        Most points per device curve.
    """
    from bokeh.layouts import column
    from bokeh.models import (
        ColumnDataSource,
        CustomJSHover,
        CustomJSTickFormatter,
        HoverTool,
        Legend,
        LegendItem,
    )
    from bokeh.plotting import figure

    fig = figure(
        height=240,
        sizing_mode="stretch_width",
        tools="xpan,xwheel_zoom,xbox_zoom,reset,save",
        toolbar_location="right",
        background_fill_alpha=0.0,
        border_fill_alpha=0.0,
        outline_line_color=None,
        name="torchprof-memory",
    )
    fig.toolbar.logo = None
    fig.xaxis.formatter = time_tick_formatter()
    fig.yaxis.formatter = CustomJSTickFormatter(code=FMT_BYTES_JS + "return fmt_bytes(tick);")
    series_by_device = device_series(profile)
    fig.yaxis.axis_label = "allocated" + (
        " (CPU: since profiling started)" if "CPU" in series_by_device else ""
    )
    items = []
    renderers = []
    for i, (label, series) in enumerate(series_by_device.items()):
        x, y = envelope(series["ts"].to_numpy(), series["allocated"].to_numpy(), max_points)
        src = ColumnDataSource({"x": x, "y": y})
        r = fig.step(x="x", y="y", source=src, mode="after", line_width=2, line_color=device_colour(i))
        items.append(LegendItem(label=legend_label(label, float(np.max(y))), renderers=[r]))
        renderers.append(r)
    if items:
        legend = Legend(items=items, location="top_left", background_fill_alpha=0.6, border_line_color=None)
        fig.add_layout(legend)
    fig.add_tools(
        HoverTool(
            renderers=renderers,
            tooltips=[("time", "@x{time}"), ("allocated", "@y{bytes}")],
            formatters={
                "@x": CustomJSHover(code=FMT_TIME_JS + "return fmt_time(value);"),
                "@y": CustomJSHover(code=FMT_BYTES_JS + "return fmt_bytes(value);"),
            },
            mode="vline",
        )
    )
    follow_theme([fig])

    top = memory_ops(profile)
    cols = columns.shown(columns.MEMORY_OPS, top)
    table, _ = make_table(top, cols, table_height(len(top)))
    return column(fig, table, sizing_mode="stretch_width", name="torchprof-memory-view")
