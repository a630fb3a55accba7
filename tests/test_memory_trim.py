"""A parse hands freed memory back (`reader.give_back_memory`) by what it decoded the Python way, not by its size."""

from __future__ import annotations

import pytest
from tracefiles import real_trace

from jupyter_torchprof.trace import native, parser, reader
from jupyter_torchprof.trace.reader import read_trace_bytes


def _trimmed(monkeypatch, path, stream: bool, native_on: bool) -> list:
    monkeypatch.setenv("TORCHPROF_NATIVE", "1" if native_on else "0")
    monkeypatch.setattr(reader, "TRIM_FROM_BYTES", 1 << 20)
    asked = []
    real = parser.give_back_memory
    monkeypatch.setattr(parser, "give_back_memory", lambda n=None: (asked.append(n), real(n))[1])
    if stream:
        monkeypatch.setattr(parser, "STREAM_JSON_BYTES", 0)
        parser.parse_streaming(path)
    else:
        parser.parse_bytes(read_trace_bytes(path), str(path))
    return asked


@pytest.mark.parametrize("stream", [False, True])
def test_a_pure_python_parse_counts_every_byte(monkeypatch, stream: bool) -> None:
    path = real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz")
    size = len(read_trace_bytes(path))
    (asked,) = _trimmed(monkeypatch, path, stream, native_on=False)
    # Every event chunk went the Python way (the head and tail around them are a few kB).
    assert 0.9 * size <= asked <= size


@pytest.mark.parametrize("stream", [False, True])
def test_a_native_parse_has_nothing_to_trim(monkeypatch, stream: bool) -> None:
    if native.library() is None:
        pytest.skip("no C compiler: every parse is pure Python")
    (asked,) = _trimmed(
        monkeypatch, real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz"), stream, native_on=True
    )
    assert asked == 0
