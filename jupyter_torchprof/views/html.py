"""Static HTML: what nbconvert, notebook viewers and widget-less frontends show.

Every name that came out of a trace is user-controlled (``record_function``
labels, kernel names) and goes through `format.esc`; nothing here builds
markup from data any other way (a Note cell's links are made, escaped, by
`notes_view.note_links_html`).

The notes on rows (`analysis.notes`) show in a Note column, each a link to
its explanation under "What the notes mean" at the end of the same view.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from .. import columns
from ..columns import format_cell
from ..format import ellipsize, esc, totals_label
from .notes_view import NOTE_KEY, explanations_html, note_links_html
from .text import (
    NVPROF_KERNEL_KEYS,
    kernel_columns,
    op_columns,
    op_extra_columns,
    plain_columns,
    summary_line,
)

#: The kernel columns of the static view shown whenever the table has them
#: (the short top of the table: the catalog's ``plain="all"`` columns).
HTML_KERNEL_KEYS = tuple(
    c.key for c in plain_columns(columns.KERNELS, NVPROF_KERNEL_KEYS, True) if not c.when
)

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
.jp-TorchProf-static td.tp-note-cell { text-align: left; }
.jp-TorchProf-static .tp-notes-title { font-weight: 600; margin: 6px 0 2px; }
.jp-TorchProf-static dl.tp-notes dd { margin: 0 0 4px 16px; max-width: 60em; }
</style>
"""


def table_html(
    rows: Iterable[list[str]],
    headers: list[str],
    caption: str | None = None,
    titles: list[str] | None = None,
    tips: list[str] | None = None,
    markup: int | None = None,
) -> str:
    """An HTML table from already formatted cells (escaped here).

    ``titles``: each row's tooltip on its first cell; ``tips``: each header's
    tooltip; ``markup``: the index of a column whose cells are markup made
    (and escaped) by this package (the Note column's links).
    """
    tips = tips or [""] * len(headers)
    head = "".join(
        f'<th title="{esc(tip)}">{esc(h)}</th>' if tip else f"<th>{esc(h)}</th>"
        for h, tip in zip(headers, tips, strict=True)
    )
    body = []
    for i, row in enumerate(rows):
        title = f' title="{esc(titles[i])}"' if titles else ""
        cells = [f"<td{title}>{esc(row[0])}</td>"] + [
            f'<td class="tp-note-cell">{c}</td>' if i == markup else f"<td>{esc(c)}</td>"
            for i, c in enumerate(row[1:], start=1)
        ]
        body.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def ops_html(table: pd.DataFrame, device: bool, row_limit: int = 20, steps: int | None = None) -> str:
    """Top rows of the op table as static HTML (``steps``: named in the caption)."""
    shown = table.head(row_limit) if row_limit and row_limit > 0 else table
    # The text columns (the notes) where a row shown has a value.
    cols = op_columns(table, device, static=True) + op_extra_columns(shown, device, static=True)
    rows, titles = [], []
    for d in shown.to_dict("records"):
        name = str(d["name"])
        if "input_shapes" in d and d["input_shapes"]:
            name = f"{name} {d['input_shapes']}"
        rows.append([ellipsize(name, 100)] + [_cell(c, d) for c in cols])
        titles.append(name)
    caption = f"Ops · {totals_label(steps)}" if steps is not None else "Ops"
    if len(shown) < len(table):
        caption += f" (top {len(shown)} of {len(table)})"
    name = columns.pick(columns.OPS, ["name"])[0]
    cols = [name, *cols]
    return table_html(
        rows, [c.title for c in cols], caption, titles, [c.tip for c in cols], _note_index(cols)
    )


def kernels_html(table: pd.DataFrame, row_limit: int = 10, steps: int | None = None) -> str:
    """Top rows of the kernel table as static HTML (``steps``: named in the caption)."""
    shown = table.head(row_limit) if row_limit and row_limit > 0 else table
    cols = kernel_columns(shown, static=True)
    rows = [[_cell(c, d) for c in cols] for d in shown.to_dict("records")]
    titles = [str(n) for n in shown["name"]]
    caption = f"Kernels · {totals_label(steps)}" if steps is not None else "Kernels"
    if len(shown) < len(table):
        caption += f" (top {len(shown)} of {len(table)})"
    return table_html(
        rows, [c.title for c in cols], caption, titles, [c.tip for c in cols], _note_index(cols)
    )


#: Prefix of the notes' anchors in a static view (apart from the report's).
ANCHOR_PREFIX = "torchprof-"


def _cell(col: columns.Column, rec: dict[str, Any]) -> str:
    """A formatted cell; the Note column's as links to the explanations (markup, escaped)."""
    if col.key == NOTE_KEY:
        return note_links_html(rec.get(NOTE_KEY), rec.get("note_ids"), ANCHOR_PREFIX)
    return format_cell(col, rec.get(col.key))


def _note_index(cols: list[columns.Column]) -> int | None:
    keys = [c.key for c in cols]
    return keys.index(NOTE_KEY) if NOTE_KEY in keys else None


def profile_html(
    summary: dict[str, Any],
    ops: pd.DataFrame,
    kernels: pd.DataFrame,
    notes: list[str],
    error: str | None = None,
    row_limit: int = 20,
    explained: str = "",
) -> str:
    """The whole static view: summary, notes, top ops, top kernels, and ``explained`` (`static_explanations`)."""
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
    parts.append(explained)
    parts.append("</div>")
    return "".join(parts)


def static_explanations(profile: Any) -> str:
    """What the notes of ``profile`` mean, for the end of its static view ("" when it has none)."""
    return explanations_html(profile, ANCHOR_PREFIX, "What the notes mean")
