"""Helpers the op-row rules share: finding candidate rows by name, their children, per-name verdicts.

Rules stay vectorised over the whole trace: names are tested once per
distinct name (the column is categorical), and Python loops run over the
candidate rows only, never over every event.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

import numpy as np

from ...trace import categories as K
from ..tree import unique_inverse
from .base import NoteContext

#: Bytes per element of the dtypes ``record_shapes`` writes (``Input type``).
DTYPE_BYTES = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "int": 4,
    "long int": 8,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
}


def named(ctx: NoteContext, rows: np.ndarray, names: Iterable[str]) -> np.ndarray:
    """Per row of ``rows``: True where the event is named one of ``names`` (compared as integer codes)."""
    codes, categories = ctx.name_codes
    wanted = set(names)
    return np.isin(codes[rows], [i for i, c in enumerate(categories) if c in wanted])


def of_kinds(ctx: NoteContext, rows: np.ndarray, kinds: Iterable[str]) -> np.ndarray:
    """Per row of ``rows``: True where the event's kind is one of ``kinds`` (compared as integer codes)."""
    kind_codes = ctx.kind_codes
    if kind_codes is None:
        return np.isin(ctx.kinds[rows], tuple(kinds))
    codes, categories = kind_codes
    wanted_kinds = set(kinds)
    wanted = [i for i, c in enumerate(categories) if c in wanted_kinds]
    picked = codes[rows]
    return picked == wanted[0] if len(wanted) == 1 else np.isin(picked, wanted)


def name_mask(
    ctx: NoteContext, test: Callable[[str], bool], kinds: Iterable[str] = (K.CPU_OP,)
) -> np.ndarray:
    """Per event: True where ``test(name)`` holds (tested once per distinct name) and its kind is one of ``kinds``."""
    out = np.zeros(len(ctx.parent), dtype=bool)
    out[_picked_rows(ctx, test, kinds)] = True
    return out


def name_rows(
    ctx: NoteContext, test: Callable[[str], bool], kinds: Iterable[str] = (K.CPU_OP,)
) -> np.ndarray:
    """``np.flatnonzero(name_mask(ctx, test, kinds))``: the rows, in order.

    Few rows (under one event in 64) are sorted as they are: no mask of
    every event and no pass over it (each a few ms on ten million events).
    """
    rows = _picked_rows(ctx, test, kinds)
    if len(rows) * 64 < len(ctx.parent):
        # distinct rows (one name each): sorted, they are the mask's positions
        return np.sort(rows)
    out = np.zeros(len(ctx.parent), dtype=bool)
    out[rows] = True
    return np.flatnonzero(out)


def _picked_rows(ctx: NoteContext, test: Callable[[str], bool], kinds: Iterable[str]) -> np.ndarray:
    """Rows whose name passes ``test`` and whose kind is one of ``kinds``, grouped by name (not sorted)."""
    categories, order, bounds = ctx.rows_by_name
    labels = ctx.name_labels
    good = np.fromiter((bool(test(c)) for c in labels), dtype=bool, count=len(labels))
    wanted = np.flatnonzero(good)
    # The rows of each wanted name are one slice of the events ordered by
    # name code: no pass over every event per rule.
    lengths = bounds[wanted + 1] - bounds[wanted]
    starts = np.repeat(bounds[wanted] - np.cumsum(lengths) + lengths, lengths)
    rows = order[starts + np.arange(int(lengths.sum()))]
    # the kind is checked on the few rows the name picked, not on every event
    return rows[of_kinds(ctx, rows, kinds)]


def rows_named(ctx: NoteContext, names: Iterable[str], kinds: Iterable[str] = (K.CPU_OP,)) -> np.ndarray:
    """Rows of the events named one of ``names`` (of ``kinds``)."""
    wanted = frozenset(names)
    return name_rows(ctx, wanted.__contains__, kinds)


