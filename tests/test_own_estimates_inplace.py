"""`flops.own_estimates` zeroes the left-out candidates in place, keeps the dtype codes small and picks the kept calls among the candidates only: same frame as before."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracefiles import real_trace

from jupyter_torchprof.analysis import flops
from jupyter_torchprof.analysis.tree import host_tree
from jupyter_torchprof.trace.parser import parse_bytes
from jupyter_torchprof.trace.reader import read_trace_bytes


def _old_keep_outermost(deferring: np.ndarray, fl: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """`flops._keep_outermost` as it was, over masks of every event."""
    n = len(fl)
    has = fl > 0
    deferring = has & deferring
    claims = has & ~deferring
    keep = has.copy()
    rows = np.flatnonzero(has)
    keep[rows[flops._ancestor_flags(parent, rows, claims)]] = False
    below = flops._mark_ancestors(parent, np.flatnonzero(keep & ~deferring), n)
    keep[deferring & below] = False
    return keep


def reference(events: pd.DataFrame, parent: np.ndarray) -> pd.DataFrame:
    """The estimates as made before: two arrays of every event from np.where, int64 codes."""
    n = len(events)
    fl, moved = np.zeros(n), np.zeros(n)
    labels, at = np.array([""], dtype=object), np.zeros(n, dtype=np.int64)
    rows = flops._candidates(events) if n and "input_dims" in events else np.array([], dtype=np.int64)
    if len(rows):
        fl[rows], moved[rows], dtype = flops._estimates_of_calls(events, rows)
        deferring = flops._named(events, flops._DEFERRING)
        keep = _old_keep_outermost(deferring, fl, np.asarray(parent))
        fl, moved = np.where(keep, fl, 0.0), np.where(keep, moved, 0.0)
        codes, uniq = pd.factorize(np.concatenate([[""], np.where(keep[rows], dtype, "")]).astype(object))
        labels = np.asarray(uniq, dtype=object)
        at[rows] = codes[1:]
    est_dtype = pd.Categorical.from_codes(at, labels) if n else np.array([], dtype=object)
    return pd.DataFrame({"est_flops": fl, "est_bytes": moved, "est_dtype": est_dtype}, index=events.index)


@pytest.fixture(scope="module")
def shaped():
    events = parse_bytes(read_trace_bytes(real_trace("diff_pair/control.pt.trace.json.gz"))).events
    return events, host_tree(events)["parent"].to_numpy()


def _same(events, parent):
    got, want = flops.own_estimates(events, parent), reference(events, parent)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    if len(events):
        assert got["est_dtype"].cat.codes.dtype == want["est_dtype"].cat.codes.dtype
    return got


def test_a_trace_with_shapes(shaped) -> None:
    got = _same(*shaped)
    assert (got["est_flops"] > 0).any()  # the trace has estimates to keep or drop


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_any_call_tree(shaped, data) -> None:
    events, _ = shaped
    n = len(events)
    # A random forest: each event's parent earlier or none, so chains of
    # estimated calls nest in every way the rule has to untangle.
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    span = data.draw(st.sampled_from([1, 3, 50, n]))
    parent = np.arange(n) - rng.integers(1, span + 1, n)
    parent[rng.random(n) < data.draw(st.floats(0.0, 1.0))] = -1
    _same(events, np.maximum(parent, -1))


def test_no_shapes_and_no_events(shaped) -> None:
    events, parent = shaped
    _same(events.drop(columns=["input_dims"]), parent)
    _same(events.iloc[:0], parent[:0])


@pytest.mark.parametrize("labels", [1, 126, 127, 128, 32766, 32767, 40000])
def test_code_type_is_the_one_pandas_keeps(labels) -> None:
    cat = pd.Categorical.from_codes(np.zeros(3, dtype=np.int64), [str(i) for i in range(labels)])
    assert cat.codes.dtype == flops._code_type(labels)
