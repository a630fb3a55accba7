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
