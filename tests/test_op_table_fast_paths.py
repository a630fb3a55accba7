"""The op table's cheaper paths on large traces answer what the code they replace answered, bit for bit.

* `ops._fold_self_costs` adds folded shares per absorbing ancestor, where
  it used to add a bincount over every event;
* `ops._aggregate` sums float columns in C (`native.group_sums`) where
  pandas' grouped sum did (still does on small tables, sorted groups or
  without the library);
* `NoteContext.rows_by_name` orders events by name code with a counting
  sort in C where a stable argsort did.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_torchprof.analysis import ops
from jupyter_torchprof.analysis.notes import base as notes_base
from jupyter_torchprof.trace import native

_SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-310, 1e16, 0.1]


def _fold_by_bincount(costs: pd.DataFrame, rows: np.ndarray) -> dict[str, np.ndarray]:
    """The code `_fold_self_costs` replaced: each self column folded over every event."""
    into = costs["folded_into"].to_numpy()
    folded = np.flatnonzero(into >= 0)
    out = {}
    for col in costs.columns:
        if col == "folded_into":
            continue
        values = costs[col].to_numpy()
        if values.dtype == np.float64 and not values.any():
            out[col] = np.zeros(len(rows))
            continue
        picked = values[rows]
        if col.startswith("self_") and len(folded):
            moved = np.bincount(into[folded], weights=values[folded], minlength=len(values))[: len(values)]
            picked = picked.astype(np.float64, copy=False) + moved[rows]
        out[col] = picked
    return out


def _random_costs(rng: np.random.Generator, n: int, folded_share: float) -> tuple[pd.DataFrame, np.ndarray]:
    pick = rng.integers(0, len(_SPECIAL) + 1, size=(4, n))
    cols = {}
    for k, name in enumerate(("self_cpu_us", "cpu_total_us", "self_device_us", "self_cpu_mem_bytes")):
        special = np.array(_SPECIAL)[np.minimum(pick[k], len(_SPECIAL) - 1)]
        cols[name] = np.where(pick[k] == len(_SPECIAL), rng.normal(size=n) * 1e3, special)
    into = np.full(n, -1, dtype=np.int64)
    fold = np.flatnonzero(rng.random(n) < folded_share)
    # Ancestors anywhere (some folded rows, some not counted: both are dropped).
    into[fold] = rng.integers(0, n, len(fold)) if n else into[fold]
    cols["folded_into"] = into
    counted = np.flatnonzero((into < 0) & (rng.random(n) < 0.8))
    return pd.DataFrame(cols), counted


@pytest.mark.parametrize("n", [0, 1, 5, 300, 20_000])
@pytest.mark.parametrize("folded_share", [0.0, 0.05, 0.6])
def test_fold_self_costs_equals_bincount_over_every_event(n: int, folded_share: float) -> None:
    rng = np.random.default_rng(n + int(folded_share * 100))
    costs, rows = _random_costs(rng, n, folded_share)
    got = ops._fold_self_costs(costs, rows)
    want = _fold_by_bincount(costs, rows)
    assert list(got) == list(want)
    for col in want:
        assert got[col].dtype == want[col].dtype, col
        assert np.array_equal(got[col].view(np.int64), want[col].view(np.int64)), col


def _aggregate(monkeypatch, keys, labels, values, native_on: bool) -> dict[str, np.ndarray]:
    with monkeypatch.context() as m:
        m.setattr(ops, "NATIVE_FROM_ROWS", 0)
        if not native_on:
            m.setattr(native, "group_sums", lambda *a, **k: None)
        return ops._aggregate(keys, labels, values)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 2), st.sampled_from(_SPECIAL + [1.0, -3.5, 2.25])),
        min_size=1,
        max_size=120,
    ),
    st.booleans(),
)
def test_aggregate_native_sums_equal_pandas(rows, sort_rows) -> None:
    """Same table with the C sums and with pandas' (unsorted groups: its Cython kernel; sorted: np.add.reduceat)."""
    if sort_rows:
        rows = sorted(rows, key=lambda r: r[:2])
    name = np.array([r[0] for r in rows], dtype=np.int64)
    kind = np.array([r[1] for r in rows], dtype=np.int64)
    value = np.array([r[2] for r in rows], dtype=np.float64)
    keys = {"name": name, "kind": kind}
    labels = {"name": np.array(["a", "b", "c", "d", "e", "f", ""], dtype=object)}
    values = {
        "self_cpu_us": value,
        "cpu_total_us": value[::-1].copy(),
        "self_device_us": np.zeros(len(value)),
        "device_total_us": np.abs(value),
        "flops": np.arange(len(value), dtype=np.int64),
    }
    with pytest.MonkeyPatch.context() as mp:
        got = _aggregate(mp, keys, labels, values, True)
        want = _aggregate(mp, keys, labels, values, False)
    assert list(got) == list(want)
    for col in want:
        a, b = np.asarray(got[col]), np.asarray(want[col])
        assert a.dtype == b.dtype, col
        if a.dtype.kind == "f":
            assert np.array_equal(a.view(np.int64), b.view(np.int64)), col
        else:
            assert np.array_equal(a, b), col


