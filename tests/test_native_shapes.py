"""The native builder on the trace shapes of HTA's tests (`benchmarks/traces`), and its metadata rule.

HTA's MTIA trace is mostly repeated metadata (310k of its 456k items: 22
distinct ``M`` events) and device events without a correlation id;
df_index_resolver is a V100 trace. Each is parsed with ``TORCHPROF_NATIVE=1``
and ``=0`` and everything compared (frames, `TraceMeta`, tables), as
`test_native_parser` does for the test data. The native path hands Python
only the first and the last of each distinct metadata event of a chunk:
the dicts they fill must come out the same, values and key order.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from test_native_parser import assert_same

from jupyter_torchprof.trace import native, parser
from jupyter_torchprof.trace.files import parse_trace
from jupyter_torchprof.trace.native import digest

SHAPES = Path(__file__).resolve().parents[1] / "benchmarks" / "traces"
SHAPE_TRACES = ["mtia_rank_0.json.gz", "df_index_resolver.json.gz"]


@pytest.fixture
def needs_native(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHPROF_NATIVE", "1")
    if native.library() is None:
        pytest.skip("no C compiler on this machine: only the pure-Python path runs")


def _both(parse, monkeypatch: pytest.MonkeyPatch) -> tuple[list, Counter]:
    """``parse()`` the pure-Python way and the native way: results (with warnings), native stats."""
    out = []
    for on in ("0", "1"):
        monkeypatch.setenv("TORCHPROF_NATIVE", on)
        digest.STATS.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            data = parse()
        out.append((data, [str(w.message) for w in caught]))
    return out, Counter(digest.STATS)


@pytest.mark.parametrize("name", SHAPE_TRACES)
def test_shape_trace_identical(name: str, monkeypatch: pytest.MonkeyPatch, needs_native: None) -> None:
    path = SHAPES / name
    ((pure, pure_warnings), (fast, fast_warnings)), stats = _both(lambda: parse_trace(path), monkeypatch)
    assert stats["native"] >= 1 and set(stats) == {"native"}, stats
    assert_same(pure, fast)
    assert pure_warnings == fast_warnings
    assert len(fast.events) > 100_000


def _meta(what: str, pid: int, tid: int, **args: object) -> dict:
    return {"name": what, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args}


@pytest.mark.parametrize("indent", [None, 2])
def test_repeated_metadata_keeps_last_value_and_first_order(
    indent: int | None, monkeypatch: pytest.MonkeyPatch, needs_native: None
) -> None:
    # Process 1 is named three times (a, b, then a again): the last one wins,
    # and it stays the first key, where its first event put it. Runs of
    # metadata events repeat (the scanner's shortcut for an event it has
    # just seen), with "ab" beside "a" (one's text starts like the other's).
    events = [
        _meta("process_name", 1, 0, name="a"),
        _meta("thread_name", 1, 7, name="t"),
        _meta("process_name", 2, 0, name="two"),
        _meta("process_name", 1, 0, name="b"),
        _meta("thread_name", 1, 7, name="t"),
        _meta("process_labels", 2, 0, labels="L"),
        _meta("process_name", 1, 0, name="a"),
        _meta("process_name", 3, 0, name="ab"),
        _meta("process_name", 3, 0, name="a"),
        {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 7, "ts": 1.0, "dur": 2.0},
    ] * 50 + [_meta("process_name", 2, 0, name="last")]
    data = json.dumps({"traceEvents": events}, indent=indent).encode()
    ((pure, _), (fast, _)), stats = _both(lambda: parser.parse_bytes(data), monkeypatch)
    assert stats["native"] >= 1, stats
    assert_same(pure, fast)
    assert list(fast.meta.process_names.items()) == [(1, "a"), (2, "last"), (3, "a")]
    assert fast.meta.thread_names == {(1, 7): "t"}
    assert fast.meta.process_labels == {2: "L"}


def test_first_and_last() -> None:
    codes = np.array([3, 1, 3, 3, 2, 1, 3, 0])
    assert digest._first_and_last(codes).tolist() == [0, 1, 4, 5, 6, 7]
    assert digest._first_and_last(np.array([5])).tolist() == [0]


def test_needed_flows_come_without_a_second_pass(monkeypatch: pytest.MonkeyPatch, needs_native: None) -> None:
    # The MTIA trace's device events have no correlation id, so its launches
    # need the flow events: the native builder kept them aside in its one pass.
    def second_pass(*args: object) -> None:
        raise AssertionError("flows read in a second pass over the file")

    monkeypatch.setattr(parser, "_flows_only", second_pass)
    data = parse_trace(SHAPES / "mtia_rank_0.json.gz")
    assert len(data.flows) and data.meta.flows_unread == 0


def test_long_decimal_timestamps_round_as_python(monkeypatch: pytest.MonkeyPatch, needs_native: None) -> None:
    # Nanosecond clocks written in µs with 3 decimals have 19 digits, past
    # the scanner's exact double path: these take its integer division.
    # Ties (x.125, x.375 ... at 2^50-2^51, where a double's step is 0.25)
    # round to even, as Python's float() and msgspec do.
    rng = np.random.default_rng(25)
    texts = [
        f"{int(v)}.{int(f):03d}"
        for v, f in zip(rng.integers(10**15, 9 * 10**15, 3000), rng.integers(0, 1000, 3000), strict=True)
    ]
    texts += [
        f"{k}.{frac}"
        for k in range(1712195495519680, 1712195495519700)
        for frac in ("125", "375", "625", "875")
    ]
    texts += [
        "9007199254740993.5",
        "4503599627370495.75",
        "1125899906842624.125",
        "12345678901234567.89",
        "1.0000000000000000001",
    ]
    body = ",".join(
        f'{{"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":{t},"dur":1.5}}' for t in texts
    )
    data = f'{{"traceEvents":[{body}]}}'.encode()
    ((pure, _), (fast, _)), stats = _both(lambda: parser.parse_bytes(data), monkeypatch)
    assert stats["native"] >= 1, stats
    assert_same(pure, fast)
    absolute = fast.events["ts"].to_numpy() + fast.meta.t0_us
    # (events past 2^53 µs are skipped, on both paths)
    assert sorted(absolute.tolist()) == sorted(x for x in map(float, texts) if x <= parser.MAX_TIMESTAMP_US)


def _launch(k: int, correlated: bool) -> list[dict]:
    """A runtime call launching a kernel at step ``k``, linked by a flow; the kernel's id may be missing."""
    args = {"correlation": k} if correlated else {}
    return [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 10.0 * k, "dur": 2.0, "args": {"correlation": k}},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": k, "pid": 1, "tid": 1, "ts": 10.0 * k},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.0 * k + 3, "dur": 4.0,
         "args": {"device": 0, "stream": 7, **args}},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": k, "pid": 0, "tid": 7, "ts": 10.0 * k + 3, "bp": "e"},
    ]  # fmt: skip


@pytest.mark.parametrize("late_uncorrelated", [False, True])
def test_flows_aside_dropped_early_still_read_when_needed(
    late_uncorrelated: bool, monkeypatch: pytest.MonkeyPatch, needs_native: None
) -> None:
    # Small chunks: the first ones' kernels all have ids, so the native
    # builder stops keeping flows aside; a kernel without one further on
    # then needs the second pass, which must give what pure Python gives.
    monkeypatch.setattr(parser, "CHUNK_BYTES", 2000)
    events = [e for k in range(1, 200) for e in _launch(k, not (late_uncorrelated and k > 150))]
    data = json.dumps({"traceEvents": events}).encode()
    ((pure, _), (fast, _)), stats = _both(lambda: parser.parse_bytes(data, defer_flows=True), monkeypatch)
    assert stats["native"] > 10 and set(stats) == {"native"}, stats
    assert_same(pure, fast)
    assert len(fast.flows) == (2 * 199 if late_uncorrelated else 0)
