"""The kernel table's FLOP and byte sums per name against the pandas groupby they replaced.

`achieved._sums_by_name` numbers the kernel names from their categorical
codes as pandas' factorize numbered the strings and lets pandas sum over
those numbers (issue 25). Each test computes the old
``groupby("name").agg(sum, sum, first)`` and asks for equal bits: on random
shares (missing names, missing precisions, rows already in name order) and
on every real trace.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
from tracefiles import GPU_TRACES, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis.achieved import _sums_by_name


def _old(names: pd.Series, shares: pd.DataFrame):
    rows = shares["row"].to_numpy(np.int64)
    by = pd.DataFrame(
        {"name": names.astype(object).to_numpy()[rows], "f": shares["est_flops"].to_numpy(),
         "b": shares["est_bytes"].to_numpy(), "p": shares["op_precision"].to_numpy()}
    ).groupby("name").agg(f=("f", "sum"), b=("b", "sum"), p=("p", "first"))  # fmt: skip
    f = {k: float(v).hex() for k, v in by["f"].items()}
    b = {k: float(v).hex() for k, v in by["b"].items()}
    return f, b, {k: v for k, v in by["p"].items() if isinstance(v, str)}


def _same(names, shares):
    f, b, p = _sums_by_name(names, shares)
    got = ({k: float(v).hex() for k, v in f.items()}, {k: float(v).hex() for k, v in b.items()}, p)
    assert got == _old(names, shares)


@pytest.mark.parametrize("seed", range(24))
def test_sums_by_name_equal_the_pandas_groupby(seed):
    rng = np.random.default_rng(seed)
    n_names = int(rng.integers(1, 8))
    labels = [f"k{rng.integers(0, 99)}_{i}" for i in range(n_names)]
    events = int(rng.integers(1, 300))
    codes = rng.integers(-1 if seed % 3 == 0 else 0, n_names, events)
    names = pd.Series(pd.Categorical.from_codes(codes, categories=labels))
    rows = rng.integers(0, events, int(rng.integers(1, 200)))
    if seed % 4 == 1:  # rows already grouped in name order: pandas sums with reduceat
        rows = rows[np.argsort(names.astype(object).fillna("~").to_numpy()[rows], kind="stable")]
    prec = np.array([["fp32", "tf32", None, ""][i] for i in rng.integers(0, 4, len(rows))], dtype=object)
    shares = pd.DataFrame(
        {"row": rows, "est_flops": rng.exponential(1e9, len(rows)) / 3,
         "est_bytes": rng.exponential(1e6, len(rows)) / 7, "op_precision": prec}
    )  # fmt: skip
    _same(names, shares)
    _same(names.astype(object), shares)  # not categorical: the factorize path


@functools.cache
def _profile(name):
    return load(str(real_trace(name)))


@pytest.mark.parametrize("name", GPU_TRACES)
def test_sums_by_name_equal_the_pandas_groupby_on_real_traces(name):
    p = _profile(name)
    shares = p._kernel_shares
    if not len(shares):
        pytest.skip("no FLOP estimates")
    _same(p.events["name"], shares)