def test_aggregate_takes_the_native_sums_on_a_large_table(monkeypatch) -> None:
    """From `NATIVE_FROM_ROWS` rows the C sums are used (a broken one would show), below they are not."""
    if native.library() is None:
        pytest.skip("no C compiler")
    rng = np.random.default_rng(0)
    n = ops.NATIVE_FROM_ROWS
    keys = {"name": rng.integers(0, 50, n), "kind": rng.integers(0, 2, n)}
    labels = {"name": np.array([f"op{k}" for k in range(50)] + [""], dtype=object)}
    value = rng.normal(size=n)
    values = {c: value for c in ("self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us")}
    calls = []
    monkeypatch.setattr(
        native, "group_sums", lambda g, v, k, at=None: calls.append(len(v)) or np.full(k, 7.0)
    )
    table = ops._aggregate(keys, labels, values)
    assert calls and (table["cpu_total_us"] == 7.0).all()
    calls.clear()
    small = {k: v[: n - 1] for k, v in keys.items()}
    ops._aggregate(small, labels, {c: v[: n - 1] for c, v in values.items()})
    assert not calls


def _context(codes: np.ndarray, categories: list[str]) -> notes_base.NoteContext:
    names = pd.Categorical.from_codes(codes, categories=categories)
    events = pd.DataFrame({"name": names, "kind": pd.Categorical(["cpu_op"] * len(codes))})
    n = len(codes)
    none = np.full(n, -1, dtype=np.int64)
    return notes_base.NoteContext(events, none, none, none, device_traced=False)


@pytest.mark.parametrize("n", [0, 1, 100, 40_000])
@pytest.mark.parametrize("ncat", [1, 3, 200, 40_000])
def test_rows_by_name_native_equals_argsort(monkeypatch, n: int, ncat: int) -> None:
    rng = np.random.default_rng(n + ncat)
    codes = rng.integers(-1, ncat, n)
    categories = [f"name{k}" for k in range(ncat)]
    monkeypatch.setattr(notes_base, "NATIVE_FROM_ROWS", 0)
    _, order, bounds = _context(codes, categories).rows_by_name
    with monkeypatch.context() as m:
        m.setattr(native, "code_order", lambda *a: None)
        _, want_order, want_bounds = _context(codes, categories).rows_by_name
    assert order.dtype == want_order.dtype
    assert np.array_equal(order, want_order)
    assert np.array_equal(bounds, want_bounds)
    assert np.array_equal(want_order, np.argsort(codes, kind="stable"))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 5), st.integers(0, 1), st.sampled_from(_SPECIAL + [1.0, -3.5]), st.booleans()
        ),
        min_size=1,
        max_size=120,
    ),
    st.booleans(),
)
def test_aggregate_reads_columns_in_place_as_gathered(events, zeros_at_rows) -> None:
    """`AtRows` columns (read at the counted rows in C, or gathered for pandas) give the gathered columns' table."""
    column = np.array([e[2] for e in events], dtype=np.float64)
    rows = np.flatnonzero([e[3] for e in events])
    if zeros_at_rows:
        column[rows] = np.where(np.arange(len(rows)) % 2, 0.0, -0.0)
    keys = {"name": np.array([e[0] for e in events])[rows], "kind": np.array([e[1] for e in events])[rows]}
    if not len(rows):
        return
    labels = {"name": np.array(["a", "b", "c", "d", "e", "f", ""], dtype=object)}
    lazy = {
        c: ops.AtRows(column) for c in ("self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us")
    }
    gathered = {c: column[rows] for c in lazy}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ops, "NATIVE_FROM_ROWS", 0)
        got = ops._aggregate(keys, labels, lazy, rows)
        mp.setattr(native, "group_sums", lambda *a, **k: None)
        got_pandas = ops._aggregate(keys, labels, lazy, rows)
        want = ops._aggregate(keys, labels, gathered)
    for table in (got, got_pandas):
        assert list(table) == list(want)
        for col in want:
            a, b = np.asarray(table[col]), np.asarray(want[col])
            assert a.dtype == b.dtype, col
            assert (
                np.array_equal(a.view(np.int64), b.view(np.int64)) if a.dtype.kind == "f" else (a == b).all()
            )


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 150))
def test_launches_work_native_equals_walk(seed: int, n: int) -> None:
    """Ops at or above each launching op, marked in C, are those the level-by-level walk marks."""
    rng = np.random.default_rng(seed)
    parent = np.full(n, -1, dtype=np.int64)
    for k in range(1, n):
        if rng.random() < 0.8:
            parent[k] = rng.integers(0, k)
    if n > 3 and rng.random() < 0.2:
        parent[0], parent[1] = 1, 0  # parents in a loop: both walks still end
    kernel = rng.random(n) < 0.3
    op = np.where(kernel & (rng.random(n) < 0.8), rng.integers(0, n, n), -1)
    kinds = pd.Categorical(np.where(kernel, "kernel", "cpu_op"), categories=["cpu_op", "kernel"])
    events = pd.DataFrame({"name": pd.Categorical(["x"] * n), "kind": kinds})
    none = np.full(n, -1, dtype=np.int64)

    def marked(native_on: bool) -> np.ndarray:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(notes_base, "NATIVE_FROM_ROWS", 0)
            if not native_on:
                m.setattr(native, "mark_up", lambda *a: None)
            return notes_base.NoteContext(events, parent, op, none, device_traced=True).launches_work

    got, want = marked(True), marked(False)
    assert got.dtype == want.dtype == bool
    assert np.array_equal(got, want)
    assert want[op[kernel & (op >= 0)]].all()


