"""FLOPs read with SI units everywhere (``537 MFLOP``, ``–`` where nothing was counted), and FLOP/s.

The op table's ``flops_per_s`` is checked against torch's own numbers:
``key_averages()`` FLOPs over its CPU total time, on three kinds of
workload, inside ``on_trace_ready`` as in tests/test_key_averages_suite.py.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tracefiles import real_trace
from workloads import WORKLOADS

from jupyter_torchprof import columns
from jupyter_torchprof.format import fmt_flops
from jupyter_torchprof.views import tables
from jupyter_torchprof.views.html import ops_html
from jupyter_torchprof.views.text import op_table_text

SI = re.compile(r"^\d+(\.\d+)? [kMGTP]?FLOP(/s)?$")


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (536_870_912, "FLOP", "537 MFLOP"),
        (1.61e9, "FLOP", "1.61 GFLOP"),
        (0, "FLOP", "–"),
        (float("nan"), "FLOP", "–"),
        (None, "FLOP", "–"),
        (float("inf"), "FLOP/s", "–"),
        (999.7e6, "FLOP", "1 GFLOP"),
        (123_456, "FLOP", "123 kFLOP"),
        (12, "FLOP", "12 FLOP"),
        (2.5, "FLOP", "2.5 FLOP"),
        (3.04e13, "FLOP/s", "30.4 TFLOP/s"),
        (2e18, "FLOP", "2000 PFLOP"),
    ],
)
def test_fmt_flops_uses_si_prefixes(value, unit, text):
    assert fmt_flops(value, unit) == text


def test_catalog_formats_counts_and_rates():
    flops, rate = columns.pick(columns.OPS, ["flops", "flops_per_s"])
    assert (rate.title, rate.unit, rate.to_json()["unit"]) == ("FLOP/s", "FLOP/s", "FLOP/s")
    assert columns.format_cell(flops, 536_870_912.0) == "537 MFLOP"
    assert columns.format_cell(rate, 3.04e13) == "30.4 TFLOP/s"
    assert columns.format_cell(flops, 0.0) == columns.format_cell(rate, float("nan")) == "–"
    assert "device total" in rate.tip and "CPU total" in rate.tip


def _js_flops(values: list[float], unit: str) -> list[str]:
    script = (
        tables.FMT_FLOPS_JS
        + f"\nconsole.log(JSON.stringify({json.dumps(values)}.map(v => fmt_flops(v, {json.dumps(unit)}))));"
    )
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True, timeout=60)
    return json.loads(out.stdout)


@pytest.mark.skipif(
    shutil.which("node") is None, reason="node is not installed (scripts/setup.sh installs it)"
)
def test_bokeh_formatter_prints_what_the_catalog_prints():
    rng = random.Random(7)
    values = [10 ** rng.uniform(-1, 19) for _ in range(400)] + [0.0, 999.7e6, 99.96e3, 1e15, 536_870_912.0]
    for unit in ("FLOP", "FLOP/s"):
        assert _js_flops(values, unit) == [fmt_flops(v, unit) for v in values]
    # The bokeh tables' FLOPs columns use that formatter, with the column's unit.
    for key, unit in (("flops", '"FLOP"'), ("flops_per_s", '"FLOP/s"')):
        fmt = tables.column_formatter(columns.pick(columns.OPS, [key])[0])
        assert f"fmt_flops(value, {unit})" in fmt.template


def test_flop_rate_uses_device_total_time_when_the_device_was_traced():
    # diff_pair/control holds shapes of a GPU run: FLOPs come from them.
    from jupyter_torchprof import load

    profile = load(str(real_trace("diff_pair/control.pt.trace.json.gz")))
    table = profile.op_table(flops=True)
    counted = table[table["flops"] > 0]
    assert len(counted) >= 4
    expected = counted["flops"] / (counted["device_total_us"] * 1e-6)
    assert np.allclose(counted["flops_per_s"], expected, rtol=1e-12)
    # Not the CPU time: on this trace the two differ by more than 20 % on some row.
    by_cpu = counted["flops"] / (counted["cpu_total_us"] * 1e-6)
    assert (abs(by_cpu / expected - 1) > 0.2).any()
    assert table.loc[table["flops"] == 0, "flops_per_s"].isna().all()
    # Per step it is the same rate (FLOPs and time both divide by the steps).
    per = profile.op_table(flops=True, per_step=True)
    assert np.allclose(per["flops_per_s"].fillna(-1), table["flops_per_s"].fillna(-1))


def test_flop_rate_is_shown_by_text_html_and_widget_tables():
    from jupyter_torchprof import load

    profile = load(str(real_trace("diff_pair/control.pt.trace.json.gz")))
    table = profile.op_table(flops=True)
    text = op_table_text(table, device=True, row_limit=10)
    assert "FLOP/s" in text and re.search(r"\d+(\.\d+)? TFLOP/s", text)
    assert re.search(r"\d+(\.\d+)? [GT]FLOP\b", text)
    assert "FLOP/s" in ops_html(table, device=True)
    op_view = tables.OpTable(profile)
    if "flops" in profile.ops.columns:  # the default table holds FLOPs only when the capture asked
        assert "flops_per_s" in [c.field for c in op_view.model.columns]
    frame = pd.DataFrame(table)
    model, _ = tables.make_table(frame, columns.shown(columns.OPS, frame))
    fields = {c.field: c for c in model.columns}
    assert fields["flops_per_s"].title == "FLOP/s"
    assert 'fmt_flops(value, "FLOP/s")' in fields["flops_per_s"].formatter.template


# --------------------------------------------------------------------------- #
# against torch's key_averages()

ACTIVE_STEPS = 3


def _capture(name: str, folder: Path):
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from jupyter_torchprof import load

    torch.manual_seed(0)
    step = WORKLOADS[name]()
    step()
    got: dict = {}

    def ready(prof) -> None:
        got["theirs"] = {
            ev.key: (ev.flops, ev.cpu_time_total)
            for ev in prof.key_averages()
            if ev.flops and not ev.is_user_annotation
        }
        path = folder / f"{name}.json"
        prof.export_chrome_trace(str(path))
        got["path"] = path

    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        with_flops=True,
        schedule=schedule(wait=0, warmup=1, active=ACTIVE_STEPS),
        on_trace_ready=ready,
    ) as prof:
        for _ in range(1 + ACTIVE_STEPS):
            step()
            prof.step()
    return got["theirs"], load(str(got["path"]))


@pytest.mark.parametrize("name", ["mlp_sum", "cnn_batchnorm", "transformer_sdpa"])
def test_flop_rate_matches_key_averages(tmp_path, name):
    theirs, ours = _capture(name, tmp_path)
    assert theirs, "the workload has ops with FLOPs"
    table = ours.op_table(flops=True)
    table = table[table["kind"] != "user_annotation"].set_index("name")
    for key, (flops, cpu_total_us) in theirs.items():
        rate = flops / (cpu_total_us * 1e-6)
        # Our CPU total agrees with torch's within 1 % or 2 µs (test_key_averages_suite).
        slack = max(0.01, 2.0 / cpu_total_us) * 1.05
        assert table.loc[key, "flops_per_s"] == pytest.approx(rate, rel=slack), key
        assert SI.match(
            columns.format_cell(columns.pick(columns.OPS, ["flops_per_s"])[0], table.loc[key, "flops_per_s"])
        )
    # Ops torch counted no FLOPs for have no rate ("–"), not 0 FLOP/s.
    assert table.loc[table["flops"] == 0, "flops_per_s"].isna().all()
