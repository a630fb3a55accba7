"""`achieved._sums_by_name`: sums in C and precisions read by code, against the pandas way it replaced."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracefiles import real_trace

from jupyter_torchprof.analysis import achieved
from jupyter_torchprof.trace import native


def reference(names: pd.Series, shares: pd.DataFrame):
    """The function as it was: pandas' groupby sums, the precisions as an object array."""
    rows = shares["row"].to_numpy(np.int64)
    if isinstance(names.dtype, pd.CategoricalDtype):
        codes = names.cat.codes.to_numpy()[rows].astype(np.int64)
        present = np.unique(codes[codes >= 0])
        labels = names.cat.categories.to_numpy(dtype=object)[present]
        by_label = np.argsort(labels, kind="stable")
        rank = np.full(len(names.cat.categories) + 1, -1, dtype=np.int64)
        rank[present[by_label]] = np.arange(len(present))
        ids, uniq = rank[codes], labels[by_label]
    else:
        ids, uniq = pd.factorize(names.to_numpy(dtype=object)[rows], sort=True)
    key = np.where(ids >= 0, ids, np.nan) if (ids < 0).any() else ids
    f = pd.Series(shares["est_flops"].to_numpy()).groupby(key).sum()
    b = pd.Series(shares["est_bytes"].to_numpy()).groupby(key).sum()
    prec = shares["op_precision"].to_numpy(dtype=object)
    ok = np.flatnonzero((ids >= 0) & ~pd.isna(prec))
    first = np.full(len(uniq), len(ids), dtype=np.int64)
    np.minimum.at(first, ids[ok], ok)
    groups = f.index.to_numpy().astype(np.int64)
    names_of = uniq[groups].tolist()
    has_first = first[groups] < len(ids)
    return (
        dict(zip(names_of, f.tolist(), strict=True)),
        dict(zip(names_of, b.tolist(), strict=True)),
        {
            n: prec[first[g]]
            for n, g, h in zip(names_of, groups.tolist(), has_first.tolist(), strict=True)
            if h
        },
    )


def _bits(d):
    return {k: np.float64(v).tobytes() for k, v in d.items()}


def _same(names, shares):
    got, want = achieved._sums_by_name(names, shares), reference(names, shares)
    assert _bits(got[0]) == _bits(want[0]) and _bits(got[1]) == _bits(want[1])
    assert got[2] == want[2]


_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, 5e-324, 1e300, 0.1, 3.0]),
)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_equal_to_pandas(data) -> None:
    n_events = data.draw(st.integers(1, 40))
    labels = [f"k{i}" for i in range(data.draw(st.integers(1, 6)))]
    codes = np.array(
        data.draw(st.lists(st.integers(-1, len(labels) - 1), min_size=n_events, max_size=n_events))
    )
    names = pd.Series(pd.Categorical.from_codes(codes, labels))
    if data.draw(st.booleans()):
        names = names.astype(object)
    n = data.draw(st.integers(0, 80))
    rows = np.array(data.draw(st.lists(st.integers(0, n_events - 1), min_size=n, max_size=n)), dtype=np.int64)
    floats = st.lists(_FLOATS, min_size=n, max_size=n)
    precs = data.draw(st.lists(st.sampled_from(["fp32", "bf16", None, np.nan]), min_size=n, max_size=n))
    prec = pd.Categorical(precs) if data.draw(st.booleans()) else precs
    shares = pd.DataFrame(
        {"row": rows, "est_flops": data.draw(floats), "est_bytes": data.draw(floats), "op_precision": prec}
    )
    old = achieved.NATIVE_FROM_ROWS
    try:
        achieved.NATIVE_FROM_ROWS = data.draw(st.sampled_from([0, 1 << 14]))
        _same(names, shares)
    finally:
        achieved.NATIVE_FROM_ROWS = old


@pytest.mark.skipif(native.library() is None, reason="no native library")
def test_a_shaped_trace_takes_the_c_path(monkeypatch) -> None:
    from jupyter_torchprof.results.profile import Profile

    p = Profile.from_file(real_trace("diff_pair/control.pt.trace.json.gz"))
    shares = p._kernel_shares
    assert len(shares)
    calls = []
    real = native.group_sums
    monkeypatch.setattr(native, "group_sums", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(achieved, "NATIVE_FROM_ROWS", 0)
    _same(p._data.events["name"], shares)
    assert calls  # summed in C (or pandas where the ids were in order, as group_sums declines)
