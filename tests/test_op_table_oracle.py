"""The op table on every real trace equals plain-Python and plain-pandas references.

The op table is computed with array shortcuts (two stable sorts instead of a
lexsort, groups numbered by first appearance, one frame built at the end);
these tests pin its figures to definitions that take none of them:

* calls, total and self CPU time per ``cpu_op`` name, counted in plain
  Python from the parsed events (torch's stack walk and folding rule);
* every column, for every grouping, equal bit for bit to the pandas grouped
  aggregation the table used before (``_reference_op_table``);
* the call tree equal to the stack walk itself (`tree.nest_reference`), and
  the notes' "launches device work" equal to a walk up from each launch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tracefiles import REAL_TRACES, real_trace

from jupyter_torchprof import columns
from jupyter_torchprof.analysis import notes as notes_mod
from jupyter_torchprof.analysis import ops as ops_mod
from jupyter_torchprof.analysis import tree as tree_mod
from jupyter_torchprof.results.profile import Profile
from jupyter_torchprof.trace import categories as K

BENCH_TRACES = Path(__file__).resolve().parents[1] / "benchmarks" / "traces"
#: HTA's MTIA and V100 traces kept with the benchmarks (MIT, see their README).
EXTRA_TRACES = ["mtia_rank_0.json.gz", "df_index_resolver.json.gz"]


@pytest.fixture(scope="module", params=REAL_TRACES + EXTRA_TRACES)
def loaded(request) -> tuple[Path, Profile]:
    name = request.param
    path = BENCH_TRACES / name if name in EXTRA_TRACES else real_trace(name)
    if not path.is_file():
        pytest.fail(f"{path} is missing (see benchmarks/traces/README.md)", pytrace=False)
    return path, Profile.from_file(path)


def _parsed_rows(p: Profile) -> list[dict]:
    """The parsed host events as plain dicts (times as the parser decoded them: an epoch-based
    start read from the JSON as a float keeps only about 0.25 µs, which the parser takes into
    account; the oracle then starts from the same times)."""
    ev = p.parsed_events
    host = K.kind_mask(ev, K.HOST_KINDS)
    cols = {c: ev[c].to_numpy()[host].tolist() for c in ("pid", "tid", "ts", "dur")}
    cols["name"] = ev["name"].astype(object).to_numpy()[host].tolist()
    cols["kind"] = ev["kind"].astype(object).to_numpy()[host].tolist()
    return [dict(zip(cols, values, strict=True)) for values in zip(*cols.values(), strict=True)]


def _self_cpu_oracle(events: list[dict], tolerance: float) -> dict[str, tuple[int, float, float]]:
    """(calls, total µs, self µs) per ``cpu_op`` name, as ``key_averages()`` counts them, in plain Python.

    Stack walk per thread (start, then longest first; a child may poke out
    of its parent by ``tolerance``, the trace's time precision); self time
    is the duration less the direct children's; an event whose parent has
    its name and no other child is folded into that parent, which takes its
    self time (its children become the parent's).
    """
    lanes: dict[tuple, list[dict]] = {}
    for e in events:
        lanes.setdefault((e["pid"], e["tid"]), []).append(e)
    rows: dict[str, tuple[int, float, float]] = {}
    for lane in lanes.values():
        lane.sort(key=lambda e: (e["ts"], -e["dur"]))
        end = [e["ts"] + e["dur"] for e in lane]
        parent = [-1] * len(lane)
        stack: list[int] = []
        for i, e in enumerate(lane):
            while stack and (e["ts"] >= end[stack[-1]] or end[i] > end[stack[-1]] + tolerance):
                stack.pop()
            parent[i] = stack[-1] if stack else -1
            stack.append(i)
        children = [0] * len(lane)
        own = [e["dur"] for e in lane]
        for i, p in enumerate(parent):
            if p >= 0:
                children[p] += 1
                own[p] -= lane[i]["dur"]
        kept = list(range(len(lane)))
        for i, p in enumerate(parent):  # parents come first: their kept ancestor is known
            if p >= 0 and children[p] == 1 and lane[p]["name"] == lane[i]["name"]:
                kept[i] = kept[p]
        self_time = [0.0] * len(lane)
        for i in range(len(lane)):
            self_time[kept[i]] += own[i]
        for i, e in enumerate(lane):
            if kept[i] == i and e["kind"] == K.CPU_OP:
                calls, total, own_total = rows.get(e["name"], (0, 0.0, 0.0))
                rows[e["name"]] = (calls + 1, total + e["dur"], own_total + self_time[i])
    return rows


def test_cpu_ops_equal_the_plain_python_oracle(loaded):
    _, p = loaded
    theirs = _self_cpu_oracle(_parsed_rows(p), p.meta.time_precision_us)
    ours = p.ops[p.ops["kind"] == K.CPU_OP].set_index("name")
    assert set(ours.index) == set(theirs)
    for name, (calls, total, own) in theirs.items():
        row = ours.loc[name]
        assert row["calls"] == calls, name
        assert row["cpu_total_us"] == pytest.approx(total, rel=1e-9, abs=1e-6), name
        assert row["self_cpu_us"] == pytest.approx(own, rel=1e-9, abs=1e-6 * calls), name


def _reference_op_table(events: pd.DataFrame, costs: pd.DataFrame, group_by: str, include_python: bool):
    """The op table as the grouped pandas aggregation it was before its array shortcuts (no FLOPs)."""
    kinds = K.OP_KINDS + ((K.PYTHON_FUNCTION,) if include_python else ())
    into = costs["folded_into"].to_numpy()
    folded = np.flatnonzero(into >= 0)
    co = costs.drop(columns="folded_into").copy()
    for col in co.columns:
        if col.startswith("self_"):
            values = co[col].to_numpy(np.float64).copy()
            values += np.bincount(into[folded], weights=values[folded], minlength=len(values))
            values[folded] = 0.0
            co[col] = values
    mask = K.kind_mask(events, kinds) & (into < 0)
    ev, co = events.loc[mask], co.loc[mask]
    names = ev["name"].astype(object).fillna("")
    frame = pd.DataFrame({"name": names.where(~names.str.match(ops_mod.STEP_PATTERN), ops_mod.STEP_ROW)})
    frame["kind"] = ev["kind"].astype(object).to_numpy()
    grouping = []
    if group_by != "name":
        label = {"shape": "input_shapes"}.get(group_by, group_by)
        frame[label] = ev[ops_mod._GROUP_COLUMN[group_by]].astype(object).fillna("").to_numpy()
        grouping = [label]
    frame["dur"] = ev["dur"].to_numpy()
    for col in co.columns:
        frame[col] = co[col].to_numpy()
    agg = {
        "calls": ("dur", "size"),
        "self_cpu_us": ("self_cpu_us", "sum"),
        "cpu_total_us": ("dur", "sum"),
        "self_device_us": ("self_device_us", "sum"),
        "device_total_us": ("device_total_us", "sum"),
    }
    agg.update({c: (c, "sum") for c in co.columns if c.endswith("_bytes")})
    table = frame.groupby(["name", "kind", *grouping], sort=False).agg(**agg).reset_index()
    for share, col in (("self_cpu_pct", "self_cpu_us"), ("self_device_pct", "self_device_us")):
        total = table[col].sum()
        table[share] = 100 * table[col] / total if total > 0 else 0.0
    table["cpu_mean_us"] = table["cpu_total_us"] / table["calls"]
    table["device_mean_us"] = table["device_total_us"] / table["calls"]
    rest = [c for c in table.columns if c.endswith("_bytes")]
    table = table[["name", *ops_mod.OP_TABLE_COLUMNS[1:], *grouping, *rest]]
    key = columns.default_sort(table["self_device_us"].sum() > 0)
    return table.sort_values([key, "cpu_total_us"], ascending=False, kind="stable").reset_index(drop=True)


@pytest.mark.parametrize("group_by", ["name", "shape", "stack"])
@pytest.mark.parametrize("include_python", [False, True])
def test_op_table_equals_the_grouped_pandas_reference(loaded, group_by, include_python):
    _, p = loaded
    events, costs = p._data.events, p._costs
    ours = ops_mod.op_table(events, costs, group_by=group_by, include_python=include_python)
    theirs = _reference_op_table(events, costs, group_by, include_python)
    assert len(ours) == len(theirs)
    for col in theirs.columns:
        a, b = ours[col].to_numpy(), theirs[col].to_numpy()
        if a.dtype.kind == "f":
            # bit for bit (NaN equal to NaN), as the old aggregation
            np.testing.assert_array_equal(a, b, err_msg=col)
        else:
            assert list(a) == list(b), col


def test_call_tree_equals_the_stack_walk(loaded):
    _, p = loaded
    ev = p._data.events
    idx = np.flatnonzero(K.kind_mask(ev, K.HOST_KINDS))
    lane = tree_mod.lane_keys(ev["pid"].to_numpy()[idx], ev["tid"].to_numpy()[idx])
    ts = ev["ts"].to_numpy()[idx]
    end = ts + ev["dur"].to_numpy()[idx]
    tol = p.meta.time_precision_us
    fast, reference = tree_mod.nest(lane, ts, end, tol), tree_mod.nest_reference(lane, ts, end, tol)
    np.testing.assert_array_equal(fast[0], reference[0])
    np.testing.assert_array_equal(fast[1], reference[1])


def test_start_order_is_the_three_key_lexsort():
    rng = np.random.default_rng(7)
    for trial in range(2000):
        n = int(rng.integers(0, 50))
        lane = rng.integers(0, 3, n) * (10**6 if trial % 7 == 0 else 1)
        start = rng.integers(0, 6, n).astype(float)
        end = start + rng.integers(0, 4, n)
        if trial % 5 == 0 and n:
            start[rng.integers(0, n, 3)] = np.nan
            end[rng.integers(0, n, 2)] = np.nan
        if trial % 11 == 0 and n:
            start[rng.integers(0, n, 2)] = -0.0
        expected = np.lexsort((-end, start, lane))
        np.testing.assert_array_equal(tree_mod.start_order(lane, start, end), expected, err_msg=str(trial))


def test_launches_work_equals_a_walk_up_from_each_launch(loaded):
    _, p = loaded
    parent, op = p._tree["parent"].to_numpy(), p._links["op"].to_numpy()
    ctx = notes_mod.NoteContext(p._data.events, parent, op, p._links["launch"].to_numpy(), True)
    expected = np.zeros(len(parent), dtype=bool)
    for row in np.flatnonzero(K.kind_mask(p._data.events, K.DEVICE_ACTIVITY)).tolist():
        at = int(op[row])
        while at >= 0 and not expected[at]:
            expected[at] = True
            at = int(parent[at])
    np.testing.assert_array_equal(ctx.launches_work, expected)


def test_dense_numbers_are_factorize():
    rng = np.random.default_rng(3)
    for _ in range(500):
        n, span = int(rng.integers(0, 200)), int(rng.integers(1, 50))
        values = rng.integers(0, span, n)
        numbers, groups, firsts = ops_mod._dense_numbers(values, span)
        expected, uniques = pd.factorize(values)
        np.testing.assert_array_equal(numbers, expected)
        assert groups == len(uniques)
        # Where each number first appears, in number order.
        np.testing.assert_array_equal(firsts, [int(np.flatnonzero(expected == g)[0]) for g in range(groups)])


def test_group_codes_firsts_are_the_running_maximum_steps():
    """The first row of each group, from the table of first positions or (hashed keys) the running maximum."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(0, 300))
        keys = [rng.integers(-1, int(rng.integers(1, 40)), n) for _ in range(int(rng.integers(1, 4)))]
        if rng.random() < 0.3 and n:
            keys.append(rng.integers(-1, 10**7, n))  # a wide key: the factorize path
        group, firsts = ops_mod._group_codes(keys)
        expected, uniques = pd.factorize(pd.MultiIndex.from_arrays(keys)) if n else (np.array([], int), [])
        np.testing.assert_array_equal(group, expected)
        np.testing.assert_array_equal(
            firsts, [int(np.flatnonzero(expected == g)[0]) for g in range(len(uniques))]
        )
