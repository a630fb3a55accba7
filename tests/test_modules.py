"""``--modules``: ops grouped by the nn.Module they ran in, time per module, module → kernels."""

from __future__ import annotations

import json

import pytest
from tracefiles import raw_events

from jupyter_torchprof import load

STEPS = 2
CELL = "loss = model(x).sum()\n"


@pytest.fixture
def run(shell):
    shell.run_cell(
        "import torch\n"
        "model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))\n"
        "x = torch.randn(4, 8)\n"
    )
    shell.run_cell_magic("torchprof", f"--modules --steps {STEPS} -q -o r", CELL)
    return shell.user_ns["r"]


def _ranges_and_ops(path):
    """Module ranges and ops from the raw file, and which range encloses each op (plain Python)."""
    events = [e for e in raw_events(path) if e.get("ph") == "X"]
    ranges = [e for e in events if str(e.get("name", "")).startswith("nn.Module: ")]
    ops = [e for e in events if e.get("cat") == "cpu_op"]

    def inside(op, r):
        return (
            r["tid"] == op["tid"]
            and r["ts"] <= op["ts"]
            and op["ts"] + op["dur"] <= r["ts"] + r["dur"] + 1e-3
        )

    owner = []
    for op in ops:
        around = [r for r in ranges if inside(op, r)]
        owner.append(min(around, key=lambda r: r["dur"]) if around else None)
    return ranges, ops, owner


def test_module_table_matches_the_ranges_in_the_file(run):
    ranges, _, _ = _ranges_and_ops(run.trace_path)
    table = run.modules.set_index("module")
    expected = {}
    for r in ranges:
        label = r["name"].removeprefix("nn.Module: ")
        calls, total = expected.get(label, (0, 0.0))
        expected[label] = (calls + 1, total + float(r["dur"]))
    assert (
        set(table.index)
        == set(expected)
        == {
            "model (Sequential)",
            "model.0 (Linear)",
            "model.1 (ReLU)",
            "model.2 (Linear)",
        }
    )
    for label, (calls, total) in expected.items():
        assert table.loc[label, "calls"] == calls == STEPS
        assert table.loc[label, "cpu_total_us"] == pytest.approx(total, rel=1e-9)
    # The outer module holds its children: more time, and only the ops outside them.
    assert table.loc["model (Sequential)", "cpu_total_us"] > table.loc["model.0 (Linear)", "cpu_total_us"]
    assert table.loc["model.0 (Linear)", "ops"] >= STEPS  # aten::linear per call


def test_ops_grouped_by_module(run):
    _, ops, owner = _ranges_and_ops(run.trace_path)
    by_module = run.op_table("module")
    assert by_module["module"].ne("").any()
    ours = {(r.name, r.module): r.calls for r in by_module.itertuples(index=False) if r.kind == "cpu_op"}
    expected: dict[tuple[str, str], int] = {}
    for op, r in zip(ops, owner, strict=True):
        key = (op["name"], r["name"].removeprefix("nn.Module: ") if r else "")
        expected[key] = expected.get(key, 0) + 1
    # Every op lands under its innermost module, as counted from the file.
    assert ours[("aten::addmm", "model.0 (Linear)")] == expected[("aten::addmm", "model.0 (Linear)")] == STEPS
    assert ours[("aten::addmm", "model.2 (Linear)")] == STEPS
    assert ours[("aten::relu", "model.1 (ReLU)")] == STEPS
    assert ours[("aten::sum", "")] == STEPS  # outside the model
    # Grouping only splits rows: per name, the calls add up to the op table's.
    by_name = by_module.groupby("name")["calls"].sum()
    assert by_name.to_dict() == run.ops.set_index("name")["calls"].to_dict()


def test_view_offers_module_grouping_and_finds_its_events(run):
    from jupyter_torchprof.views.tables import OpTable, available_groupings

    assert "module" in available_groupings(run)
    table = OpTable(run, group_by="module")
    names = list(table.source.data["name"])
    modules = list(table.source.data["module"])
    i = next(
        k
        for k, (n, m) in enumerate(zip(names, modules, strict=True))
        if (n, m) == ("aten::addmm", "model.2 (Linear)")
    )
    rows = table.event_rows(i)
    assert len(rows) == STEPS
    assert set(run.module_of.iloc[rows]) == {"model.2 (Linear)"}


def _constructed(tmp_path):
    """Constructed (not captured): a module range, two ops inside, each launching one kernel."""
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "user_annotation", "name": "nn.Module: net (Block)", "pid": 1, "tid": 1, "ts": 1, "dur": 60},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 2, "dur": 20, "args": {"External id": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 3, "dur": 5,
         "args": {"correlation": 10, "External id": 1}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 30, "dur": 20, "args": {"External id": 2}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 31, "dur": 5,
         "args": {"correlation": 11, "External id": 2}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::sum", "pid": 1, "tid": 1, "ts": 70, "dur": 20, "args": {"External id": 3}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 71, "dur": 5,
         "args": {"correlation": 12, "External id": 3}},
        {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 10, "dur": 15,
         "args": {"correlation": 10, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "relu_kernel", "pid": 0, "tid": 7, "ts": 40, "dur": 4,
         "args": {"correlation": 11, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "reduce_kernel", "pid": 0, "tid": 7, "ts": 80, "dur": 3,
         "args": {"correlation": 12, "device": 0, "stream": 7}},
    ]  # fmt: skip
    path = tmp_path / "constructed.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    return load(str(path))


def test_module_kernels_on_a_constructed_gpu_trace(tmp_path):
    p = _constructed(tmp_path)
    k = p.module_kernels("net (Block)").set_index("name")
    assert set(k.index) == {"gemm_kernel", "relu_kernel"}
    assert k.loc["gemm_kernel", "total_us"] == 15
    row = p.modules.set_index("module").loc["net (Block)"]
    assert row["device_total_us"] == 19
    assert row["kernels"] == 2 and row["ops"] == 2
    assert p.module_kernels("nothing (Here)").empty


def test_no_modules_no_grouping(tmp_path):
    from jupyter_torchprof.views.tables import available_groupings

    path = tmp_path / "plain.json"
    path.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5}
                ]
            }
        )
    )
    p = load(str(path))
    assert p.modules.empty
    assert "module" not in available_groupings(p)


def test_kernel_view_shows_the_kernels_of_one_module(tmp_path):
    from jupyter_torchprof.views.tables import KernelTable

    p = _constructed(tmp_path)
    table = KernelTable(p)
    assert set(table.shown["name"]) == {"gemm_kernel", "relu_kernel", "reduce_kernel"}
    table.update(module="net (Block)")
    assert set(table.shown["name"]) == {"gemm_kernel", "relu_kernel"}
    assert "launched inside net (Block)" in table.status()
    table.update(module="")
    assert len(table.shown) == 3
    view = p.view()
    try:
        assert view.k_module.options[1] == ("net (Block)", "net (Block)")
        view.k_module.value = "net (Block)"
        assert set(view.kernels.shown["name"]) == {"gemm_kernel", "relu_kernel"}
    finally:
        view.close()
