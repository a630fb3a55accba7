"""The shapes every note rule shares: an `Annotation`, a `Hit`, the `NoteContext` rules read.

See the package's docstring for what notes are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from ...trace import categories as K
from ...trace import native
from ..coded import CodedNames

#: Bumped when a rule changes what it reports (part of the table cache's fingerprint).
RULES_VERSION = 2
#: Tables a note can be on.
OPS = "ops"
KERNELS = "kernels"
#: Joins several notes on one row.
SEPARATOR = " · "
#: Events from which `NoteContext.rows_by_name` sorts in C (below, numpy costs less than the call).
NATIVE_FROM_ROWS = 1 << 14


@dataclass(frozen=True)
class Annotation:
    """One kind of note: ``id`` (stable, the docs' anchor), ``text`` (on the row), ``why`` (the explanation)."""

    id: str
    table: str
    text: str
    why: str


@dataclass(frozen=True)
class Hit:
    """A note found on one row: table, row key (op or kernel name), annotation id, text, triggering event.

    ``text`` may say more than the annotation's own (``SDPA backend: flash``);
    empty means the annotation's text. ``event`` is the row in the events of
    the event that showed it (-1 when the row as a whole did).
    """

    table: str
    key: str
    id: str
    text: str = ""
    event: int = -1


@dataclass
class NoteContext:
    """What rules read: the parsed events, the host call tree and launch links, aligned by row.

    ``parent`` is each event's enclosing host event (-1 at the top), ``op``
    each device event's launching op (-1 where none), ``launch`` its launch
    call. ``device_traced`` is False on a host-only run, where "launches no
    kernel" cannot be read.
    """

    events: pd.DataFrame
    parent: np.ndarray
    op: np.ndarray
    launch: np.ndarray
    device_traced: bool

    @cached_property
    def names(self) -> Any:
        """Each event's name, indexed like an object array (``names[rows]``, ``names[row]``), for comparing with Python strings.

        Read through the categorical codes (`coded.CodedNames`): the rules
        look at a few rows each, and an object array of every event's name
        cost a pass over all of them.
        """
        names = self.events["name"]
        if not isinstance(names.dtype, pd.CategoricalDtype):
            return names.to_numpy(dtype=object)
        codes, categories = self.name_codes
        return CodedNames(codes, categories.to_numpy(dtype=object))

    @cached_property
    def kinds(self) -> np.ndarray:
        """Each event's kind (`trace.categories`)."""
        kind = self.events["kind"]
        if isinstance(kind.dtype, pd.CategoricalDtype):
            # The distinct kinds picked by code: converting the column itself
            # builds one Python string per event (a tenth of the notes' time).
            labels = np.append(kind.cat.categories.to_numpy(object), np.nan)
            return labels[kind.cat.codes.to_numpy()]
        return kind.to_numpy(dtype=object)

    # The rules look names and kinds up about a hundred times per trace, and
    # each pandas accessor call costs tens of µs (a real share of a small
    # trace's notes): the codes are read once per context.

    @cached_property
    def name_codes(self) -> tuple[np.ndarray, pd.Index]:
        """Each event's name as an integer code (-1 where missing), and the names the codes index."""
        names = self.events["name"]
        if not isinstance(names.dtype, pd.CategoricalDtype):
            names = names.astype("category")
        return names.cat.codes.to_numpy(), names.cat.categories

    @cached_property
    def name_labels(self) -> list[str]:
        """The distinct names (`name_codes`) as Python strings."""
        return [str(c) for c in self.name_codes[1]]

    @cached_property
    def rows_by_name(self) -> tuple[pd.Index, np.ndarray, np.ndarray]:
        """The names, the events ordered by name code, and where each code's rows start in that order (and end)."""
        codes, categories = self.name_codes
        # A counting sort in C on a large trace (a tenth of its notes' time as a sort).
        done = native.code_order(codes, len(categories)) if len(codes) >= NATIVE_FROM_ROWS else None
        if done is not None:
            return categories, done[0], done[1]
        small = codes.astype(np.int16) if len(categories) < 2**15 else codes
        order = np.argsort(small, kind="stable")
        bounds = np.searchsorted(small[order], np.arange(len(categories) + 1))
        return categories, order, bounds

    @cached_property
    def kind_codes(self) -> tuple[np.ndarray, list[str]] | None:
        """Each event's kind as an integer code and the kinds the codes index; None where not categorical."""
        kind = self.events["kind"]
        if not isinstance(kind.dtype, pd.CategoricalDtype):
            return None
        return kind.cat.codes.to_numpy(), list(kind.cat.categories)

    def kind_in(self, kinds: tuple[str, ...]) -> np.ndarray:
        """Per event: True where its kind is one of ``kinds`` (`trace.categories.kind_mask`, by code)."""
        return K.kind_mask(self.events, kinds)

    def rows_of_kind(self, *kinds: str) -> np.ndarray:
        """Rows of the events of any of ``kinds``."""
        return np.flatnonzero(self.kind_in(kinds))

    @cached_property
    def launches_work(self) -> np.ndarray:
        """Per event: True where it or an event below it launched device work (kernel, copy, memset)."""
        n = len(self.events)
        owners = self.op[self.kind_in(K.DEVICE_ACTIVITY)]
        if n >= NATIVE_FROM_ROWS:
            # In C: each owner's walk up stops at a node marked already.
            done = native.mark_up(self.parent, owners[owners >= 0])
            if done is not None:
                return done
        out = np.zeros(n, dtype=bool)
        # Mark each launching op, then walk up the call tree to the roots,
        # one level per pass. Marking in a boolean array drops the duplicates
        # (np.unique would sort every pass).
        out[owners[owners >= 0]] = True
        frontier = np.flatnonzero(out)
        while len(frontier):
            up = self.parent[frontier]
            up = up[up >= 0]
            up = up[~out[up]]
            out[up] = True
            frontier = _distinct(up, n)
        return out


def _distinct(rows: np.ndarray, n: int) -> np.ndarray:
    """``rows`` without repeats (any order), in time linear in ``len(rows)`` after one scratch array."""
    if len(rows) < 2:
        return rows
    last = np.empty(n, dtype=np.int64)
    pos = np.arange(len(rows))
    last[rows] = pos
    return rows[last[rows] == pos]


Rule = Callable[[NoteContext], list[Hit]]
