"""Why a row is there: short notes on op and kernel rows, read from the trace alone.

An expert reading a trace says things like "``aten::t`` is metadata only, it
launches nothing" or "this copy seeds the GEMM's output with the bias". Each
such reading is a *note*: an `Annotation` (an id, the short text put on the
row, and the explanation a user gets when asking why) and a rule that finds
the rows it applies to, with the event that triggered it.

Rules live in two tables, `ops.OP_RULES` and `kernels.KERNEL_RULES`,
each a function ``rule(ctx) -> list[Hit]``; this module runs them
(`annotate`) and turns the hits into the ``note`` / ``note_ids`` columns of
the op and kernel tables (`note_columns`). Every note's explanation is in
`annotations()`, which ``docs/annotations.md`` is written from
(``python -m jupyter_torchprof.analysis.notes > docs/annotations.md``).

Pure: events, tree and links in, hits out. A rule that cannot tell (a CPU-only
run for a device-side note, no shapes recorded) says nothing: a note is only
ever a positive reading, never a guess.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .base import KERNELS, OPS, RULES_VERSION, SEPARATOR, Annotation, Hit, NoteContext, Rule
from .kernels import KERNEL_ANNOTATIONS, KERNEL_RULES
from .ops import OP_ANNOTATIONS, OP_RULES

__all__ = [
    "KERNELS",
    "OPS",
    "RULES_VERSION",
    "SEPARATOR",
    "Annotation",
    "Hit",
    "NoteContext",
    "Rule",
    "annotate",
    "annotations",
    "markdown",
    "note_columns",
    "rule_ids",
]


def _registry() -> tuple[dict[str, Annotation], tuple[Rule, ...]]:
    found = [*OP_ANNOTATIONS, *KERNEL_ANNOTATIONS]
    by_id = {a.id: a for a in found}
    if len(by_id) != len(found):
        raise ValueError("two annotations share an id")
    return by_id, (*OP_RULES, *KERNEL_RULES)


def annotations() -> dict[str, Annotation]:
    """Every note this version can put on a row, by id."""
    return _registry()[0]


def rule_ids() -> list[str]:
    """Annotation ids and the rules' names, for the table cache's fingerprint."""
    by_id, rules = _registry()
    return sorted(by_id) + sorted(r.__name__ for r in rules) + [f"version {RULES_VERSION}"]


_HIT_COLUMNS = ("table", "key", "id", "note", "why", "event")


def annotate(ctx: NoteContext) -> pd.DataFrame:
    """Every note on every row: one row per (table, key, id), the first triggering event kept.

    Columns: ``table`` (``ops`` / ``kernels``), ``key`` (op or kernel name),
    ``id``, ``note`` (the text on the row), ``why`` (the explanation),
    ``event`` (row in the events, -1 where none).
    """
    by_id, rules = _registry()
    rows: dict[tuple[str, str, str], Hit] = {}
    for rule in rules:
        for hit in rule(ctx):
            if hit.id not in by_id:
                raise KeyError(f"{rule.__name__} reported an unknown note {hit.id!r}")
            rows.setdefault((hit.table, hit.key, hit.id), hit)
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=np.int64 if c == "event" else object) for c in _HIT_COLUMNS})
    hits = list(rows.values())
    return pd.DataFrame(
        {
            "table": [h.table for h in hits],
            "key": [h.key for h in hits],
            "id": [h.id for h in hits],
            "note": [h.text or by_id[h.id].text for h in hits],
            "why": [by_id[h.id].why for h in hits],
            "event": np.array([h.event for h in hits], dtype=np.int64),
        }
    )


def note_columns(keys: pd.Series, hits: pd.DataFrame, table: str) -> tuple[list[str], list[str]]:
    """The ``note`` and ``note_ids`` columns of ``table`` for rows named ``keys`` (empty text where none)."""
    mine = hits[hits["table"] == table]
    texts: dict[str, list[str]] = {}
    ids: dict[str, list[str]] = {}
    for key, note_id, text in zip(mine["key"], mine["id"], mine["note"], strict=True):
        texts.setdefault(key, []).append(text)
        ids.setdefault(key, []).append(note_id)
    names = keys.astype(str).tolist()
    return (
        [SEPARATOR.join(texts.get(k, ())) for k in names],
        [",".join(ids.get(k, ())) for k in names],
    )


def markdown() -> str:
    """``docs/annotations.md``: every note, its text and explanation, under an anchor named by its id."""
    lines = [
        "# What the notes on a row mean",
        "",
        "Written by `python -m jupyter_torchprof.analysis.notes`; do not edit by hand.",
        "Each note is read from the trace alone; a rule that cannot tell says nothing.",
        "",
    ]
    for table, title in ((OPS, "Op rows"), (KERNELS, "Kernel rows")):
        lines += [f"## {title}", ""]
        for note in sorted(annotations().values(), key=lambda a: a.id):
            if note.table == table:
                lines += [f'<a id="{note.id}"></a>', f"### {note.text}", "", f"`{note.id}`: {note.why}", ""]
    return "\n".join(lines).rstrip() + "\n"
