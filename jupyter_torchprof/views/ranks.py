"""The cross-rank table of a `RankSet`, as formatted cells for the text and HTML renderers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..format import fmt_pct, fmt_time

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

_HEADERS = [
    "Rank", "Steps", "Wall/step", "Device busy/step", "Busy %", "Comm/step", "Work/step", "vs median",
]  # fmt: skip


def rank_headers() -> list[str]:
    """Column titles of the cross-rank table."""
    return list(_HEADERS)


def rank_rows(table: pd.DataFrame) -> list[list[str]]:
    """One row of formatted cells per rank of `RankSet.table`."""
    return [
        [
            str(r.rank),
            str(r.steps),
            fmt_time(r.wall_per_step_us),
            fmt_time(r.device_busy_per_step_us),
            fmt_pct(r.device_busy_pct),
            fmt_time(r.comm_per_step_us),
            fmt_time(r.work_per_step_us),
            f"{r.vs_median:.2f}× step, {r.work_vs_median:.2f}× work" + (" straggler" if r.straggler else ""),
        ]
        for r in table.itertuples(index=False)
    ]
