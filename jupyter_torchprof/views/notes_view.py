"""The notes on op and kernel rows (`analysis.notes`) as every view shows them.

One place for what the views share: the chip a bokeh table draws in its
Note column, what a selected row's notes say (the explanation and the event
that showed each), the note text per name the timeline's hover reads, and
the "What the notes mean" list with an anchor per note id that the report
and the static HTML link each note to.

Note text can hold parts of kernel names (the ops a Triton kernel fused):
every string here is escaped, in Python with `format.esc` and in the
browser by the template's own escaping (``<%- %>``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..analysis.notes import SEPARATOR
from ..format import esc, fmt_time

if TYPE_CHECKING:  # pragma: no cover
    from ..results.profile import Profile

#: The catalog key of the notes column (`columns.OPS`, `columns.KERNELS`).
NOTE_KEY = "note"
#: Where a note's explanation is, inside one document: ``#<prefix>note-<id>``.
ANCHOR = "note-"


def note_anchor(note_id: str, prefix: str = "") -> str:
    """The id of the element holding the explanation of ``note_id`` (``prefix`` keeps two sides apart)."""
    return f"{prefix}{ANCHOR}{note_id}"


# --------------------------------------------------------------------------- #
# the bokeh tables' chip

#: One chip per note of the cell (notes are joined by `SEPARATOR`); the text
#: goes through the template's escaping, never in as markup.
_CHIP_TEMPLATE = (
    '<% if (value) { %><div style="overflow:hidden;text-overflow:ellipsis;white-space:nowrap">'
    "<% value.split(" + repr(SEPARATOR).replace("'", '"') + ").forEach(function (t, i) { %>"
    # The separator, not drawn: a cut cell's tooltip (its text) still reads "a · b".
    '<% if (i) { %><span style="display:none">' + SEPARATOR + "</span><% } %>"
    '<span class="torchprof-note-chip" style="display:inline-block;margin:2px 4px 0 0;padding:0 6px;'
    "border-radius:8px;font-size:11px;line-height:16px;background:rgba(255,160,0,0.18);"
    'color:var(--jp-ui-font-color1,#333);border:1px solid rgba(255,160,0,0.55)"><%- t %></span>'
    "<% }); %></div><% } %>"
)


def note_chip_formatter() -> Any:
    """The Note column's cells: each note a small rounded chip (sorting still uses the text)."""
    from bokeh.models import HTMLTemplateFormatter

    return HTMLTemplateFormatter(template=_CHIP_TEMPLATE)


# --------------------------------------------------------------------------- #
# a selected row's notes


@dataclass(frozen=True)
class RowNote:
    """One note on a selected row: what it says, why, and the event that showed it (-1: the row as a whole)."""

    id: str
    text: str
    why: str
    event: int
    event_name: str = ""
    event_ts: float = float("nan")


def row_notes(profile: Profile, table: str, keys: list[str]) -> list[RowNote]:
    """The notes on the rows named ``keys`` of ``table`` (``ops`` / ``kernels``), in the order found."""
    hits = profile.annotations
    mine = hits[(hits["table"] == table) & hits["key"].isin(keys)]
    ev = profile.events
    out = []
    for rec in mine.to_dict("records"):
        row = int(rec["event"])
        name, ts = "", float("nan")
        if 0 <= row < len(ev):
            name, ts = str(ev["name"].iloc[row]), float(ev["ts"].iloc[row])
        out.append(RowNote(str(rec["id"]), str(rec["note"]), str(rec["why"]), row, name, ts))
    return out


def why_html(why: str) -> str:
    """An explanation as markup: escaped, its `backticked` names set as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", esc(why))


def row_notes_html(notes: list[RowNote]) -> str:
    """What the selection line adds for ``notes``: each one's text, explanation and triggering event."""
    if not notes:
        return ""
    items = []
    for n in notes:
        seen = ""
        if n.event >= 0:
            seen = f'<div class="jp-TorchProf-note-event">seen at: {esc(n.event_name)} at {esc(fmt_time(n.event_ts))}</div>'
        items.append(
            f'<li class="jp-TorchProf-note-item" data-note="{esc(n.id)}">'
            f'<span class="jp-TorchProf-note-chip">{esc(n.text)}</span> '
            f'<span class="jp-TorchProf-note-why">{why_html(n.why)}</span>{seen}</li>'
        )
    return f'<ul class="jp-TorchProf-notes">{"".join(items)}</ul>'


def first_event(notes: list[RowNote]) -> np.ndarray:
    """The first triggering event of ``notes`` (empty where none names one): what "show in timeline" zooms to."""
    rows = [n.event for n in notes if n.event >= 0]
    return np.array(rows[:1], dtype=np.int64)


# --------------------------------------------------------------------------- #
# the timeline's hover


def notes_by_name(profile: Profile) -> dict[str, str]:
    """Each op or kernel name with notes: its notes' text, as its table row shows it."""
    hits = profile.annotations
    out: dict[str, list[str]] = {}
    for key, text in zip(hits["key"].astype(str), hits["note"].astype(str), strict=True):
        if text not in out.setdefault(key, []):
            out[key].append(text)
    return {k: SEPARATOR.join(v) for k, v in out.items()}


# --------------------------------------------------------------------------- #
# documents: a note links to its explanation


def note_links_html(texts: Any, ids: Any, prefix: str = "") -> str:
    """A Note cell's content: each note a link to its explanation in the same document ("" for none)."""
    if not isinstance(texts, str) or not texts:
        return ""
    words = texts.split(SEPARATOR)
    keys = str(ids or "").split(",")
    if len(keys) != len(words):
        return esc(texts)
    return SEPARATOR.join(
        f'<a class="tp-note" href="#{esc(note_anchor(k, prefix))}">{esc(w)}</a>'
        for w, k in zip(words, keys, strict=True)
    )


def explanations(profile: Profile) -> pd.DataFrame:
    """The notes present in ``profile``, one row per id (``id``, ``note``, ``why``, rows showing it)."""
    hits = profile.annotations
    if hits.empty:
        return pd.DataFrame({"id": [], "note": [], "why": [], "rows": []})
    first = hits.drop_duplicates("id")[["id", "why"]]
    texts = hits.groupby("id", sort=False)["note"].first()
    counts = hits.groupby("id", sort=False).size()
    out = first.assign(note=first["id"].map(texts), rows=first["id"].map(counts).astype(int))
    return out[["id", "note", "why", "rows"]].sort_values("id", kind="stable").reset_index(drop=True)


def explanations_html(profile: Profile, prefix: str = "", heading: str = "") -> str:
    """The "What the notes mean" list: each note present, under its anchor, with its explanation ("" when none)."""
    present = explanations(profile)
    if present.empty:
        return ""
    items = []
    for rec in present.to_dict("records"):
        rows = f"{rec['rows']} row{'s' if rec['rows'] != 1 else ''}"
        items.append(
            f'<dt id="{esc(note_anchor(rec["id"], prefix))}"><span class="tp-note-text">{esc(rec["note"])}</span> '
            f"<code>{esc(rec['id'])}</code> · {esc(rows)}</dt><dd>{why_html(rec['why'])}</dd>"
        )
    head = f'<div class="tp-notes-title">{esc(heading)}</div>' if heading else ""
    return f'{head}<dl class="tp-notes">{"".join(items)}</dl>'
