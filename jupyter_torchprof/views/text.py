"""Plain-text rendering: what a terminal IPython (and ``text/plain``) shows."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .. import columns
from ..columns import Column, format_cell
from ..format import ellipsize, fmt_pct, fmt_time, totals_label


def summary_line(summary: dict[str, Any]) -> str:
    """One line: device, steps, wall / CPU / device time per step."""
    parts = []
    if summary.get("name"):
        parts.append(str(summary["name"]))
    parts.append(str(summary.get("device", "?")))
    steps = summary.get("steps", 0)
    parts.append(f"{steps} step{'s' if steps != 1 else ''}" if steps else "whole trace")
    per = "/step" if steps else ""
    parts.append(f"wall {fmt_time(summary.get('wall_per_step_us'))}{per}")
    parts.append(f"CPU busy {fmt_time(summary.get('cpu_busy_per_step_us'))}{per}")
    if summary.get("device_traced"):
        parts.append(
            f"device busy {fmt_time(summary.get('device_busy_per_step_us'))}{per}"
            f" ({fmt_pct(summary.get('device_busy_pct'))})"
        )
    return " · ".join(parts)


#: The op columns of the text table, in key_averages' order (times first, calls last).
TEXT_OP_KEYS = (
    "self_cpu_pct",
    "self_cpu_us",
    "cpu_total_us",
    "cpu_mean_us",
    "self_device_us",
    "self_device_pct",
    "device_total_us",
    "device_mean_us",
    "self_cpu_mem_bytes",
    "self_device_mem_bytes",
    "flops",
    "flops_per_s",
    "calls",
)
#: The kernel columns of the text table.
TEXT_KERNEL_KEYS = ("short_name", "calls", "total_us", "mean_us", "min_us", "median_us", "max_us", "pct")


def op_columns(table: pd.DataFrame, device: bool) -> list[Column]:
    """The catalog's op columns the text table shows for ``table`` (name and extras apart)."""
    return columns.shown(columns.pick(columns.OPS, TEXT_OP_KEYS), table, device)


def render_table(rows: list[list[str]], headers: list[str], name_width: int = 60) -> str:
    """Fixed-width table; the first column is left-aligned, the rest right."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    widths[0] = min(max(widths[0], 4), name_width)
    sep = "  ".join("-" * w for w in widths)

    def line(cells: list[str]) -> str:
        out = [ellipsize(cells[0], widths[0]).ljust(widths[0])]
        out += [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=False)]
        return "  ".join(out).rstrip()

    return "\n".join([sep, line(headers), sep, *(line(r) for r in rows), sep])


def op_table_text(
    table: pd.DataFrame,
    device: bool,
    row_limit: int | None = 20,
    name_width: int = 60,
    steps: int | None = None,
) -> str:
    """The op table in key_averages' layout with device-neutral headers.

    ``steps``, when given, is named in the footer: the numbers are totals
    over that many profiled steps.
    """
    cols = op_columns(table, device)
    extra = columns.shown(columns.pick(columns.OPS, ("input_shapes", "stack", "module")), table, device)
    shown = table if row_limit is None or row_limit <= 0 else table.head(row_limit)
    rows = []
    for d in shown.to_dict("records"):
        rows.append(
            [str(d["name"])]
            + [format_cell(c, d[c.key]) for c in cols]
            + [ellipsize(format_cell(c, d[c.key]), 60) for c in extra]
        )
    name = columns.pick(columns.OPS, ["name"])[0].title
    headers = [name] + [c.title for c in cols] + [c.title for c in extra]
    text = render_table(rows, headers, name_width)
    footer = []
    if steps is not None:
        footer.append(f"Ops: {totals_label(steps)} (per step: Profile.op_table(per_step=True))")
    footer.append(f"Self CPU time total: {fmt_time(table['self_cpu_us'].sum())}")
    if device:
        footer.append(f"Self device time total: {fmt_time(table['self_device_us'].sum())}")
    hidden = len(table) - len(shown)
    if hidden > 0:
        footer.append(f"({hidden} more rows; pass row_limit=-1 or use Profile.ops for all)")
    return text + "\n" + "\n".join(footer)


def kernel_table_text(
    table: pd.DataFrame, row_limit: int | None = 20, name_width: int = 60, steps: int | None = None
) -> str:
    """The kernel table as fixed-width text (``steps``: named in the footer, as for ops)."""
    shown = table if row_limit is None or row_limit <= 0 else table.head(row_limit)
    cols = columns.pick(columns.KERNELS, TEXT_KERNEL_KEYS)
    headers = [c.title for c in cols]
    rows = [[format_cell(c, d.get(c.key)) for c in cols] for d in shown.to_dict("records")]
    text = render_table(rows, headers, name_width)
    if steps is not None:
        text += f"\nKernels: {totals_label(steps)} (per step: Profile.kernel_table(per_step=True))"
    return text
