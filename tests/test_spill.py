"""A huge trace keeps its detail columns on disk (`trace.spill`), with the same tables and views.

Every real trace is loaded as a huge one would be (streamed, see
`parser.STREAM_JSON_BYTES`), and compared with the whole-file load: the
tables, the findings, the timeline's glyphs and an event's details. The
spilled columns must still read from the mapping after all that (nothing
copied them back into memory), and nothing may stay on disk.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from tracefiles import REAL_TRACES, assert_same_findings, real_trace

from jupyter_torchprof.results.profile import Profile
from jupyter_torchprof.trace import parser, spill
from jupyter_torchprof.trace.spill import DETAIL_COLUMNS, is_spilled
from jupyter_torchprof.views.timeline import Timeline

TABLES = (
    "ops",
    "kernels",
    "steps",
    "streams",
    "memcpy",
    "launches",
    "launch_summary",
    "gpu_annotations",
    "modules",
)


@pytest.fixture
def spill_dir(tmp_path, monkeypatch):
    folder = tmp_path / "spill"
    monkeypatch.setenv("TORCHPROF_SPILL_DIR", str(folder))
    monkeypatch.delenv("TORCHPROF_SPILL", raising=False)
    return folder


def _load(path, monkeypatch, huge: bool, spill_from: int = 0) -> Profile:
    with monkeypatch.context() as m:
        m.setattr(parser, "STREAM_JSON_BYTES", 0 if huge else 1 << 60)
        # These traces are small: they spill only when any size does.
        m.setattr(spill, "SPILL_FROM_BYTES", spill_from)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return Profile.from_file(path)


def _spilled(p: Profile) -> list[str]:
    return [c for c in DETAIL_COLUMNS if c in p.events.columns and is_spilled(p.events[c])]


@pytest.mark.parametrize("name", REAL_TRACES)
def test_a_spilled_trace_gives_the_same_tables_and_views(name, spill_dir, monkeypatch):
    path = real_trace(name)
    whole = _load(path, monkeypatch, huge=False)
    huge = _load(path, monkeypatch, huge=True)
    present = [c for c in DETAIL_COLUMNS if c in huge.events.columns]
    assert present and _spilled(huge) == present
    assert not _spilled(whole)

    pd.testing.assert_frame_equal(huge.events, whole.events)
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(huge, table), getattr(whole, table), obj=table)
    pd.testing.assert_frame_equal(huge.kernel_table(per_step=True), whole.kernel_table(per_step=True))
    assert huge.summary == whole.summary
    assert_same_findings(huge.findings, whole.findings)

    a, b = Timeline(huge, max_glyphs=500), Timeline(whole, max_glyphs=500)
    for sa, sb in ((a.host_source, b.host_source), (a.dev_source, b.dev_source)):
        assert sa.data.keys() == sb.data.keys()
        for col in sa.data:
            np.testing.assert_array_equal(np.asarray(sa.data[col]), np.asarray(sb.data[col]), err_msg=col)
    kernels = np.flatnonzero(huge.events["kind"].to_numpy() == "kernel")
    for row in kernels[:20]:  # a click's details read the launch configuration back
        assert a.describe(int(row)) == b.describe(int(row))

    # All of that read the detail columns from the mapping, and left no file behind.
    assert _spilled(huge) == present
    assert not any(spill_dir.rglob("*"))


def test_detail_columns_spill_from_a_size_on(spill_dir, monkeypatch):
    path = real_trace("a100_nccl_rank0.pt.trace.json.gz")
    whole = _load(path, monkeypatch, huge=False)
    present = [c for c in DETAIL_COLUMNS if c in whole.events.columns]
    held = sum(
        whole.events[c].to_numpy().nbytes
        if whole.events[c].dtype != "category"
        else whole.events[c].cat.codes.to_numpy().nbytes
        for c in present
    )
    assert held > 0
    below = _load(path, monkeypatch, huge=True, spill_from=held + 1)
    assert not _spilled(below)
    at = _load(path, monkeypatch, huge=True, spill_from=held)
    assert _spilled(at) == present
    pd.testing.assert_frame_equal(below.events, at.events)
    # The default keeps a trace of this size (a few MB of detail columns) in memory.
    assert spill.SPILL_FROM_BYTES > held
    assert not any(spill_dir.rglob("*"))


def test_spilling_can_be_turned_off(spill_dir, monkeypatch):
    monkeypatch.setenv("TORCHPROF_SPILL", "0")
    p = _load(real_trace("a100_nccl_rank0.pt.trace.json.gz"), monkeypatch, huge=True)
    assert not _spilled(p)


def test_a_spill_folder_that_cannot_be_made_keeps_the_columns_in_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    monkeypatch.setenv("TORCHPROF_SPILL_DIR", str(blocker / "spill"))
    path = real_trace("a100_nccl_rank0.pt.trace.json.gz")
    p = _load(path, monkeypatch, huge=True)
    assert not _spilled(p)
    pd.testing.assert_frame_equal(p.kernels, _load(path, monkeypatch, huge=False).kernels)


def test_a_full_disk_keeps_the_columns_in_memory(spill_dir, monkeypatch):
    from jupyter_torchprof.trace import spill

    def full(path, array, allow_pickle=False):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spill.np, "save", full)
    path = real_trace("a100_nccl_rank0.pt.trace.json.gz")
    p = _load(path, monkeypatch, huge=True)
    monkeypatch.undo()
    assert not _spilled(p)
    assert not any(spill_dir.rglob("*"))  # the half-made folder is removed
    pd.testing.assert_frame_equal(p.ops, _load(path, monkeypatch, huge=False).ops)
