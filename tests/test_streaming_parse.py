"""A trace too big to hold is parsed as it inflates (`parser.parse_streaming`), with the same result.

Streaming starts above `parser.STREAM_JSON_BYTES`; here the sizes that shape
it (the pieces read, the chunks cut, the tail kept back) are made tiny, so
that every real trace is cut into many pieces and chunks, and the result is
compared with the whole-file parse field by field.
"""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import pandas as pd
import pytest
from tracefiles import REAL_TRACES, real_trace

from jupyter_torchprof.runs.load import load
from jupyter_torchprof.trace import parser, reader
from jupyter_torchprof.trace.progress import reporting

TRACES = REAL_TRACES
META_FIELDS = (
    "device_properties", "distributed", "rank", "world_size", "options", "top_level", "t0_us", "span_us",
    "time_precision_us", "skipped", "skipped_reasons", "warnings", "flows_unread", "process_names",
    "thread_names", "process_labels",
)  # fmt: skip


@pytest.fixture
def tiny_stream(monkeypatch):
    """Pieces of 4 KiB, chunks of 16 KiB, a 32 KiB tail and a 48 KiB window: many of each on every real trace."""
    _tiny(monkeypatch)


def _whole(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return parser.parse_bytes(reader.read_trace_bytes(path), path)


def _streamed(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return parser.parse_streaming(path)


def assert_same(a, b) -> None:
    for frame in ("events", "memory", "flows"):
        pd.testing.assert_frame_equal(getattr(a, frame), getattr(b, frame), check_categorical=True)
    for name in META_FIELDS:
        assert getattr(a.meta, name) == getattr(b.meta, name), name


def _tiny(monkeypatch) -> None:
    monkeypatch.setattr(reader, "_CHUNK", 4096)
    monkeypatch.setattr(parser, "CHUNK_BYTES", 16 << 10)
    monkeypatch.setattr(parser, "STREAM_TAIL_BYTES", 32 << 10)
    # Smaller than what it must hold: it grows once, then moves its bytes to the front.
    monkeypatch.setattr(parser, "WINDOW_BYTES", 48 << 10)


@pytest.mark.parametrize("name", TRACES)
def test_streamed_parse_equals_the_whole_file_parse(name: str, monkeypatch) -> None:
    path = real_trace(name)
    whole = _whole(path)  # with the sizes a user gets
    _tiny(monkeypatch)
    assert_same(_streamed(path), whole)


def test_the_trace_really_was_cut_in_many_chunks(tiny_stream, monkeypatch) -> None:
    path = real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz")
    sizes: list[int] = []
    real_add = parser._Builder.add

    def add(self, chunk, items, bare=False):
        sizes.append(len(chunk))
        real_add(self, chunk, items, bare)

    monkeypatch.setattr(parser._Builder, "add", add)
    _streamed(path)
    json_size = len(gzip.decompress(path.read_bytes()))
    assert len(sizes) > 100
    assert max(sizes) < json_size / 50


def test_tables_agree_after_a_streamed_load(tiny_stream, monkeypatch) -> None:
    path = real_trace("a100_nccl_rank0.pt.trace.json.gz")
    whole = load(path)
    monkeypatch.setattr(parser, "STREAM_JSON_BYTES", 0)  # every file streams
    seen: list[str] = []
    with reporting(lambda phase, done, total: seen.append(phase)):
        streamed = load(path)
    assert "parsing" in seen and "inflating" not in seen  # read and parsed in one pass
    for table in ("ops", "kernels", "steps"):
        pd.testing.assert_frame_equal(getattr(streamed, table), getattr(whole, table))
    assert streamed.summary == whole.summary


def test_deferred_flows_read_back_the_same_way(tiny_stream, monkeypatch) -> None:
    path = real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz")
    t0 = _whole(path).meta.t0_us
    whole = parser.read_flows(path, t0)
    monkeypatch.setattr(parser, "STREAM_JSON_BYTES", 0)
    pd.testing.assert_frame_equal(parser.read_flows(path, t0), whole)
    assert len(whole) > 0


def test_a_document_that_cannot_be_cut_is_parsed_whole(tmp_path: Path, tiny_stream) -> None:
    # The events array is not at the top (a bare list), and then not within the first MiB.
    src = real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    import orjson

    doc = orjson.loads(gzip.decompress(src.read_bytes()))
    bare = tmp_path / "bare.json"
    bare.write_bytes(orjson.dumps(doc["traceEvents"]))
    late = tmp_path / "late.json"
    late.write_bytes(orjson.dumps({"padding": "x" * (2 << 20), **doc}))
    for path in (bare, late):
        assert_same(_streamed(path), _whole(path))


def test_hostile_bytes_stream_to_the_same_error(tmp_path: Path, tiny_stream) -> None:
    from jupyter_torchprof.errors import TraceError

    src = gzip.decompress(real_trace("mi250_rocm_train.pt.trace.json.gz").read_bytes())
    cases = {
        "truncated.json.gz": gzip.compress(src)[:-200],
        "empty.json": b"   \n",
        "cut.json": src[: len(src) // 2],
    }
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(TraceError) as streamed:
            _streamed(path)
        with pytest.raises(TraceError) as whole:
            _whole(path)
        assert str(streamed.value) == str(whole.value), name
