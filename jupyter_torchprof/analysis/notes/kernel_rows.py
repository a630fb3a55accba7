"""Rows of kernel calls grouped by name, for the kernel-row rules (one reading per distinct name).

Names are compared through the events' categorical codes: kernel names run to
thousands of characters and a trace holds them hundreds of thousands of times,
so the strings are looked at once per distinct name.
"""

from __future__ import annotations

import numpy as np

from ...trace import categories as K
from .base import NoteContext


def first_call(ctx: NoteContext, rows: np.ndarray | None = None) -> dict[str, int]:
    """Each distinct kernel name among ``rows`` (default: every kernel call) and the row of its first call."""
    if rows is None:
        rows = ctx.rows_of_kind(K.KERNEL)
    if not len(rows):
        return {}
    codes, names = ctx.name_codes
    uniq, first = np.unique(codes[rows], return_index=True)
    order = np.argsort(first, kind="stable")  # trace order, as the rules met them
    return {str(names[uniq[i]]): int(rows[first[i]]) for i in order}


def matching(ctx: NoteContext, rows: np.ndarray, pattern) -> np.ndarray:
    """Per row, whether ``pattern`` (a compiled regex) matches its name (tested once per distinct name)."""
    codes, names = ctx.name_codes
    uniq, inv = np.unique(codes[rows], return_inverse=True)
    hit = np.array([bool(pattern.search(str(names[c]))) for c in uniq], dtype=bool)
    return hit[inv] if len(rows) else np.zeros(0, dtype=bool)


def calls_per_name(ctx: NoteContext, rows: np.ndarray, flag: np.ndarray) -> dict[str, tuple[int, int]]:
    """Per distinct name among ``rows``: (calls with ``flag`` set, calls)."""
    codes, names = ctx.name_codes
    uniq, inv = np.unique(codes[rows], return_inverse=True)
    total = np.bincount(inv, minlength=len(uniq))
    flagged = np.bincount(inv, weights=flag.astype(np.float64), minlength=len(uniq)).astype(int)
    return {str(names[c]): (int(f), int(t)) for c, f, t in zip(uniq, flagged, total, strict=True)}
