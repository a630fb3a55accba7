"""The cross-rank table of a `RankSet`, as formatted cells for the text and HTML renderers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import columns
from ..columns import format_cell

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def rank_headers() -> list[str]:
    """Column titles of the cross-rank table (the catalog's `columns.RANKS`)."""
    return [c.title for c in columns.RANKS]


def rank_rows(table: pd.DataFrame) -> list[list[str]]:
    """One row of formatted cells per rank of `RankSet.table`."""
    cols = columns.RANKS[:-1]
    return [
        [format_cell(c, d[c.key]) for c in cols]
        + [
            f"{d['vs_median']:.2f}× step, {d['work_vs_median']:.2f}× work"
            + (" straggler" if d["straggler"] else "")
        ]
        for d in table.to_dict("records")
    ]


def _rank_label(rank: object) -> str:
    return f"Rank {rank}"


def straggler_verdict(table: pd.DataFrame, ratio: float) -> str:
    """The cross-rank verdict in one sentence: which rank straggles, by how much, in its step or its work.

    ``table`` is `RankSet.table`; ``ratio`` the straggler threshold (step
    time or work over the median rank's). Collectives make every rank wait
    for the slowest, so the sentence says whether the rank stands out in its
    whole step, in its work (the step outside communication), or both.
    """
    import numpy as np

    from ..format import fmt_time

    if table.empty:
        return "No rank could be read."
    if len(table) < 2:
        return f"One rank ({_rank_label(table['rank'].iloc[0])}): nothing to compare it with."
    step_median = float(np.median(table["wall_per_step_us"]))
    work_median = float(np.median(table["work_per_step_us"]))
    slow = table[table["straggler"]].sort_values("vs_median", ascending=False, kind="stable")
    if slow.empty:
        worst = table.loc[table["vs_median"].idxmax()]
        return (
            f"No straggler: every rank's step and work are within {ratio:.2f}× of the median rank's "
            f"(slowest step: rank {worst['rank']}, {worst['vs_median']:.2f}× the median "
            f"{fmt_time(step_median)})."
        )
    sentences = []
    for r in slow.to_dict("records"):
        by_step = r["vs_median"] > ratio
        by_work = r["work_vs_median"] > ratio
        step = (
            f"its step takes {fmt_time(r['wall_per_step_us'])}, {r['vs_median']:.2f}× the median rank's "
            f"{fmt_time(step_median)}"
        )
        work = (
            f"its work (the step outside communication) takes {fmt_time(r['work_per_step_us'])}, "
            f"{r['work_vs_median']:.2f}× the median {fmt_time(work_median)}"
        )
        if by_step and by_work:
            why = f"{step}; {work}"
        elif by_step:
            why = step
        else:
            why = f"{work}, while its step ({r['vs_median']:.2f}× the median) shows little: the others wait for it"
        sentences.append(f"{_rank_label(r['rank'])} is a straggler: {why}.")
    return " ".join(sentences)


#: The cross-rank text table's columns (positions in `rank_headers`) hidden first
#: when it does not fit: the busy share, steps, communication, device busy.
RANK_DROP_ORDER = (4, 1, 5, 3)


def rank_table_text(table: pd.DataFrame, width: int | None = None) -> str:
    """The cross-rank table as fixed-width text, no wider than ``width`` (`text.render_fitted`)."""
    from .text import hidden_note, render_fitted, wrap_lines

    text, hidden = render_fitted(rank_rows(table), rank_headers(), 12, width, RANK_DROP_ORDER)
    return text + ("\n" + wrap_lines(hidden_note(hidden, "RankSet.table has them"), width) if hidden else "")
