"""``--modules``: ops grouped by the nn.Module they ran in, time per module, module → kernels."""

from __future__ import annotations

import json

import numpy as np
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


# --------------------------------------------------------------------------- #
# backward work: the module of the forward op that made its autograd node

TRAIN_STEPS = 2
BACKWARD = " · backward"


@pytest.fixture
def train_run(shell):
    shell.run_cell(
        "import torch\n"
        "torch.manual_seed(0)\n"
        "model = torch.nn.Sequential(\n"
        "    torch.nn.Linear(8, 16), torch.nn.ReLU(),\n"
        "    torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh()),\n"
        "    torch.nn.Linear(16, 4),\n"
        ")\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        "x = torch.randn(32, 8)\n"
    )
    shell.run_cell_magic(
        "torchprof",
        f"--modules --record-shapes --steps {TRAIN_STEPS} -q -o r",
        "opt.zero_grad()\nloss = model(x).pow(2).mean()\nloss.backward()\nopt.step()\n",
    )
    return shell.user_ns["r"]


def _expected_backward_modules(path):
    """For every host event under a backward node: the expected module label, from the file alone.

    Forward ops are the ops with a ``Sequence number`` and a ``Fwd thread id`` of 0 (or none);
    a backward node (``autograd::engine::evaluate_function: …``, which has
    both) belongs to the latest forward op with its number started before it,
    and that op's module is its innermost ``nn.Module: `` range.
    """
    events = [e for e in raw_events(path) if e.get("ph") == "X"]
    ranges = [e for e in events if str(e.get("name", "")).startswith("nn.Module: ")]
    ops = [e for e in events if e.get("cat") == "cpu_op"]

    def inside(op, r):
        return (
            r is not op
            and r["tid"] == op["tid"]
            and r["ts"] <= op["ts"]
            and op["ts"] + op["dur"] <= r["ts"] + r["dur"]
        )

    def module(op):
        around = [r for r in ranges if inside(op, r)]
        return min(around, key=lambda r: r["dur"])["name"].removeprefix("nn.Module: ") if around else ""

    # torch writes the forward thread's id on backward ops, 0 on forward ops
    forward = [o for o in ops if "Sequence number" in o["args"] and not o["args"].get("Fwd thread id")]
    nodes = [o for o in ops if o["name"].startswith("autograd::engine::evaluate_function: ")]
    expected = {}
    for node in nodes:
        seq = node["args"].get("Sequence number")
        before = [f for f in forward if f["args"]["Sequence number"] == seq and f["ts"] <= node["ts"]]
        fwd = max(before, key=lambda f: f["ts"]) if before else None
        label = module(fwd) if fwd is not None else ""
        for e in [node, *[o for o in ops if inside(o, node)]]:
            expected[(e["tid"], e["ts"], e["name"])] = label + BACKWARD if label else ""
    return expected


def test_backward_ops_get_the_module_of_their_forward_op(train_run):
    expected = _expected_backward_modules(train_run.trace_path)
    ev = train_run.events
    t0 = train_run.meta.t0_us
    module_of = train_run.module_of.astype(str).to_numpy()
    rows = {
        (int(tid), round(float(ts) + t0, 3), str(name)): i
        for i, (tid, ts, name) in enumerate(zip(ev["tid"], ev["ts"], ev["name"].astype(str), strict=True))
    }
    got = {k: module_of[rows[(k[0], round(k[1], 3), k[2])]] for k in expected}
    assert got == expected
    # Every module of the tree shows its backward work; the loss's own ops (pow,
    # mean) ran outside the model, so their backward nodes have none.
    assert set(expected.values()) == {
        "model.0 (Linear) · backward",
        "model.1 (ReLU) · backward",
        "model.2.0 (Linear) · backward",
        "model.2.1 (Tanh) · backward",
        "model.3 (Linear) · backward",
        "",
    }
    loss_nodes = {k[2] for k, v in expected.items() if k[2].startswith("autograd::engine") and not v}
    assert {
        "autograd::engine::evaluate_function: MeanBackward0",
        "autograd::engine::evaluate_function: PowBackward0",
    } <= loss_nodes


def test_grouping_by_module_splits_the_backward_nodes(train_run):
    by_module = train_run.op_table("module")
    node = by_module[by_module["name"] == "autograd::engine::evaluate_function: AddmmBackward0"]
    # One AddmmBackward0 per Linear and step, each row under its Linear's backward.
    assert dict(zip(node["module"], node["calls"], strict=True)) == {
        "model.0 (Linear) · backward": TRAIN_STEPS,
        "model.2.0 (Linear) · backward": TRAIN_STEPS,
        "model.3 (Linear) · backward": TRAIN_STEPS,
    }
    by_name = by_module.groupby("name")["calls"].sum()
    assert by_name.to_dict() == train_run.ops.set_index("name")["calls"].to_dict()


@pytest.mark.parametrize(
    "name",
    [
        "a100_nccl_rank0.pt.trace.json.gz",
        "v100_ddp_ns_timestamps.pt.trace.json.gz",
        "mi250_rocm_train.pt.trace.json.gz",
    ],
)
def test_backward_link_is_kinetos_fwdbwd_flow(name):
    """On real GPU traces (no modules recorded): the sequence-number link draws Kineto's own fwdbwd arrows."""
    from tracefiles import real_trace

    from jupyter_torchprof.analysis.modules import backward_nodes, forward_of_backward

    path = real_trace(name)
    raw = raw_events(path)
    flows: dict = {}
    for e in raw:
        if e.get("cat") == "fwdbwd":
            flows.setdefault(e["id"], {})[e["ph"]] = (e["tid"], e["ts"])
    pairs = [(f["s"], f["f"]) for f in flows.values() if "s" in f and "f" in f]
    assert len(pairs) >= 4  # MI250: 4 pairs; the DDP traces: hundreds
    p = load(str(path))
    ev = p.events  # parsed columns with the call tree's parent and depth
    t0 = p.meta.t0_us
    parent = ev["parent"].to_numpy()
    fwd = forward_of_backward(ev, parent, ev["depth"].to_numpy())
    is_node = backward_nodes(ev)
    ops = np.flatnonzero(ev["kind"].astype(str).to_numpy() == "cpu_op")
    at = {}
    for i in ops.tolist():
        at.setdefault((int(ev["tid"].iat[i]), round(float(ev["ts"].iat[i]) + t0, 3)), []).append(i)
    linked = 0
    for (s_tid, s_ts), (f_tid, f_ts) in pairs:
        # The flow ends on the node's inner op (AddmmBackward0); its parent is the engine's node.
        (end,) = [i for i in at[(f_tid, round(f_ts, 3))] if not is_node[i]]
        node = int(parent[end])
        assert is_node[node]
        start = at[(s_tid, round(s_ts, 3))]
        assert int(fwd[node]) in start, (ev["name"].iat[node], [ev["name"].iat[i] for i in start])
        linked += 1
    assert linked == len(pairs)


def test_sequence_numbers_are_read_from_the_file():
    """The parsed ``sequence`` column holds each host op's ``Sequence number`` (-1 where none)."""
    from tracefiles import real_trace

    path = real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz")
    raw = [e for e in raw_events(path) if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    expected = sorted((e["name"], int(e.get("args", {}).get("Sequence number", -1))) for e in raw)
    ev = load(str(path)).events
    ops = ev[ev["kind"].astype(str) == "cpu_op"]
    got = sorted(zip(ops["name"].astype(str), ops["sequence"].astype(int), strict=True))
    assert got == expected
    assert sum(s >= 0 for _, s in got) == sum("Sequence number" in e.get("args", {}) for e in raw) > 1000
