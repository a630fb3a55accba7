"""The notes on rows (`analysis.notes`): the registry, the columns, the docs page kept current."""

from __future__ import annotations

from pathlib import Path

import pytest
from tracefiles import raw_events, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis import notes

DOCS = Path(__file__).resolve().parents[1] / "docs" / "annotations.md"


def test_docs_page_is_written_from_the_rules():
    assert DOCS.read_text() == notes.markdown(), (
        "docs/annotations.md is stale: python -m jupyter_torchprof.analysis.notes > docs/annotations.md"
    )


def test_every_note_has_an_explanation_and_a_known_table():
    found = notes.annotations()
    assert found
    for note in found.values():
        assert note.table in (notes.OPS, notes.KERNELS)
        assert len(note.text) <= 60 and len(note.why) >= 80, note.id


@pytest.mark.parametrize("trace", ["a100_nccl_rank0.pt.trace.json.gz", "triton_kernel.pt.trace.json.gz"])
def test_note_columns_match_the_long_table(trace):
    """Each row's ``note``/``note_ids`` are exactly its hits in `Profile.annotations`; events are real rows."""
    profile = load(real_trace(trace))
    hits = profile.annotations
    assert len(hits), "these traces hold at least one noted row"
    names = profile.events["name"].astype(str).to_numpy()
    for table, frame in ((notes.OPS, profile.ops), (notes.KERNELS, profile.kernels)):
        mine = hits[hits["table"] == table]
        for name, text, ids in zip(frame["name"], frame["note"], frame["note_ids"], strict=True):
            rows = mine[mine["key"] == name]
            assert (ids.split(",") if ids else []) == rows["id"].tolist()
            assert text == notes.SEPARATOR.join(rows["note"])
        for key, event in zip(mine["key"], mine["event"], strict=True):
            if event >= 0 and table == notes.OPS:
                assert names[event] == key


def test_metadata_only_agrees_with_the_file():
    """Every op noted metadata-only launched nothing, checked straight against the JSON's correlation ids."""
    path = real_trace("a100_nccl_rank0.pt.trace.json.gz")
    profile = load(path)
    noted = set(profile.ops.loc[profile.ops["note_ids"].str.contains("metadata-only"), "name"])
    assert {"aten::t", "aten::view"} <= noted
    events = [e for e in raw_events(path) if e.get("ph") == "X"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    launches = [e for e in events if e.get("cat") == "cuda_runtime" and "Launch" in e["name"]]
    for op in ops:
        if op["name"] not in noted:
            continue
        lo, hi, tid = op["ts"], op["ts"] + op["dur"], op["tid"]
        inside = [x for x in launches if x["tid"] == tid and lo <= x["ts"] < hi]
        assert not inside, f"{op['name']} at {lo} launched {inside[0]['name']}"
