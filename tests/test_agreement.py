"""Our op table against torch's own key_averages() on the very same profile."""

from __future__ import annotations

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from jupyter_torchprof import load


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc1 = torch.nn.Linear(8 * 8 * 8, 64)
        self.norm = torch.nn.LayerNorm(64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.bn(self.conv(x))))
        x = torch.flatten(x, 1)
        x = torch.nn.functional.gelu(self.norm(self.fc1(x)))
        return torch.log_softmax(self.fc2(x), dim=1)


def _train_steps(prof_steps: int = 3):
    torch.manual_seed(0)
    model = Block()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(16, 3, 16, 16)
    target = torch.randint(0, 10, (16,))

    def step() -> None:
        opt.zero_grad()
        loss = torch.nn.functional.nll_loss(model(x), target)
        loss.backward()
        opt.step()

    step()  # warm-up outside the profiler
    return step


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    step = _train_steps()
    path = tmp_path_factory.mktemp("agree") / "trace.json"
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        for k in range(3):
            with record_function(f"ProfilerStep#{k}"):
                step()
    prof.export_chrome_trace(str(path))
    return prof, load(str(path))


def test_at_least_twenty_distinct_ops(profiled):
    _, ours = profiled
    assert (ours.ops["kind"] == "cpu_op").sum() >= 20


def test_calls_and_cpu_times_match_key_averages(profiled):
    prof, ours = profiled
    theirs = {e.key: e for e in prof.key_averages()}
    table = ours.ops.set_index("name")
    total_self = sum(e.self_cpu_time_total for e in theirs.values())
    assert abs(table["self_cpu_us"].sum() - total_self) <= max(0.01 * total_self, 2.0)
    checked = 0
    for key, ev in theirs.items():
        assert key in table.index, f"{key} missing from our op table"
        row = table.loc[key]
        assert row["calls"] == ev.count, key
        # Every op's times, not only the large ones: how many ops reach 1 % of
        # the run depends on the machine's load, and the 2 µs slack covers the
        # rounding of the smallest.
        checked += 1
        assert row["cpu_total_us"] == pytest.approx(ev.cpu_time_total, rel=0.01, abs=2.0), key
        assert row["self_cpu_us"] == pytest.approx(ev.self_cpu_time_total, rel=0.01, abs=2.0), key
    assert checked >= 20
    # Nothing extra on our side either (same set of rows).
    assert set(table.index) == set(theirs)


def test_flops_match_key_averages(profiled):
    prof, ours = profiled
    table = ours.op_table(flops=True).set_index("name")
    with_flops = [e for e in prof.key_averages() if e.flops]
    assert {e.key for e in with_flops} >= {"aten::addmm", "aten::mm", "aten::conv2d"}
    for e in with_flops:
        assert table.loc[e.key, "flops"] == pytest.approx(e.flops, rel=1e-6), e.key


def test_calls_by_input_shape_match(profiled):
    prof, ours = profiled
    by_shape = ours.op_table("shape")
    ours_counts = {
        (r.name, r.input_shapes): r.calls for r in by_shape.itertuples(index=False) if r.kind == "cpu_op"
    }
    for e in prof.key_averages(group_by_input_shape=True):
        if e.key.startswith("ProfilerStep") or e.key not in set(by_shape["name"]):
            continue
        shapes = json.dumps(e.input_shapes, separators=(",", ":")) if e.input_shapes else ""
        if (e.key, shapes) in ours_counts:
            assert ours_counts[(e.key, shapes)] == e.count, (e.key, shapes)
    assert len(ours_counts) > len(ours.ops[ours.ops["kind"] == "cpu_op"])
