"""The code-based paths of the findings, kernel and launch tables against plain per-row oracles.

The findings, the kernel table's FLOP estimates and the launch table read
names and arguments through categorical codes, once per distinct label
(issue 25). Each test here recomputes one of them the plain way, a Python
value per row, on every real trace (and on random intervals for the idle
gaps), so a code path that drifts from the per-row meaning fails.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
from tracefiles import REAL_TRACES, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis import flops
from jupyter_torchprof.analysis.findings import inputs_from_profile
from jupyter_torchprof.analysis.findings.intervals import idle_segments
from jupyter_torchprof.analysis.findings.variance import _launch_codes


@functools.cache
def profile(name: str):
    return load(str(real_trace(name)))


def _plain_names(events: pd.DataFrame) -> list:
    return events["name"].astype(object).tolist()


@pytest.mark.parametrize("name", REAL_TRACES)
def test_name_lookups_equal_a_test_per_row(name):
    p = profile(name)
    inp = inputs_from_profile(p)
    plain = _plain_names(p.events)
    rows = np.arange(len(plain))[:: max(1, len(plain) // 5000)]
    assert [inp.names[int(r)] for r in rows[:50]] == [plain[int(r)] for r in rows[:50]]
    assert inp.names[rows].tolist() == [plain[int(r)] for r in rows]
    assert inp.codes_in(rows).tolist() == np.unique(inp.name_codes[rows]).tolist()

    def test(n: object) -> bool:
        return "cuda" in str(n).lower() or str(n).startswith("aten::c")

    flags = inp.name_flags(rows, test)
    want = [test(plain[int(r)]) if isinstance(plain[int(r)], str) else test("") for r in rows]
    assert flags.tolist() == want
    wanted = {n for n in plain[:200] if isinstance(n, str)}
    assert inp.rows_named(wanted).tolist() == [i for i, n in enumerate(plain) if n in wanted]
    assert inp.rows_named(wanted, rows).tolist() == [int(r) for r in rows if plain[int(r)] in wanted]


@pytest.mark.parametrize("name", REAL_TRACES)
def test_launch_sizes_by_code_equal_the_strings(name):
    ev = profile(name).events
    rows = np.arange(len(ev))
    for col in ("grid", "block"):
        if col not in ev:
            continue
        codes, labels = _launch_codes(ev, col, rows, True)
        assert labels[codes].tolist() == ev[col].astype(object).fillna("").tolist()


def _plain_idle(start, end, lo, hi):
    """Idle stretches of a lane in [lo, hi] by a sweep over its intervals in start order."""
    order = sorted((i for i in range(len(start)) if end[i] > lo and start[i] < hi), key=lambda i: start[i])
    gaps, t, holder = [], lo, -1
    for i in order:
        s, e = min(max(start[i], lo), hi), min(max(end[i], lo), hi)
        if s > t:
            gaps.append((t, s, holder, i))
        if e >= t:
            t, holder = e, i
    if not order:
        return [(lo, hi, -1, -1)]
    if t < hi:
        gaps.append((t, hi, holder, -1))
    return gaps


@pytest.mark.parametrize("seed", range(40))
def test_idle_segments_equal_a_sweep(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 40))
    start = np.round(rng.uniform(0, 100, n), 1)
    end = start + np.round(rng.exponential(5, n), 1) * (rng.uniform(size=n) > 0.2)
    lo, hi = sorted(np.round(rng.uniform(-10, 110, 2), 1).tolist())
    gs, ge, before, after = idle_segments(start, end, lo, hi)
    got = list(zip(gs.tolist(), ge.tolist(), before.tolist(), after.tolist(), strict=True))
    assert got == _plain_idle(start.tolist(), end.tolist(), lo, hi)
    assert gs.dtype == ge.dtype == np.float64 and before.dtype == after.dtype == np.int64


@pytest.mark.parametrize("name", REAL_TRACES)
def test_launch_table_labels_equal_the_per_row_objects(name):
    p = profile(name)
    ev, table = p.events, p.launches
    rows = table["row"].to_numpy()
    plain = ev["name"].astype(object).to_numpy()
    assert table["name"].astype(object).tolist() == plain[rows].tolist()
    assert table["kind"].astype(object).tolist() == ev["kind"].astype(object).to_numpy()[rows].tolist()
    for pos, col in (("launch_row", "launch_name"), ("op_row", "op_name")):
        at = table[pos].to_numpy()
        want = [plain[a] if a >= 0 and isinstance(plain[a], str) else None for a in at.tolist()]
        got = [v if isinstance(v, str) else None for v in table[col].tolist()]
        assert got == want
    if len(table):
        assert all(str(table[c].dtype) == "str" for c in ("name", "kind", "link"))


@pytest.mark.parametrize("name", REAL_TRACES)
def test_flop_estimates_equal_one_estimate_per_row(name):
    ev = profile(name).events
    if "input_dims" not in ev:
        pytest.skip("no arguments recorded")
    rows = np.flatnonzero(ev["name"].isin(list(flops.EST_OPS)).to_numpy(bool))[:3000]
    got = flops._estimates_of_calls(ev, rows)
    cells = {c: (ev[c].astype(object).fillna("").to_numpy() if c in ev else None) for c in flops.EST_COLUMNS}
    want_f, want_b, want_d = [], [], []
    for r in rows.tolist():
        dims, types, concrete = (
            flops._loads(cells[c][r]) if cells[c] is not None else None for c in flops.EST_COLUMNS
        )
        est = flops.estimate_call(
            str(ev["name"].iat[r]),
            dims,
            concrete if isinstance(concrete, list) else [],
            types if isinstance(types, list) else [],
        )
        want_f.append(est.flops if est else 0.0)
        want_b.append(est.bytes if est else 0.0)
        want_d.append(est.dtype if est else "")
    assert got[0].tolist() == want_f and got[1].tolist() == want_b and got[2].tolist() == want_d


@pytest.mark.parametrize("seed", range(12))
def test_kernel_groups_equal_np_unique(seed):
    from jupyter_torchprof.analysis.tree import unique_inverse

    rng = np.random.default_rng(seed)
    dtype = (np.int8, np.int16, np.int32, np.int64)[seed % 4]
    top = 100 if seed < 8 else 2**30  # the last ones span far more than the rows: the sorting path
    codes = rng.integers(-1, min(top, np.iinfo(dtype).max), int(rng.integers(0, 500))).astype(dtype)
    got, want = unique_inverse(codes), np.unique(codes, return_inverse=True)
    assert got[0].tolist() == want[0].tolist() and got[0].dtype == want[0].dtype
    assert got[1].tolist() == want[1].tolist()


@pytest.mark.parametrize("seed", range(12))
def test_limit_rows_equal_sorted_unique(seed):
    from jupyter_torchprof.analysis.findings.model import limit_rows, unique_rows

    rng = np.random.default_rng(seed)
    top = (50, 10**4, 10**8)[seed % 3]  # dense, sparse, and far wider than the rows (the sorting path)
    rows = rng.integers(-1, top, int(rng.integers(0, 300)))
    if seed % 2:
        rows = np.unique(rows)  # already sorted and distinct: the fast path
    want = np.unique(rows[rows >= 0])
    assert unique_rows(rows[rows >= 0]).tolist() == want.tolist()
    assert limit_rows(rows, 25) == want[:25].tolist() and limit_rows(rows.tolist(), -1) == want.tolist()
