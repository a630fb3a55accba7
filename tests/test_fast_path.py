"""The chunked fast path of the parser holds on real traces, log arrays included.

Kineto writes the profiler's log lines as ``"INFO"`` / ``"ERROR"`` arrays of
strings after ``traceEvents``; they hold ``]`` themselves, so the file's last
``]`` is not the events array's. The reference below is the parser's exact
path (the whole document decoded, the events array split on its true item
boundaries), and the event count comes from the json module.
"""

from __future__ import annotations

import gzip
import json
import warnings

import pandas as pd
import pytest
from tracefiles import REAL_TRACES, raw_events, real_trace

from jupyter_torchprof.trace import parser
from jupyter_torchprof.trace.parser import TraceMeta, parse_bytes
from jupyter_torchprof.trace.reader import read_trace_bytes


def _slow_path(data: bytes, path: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Events, memory and flows read the exact way: whole document, then item by item."""
    meta = TraceMeta(path=path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        doc, data = parser._decode_document(data, path, meta, whole=True)
        parser._read_document(doc, meta)
        return parser._parse_events(data, doc.traceEvents, meta, True, False)


def _complete_events(events: list[dict]) -> int:
    return sum(1 for e in events if e.get("ph") == "X")


@pytest.mark.parametrize("name", REAL_TRACES)
def test_real_trace_takes_the_fast_path_and_matches_the_slow_one(name):
    path = real_trace(name)
    data = read_trace_bytes(path)
    fast = parse_bytes(data, str(path), defer_flows=False)
    assert fast.meta.fallback_reason is None
    events, memory, flows = _slow_path(data, str(path))
    pd.testing.assert_frame_equal(fast.events, events)
    pd.testing.assert_frame_equal(fast.memory, memory)
    pd.testing.assert_frame_equal(fast.flows, flows)
    assert len(fast.events) + fast.meta.skipped_reasons.get("no name", 0) <= _complete_events(
        raw_events(path)
    )


@pytest.mark.parametrize("name", REAL_TRACES)
def test_real_trace_keeps_the_top_level_keys_after_the_events(name):
    path = real_trace(name)
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    meta = parse_bytes(read_trace_bytes(path), str(path)).meta
    for key in ("traceName", "displayTimeUnit", "baseTimeNanoseconds", "schemaVersion"):
        if key in doc:
            assert meta.top_level[key] == doc[key]


def _log_tail_document(n: int) -> dict:
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"aten::op{i % 7}",
            "pid": 1,
            "tid": 1,
            "ts": 10.0 * i,
            "dur": 5.0,
        }
        for i in range(n)
    ]
    return {
        "schemaVersion": 1,
        "traceEvents": events,
        # log lines holding every bracket pattern the search looks at
        "INFO": ["INFO:x CuptiActivityProfiler.cpp:976] Enabling", "odd }] and },{ and [] in a line"],
        "ERROR": [],
        "traceName": "t.json",
        "displayTimeUnit": "ms",
    }


@pytest.mark.parametrize("chunk_bytes", [1 << 12, parser.CHUNK_BYTES])
def test_trailing_log_arrays_keep_the_fast_path(chunk_bytes, monkeypatch):
    monkeypatch.setattr(parser, "CHUNK_BYTES", chunk_bytes)  # many chunks, or one
    doc = _log_tail_document(2000)
    for data in (json.dumps(doc).encode(), json.dumps(doc, indent=2).encode()):
        got = parse_bytes(data)
        assert got.meta.fallback_reason is None
        assert len(got.events) == len(doc["traceEvents"])
        assert got.events["ts"].tolist() == [e["ts"] for e in doc["traceEvents"]]
        assert got.meta.top_level["traceName"] == "t.json"


@pytest.mark.parametrize("decoys", [1, 40])
def test_array_of_objects_after_the_events_still_reads_every_event(decoys, monkeypatch):
    # An array of objects after the events ends like the events array. With
    # one object the item before its "]" is not an array's tail, so the true
    # end is found; with many the guess can be wrong, some chunk then fails
    # to decode and the exact path reads the file: the events are right either way.
    monkeypatch.setattr(parser, "CHUNK_BYTES", 1 << 12)
    doc = _log_tail_document(2000)
    doc["extra"] = [{"ph": "X", "name": "decoy", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0}] * decoys
    got = parse_bytes(json.dumps(doc).encode())
    if decoys == 1:
        assert got.meta.fallback_reason is None
    assert len(got.events) == len(doc["traceEvents"])
    assert "decoy" not in set(got.events["name"].astype(str))