def test_mark_up_refuses_rows_outside() -> None:
    if native.library() is None:
        pytest.skip("no C compiler")
    with pytest.raises(ValueError, match="outside"):
        native.mark_up(np.array([-1, 0]), np.array([2]))
    with pytest.raises(ValueError, match="outside"):
        native.mark_up(np.array([-1, 7]), np.array([1]))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 150))
def test_self_values_native_equals_children_sums(seed: int, n: int) -> None:
    """A value minus its host children's, 0.0 off the host: in C as by `tree.children_sums` and a subtraction."""
    rng = np.random.default_rng(seed)
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int32)
    for k in range(1, n):
        if rng.random() < 0.8:
            parent[k] = rng.integers(0, k)
            depth[k] = depth[parent[k]] + 1
    off = rng.random(n) < 0.2
    depth[off] = -1  # device events (their children's parents stay: C and numpy must agree there too)
    parent[off] = -1
    specials = np.array(_SPECIAL + [1.0, 2.5, -7.0])
    values = np.where(
        rng.random(n) < 0.5, rng.normal(size=n) * 1e3, specials[rng.integers(0, len(specials), n)]
    )
    is_host = depth >= 0
    with pytest.MonkeyPatch.context() as m:
        m.setattr(ops, "NATIVE_FROM_NODES", 0)
        got = ops._self_values(parent, depth, is_host, values, None)
        m.setattr(native, "self_values", lambda *a: None)
        want = ops._self_values(parent, depth, is_host, values, np.flatnonzero(parent >= 0))
    nan = np.isnan(want)
    # (a NaN's sign is left open by IEEE 754: only that it is NaN is compared)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.int64), want[~nan].view(np.int64))


@pytest.mark.parametrize("trace", ["a100_nccl_rank0.pt.trace.json.gz", "diff_pair/control.pt.trace.json.gz"])
@pytest.mark.parametrize("group_by", ["name", "shape"])
def test_op_table_equal_with_and_without_native_grouping(trace: str, group_by: str) -> None:
    """Real traces large enough for the C grouping (or its decline where the keys span too much): the same table."""
    import jupyter_torchprof

    path = __import__("pathlib").Path(__file__).parent / "data" / "kineto" / trace
    profile = jupyter_torchprof.load(path)
    got = profile.op_table(group_by)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(native, "group_keys", lambda *a: None)
        m.setattr(native, "group_sums", lambda *a, **k: None)
        fresh = jupyter_torchprof.load(path)
        want = fresh.op_table(group_by)
    pd.testing.assert_frame_equal(got, want, check_exact=True)


@pytest.mark.parametrize("n", [1, 50, 5000])
@pytest.mark.parametrize("share", [0.001, 0.3, 1.0])
def test_name_rows_are_the_mask_positions(n: int, share: float) -> None:
    """`name_rows` (sorted picks where few, the mask where many) is ``np.flatnonzero(name_mask(...))``."""
    from jupyter_torchprof.analysis.notes import ops_common

    rng = np.random.default_rng(n)
    categories = [f"aten::op{k}" for k in range(40)]
    codes = rng.integers(-1, 40, n)
    codes[(codes == 0) | (codes == 39)] = 1
    # two rare names: few rows, picked name by name, sorted after
    rare = rng.choice(n, min(n, max(2, n // 100)), replace=False)
    codes[rare] = rng.choice([0, 39], len(rare))
    kinds = pd.Categorical(
        np.where(rng.random(n) < 0.8, "cpu_op", "cuda_runtime"), categories=["cpu_op", "cuda_runtime"]
    )
    events = pd.DataFrame({"name": pd.Categorical.from_codes(codes, categories=categories), "kind": kinds})
    none = np.full(n, -1, dtype=np.int64)
    ctx = notes_base.NoteContext(events, none, none, none, device_traced=True)
    wanted = set(rng.choice(categories, max(1, int(40 * share)), replace=False))
    for test in (
        wanted.__contains__,
        {"aten::op0", "aten::op39"}.__contains__,
        lambda name: False,
        lambda name: True,
    ):
        got = ops_common.name_rows(ctx, test)
        want = np.flatnonzero(ops_common.name_mask(ctx, test))
        assert got.dtype == want.dtype
        assert np.array_equal(got, want)
