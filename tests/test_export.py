"""Export: the trace for Perfetto, tables, text; bad paths are one clear line."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pandas as pd
import pytest
from tracefiles import raw_events, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.export import ExportError, export

SETUP = """
import torch
m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
x = torch.randn(16, 32)
"""


@pytest.fixture
def gp100():
    return load(str(real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")))


def test_trace_export_is_the_trace_as_captured(gp100, tmp_path):
    src = real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    gp100.export(tmp_path / "t.json")
    gp100.export(tmp_path / "t.json.gz")
    with gzip.open(src, "rb") as fh:
        original = fh.read()
    assert (tmp_path / "t.json").read_bytes() == original
    assert (tmp_path / "t.json.gz").read_bytes() == src.read_bytes()
    again = load(str(tmp_path / "t.json"))
    pd.testing.assert_frame_equal(again.ops, gp100.ops)
    pd.testing.assert_frame_equal(again.kernels, gp100.kernels)


def test_exported_trace_reads_in_holistic_trace_analysis(gp100, tmp_path):
    """An independent reader (HTA) sees the same kernels in the exported trace."""
    hta = pytest.importorskip("hta.trace_analysis")
    folder = tmp_path / "hta"
    folder.mkdir()
    gp100.export(folder / "rank-0.json.gz")
    analyzer = hta.TraceAnalysis(trace_dir=str(folder))
    trace_df = analyzer.t.get_trace(0)
    symbols = analyzer.t.symbol_table.get_sym_table()
    names = trace_df["name"].map(lambda i: symbols[i])
    cats = trace_df["cat"].map(lambda i: symbols[i])
    kern = trace_df[cats == "kernel"]
    expected = {
        e["name"]
        for e in raw_events(real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz"))
        if e.get("cat") == "kernel"
    }
    assert set(names[kern.index]) == expected
    ours = gp100.kernels
    assert len(kern) == int(ours.loc[ours["kind"] == "kernel", "calls"].sum())


def test_tables_and_text(gp100, tmp_path):
    gp100.export(tmp_path / "ops.csv")
    gp100.export(tmp_path / "k.csv", table="kernels")
    gp100.export(tmp_path / "ops.parquet")
    gp100.export(tmp_path / "t.txt")
    ops = pd.read_csv(tmp_path / "ops.csv")
    assert list(ops["name"]) == list(gp100.ops["name"])
    assert ops["self_device_us"].sum() == pytest.approx(gp100.ops["self_device_us"].sum())
    assert list(pd.read_csv(tmp_path / "k.csv")["name"]) == list(gp100.kernels["name"])
    assert len(pd.read_parquet(tmp_path / "ops.parquet")) == len(gp100.ops)
    text = (tmp_path / "t.txt").read_text()
    assert "Self CPU" in text and gp100.ops["name"].iloc[-1][:40] in text


def test_bad_paths_are_one_line_and_write_nothing(gp100, tmp_path):
    with pytest.raises(ExportError, match="unknown export format '.xyz'"):
        export(gp100, tmp_path / "a.xyz")
    with pytest.raises(ExportError, match="does not exist"):
        export(gp100, tmp_path / "missing" / "a.json")
    (tmp_path / "exists.csv").write_text("keep me")
    with pytest.raises(ExportError, match="already exists"):
        export(gp100, tmp_path / "exists.csv")
    assert (tmp_path / "exists.csv").read_text() == "keep me"
    export(gp100, tmp_path / "exists.csv", force=True)
    assert (tmp_path / "exists.csv").read_text() != "keep me"
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    # root ignores file modes; /sys refuses new files even to root
    target = locked / "a.json" if not os.access(locked, os.W_OK) else Path("/sys/torchprof-export-test.json")
    try:
        with pytest.raises(ExportError, match="(?i)permission denied"):
            export(gp100, target)
    finally:
        locked.chmod(0o700)
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_magic_export_option(shell, tmp_path, capsys):
    shell.run_cell(SETUP)
    capsys.readouterr()
    res = shell.run_cell(f"%%torchprof --steps 1 --export {tmp_path / 'run.json.gz'}\ny = m(x)")
    assert res.error_in_exec is None
    out = capsys.readouterr().out
    assert "run.json.gz" in out and "JSON" in out
    p = load(str(tmp_path / "run.json.gz"))
    assert p.summary["steps"] == 1
    res = shell.run_cell(f"%%torchprof --steps 1 --export {tmp_path / 'run.json.gz'}\ny = m(x)")
    text = "".join(capsys.readouterr())
    assert "already exists" in text and "Traceback" not in text
    # the profile itself was still produced and kept
    assert shell.user_ns["_torchprof"].summary["steps"] == 1
    shell.run_cell(f"%%torchprof --steps 1 --export {tmp_path / 'run.json.gz'} --force\ny = m(x)")
    data = json.loads(gzip.open(tmp_path / "run.json.gz").read())
    assert "traceEvents" in data
