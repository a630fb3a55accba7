"""Plain-text rendering: what a terminal IPython (and ``text/plain``) shows."""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
from collections.abc import Sequence
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


#: The op columns of key_averages' table, in its order (times first, calls
#: last): the text table leads with those the catalog lets it show.
KEY_AVERAGES_OP_KEYS = (
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
#: The kernel columns nvprof's summary leads with, in its order.
NVPROF_KERNEL_KEYS = ("short_name", "calls", "total_us", "mean_us", "min_us", "median_us", "max_us", "pct")


def plain_columns(catalog: Sequence[Column], lead: Sequence[str] = (), static: bool = False) -> list[Column]:
    """The catalog columns a plain renderer shows (`Column.plain`): those of ``lead`` first, in its order.

    ``static``: the short static ``text/html`` (``plain="all"``), else the
    text table (``"all"`` or ``"text"``). The rest follow in catalog order,
    so a column added to the catalog shows here unless it says otherwise.
    """
    allowed = ("all",) if static else ("all", "text")
    ok = [c for c in catalog if c.plain in allowed]
    by_key = {c.key: c for c in ok}
    first = [by_key[k] for k in lead if k in by_key]
    return first + [c for c in ok if c not in first]


def _op_plain(static: bool = False) -> list[Column]:
    # The name leads every row apart; the grouping keys are text after the numbers.
    return [c for c in plain_columns(columns.OPS, KEY_AVERAGES_OP_KEYS, static) if c.kind != "name"]


#: The numeric op columns of the text table: key_averages' first, then the
#: catalog's other numbers in its order.
TEXT_OP_KEYS = tuple(c.key for c in _op_plain() if c.numeric)
#: The text op columns, after the numbers (shapes, stack, module, notes): the catalog's, in its order.
TEXT_OP_EXTRA_KEYS = tuple(c.key for c in _op_plain() if not c.numeric)
#: The kernel columns of the text table shown whenever the table has them...
TEXT_KERNEL_KEYS = tuple(c.key for c in plain_columns(columns.KERNELS, NVPROF_KERNEL_KEYS) if not c.when)
#: ...and those shown where some row has a value (the notes).
TEXT_KERNEL_EXTRA_KEYS = tuple(c.key for c in plain_columns(columns.KERNELS, NVPROF_KERNEL_KEYS) if c.when)
#: Characters a text cell of the extra columns takes at most.
EXTRA_CHARS = 60


def op_columns(table: pd.DataFrame, device: bool, static: bool = False) -> list[Column]:
    """The catalog's numeric op columns a plain table shows for ``table`` (name and text columns apart)."""
    return columns.shown([c for c in _op_plain(static) if c.numeric], table, device)


def op_extra_columns(table: pd.DataFrame, device: bool, static: bool = False) -> list[Column]:
    """The text columns a plain table shows after the numbers for the rows ``table`` (`Column.plain`)."""
    return columns.shown([c for c in _op_plain(static) if not c.numeric], table, device)


def kernel_columns(table: pd.DataFrame, static: bool = False) -> list[Column]:
    """The catalog's kernel columns a plain table shows for ``table`` (``static``: the short static view)."""
    return columns.shown(plain_columns(columns.KERNELS, NVPROF_KERNEL_KEYS, static), table)


#: The name column gives way first, down to this many characters, before a column is hidden.
NAME_MIN_CHARS = 18


def fit_width(width: int | None = None) -> int | None:
    """The width text is fitted to: ``width``; when None, the terminal's; None for no limit.

    ``width=0`` asks for no limit. Where no terminal is attached (a script
    writing to a file, a notebook's kernel) the text keeps its natural width.
    """
    if width is None:
        if _in_kernel():
            return None
        width = shutil.get_terminal_size(fallback=(0, 0)).columns
    return int(width) if width and width > 0 else None


def _in_kernel() -> bool:
    # A notebook kernel's standard streams may still be the terminal its server
    # was started from: its text is not shown there.
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def fit_columns(
    widths: list[int], width: int, drop_order: Sequence[int], name_min: int = NAME_MIN_CHARS
) -> tuple[list[int], int]:
    """The columns kept and the name column's width so that a row fits in ``width`` characters.

    The name (column 0) is ellipsized first, down to ``name_min``; then
    columns are hidden in ``drop_order`` until the name has that room; the
    name takes what is left (at least 4 characters).
    """
    keep = list(range(len(widths)))

    def room() -> int:
        return width - sum(widths[i] + 2 for i in keep[1:])

    order = [i for i in drop_order if 0 < i < len(widths)]
    while room() < min(widths[0], name_min) and order:
        keep.remove(order.pop(0))
    return keep, min(widths[0], max(room(), 4))


def render_fitted(
    rows: list[list[str]],
    headers: list[str],
    name_width: int = 60,
    width: int | None = None,
    drop_order: Sequence[int] = (),
) -> tuple[str, list[str]]:
    """A fixed-width table (first column left-aligned, the rest right) no wider than ``width``.

    Returns the text and the titles of the columns hidden to fit (see `fit_columns`).
    """
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    widths[0] = min(max(widths[0], 4), name_width)
    keep = list(range(len(headers)))
    if width is not None:
        keep, widths[0] = fit_columns(widths, width, drop_order)
    sep = "  ".join("-" * widths[i] for i in keep)

    def line(cells: list[str]) -> str:
        out = [ellipsize(cells[0], widths[0]).ljust(widths[0])]
        out += [cells[i].rjust(widths[i]) for i in keep[1:] if i < len(cells)]
        return "  ".join(out).rstrip()

    text = "\n".join([sep, line(headers), sep, *(line(r) for r in rows), sep])
    return text, [h for i, h in enumerate(headers) if i not in keep]


def render_table(
    rows: list[list[str]], headers: list[str], name_width: int = 60, width: int | None = None
) -> str:
    """Fixed-width table; the first column is left-aligned, the rest right (see `render_fitted`)."""
    return render_fitted(rows, headers, name_width, width, range(len(headers) - 1, 0, -1))[0]


def drop_order(cols: Sequence[Column], keep: Sequence[str] = ()) -> list[int]:
    """Which of ``cols`` (behind a name column) a narrow table hides first.

    Columns that are not times, from the right; then times from the right,
    never those in ``keep`` (the columns the table is sorted by).
    """
    others = [i + 1 for i, c in enumerate(cols) if c.kind != "time"]
    times = [i + 1 for i, c in enumerate(cols) if c.kind == "time" and c.key not in keep]
    return others[::-1] + times[::-1]


def hidden_note(hidden: list[str], whole: str = "table(width=0) shows all") -> str:
    """The footer line naming the columns hidden to fit, and where ``whole`` table is ("" when none)."""
    if not hidden:
        return ""
    return f"(hidden to fit the width: {', '.join(hidden)}; {whole})"


def wrap_lines(text: str, width: int | None) -> str:
    """Each line of ``text`` wrapped to ``width`` (a continuation indented under its first word)."""
    if width is None:
        return text
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        # "  SEVERITY  text": a continuation starts under the text, not under the label.
        label = re.match(r"^\s*\S+(?: \S+)*?\s{2,}", line)
        hang = " " * (len(label.group(0)) if label and len(label.group(0)) < width // 3 else 0)
        hang = hang or " " * (len(line) - len(line.lstrip(" ")) + 2)
        out += textwrap.wrap(
            line, width, subsequent_indent=hang, break_long_words=True, break_on_hyphens=False
        ) or [line[:width]]
    return "\n".join(out)


def wrap_summary(line: str, width: int | None) -> str:
    """The summary line broken at its `` · `` separators to fit ``width``."""
    if width is None or len(line) <= width:
        return line
    out, current = [], ""
    for part in line.split(" · "):
        candidate = f"{current} · {part}" if current else part
        if current and len(candidate) > width:
            out.append(current)
            current = "  " + part
        else:
            current = candidate
    out.append(current)
    return wrap_lines("\n".join(out), width)


def op_table_text(
    table: pd.DataFrame,
    device: bool,
    row_limit: int | None = 20,
    name_width: int = 60,
    steps: int | None = None,
    width: int | None = None,
    sort: str | None = None,
) -> str:
    """The op table in key_averages' layout with device-neutral headers.

    ``steps``, when given, is named in the footer: the numbers are totals
    over that many profiled steps. ``width``: the most characters a line
    takes (None: no limit); names give way first, then the columns that are
    not times, then times from the right, never ``sort``'s column nor the
    self CPU and self device times.
    """
    cols = op_columns(table, device)
    shown = table if row_limit is None or row_limit <= 0 else table.head(row_limit)
    # Judged on the rows shown: a top-20 without a note has no empty Note column.
    extra = op_extra_columns(shown, device)
    rows = []
    for d in shown.to_dict("records"):
        rows.append(
            [str(d["name"])]
            + [format_cell(c, d[c.key]) for c in cols]
            + [ellipsize(format_cell(c, d[c.key]), EXTRA_CHARS) for c in extra]
        )
    name = columns.pick(columns.OPS, ["name"])[0].title
    headers = [name] + [c.title for c in cols] + [c.title for c in extra]
    keep = ("self_cpu_us", "self_device_us", *((sort,) if sort else ()))
    text, hidden = render_fitted(rows, headers, name_width, width, drop_order([*cols, *extra], keep))
    footer = []
    if steps is not None:
        footer.append(f"Ops: {totals_label(steps)} (per step: Profile.op_table(per_step=True))")
    footer.append(f"Self CPU time total: {fmt_time(table['self_cpu_us'].sum())}")
    if device:
        footer.append(f"Self device time total: {fmt_time(table['self_device_us'].sum())}")
    if hidden:
        footer.append(hidden_note(hidden))
    more = len(table) - len(shown)
    if more > 0:
        footer.append(f"({more} more rows; pass row_limit=-1 or use Profile.ops for all)")
    return text + "\n" + wrap_lines("\n".join(footer), width)


def _cells(cols: list[Column], rec: dict[str, Any]) -> list[str]:
    return [format_cell(c, rec.get(c.key)) for c in cols]


def kernel_table_text(
    table: pd.DataFrame,
    row_limit: int | None = 20,
    name_width: int = 60,
    steps: int | None = None,
    width: int | None = None,
) -> str:
    """The kernel table as fixed-width text (``steps``, ``width``: as for `op_table_text`)."""
    shown = table if row_limit is None or row_limit <= 0 else table.head(row_limit)
    cols = kernel_columns(shown)
    headers = [c.title for c in cols]
    # Text after the name (the notes) is cut to a readable length; the name gives way to fit.
    cut = [i > 0 and not c.numeric for i, c in enumerate(cols)]
    rows = [
        [
            ellipsize(cell, EXTRA_CHARS) if short else cell
            for cell, short in zip(_cells(cols, d), cut, strict=True)
        ]
        for d in shown.to_dict("records")
    ]
    text, hidden = render_fitted(rows, headers, name_width, width, drop_order(cols[1:], ("total_us",)))
    footer = [hidden_note(hidden)] if hidden else []
    if steps is not None:
        footer.append(f"Kernels: {totals_label(steps)} (per step: Profile.kernel_table(per_step=True))")
    return "\n".join([text, *(wrap_lines(f, width) for f in footer)])
