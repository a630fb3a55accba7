"""The roofline of the Kernels page: arithmetic intensity against achieved FLOP/s for the top kernels.

Log-log: x is FLOP per byte (estimated: the launching op's input and
output tensor sizes, `flops.estimate_call`), y the kernel's share of its
op's estimated FLOPs over its device time (`achieved.add_kernel_rates`).
The roofs are the device's (`Profile.peaks`): memory bandwidth × intensity
up to each compute peak the points use. A point is drawn only when the
kernel has an estimate; the plot only when the device's peaks are known
(else the page says why, in one line). The hover's numbers are the kernel
table's cells, formatted by the column catalog, so the plot says what the
table says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .. import columns
from ..format import esc, fmt_flops
from . import ui as W

if TYPE_CHECKING:
    from ..results.profile import Profile

ROOFLINE_NAME = "torchprof-roofline"
#: Kernels drawn: the top ones by device time among those with an estimate.
TOP_KERNELS = 12
_HOVER_COLUMNS = ("est_flops_per_s", "peak_pct", "intensity")


def roofline_points(profile: Profile, top: int = TOP_KERNELS) -> pd.DataFrame:
    """The kernels drawn: the ``top`` by device time with an estimated rate and intensity, with their hover texts."""
    k = profile.kernels
    if "est_flops_per_s" not in k or "intensity" not in k:
        return pd.DataFrame(columns=["short_name", "name", "total_us", *_HOVER_COLUMNS])
    ok = np.isfinite(k["est_flops_per_s"].to_numpy(np.float64)) & np.isfinite(
        k["intensity"].to_numpy(np.float64)
    )
    rows = k[ok].sort_values("total_us", ascending=False, kind="stable").head(top).reset_index(drop=True)
    for col in columns.pick(columns.KERNELS, list(_HOVER_COLUMNS)):
        rows[col.key + "_text"] = [columns.format_cell(col, v) for v in rows[col.key]]
    rows["peak_text"] = [
        f"{pct} % of {prec}"
        if pct != "–"
        else f"– ({profile.peaks.name if profile.peaks else 'device'} has no {prec})"
        for pct, prec in zip(rows["peak_pct_text"], rows["peak_precision"], strict=True)
    ]
    return rows


def unavailable_reason(profile: Profile) -> str:
    """Why the roofline cannot be drawn ("" when it can)."""
    if profile.peaks is None:
        props = profile.meta.device_properties or [{}]
        name = str(props[0].get("name") or "this device")
        return f"Roofline: no peak figures for {name} (analysis/hardware.py lists the devices it knows)."
    if roofline_points(profile).empty:
        return (
            "Roofline: no kernel has estimated FLOPs (record shapes, with --shapes or record_shapes=True, "
            "for GEMMs, convolutions and attention)."
        )
    return ""


def _roofs(profile: Profile, points: pd.DataFrame, xs: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """(legend label, y over ``xs``) per roof: min(bandwidth × x, peak) for each precision the points use."""
    peaks = profile.peaks
    assert peaks is not None
    bandwidth = peaks.memory_bytes_per_s
    used = [p.split(" ", 1)[0] for p in points["peak_precision"].astype(str) if p]
    out = []
    for prec in dict.fromkeys(used):
        peak = peaks.peak(prec)
        if peak:
            out.append((f"{prec} peak {fmt_flops(peak, 'FLOP/s')}", np.minimum(bandwidth * xs, peak)))
    if not out:  # no precision of the points has a peak: the memory roof alone
        out.append(("", bandwidth * xs))
    label = f"memory {bandwidth / 1e12:.2f} TB/s"
    return [(f"{name} · {label}" if name else label, ys) for name, ys in out]


def build_roofline(profile: Profile) -> Any:
    """The bokeh figure: the device's roofs and one point per top kernel, hover naming it with its numbers."""
    from bokeh.models import ColumnDataSource, HoverTool

    from .style import follow_theme, static_chart

    points = roofline_points(profile)
    x = points["intensity"].to_numpy(np.float64)
    y = points["est_flops_per_s"].to_numpy(np.float64)
    xs = np.logspace(np.log10(max(x.min() / 10, 1e-3)), np.log10(max(x.max() * 10, 1e3)), 200)
    # The roofline had a plot outline; the other charts do not (now none do).
    fig = static_chart(ROOFLINE_NAME, 360, x_axis_type="log", y_axis_type="log")
    fig.xaxis.axis_label = "arithmetic intensity (FLOP/byte, estimated)"
    fig.yaxis.axis_label = "achieved FLOP/s (estimated)"
    colours = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
    for i, (label, ys) in enumerate(_roofs(profile, points, xs)):
        fig.line(xs, ys, line_width=2, color=colours[i % len(colours)], legend_label=label, name="roof")
    source = ColumnDataSource(
        {
            "x": x,
            "y": y,
            "kernel": points["short_name"].astype(str).tolist(),
            "rate": points["est_flops_per_s_text"].tolist(),
            "peak": points["peak_text"].tolist(),
            "intensity": points["intensity_text"].tolist(),
        }
    )
    dots = fig.scatter("x", "y", source=source, size=10, color="#ff7f0e", line_color="black", name="kernels")
    fig.add_tools(
        HoverTool(
            renderers=[dots],
            tooltips=[
                ("kernel", "@kernel"),
                ("FLOP/s", "@rate"),
                ("% of peak", "@peak"),
                ("FLOP/byte", "@intensity"),
            ],
        )
    )
    fig.legend.location = "bottom_right"
    fig.legend.background_fill_alpha = 0.0
    fig.legend.label_text_font_size = "11px"
    follow_theme([fig])
    return fig


class RooflineSection:
    """The Kernels page's roofline: a "Roofline" toggle that draws the plot below the table, or why it cannot.

    The figure is made on the first click (bokeh is not on the page's path
    until then) and hidden, not dropped, on the second.
    """

    def __init__(self, profile: Profile, as_node: Any) -> None:
        self.profile = profile
        self._as_node = as_node  # how the page wraps a bokeh model (`OneWidget._bokeh_model`)
        self.figure: Any = None
        self.slot = W.VBox([], cls=["jp-TorchProf-roofline"])
        reason = unavailable_reason(profile)
        self.toggle: W.Button | None = None
        if reason:
            self.slot.children = [W.HTML(f'<div class="jp-TorchProf-hint">{esc(reason)}</div>')]
            return
        self.toggle = W.Button(
            "Roofline", tooltip="arithmetic intensity vs achieved FLOP/s of the top kernels"
        )
        self.toggle.add_class("jp-TorchProf-rooflinetoggle")
        self.toggle.on_click(lambda _: self.flip())

    def flip(self) -> None:
        """Show the roofline (making it the first time), or hide it."""
        if self.slot.children:
            self.slot.children = []
            return
        if self.figure is None:
            self.figure = self._as_node(build_roofline(self.profile), "jp-TorchProf-rooflineplot")
        hint = (
            f"top {len(roofline_points(self.profile))} kernels by device time with estimated FLOPs · "
            "FLOPs and bytes are estimates from the launching op's shapes, shared among its kernels by "
            "device time · hover a point"
        )
        self.slot.children = [W.HTML(f'<div class="jp-TorchProf-hint">{esc(hint)}</div>'), self.figure]
