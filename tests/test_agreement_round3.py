"""Our op table against torch's ``key_averages()``: FLOPs of Scalar operands,
annotations named like ops, and memory allocated on another thread.

As in ``test_key_averages_suite``, each workload runs under a scheduled
``torch.profiler`` (one warm-up step, three active ones), ``key_averages()``
is computed inside ``on_trace_ready`` and the same cycle's trace is loaded by
our parser. Rows are matched on (name, is it a user annotation), torch's own
key, and must agree on calls, CPU times (1 % or 2 µs), CPU memory (bytes,
exactly) and FLOPs (exactly).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from jupyter_torchprof import load
from jupyter_torchprof.analysis.flops import flops_of

ACTIVE_STEPS = 3

#: Profiles a workload the way the tests below do, in a process of its own,
#: and writes torch's rows (by name and by input shape) beside the trace.
#: Used where the workload changes torch's global state: it registers an
#: ``aten::add`` overload whose first operand is a Scalar, so that
#: TorchScript resolves ``1 + x`` to it (stock torch 2.13 swaps the operands
#: into ``add(x, 1)``, and its int/float ``add`` is never recorded), which
#: is the call torch gives 0 FLOPs (``saveExtraArgs`` wants a tensor first).
_SCALAR_FIRST = textwrap.dedent(
    """
    import json, sys
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    lib = torch.library.Library("aten", "FRAGMENT")
    lib.define("add.Scalar_first(Scalar self, Tensor other) -> Tensor")
    # No aten::add inside: torch would fold a lone same-name child.
    lib.impl("add.Scalar_first", lambda a, b: torch.sub(b, -a), "CompositeExplicitAutograd")

    @torch.jit.script
    def f(x: torch.Tensor) -> torch.Tensor:
        return (1 + x) * (x + 1) * 3

    x = torch.randn(8, 4)
    zero_dim = torch.tensor(2.0)

    def step():
        f(x)
        torch.add(zero_dim, x)  # a 0-dim tensor first: 1 FLOP, as torch counts

    def rows(averages):
        return [[e.key, bool(e.is_user_annotation), e.count, e.flops or 0, e.input_shapes] for e in averages]

    def ready(prof):
        out = sys.argv[1]
        prof.export_chrome_trace(out + "/trace.json")
        with open(out + "/theirs.json", "w") as fh:
            json.dump({"by_name": rows(prof.key_averages()),
                       "by_shape": rows(prof.key_averages(group_by_input_shape=True))}, fh)

    step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True,
                 with_flops=True, schedule=schedule(wait=0, warmup=1, active=3),
                 on_trace_ready=ready) as prof:
        for _ in range(4):
            step()
            prof.step()
    """
)


def _capture(step: Callable[[], object], path: Path):
    """(torch's rows by name, our Profile) of three profiled steps of ``step``."""
    step()  # first call outside the profiler (lazy init, TorchScript profiling runs)
    got: dict = {}

    def ready(prof) -> None:
        # Inside on_trace_ready: the cycle clears its events right after.
        got["by_name"] = list(prof.key_averages())
        prof.export_chrome_trace(str(path))

    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        profile_memory=True,
        with_flops=True,
        schedule=schedule(wait=0, warmup=1, active=ACTIVE_STEPS),
        on_trace_ready=ready,
    ) as prof:
        for _ in range(1 + ACTIVE_STEPS):
            step()
            prof.step()
    return got["by_name"], load(str(path))


def _ours_by_key(table) -> dict:
    """Our rows keyed as torch keys its rows: (name, is it a user annotation)."""
    keys = list(zip(table["name"], table["kind"] == "user_annotation", strict=True))
    assert len(set(keys)) == len(keys), "one row per (name, kind)"
    return {k: row for k, (_, row) in zip(keys, table.iterrows(), strict=True)}


def _close(ours: float, theirs: float) -> bool:
    return abs(ours - theirs) <= max(0.01 * abs(theirs), 2.0)


def _mismatches(row, ev, selfs: bool = True) -> list[str]:
    out = []
    if row["calls"] != ev.count:
        out.append(f"calls {row['calls']} != {ev.count}")
    times = [("cpu_total_us", ev.cpu_time_total)]
    mems = [("cpu_mem_bytes", ev.cpu_memory_usage), ("flops", ev.flops or 0)]
    if selfs:
        times.append(("self_cpu_us", ev.self_cpu_time_total))
        mems.append(("self_cpu_mem_bytes", ev.self_cpu_memory_usage))
    for col, theirs in times:
        if not _close(row[col], theirs):
            out.append(f"{col} {row[col]:.2f} != {theirs:.2f}")
    for col, theirs in mems:
        if row.get(col, 0) != theirs:
            out.append(f"{col} {row.get(col, 0)} != {theirs}")
    return out