def children(
    ctx: NoteContext, rows: np.ndarray, kinds: Iterable[str] = (K.CPU_OP,)
) -> tuple[np.ndarray, np.ndarray]:
    """The direct children (of ``kinds``) of ``rows``: (child rows, their parent rows)."""
    is_parent = np.zeros(len(ctx.parent) + 1, dtype=bool)
    is_parent[rows] = True
    # parent -1 reads the extra last slot, which is never a parent
    kids = np.flatnonzero(is_parent[ctx.parent])
    kids = kids[of_kinds(ctx, kids, kinds)]
    return kids, ctx.parent[kids]


def owning(ctx: NoteContext, rows: np.ndarray, owners: np.ndarray) -> np.ndarray:
    """For each of ``rows`` (host events), the nearest enclosing event among ``owners`` (itself included), -1 if none.

    Walks up the call tree for all rows at once, one level per step.
    """
    is_owner = np.zeros(len(ctx.parent), dtype=bool)
    is_owner[owners] = True
    out = np.full(len(rows), -1, dtype=np.int64)
    cur = rows.astype(np.int64).copy()
    todo = np.flatnonzero(cur >= 0)
    while len(todo):
        here = cur[todo]
        found = is_owner[here]
        out[todo[found]] = here[found]
        todo = todo[~found]
        cur[todo] = ctx.parent[cur[todo]]
        todo = todo[cur[todo] >= 0]
    return out


def device_under(ctx: NoteContext, owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Device work launched at or below ``owners``: (device rows, the owner each belongs to)."""
    device = np.flatnonzero(ctx.op >= 0)
    device = device[of_kinds(ctx, device, K.DEVICE_ACTIVITY)]
    owner = owning(ctx, ctx.op[device], owners)
    keep = owner >= 0
    return device[keep], owner[keep]


def verdicts(ctx: NoteContext, rows: np.ndarray, ok: np.ndarray) -> list[tuple[str, int, int, int]]:
    """Per op name among ``rows``: (name, first row where ``ok``, calls where ``ok``, calls), names with an ``ok``.

    Grouped by name code with numpy (a million candidate rows cost no Python
    loop); names come in the order of their first row.
    """
    rows = np.asarray(rows, dtype=np.int64)
    ok = np.asarray(ok, dtype=bool)
    if not len(rows):
        return []
    codes, categories = ctx.name_codes
    # Name codes (-1: no name) numbered without a sort (`tree.unique_inverse`).
    groups, inverse = unique_inverse(codes[rows].astype(np.int64))
    calls = np.bincount(inverse, minlength=len(groups))
    good = np.bincount(inverse[ok], minlength=len(groups))
    first_ok = np.full(len(groups), np.iinfo(np.int64).max)
    np.minimum.at(first_ok, inverse[ok], rows[ok])
    first_any = np.full(len(groups), np.iinfo(np.int64).max)
    np.minimum.at(first_any, inverse, rows)
    out = []
    for g in np.argsort(first_any, kind="stable"):
        if good[g] and groups[g] >= 0:
            out.append((str(categories[groups[g]]), int(first_ok[g]), int(good[g]), int(calls[g])))
    return out


def of_calls(n_ok: int, n: int) -> str:
    """`` (in 3 of 4 calls)`` where a note held for only some calls of its op, else nothing."""
    return "" if n_ok == n else f" (in {n_ok} of {n} calls)"


def shapes(text: object) -> list[list[int]] | None:
    """``Input Dims`` of one call as lists of ints (``[[2,4],[],[3]]``), None where not recorded."""
    if not isinstance(text, str) or not text.startswith("["):
        return None
    try:
        dims = json.loads(text)
    except ValueError:
        return None
    if not isinstance(dims, list):
        return None
    return [d if isinstance(d, list) and all(isinstance(x, int) for x in d) else [] for d in dims]


def first_type(text: object) -> str | None:
    """The first ``Input type`` of one call (``float``, ``c10::Half``), None where not recorded."""
    if not isinstance(text, str) or not text.startswith("["):
        return None
    try:
        types = json.loads(text)
    except ValueError:
        return None
    return str(types[0]) if isinstance(types, list) and types else None
