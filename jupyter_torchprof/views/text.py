"""Plain-text rendering: what a terminal IPython (and ``text/plain``) shows."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..format import ellipsize, fmt_bytes, fmt_count, fmt_flops, fmt_pct, fmt_time, totals_label


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


_OP_COLUMNS: list[tuple[str, str, Any]] = [
    ("self_cpu_pct", "Self CPU %", fmt_pct),
    ("self_cpu_us", "Self CPU", fmt_time),
    ("cpu_total_us", "CPU total", fmt_time),
    ("cpu_mean_us", "CPU avg", fmt_time),
    ("self_device_us", "Self Device", fmt_time),
    ("self_device_pct", "Self Device %", fmt_pct),
    ("device_total_us", "Device total", fmt_time),
    ("device_mean_us", "Device avg", fmt_time),
    ("self_cpu_mem_bytes", "Self CPU Mem", fmt_bytes),
    ("self_device_mem_bytes", "Self Device Mem", fmt_bytes),
    ("flops", "Total FLOPs", fmt_flops),
    ("calls", "# Calls", fmt_count),
]


def op_columns(table: pd.DataFrame, device: bool) -> list[tuple[str, str, Any]]:
    """The (column, header, formatter) triples shown for an op table."""
    cols = [c for c in _OP_COLUMNS if c[0] in table.columns]
    if not device:
        cols = [c for c in cols if "device" not in c[0]]
    return cols


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
    extra = [c for c in ("input_shapes", "stack", "module") if c in table.columns]
    shown = table if row_limit is None or row_limit <= 0 else table.head(row_limit)
    rows = []
    for rec in shown.itertuples(index=False):
        d = rec._asdict()
        rows.append(
            [str(d["name"])]
            + [fmt(d[c]) for c, _, fmt in cols]
            + [ellipsize(str(d[c] or ""), 60) for c in extra]
        )
    headers = ["Name"] + [h for _, h, _ in cols] + [c.replace("_", " ").title() for c in extra]
    text = render_table(rows, headers, name_width)
    footer = []
    if steps is not None:
        footer.append(f"Ops: {totals_label(steps)} (per step: Profile.op_table(per_step=True))")
    footer.append(f"Self CPU time total: {fmt_time(table['self_cpu_us'].sum())}")
    if device:
        footer.append(f"Self Device time total: {fmt_time(table['self_device_us'].sum())}")
    hidden = len(table) - len(shown)
    if hidden > 0:
        footer.append(f"({hidden} more rows; pass row_limit=-1 or use Profile.ops for all)")
    return text + "\n" + "\n".join(footer)


def kernel_table_text(
    table: pd.DataFrame, row_limit: int | None = 20, name_width: int = 60, steps: int | None = None
) -> str:
    """The kernel table as fixed-width text (``steps``: named in the footer, as for ops)."""
    shown = table if row_limit is None or row_limit <= 0 else table.head(row_limit)
    headers = ["Kernel", "Calls", "Total", "Mean", "Min", "Median", "Max", "%"]
    rows = [
        [
            str(r.short_name),
            fmt_count(r.calls),
            fmt_time(r.total_us),
            fmt_time(r.mean_us),
            fmt_time(r.min_us),
            fmt_time(r.median_us),
            fmt_time(r.max_us),
            fmt_pct(r.pct),
        ]
        for r in shown.itertuples(index=False)
    ]
    text = render_table(rows, headers, name_width)
    if steps is not None:
        text += f"\nKernels: {totals_label(steps)} (per step: Profile.kernel_table(per_step=True))"
    return text