def _assert_rows_equal(theirs: list, table, selfs: bool = True) -> None:
    ours = _ours_by_key(table)
    by_key = {(ev.key, bool(ev.is_user_annotation)): ev for ev in theirs}
    assert set(ours) == set(by_key), "the same rows on both sides"
    bad = {key: m for key, ev in by_key.items() if (m := _mismatches(ours[key], ev, selfs))}
    assert not bad, bad


# --------------------------------------------------------------------------- #
# item 5: a record_function named like an op is its own row


def annotated_mm() -> Callable[[], object]:
    """``record_function("aten::mm")`` around ``torch.mm``, beside plain ``torch.mm`` calls."""
    a, b = torch.randn(32, 16), torch.randn(16, 8)

    def step() -> None:
        with record_function("aten::mm"):
            torch.mm(a, b)  # its lone same-name child: torch folds it into the range
        with record_function("aten::mm"):
            torch.mm(a, b)
            torch.relu(a)
        torch.mm(a, b)

    return step


def test_annotation_named_like_an_op_is_its_own_row(tmp_path):
    theirs, ours = _capture(annotated_mm(), tmp_path / "annotated_mm.json")
    table = ours.op_table(flops=True)
    _assert_rows_equal(theirs, table)
    rows = _ours_by_key(table)
    annotation, op = rows[("aten::mm", True)], rows[("aten::mm", False)]
    # Two ranges per step; the op: the plain call and the one beside relu
    # (the lone child of the first range is folded into it, as in torch).
    assert (annotation["calls"], op["calls"]) == (2 * ACTIVE_STEPS, 2 * ACTIVE_STEPS)
    assert annotation["flops"] == 0
    assert op["flops"] == 2 * ACTIVE_STEPS * flops_of("aten::mm", [[32, 16], [16, 8]], [])


# --------------------------------------------------------------------------- #
# item 5: FLOPs of an aten::add whose first operand is a Scalar


