"""The kernel-variance rule's grouped statistics against the pandas groupby they replaced.

`variance._spread_launches` numbers the (kernel, grid, block) launches with
one integer key and takes size, median and max from one sort (issue 25);
the excess is still pandas' grouped sum. Each test computes the same figures
with a three-key pandas groupby, the old way, and asks for equal bits: on
random launches (ties, a single group, groups lying in order) and on every
real trace.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pandas as pd
import pytest
from tracefiles import GPU_TRACES, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis.findings import THRESHOLDS, inputs_from_profile
from jupyter_torchprof.analysis.findings import variance as V


def _old_stats(names, grid, block, dur, th):
    frame = pd.DataFrame({"name": names, "grid": grid, "block": block, "dur": dur})
    g = frame.groupby(["name", "grid", "block"], sort=False)["dur"]
    stats = g.agg(["size", "median", "max"])
    stats = stats[
        (stats["size"] >= th.variance_min_calls)
        & (stats["max"] >= th.variance_max_over_median * stats["median"])
        & (stats["max"] - stats["median"] >= th.variance_min_spread_us)
    ]
    if stats.empty:
        return []
    over = frame.assign(excess=np.maximum(frame["dur"] - g.transform("median"), 0.0))
    excess = over.groupby(["name", "grid", "block"], sort=False)["excess"].sum()
    stats = stats.assign(excess=excess.reindex(stats.index)).sort_values("excess", ascending=False)
    return [(k, int(r["size"]), r["median"], r["max"], r["excess"]) for k, r in stats.iterrows()]


def _new_stats(names, grid, block, dur, th):
    spread = V._spread_launches(names, grid, block, dur, th)
    if spread is None:
        return []
    _inv, keys, stats = spread
    return [
        (tuple(keys[int(r["group"])]), int(r["size"]), r["median"], r["max"], r["excess"])
        for _, r in stats.iterrows()
    ]


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert tuple(int(v) for v in x[0]) == tuple(y[0]) and x[1] == y[1]
        assert [float(v).hex() for v in x[2:]] == [float(v).hex() for v in y[2:]]


@pytest.mark.parametrize("seed", range(30))
def test_spread_launches_equal_the_pandas_groupby(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    groups = int(rng.integers(1, 6))
    names = rng.integers(-1, groups, n).astype(np.int16)
    grid = rng.integers(0, 2, n)
    block = rng.integers(0, 3, n) if seed % 3 else np.zeros(n, dtype=np.int64)
    if seed % 5 == 0:  # groups lying in order: pandas sums them another way
        order = np.lexsort((block, grid, names))
        names, grid, block = names[order], grid[order], block[order]
    dur = np.round(rng.exponential(20, n), int(rng.integers(0, 4)))
    dur[rng.uniform(size=n) < 0.05] *= 30  # slow calls
    _same(_old_stats(names, grid, block, dur, THRESHOLDS), _new_stats(names, grid, block, dur, THRESHOLDS))


@functools.cache
def _inputs(name):
    return inputs_from_profile(load(str(real_trace(name))))


@pytest.mark.parametrize("name", GPU_TRACES)
def test_spread_launches_equal_the_pandas_groupby_on_real_traces(name):
    inp = _inputs(name)
    rows = V._kernel_rows(inp)
    if not len(rows):
        pytest.skip("no kernels")
    has_grid = "grid" in inp.events and bool(inp.events["grid"].iloc[rows].notna().any())
    grid, _ = V._launch_codes(inp.events, "grid", rows, has_grid)
    block, _ = V._launch_codes(inp.events, "block", rows, has_grid)
    names, dur = inp.name_codes[rows], inp.dur[rows]
    # Thresholds loose enough that most launches are kept and compared.
    th = dataclasses.replace(
        THRESHOLDS, variance_min_calls=2, variance_max_over_median=1.0, variance_min_spread_us=0.0
    )
    for t in (THRESHOLDS, th):
        _same(_old_stats(names, grid, block, dur, t), _new_stats(names, grid, block, dur, t))
