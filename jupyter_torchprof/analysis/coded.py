"""Names per event read through the categorical codes: only the rows asked for become strings.

The findings' `Inputs` and the notes' `NoteContext` both index event names
by row many times; an object array of every event's name cost a pass over
millions of events (and a Python string reference each) before any rule ran.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


class CodedNames:
    """Names per row from codes and labels, indexed like an object array; a missing name reads NaN, as in ``astype(object)``."""

    def __init__(self, codes: np.ndarray, labels: np.ndarray) -> None:
        self._codes = codes
        # Code -1 indexes the last entry: the NaN a missing name reads as.
        self._labels = np.append(labels.astype(object), np.array([np.nan], dtype=object))

    def __len__(self) -> int:
        return len(self._codes)

    def __getitem__(self, rows: Any) -> Any:
        return self._labels[self._codes[rows]]


def coded(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(integer code per row, -1 for none; the label of each code) of a column, categorical or not.

    A categorical's own codes, not copied: a widened copy of ten million
    cost a tenth of a second per column (pandas sizes them so that code + 1
    still fits, which `findings.model.Inputs.name_flags` relies on).
    """
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy(), col.cat.categories.to_numpy(dtype=object)
    codes, uniques = pd.factorize(col.astype(object))
    return codes.astype(np.int64), np.asarray(uniques, dtype=object)
