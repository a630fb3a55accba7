"""`Inputs.in_steps` / `step_of` by one search over many disjoint windows, against the comparison per window."""

from __future__ import annotations

import copy
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracefiles import REAL_TRACES, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis.findings import inputs_from_profile, model


def ref_in_steps(inp, rows):
    t = inp.ts[rows]
    inside = np.zeros(len(rows), dtype=bool)
    for lo, hi in inp.windows:
        inside |= (t >= lo) & (t < hi)
    return inside


def ref_step_of(inp, rows):
    t = inp.ts[rows]
    out = np.full(len(rows), -1, dtype=np.int64)
    for i, (lo, hi) in enumerate(inp.windows):
        out[(t >= lo) & (t < hi)] = i
    return out


@functools.cache
def _inputs(name):
    return inputs_from_profile(load(str(real_trace(name))))


def _same(inp, rows):
    np.testing.assert_array_equal(inp.in_steps(rows), ref_in_steps(inp, rows))
    got = inp.step_of(rows)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, ref_step_of(inp, rows))


@pytest.fixture(autouse=True)
def _search_always(monkeypatch):
    monkeypatch.setattr(model, "WINDOW_SEARCH_FROM", 0)


@pytest.mark.parametrize("name", REAL_TRACES)
def test_real_traces(name):
    inp = _inputs(name)
    _same(inp, np.arange(len(inp.ts)))
    assert inp._window_of(inp.ts[:1]) is not None  # one search on their steps


def test_few_windows_are_compared(monkeypatch):
    monkeypatch.setattr(model, "WINDOW_SEARCH_FROM", 16)
    inp = _inputs(REAL_TRACES[0])
    assert len(inp.windows) <= 16 and inp._window_of(inp.ts[:1]) is None
    _same(inp, np.arange(len(inp.ts)))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_windows_and_times(data):
    inp = copy.copy(_inputs(REAL_TRACES[0]))
    grid = st.sampled_from([0.0, 1.0, 2.0, 2.5, 3.0, 5.0, -np.inf, np.inf])
    n = data.draw(st.integers(1, 6))
    bounds = data.draw(st.lists(st.tuples(grid, grid), min_size=n, max_size=n))
    mode = data.draw(st.sampled_from(["any", "by_start", "disjoint"]))
    if mode == "by_start":  # sorted by start but overlapping: must not be searched
        bounds = sorted(bounds)
    if mode == "disjoint":  # sorted and touching or apart: the searched case, with empty and inverted ones
        flat = sorted(x for b in bounds for x in b)
        bounds = [(flat[2 * i], flat[2 * i + 1]) for i in range(n)]
        if data.draw(st.booleans()):
            bounds = [(b, a) if i % 2 else (a, b) for i, (a, b) in enumerate(bounds)]
    times = data.draw(st.lists(st.one_of(grid, st.just(np.nan), st.floats(-1, 6)), min_size=1, max_size=30))
    inp.__dict__.update(
        windows=[(float(a), float(b)) for a, b in bounds], ts=np.array(times, dtype=np.float64)
    )
    inp.__dict__.pop("_window_bounds", None)
    _same(inp, np.arange(len(times)))
