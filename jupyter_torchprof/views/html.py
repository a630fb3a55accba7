"""Static HTML: what nbconvert, notebook viewers and widget-less frontends show.

Every name that came out of a trace is user-controlled (``record_function``
labels, kernel names) and goes through `format.esc`; nothing here builds
markup from data any other way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from .. import columns
from ..columns import format_cell
from ..format import ellipsize, esc, totals_label
from .text import op_columns, summary_line

#: The kernel columns of the static view (the top of the table, short).
HTML_KERNEL_KEYS = ("short_name", "calls", "total_us", "mean_us", "pct")

_STYLE = """
<style>
.jp-TorchProf-static { font-family: var(--jp-ui-font-family, sans-serif); font-size: 12px; }
.jp-TorchProf-static .jp-TorchProf-summary { font-weight: 600; margin: 4px 0; }
.jp-TorchProf-static .jp-TorchProf-note { color: var(--jp-warn-color0, #a15c00); margin: 2px 0; }
.jp-TorchProf-static .jp-TorchProf-error { color: var(--jp-error-color0, #b00020); margin: 2px 0; }
.jp-TorchProf-static table { border-collapse: collapse; margin: 4px 0; }
.jp-TorchProf-static th, .jp-TorchProf-static td { padding: 2px 8px; text-align: right;
  border-bottom: 1px solid var(--jp-border-color2, #e0e0e0); white-space: nowrap; }
.jp-TorchProf-static th:first-child, .jp-TorchProf-static td:first-child { text-align: left;
  max-width: 48em; overflow: hidden; text-overflow: ellipsis; }
.jp-TorchProf-static caption { text-align: left; font-weight: 600; padding: 4px 0; }
</style>
"""


def table_html(
    rows: Iterable[list[str]],
    headers: list[str],
    caption: str | None = None,
    titles: list[str] | None = None,
    tips: list[str] | None = None,
) -> str:
    """An HTML table from already formatted cells (escaped here).

    ``titles``: each row's tooltip on its first cell; ``tips``: each header's tooltip.
    """
    tips = tips or [""] * len(headers)
    head = "".join(
        f'<th title="{esc(tip)}">{esc(h)}</th>' if tip else f"<th>{esc(h)}</th>"
        for h, tip in zip(headers, tips, strict=True)
    )
    body = []
    for i, row in enumerate(rows):
        title = f' title="{esc(titles[i])}"' if titles else ""
        cells = [f"<td{title}>{esc(row[0])}</td>"] + [f"<td>{esc(c)}</td>" for c in row[1:]]
        body.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def ops_html(table: pd.DataFrame, device: bool, row_limit: int = 20, steps: int | None = None) -> str:
    """Top rows of the op table as static HTML (``steps``: named in the caption)."""
    cols = op_columns(table, device)
    shown = table.head(row_limit) if row_limit and row_limit > 0 else table
    rows, titles = [], []
    for d in shown.to_dict("records"):
        name = str(d["name"])
        if "input_shapes" in d and d["input_shapes"]:
            name = f"{name} {d['input_shapes']}"
        rows.append([ellipsize(name, 100)] + [format_cell(c, d[c.key]) for c in cols])
        titles.append(name)
    caption = f"Ops · {totals_label(steps)}" if steps is not None else "Ops"
    if len(shown) < len(table):
        caption += f" (top {len(shown)} of {len(table)})"
    name = columns.pick(columns.OPS, ["name"])[0]
    cols = [name, *cols]
    return table_html(rows, [c.title for c in cols], caption, titles, [c.tip for c in cols])


def kernels_html(table: pd.DataFrame, row_limit: int = 10, steps: int | None = None) -> str:
    """Top rows of the kernel table as static HTML (``steps``: named in the caption)."""
    shown = table.head(row_limit) if row_limit and row_limit > 0 else table
    cols = columns.pick(columns.KERNELS, HTML_KERNEL_KEYS)
    rows = [[format_cell(c, d.get(c.key)) for c in cols] for d in shown.to_dict("records")]
    titles = [str(n) for n in shown["name"]]
    caption = f"Kernels · {totals_label(steps)}" if steps is not None else "Kernels"
    if len(shown) < len(table):
        caption += f" (top {len(shown)} of {len(table)})"
    return table_html(rows, [c.title for c in cols], caption, titles, [c.tip for c in cols])


def profile_html(
    summary: dict[str, Any],
    ops: pd.DataFrame,
    kernels: pd.DataFrame,
    notes: list[str],
    error: str | None = None,
    row_limit: int = 20,
) -> str:
    """The whole static view: summary, notes, top ops, top kernels."""
    parts = [_STYLE, '<div class="jp-TorchProf-static">']
    parts.append(f'<div class="jp-TorchProf-summary">{esc(summary_line(summary))}</div>')
    if error:
        parts.append(f'<div class="jp-TorchProf-error">{esc(error)}</div>')
    for note in notes:
        parts.append(f'<div class="jp-TorchProf-note">{esc(note)}</div>')
    device = bool(summary.get("device_traced"))
    steps = int(summary.get("steps") or 0)
    parts.append(ops_html(ops, device, row_limit, steps))
    if device and not kernels.empty:
        parts.append(kernels_html(kernels, min(row_limit, 10), steps))
    parts.append("</div>")
    return "".join(parts)
