"""Totals vs per step: every table says which it holds, and can show either."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule
from tracefiles import real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis.ops import ADDITIVE_COLUMNS

STEPS = 3


@pytest.fixture(scope="module")
def cpu_profile(tmp_path_factory):
    path = tmp_path_factory.mktemp("per_step") / "trace.json"
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=STEPS),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(1 + STEPS):
            model(x).sum().backward()
            prof.step()
    return load(str(path))


def test_the_trace_has_the_steps(cpu_profile):
    assert cpu_profile.summary["steps"] == STEPS
    assert cpu_profile.step_count == STEPS


def test_op_table_per_step_divides_the_additive_columns(cpu_profile):
    totals = cpu_profile.op_table()
    per = cpu_profile.op_table(per_step=True)
    assert list(per.columns) == list(totals.columns)
    for col in totals.columns:
        if col in ADDITIVE_COLUMNS:
            np.testing.assert_allclose(per[col], totals[col] / STEPS, err_msg=col)
        elif col.endswith(("_pct", "_mean_us")):
            np.testing.assert_allclose(per[col], totals[col], err_msg=col)
    # The cached totals are untouched.
    assert cpu_profile.op_table() is totals
    assert (per.set_index("name").loc["aten::addmm", "calls"]) == pytest.approx(2.0)


def test_kernel_table_per_step_on_a_real_gpu_trace():
    p = load(str(real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")))
    n = p.step_count
    assert n >= 1
    per = p.kernel_table(per_step=True)
    np.testing.assert_allclose(per["total_us"], p.kernels["total_us"] / n)
    np.testing.assert_allclose(per["calls"], p.kernels["calls"] / n)
    np.testing.assert_allclose(per["median_us"], p.kernels["median_us"])
    np.testing.assert_allclose(per["pct"], p.kernels["pct"])


def test_text_and_static_html_say_totals_over_the_steps(cpu_profile):
    text = cpu_profile.table()
    assert f"Ops: totals over {STEPS} steps" in text
    html = cpu_profile._repr_html_static()
    assert f"Ops · totals over {STEPS} steps" in html
    assert "row_limit=-1" in cpu_profile.table(row_limit=3)


def test_report_captions_say_totals(cpu_profile, tmp_path):
    out = tmp_path / "r.html"
    cpu_profile.export(out)
    page = out.read_text()
    assert f"Ops · totals over {STEPS} steps" in page


def test_interactive_op_table_switches_to_per_step(cpu_profile):
    from jupyter_torchprof.views.tables import OpTable

    table = OpTable(cpu_profile)
    assert f"totals over {STEPS} steps" in table.status()
    totals = dict(zip(table.source.data["name"], table.source.data["self_cpu_us"], strict=True))
    titles = {c.field: c.title for c in table.model.columns}
    table.update(per_step=True)
    per = dict(zip(table.source.data["name"], table.source.data["self_cpu_us"], strict=True))
    assert per.keys() == totals.keys()
    for name, value in totals.items():
        assert per[name] == pytest.approx(value / STEPS)
    shown = {c.field: c.title for c in table.model.columns}
    assert shown["self_cpu_us"] == titles["self_cpu_us"] + " /step"
    assert shown["name"] == titles["name"]
    assert f"per step (totals ÷ {STEPS})" in table.status()
    assert "/step" in table.status()
    table.update(per_step=False)
    assert {c.field: c.title for c in table.model.columns} == titles


def test_total_mode_status_does_not_say_self(cpu_profile):
    from jupyter_torchprof.views.tables import OpTable

    table = OpTable(cpu_profile, mode="total")
    assert "self CPU" not in table.status()


def test_widget_has_the_per_step_toggle(cpu_profile):
    view = cpu_profile.view()
    try:
        assert view.op_per_step.value is False
        view.op_per_step.value = True
        assert view.ops.per_step is True
        assert "per step" in view.op_status.value
    finally:
        view.close()