@pytest.fixture(scope="module")
def scalar_first(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scalar_first")
    script = folder / "profile_it.py"
    script.write_text(_SCALAR_FIRST)
    subprocess.run([sys.executable, str(script), str(folder)], check=True, capture_output=True, timeout=600)
    theirs = json.loads((folder / "theirs.json").read_text())
    return theirs, load(str(folder / "trace.json"))


def test_scalar_first_add_is_in_the_trace(scalar_first):
    """The case is really there: an ``aten::add`` whose first ``Input type`` is Scalar."""
    _, ours = scalar_first
    ev = ours.events
    adds = ev[(ev["name"] == "aten::add") & (ev["kind"] == "cpu_op")]
    types = [json.loads(t) for t in adds["input_types"].astype(str)]
    assert sum(t[0] == "Scalar" for t in types) == ACTIVE_STEPS
    assert any(
        t[0] == "float" and json.loads(d)[0] == [] for t, d in zip(types, adds["input_dims"], strict=True)
    )


def test_scalar_first_add_flops_match_key_averages(scalar_first):
    theirs, ours = scalar_first
    table = _ours_by_key(ours.op_table(flops=True))
    for key, annotation, count, flops, _ in theirs["by_name"]:
        row = table[(key, annotation)]
        assert (row["calls"], row["flops"]) == (count, flops), key
    assert {(k, a) for k, a, *_ in theirs["by_name"]} == set(table)


def test_scalar_first_add_flops_by_input_shape(scalar_first):
    theirs, ours = scalar_first
    by_shape = ours.op_table("shape", flops=True)
    ours_rows = {
        (r.name, json.dumps(json.loads(r.input_shapes) if r.input_shapes else [])): (r.calls, r.flops)
        for r in by_shape.itertuples(index=False)
        if r.kind == "cpu_op"
    }
    checked = 0
    for key, annotation, count, flops, shapes in theirs["by_shape"]:
        if annotation or key not in ("aten::add", "aten::mul"):
            continue
        assert ours_rows[(key, json.dumps(shapes))] == (count, flops), (key, shapes)
        checked += 1
    # add(Scalar, x), add(x, 1), add(0-dim, x), and the products
    assert checked >= 4


# --------------------------------------------------------------------------- #
# item 6: memory allocated on another thread inside an op's interval


@torch.jit.script
def _allocate(x: torch.Tensor) -> torch.Tensor:
    return torch.ones(1000) * x.sum()


@torch.jit.script
def _fork_and_wait(x: torch.Tensor) -> torch.Tensor:
    # The forked task runs on an inter-op thread that inherits the
    # profiler: its allocations fall inside this function's interval on the
    # main thread, which waits for it.
    fut = torch.jit.fork(_allocate, x)
    y = torch.zeros(10) + 1
    return torch.jit.wait(fut) + y.sum()


def forked_allocation() -> Callable[[], object]:
    x = torch.randn(10)

    def step() -> None:
        with record_function("wait"):
            _fork_and_wait(x)

    return step


def _trace_totals(path: Path) -> dict:
    """Total duration (µs) per (name, is it a user annotation), summed straight from the trace JSON."""
    totals: dict = {}
    for e in json.loads(path.read_text())["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation"):
            key = (e["name"], e["cat"] == "user_annotation")
            totals[key] = totals.get(key, 0.0) + e["dur"]
    return totals


def _trace_memory(path: Path, name: str, cat: str) -> int:
    """Bytes allocated, on any thread, inside the intervals of the ``name`` events, straight from the trace JSON."""
    doc = json.loads(path.read_text())
    spans = [
        (e["ts"], e["ts"] + e["dur"])
        for e in doc["traceEvents"]
        if e.get("ph") == "X" and e.get("name") == name and e.get("cat") == cat
    ]
    allocs = [(e["ts"], e["args"]["Bytes"]) for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    return sum(b for s, e in spans for t, b in allocs if s <= t <= e)


def test_memory_allocated_on_another_thread_matches_key_averages(tmp_path):
    path = tmp_path / "forked.json"
    theirs, ours = _capture(forked_allocation(), path)
    ev = ours.events
    mem = ours.memory_events
    main_tid = ev.loc[ev["name"] == "wait", "tid"].iloc[0]
    # The workload does what it says: allocations on a second thread.
    assert (mem.loc[mem["bytes"] > 0, "tid"] != main_tid).any()
    # Totals (time, memory on any thread) agree. Self columns do not on this
    # workload, and the README says so: torch does not nest the forked
    # TorchScript function under the record_function around it (the range's
    # self time is its whole time), while our call tree, built from the
    # trace's intervals, does. On a loaded machine torch's tree sometimes
    # matches ours, so the self columns are not a stable oracle here.
    #
    # On a loaded machine torch's exported trace can also disagree with its
    # own key_averages() about one call of the TorchScript function that
    # waits on the fork: the JSON gave one `_fork_and_wait` 238 µs, ending
    # after the record_function around it (37 µs), where key_averages()
    # counted 32 µs (and so left out an allocation the file's interval
    # holds). Our table reads the file, so for such a row (and only for the
    # functions of this fork) the oracle of its total time and its memory is
    # the file itself; its calls and FLOPs are still held to key_averages().
    table = ours.op_table(flops=True)
    in_file = _trace_totals(path)
    fork_rows = {("_fork_and_wait", False), ("<forked function>", False), ("wait", True)}
    exported_differently = {
        key
        for ev in theirs
        if (key := (ev.key, bool(ev.is_user_annotation))) in fork_rows
        and not _close(in_file.get(key, 0.0), ev.cpu_time_total)
    }
    rows = _ours_by_key(table)
    for key in exported_differently:
        assert _close(rows[key]["cpu_total_us"], in_file[key]), key
        cat = "user_annotation" if key[1] else "cpu_op"
        assert rows[key]["cpu_mem_bytes"] == _trace_memory(path, key[0], cat), key
    checked = [ev for ev in theirs if (ev.key, bool(ev.is_user_annotation)) not in exported_differently]
    _assert_rows_equal(checked, table[[k not in exported_differently for k in rows]], selfs=False)
    for ev in theirs:  # the rows whose total was checked against the file: every other column
        key = (ev.key, bool(ev.is_user_annotation))
        if key in exported_differently:
            left = _mismatches(rows[key], ev, selfs=False)
            assert not [m for m in left if not m.startswith(("cpu_total_us", "cpu_mem_bytes"))], left


def test_memory_in_an_interval_counts_every_thread(tmp_path):
    """The fork function's memory, summed straight from the trace JSON, any thread."""
    path = tmp_path / "forked.json"
    _, ours = _capture(forked_allocation(), path)
    doc = json.loads(path.read_text())
    spans = [
        e
        for e in doc["traceEvents"]
        if e.get("ph") == "X" and e.get("name") == "_fork_and_wait" and e.get("cat") == "cpu_op"
    ]
    expected = _trace_memory(path, "_fork_and_wait", "cpu_op")
    row = ours.ops.set_index(["name", "kind"]).loc[("_fork_and_wait", "cpu_op")]
    assert len(spans) == ACTIVE_STEPS
    assert row["cpu_mem_bytes"] == expected
