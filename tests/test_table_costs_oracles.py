"""Second paths that make the tables cheaper per event, each checked against the plain one it replaces.

Every fast path here answers exactly what the slower, obvious code answers
(same values, same dtype): the oracle is that code, run on the same input.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jupyter_torchprof.analysis import links

LABELS = ["", "cudaLaunchKernel", "void at::native::elementwise_kernel<128, 4>", "é→ñ 名前", "x" * 300]


@pytest.mark.parametrize("missing_share", [0.0, 0.3, 1.0])
def test_labels_at_equals_take(missing_share: float) -> None:
    """The string column made from numpy buffers is what pandas' take makes of the same codes."""
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(7)
    labels = pd.Index(LABELS)
    for n, dtype in ((0, np.int64), (1, np.int8), (5000, np.int8), (5000, np.int64)):
        codes = rng.integers(0, len(LABELS), n).astype(dtype)
        codes[rng.random(n) < missing_share] = -1
        got = links._labels_at(labels, codes)
        strings = pd.array(np.asarray(labels, dtype=object), dtype="str")
        if not (codes >= 0).any():
            expected = np.append(np.asarray(labels, dtype=object), np.array([np.nan], dtype=object))[codes]
            pd.testing.assert_series_equal(pd.Series(got), pd.Series(expected))
            continue
        expected = strings.take(codes, allow_fill=True)
        pd.testing.assert_series_equal(pd.Series(got), pd.Series(expected), check_exact=True)
        assert got.dtype == expected.dtype


def test_labels_at_without_pyarrow_strings_takes() -> None:
    """An array that is not pyarrow's gets no buffers made: the caller's take answers."""
    strings = pd.array(np.array(["a", "b"], dtype=object), dtype=object)
    assert links._arrow_strings_at(strings, np.array([0, 1, -1])) is None
