"""Our op table against torch's ``key_averages()`` on fourteen kinds of workload.

Each workload runs under ``torch.profiler`` with a schedule (one warm-up step,
three active ones); ``key_averages()`` is computed inside ``on_trace_ready``,
where the events of the cycle still exist, and the same cycle's trace is
exported and loaded by our parser. Every row torch reports must be ours with
the same calls, self and total CPU time (1 % or 2 µs), CPU memory (bytes,
exactly) and FLOPs, by name and by input shape.

The workloads (tests/workloads.py) are picked for torch's tree rules: a lone
same-name child is folded into its parent (``aten::sum`` → ``aten::sum``,
``aten::div_``, ``aten::sort``, nested ``record_function("block")``), and a
convolution's FLOPs belong to ``aten::conv2d`` alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule
from workloads import WORKLOADS

from jupyter_torchprof import load
from jupyter_torchprof.results.profile import Profile

ACTIVE_STEPS = 3


@dataclass
class Captured:
    by_name: list
    by_shape: list
    ours: Profile


def _capture(name: str, folder: Path) -> Captured:
    torch.manual_seed(0)
    step = WORKLOADS[name]()
    step()  # first call outside the profiler (lazy init, compilation)
    got: dict = {}

    def ready(prof) -> None:
        # Inside on_trace_ready: the cycle clears its events right after.
        got["by_name"] = list(prof.key_averages())
        got["by_shape"] = list(prof.key_averages(group_by_input_shape=True))
        path = folder / f"{name}.json"
        prof.export_chrome_trace(str(path))
        got["path"] = path

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
    return Captured(got["by_name"], got["by_shape"], load(str(got["path"])))


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> dict[str, Captured]:
    folder = tmp_path_factory.mktemp("key_averages")
    return {name: _capture(name, folder) for name in WORKLOADS}


def _close(ours: float, theirs: float) -> bool:
    return abs(ours - theirs) <= max(0.01 * abs(theirs), 2.0)


def _mismatches(row, ev) -> list[str]:
    out = []
    if row["calls"] != ev.count:
        out.append(f"calls {row['calls']} != {ev.count}")
    for col, theirs in (("cpu_total_us", ev.cpu_time_total), ("self_cpu_us", ev.self_cpu_time_total)):
        if not _close(row[col], theirs):
            out.append(f"{col} {row[col]:.2f} != {theirs:.2f}")
    for col, theirs in (
        ("cpu_mem_bytes", ev.cpu_memory_usage),
        ("self_cpu_mem_bytes", ev.self_cpu_memory_usage),
    ):
        if row.get(col, 0) != theirs:
            out.append(f"{col} {row.get(col, 0)} != {theirs}")
    if row.get("flops", 0) != (ev.flops or 0):
        out.append(f"flops {row.get('flops', 0)} != {ev.flops}")
    return out


def test_the_suite_is_varied():
    assert len(WORKLOADS) >= 12


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_row_equals_key_averages(captured, name):
    cap = captured[name]
    table = cap.ours.op_table(flops=True)
    # torch keys a row by name and whether it is a user annotation; so do we.
    table = table.set_index([table["name"], table["kind"] == "user_annotation"])
    assert table.index.is_unique
    theirs = {(ev.key, bool(ev.is_user_annotation)): ev for ev in cap.by_name}
    assert len(theirs) == len(cap.by_name)
    assert set(table.index) == set(theirs), "the same rows on both sides"
    bad = {key: m for key, ev in theirs.items() if (m := _mismatches(table.loc[key], ev))}
    assert not bad, bad


def _torch_shape_key(ours: str) -> str:
    """Our input-shapes label as torch spells it: a tensor list shows as ``[]``.

    Ours keeps the list's shapes (``[[[64,64],[64,64]],[]]`` for
    ``torch.cat([a, b])``); torch writes ``[[], []]``, losing them.
    """
    if not ours:
        return "[]"
    dims = json.loads(ours)
    return json.dumps([[] if d and isinstance(d[0], list) else d for d in dims])


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_row_by_input_shape_equals_key_averages(captured, name):
    cap = captured[name]
    ours = cap.ours.op_table("shape", flops=True)
    ours = ours.assign(
        torch_shapes=[_torch_shape_key(s) for s in ours["input_shapes"]],
        annotation=ours["kind"] == "user_annotation",
    )
    summed = ours.groupby(["name", "annotation", "torch_shapes"]).agg(
        calls=("calls", "sum"),
        cpu_total_us=("cpu_total_us", "sum"),
        self_cpu_us=("self_cpu_us", "sum"),
        cpu_mem_bytes=("cpu_mem_bytes", "sum"),
        self_cpu_mem_bytes=("self_cpu_mem_bytes", "sum"),
        flops=("flops", "sum"),
    )
    bad = {}
    for ev in cap.by_shape:
        key = (ev.key, bool(ev.is_user_annotation), json.dumps(ev.input_shapes or []))
        if key not in summed.index:
            bad[key] = "missing"
        elif m := _mismatches(summed.loc[key], ev):
            bad[key] = m
    assert not bad, bad
    assert len(summed) == len(cap.by_shape)


def test_lone_same_name_children_are_folded(captured):
    """The shapes torch folds are present in the suite, and folded as torch does."""
    expect = {
        ("mlp_sum", "aten::sum"): 3 * 3,
        ("mlp_mean", "aten::mean"): 3,
        ("adam_foreach", "aten::div_"): 15,
        ("nested_record_function", "block"): 3,
        ("inplace_ops", "aten::sort"): 3,
    }
    for (workload, op), calls in expect.items():
        cap = captured[workload]
        raw = int((cap.ours.events["name"] == op).sum())
        assert raw > calls, f"{workload}: {op} is not nested in the trace ({raw} events)"
        assert cap.ours.ops.set_index("name").loc[op, "calls"] == calls, (workload, op)


def test_folded_events_are_marked_in_events(captured):
    ev = captured["nested_record_function"].ours.events
    block = ev[ev["name"] == "block"]
    inner = block[block["folded_into"] >= 0]
    assert len(inner) == ACTIVE_STEPS
    assert set(ev.loc[inner["folded_into"], "name"]) == {"block"}


def test_convolution_flops_counted_once(captured):
    table = captured["cnn_batchnorm"].ours.op_table(flops=True).set_index("name")
    conv = table.loc["aten::conv2d", "flops"]
    assert conv > 0
    assert table.loc[["aten::convolution", "aten::_convolution"], "flops"].sum() == 0
    assert table["flops"].sum() == conv + table.drop(index="aten::conv2d")["flops"].sum()


def test_tensor_list_shapes_keep_each_tensor(captured):
    """Ours differs from torch on purpose: ``torch.cat([a, b, c])`` keeps the three shapes."""
    ours = captured["inplace_ops"].ours.op_table("shape").set_index(["name", "input_shapes"])
    assert ("aten::cat", "[[[64,64],[64,64],[64,64]],[]]") in ours.index
    assert ("aten::cat", "[[[64,64],[64,64]],[]]") in ours.index
    theirs = {json.dumps(e.input_shapes) for e in captured["inplace_ops"].by_shape if e.key == "aten::cat"}
    assert theirs == {"[[], []]"}
