"""The events' columns, appended chunk by chunk into one array each: `ColumnStore`.

A parse digests its events a chunk (~4 MB of JSON) at a time. Keeping each
chunk's arrays in a list and joining them at the end (``np.concatenate``)
held every column twice at the end of the parse and copied all of it once
more: 39 ms of a 1M-event load, and the columns' size again in peak memory.

Here each column is one array, reserved for the rows the trace is expected
to hold (`ColumnStore.expect`, from the first chunk's rows per byte and the
JSON's size) and grown by half when more come. Rows never written are never
touched, so a reserve costs address space, not memory: only what is
written is faulted in. A wrong guess costs a copy (when short), never a
wrong result.
"""

from __future__ import annotations

import numpy as np

#: Reserve over the rows the first chunk predicts: chunks differ in rows per byte.
SLACK = 1.25


class ColumnStore:
    """Named columns of equal length, appended to in chunks, read once at the end (`take`)."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.rows = 0
        self.capacity = 0
        self.expected = 0

    def __bool__(self) -> bool:
        """Whether anything was appended (even a chunk of no rows), as a dict of lists would say."""
        return bool(self.arrays)

    def expect(self, rows: int) -> None:
        """The rows the whole trace is expected to hold (a hint: reserved at the first append)."""
        self.expected = max(int(rows), 0)

    def append(self, columns: dict[str, np.ndarray]) -> None:
        """Add one chunk's rows; every chunk brings the same columns, each of the same length.

        Grows to the larger of half again and the latest `expect`.
        """
        if self.arrays and columns.keys() != self.arrays.keys():
            raise ValueError(
                f"columns differ from the first chunk's: {sorted(columns)} vs {sorted(self.arrays)}"
            )
        m = len(next(iter(columns.values()))) if columns else 0
        end = self.rows + m
        if not self.arrays:
            self.capacity = max(end, self.expected)
            self.arrays = {k: np.empty(self.capacity, dtype=v.dtype) for k, v in columns.items()}
        elif end > self.capacity:
            self._grow(max(end, self.capacity + self.capacity // 2, self.expected))
        for k, v in columns.items():
            if len(v) != m:
                raise ValueError(f"column {k!r} has {len(v)} rows, not {m}")
            target = self.arrays[k]
            if v.dtype != target.dtype:
                # A chunk read another way (the Python path) may bring a wider
                # type: the column takes the type both fit, as concatenating would.
                wider = np.result_type(target.dtype, v.dtype)
                if wider != target.dtype:
                    target = self.arrays[k] = _resized(target, self.rows, self.capacity, wider)
            target[self.rows : end] = v
        self.rows = end

    def _grow(self, capacity: int) -> None:
        self.arrays = {k: _resized(a, self.rows, capacity, a.dtype) for k, a in self.arrays.items()}
        self.capacity = capacity

    def take(self) -> dict[str, np.ndarray]:
        """Each column's rows (views of the reserve), and the store emptied."""
        out = {k: a[: self.rows] for k, a in self.arrays.items()}
        self.arrays, self.rows, self.capacity = {}, 0, 0
        return out


def _resized(a: np.ndarray, rows: int, capacity: int, dtype: np.dtype) -> np.ndarray:
    """A new array of ``capacity`` holding ``a[:rows]`` (as ``dtype``)."""
    out = np.empty(capacity, dtype=dtype)
    out[:rows] = a[:rows]
    return out
