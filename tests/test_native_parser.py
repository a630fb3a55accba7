"""The native (C) column builder gives exactly what the pure-Python parser gives.

Every trace is parsed twice, with ``TORCHPROF_NATIVE=1`` and ``=0``, and
everything the parser returns is compared: the three frames (values, dtypes,
categories in order), the whole `TraceMeta` (skipped reasons, warnings,
metadata) and the op, kernel and step tables built from them. The native
runs also assert that the C scanner really digested chunks (or refused the
ones it had to), so a silently disabled native path fails here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tracefiles import REAL_TRACES, raw_events, real_trace

from jupyter_torchprof.results.profile import Profile
from jupyter_torchprof.trace import native, parser
from jupyter_torchprof.trace.files import parse_trace
from jupyter_torchprof.trace.native import digest
from jupyter_torchprof.trace.reader import read_trace_bytes

ROOT = Path(__file__).resolve().parents[1]


def _synthetic_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_synthetic_trace", ROOT / "benchmarks" / "make_synthetic_trace.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _require_native(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHPROF_NATIVE", "1")
    if native.library() is None:
        pytest.skip("no C compiler on this machine: only the pure-Python path runs")


def _parse(data: bytes, path: str | None, on: bool, monkeypatch: pytest.MonkeyPatch, **kw: Any):
    monkeypatch.setenv("TORCHPROF_NATIVE", "1" if on else "0")
    digest.STATS.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result: Any = parser.parse_bytes(data, path, **kw)
        except Exception as exc:  # the same error must come from both paths
            result = (type(exc), str(exc))
    return result, [str(w.message) for w in caught], Counter(digest.STATS)


def assert_same_frames(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=True, check_categorical=True)
    for col in a.columns:
        if isinstance(a[col].dtype, pd.CategoricalDtype):
            assert list(a[col].cat.categories) == list(b[col].cat.categories), col


def assert_same(a: Any, b: Any, tables: bool = True) -> None:
    if isinstance(a, tuple) or isinstance(b, tuple):
        assert a == b
        return
    for frame in ("events", "memory", "flows"):
        assert_same_frames(getattr(a, frame), getattr(b, frame))
    assert a.meta == b.meta
    if tables and len(a.events):
        pa, pb = Profile(a), Profile(b)
        for table in ("ops", "kernels", "steps"):
            assert_same_frames(getattr(pa, table), getattr(pb, table))


def _compare(data: bytes, path: str | None, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> Counter:
    pure, pure_warnings, pure_stats = _parse(data, path, False, monkeypatch, **kw)
    fast, fast_warnings, stats = _parse(data, path, True, monkeypatch, **kw)
    assert not pure_stats, "TORCHPROF_NATIVE=0 must not touch the native builder"
    assert_same(pure, fast)
    assert pure_warnings == fast_warnings
    return stats


def _compare_file(path: Path, monkeypatch: pytest.MonkeyPatch) -> Counter:
    """The same through `files.parse_trace`, the way `load` reads a file (streamed when big)."""
    results = []
    for on in (False, True):
        monkeypatch.setenv("TORCHPROF_NATIVE", "1" if on else "0")
        digest.STATS.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            data = parse_trace(path)
        results.append((data, [str(w.message) for w in caught], Counter(digest.STATS)))
    (pure, pure_warnings, pure_stats), (fast, fast_warnings, stats) = results
    assert not pure_stats
    assert_same(pure, fast)
    assert pure_warnings == fast_warnings
    return stats


@pytest.mark.parametrize("name", REAL_TRACES)
def test_real_trace_file_identical(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = real_trace(name)
    _require_native(monkeypatch)
    stats = _compare_file(path, monkeypatch)
    assert stats["native"] >= 1 and set(stats) == {"native"}, stats


@pytest.mark.parametrize("defer_flows", [None, False])
@pytest.mark.parametrize("name", REAL_TRACES)
def test_real_trace_identical(name: str, defer_flows: bool | None, monkeypatch: pytest.MonkeyPatch) -> None:
    path = real_trace(name)
    _require_native(monkeypatch)
    stats = _compare(read_trace_bytes(path), str(path), monkeypatch, defer_flows=defer_flows)
    # Real Kineto traces are read natively from end to end.
    assert stats["native"] >= 1 and set(stats) == {"native"}, stats


@pytest.mark.parametrize("chunk_bytes", [1 << 14, parser.CHUNK_BYTES])
@pytest.mark.parametrize("events, steps", [(3_000, 1), (30_000, 4)])
def test_synthetic_identical(
    events: int, steps: int, chunk_bytes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _require_native(monkeypatch)
    path = tmp_path / "synthetic.pt.trace.json.gz"
    _synthetic_module().write_trace(path, events, steps=steps)
    monkeypatch.setattr(parser, "CHUNK_BYTES", chunk_bytes)  # many chunks: interning order across them
    for defer in (None, False):
        stats = _compare(read_trace_bytes(path), str(path), monkeypatch, defer_flows=defer)
        assert stats["native"] >= 1 and set(stats) == {"native"}, stats
    stats = _compare_file(path, monkeypatch)
    assert stats["native"] >= 1 and set(stats) == {"native"}, stats


def _event_text(i: int) -> str:
    kinds = ("cpu_op", "kernel", "cuda_runtime", "python_function", "gpu_memcpy", "user_annotation")
    cat = kinds[i % len(kinds)]
    args: dict[str, Any] = {"External id": i, "correlation": i // 2}
    if cat == "kernel":
        args.update(
            {
                "device": 0,
                "stream": 7,
                "grid": [i % 3, 1, 1],
                "block": [128, 1, 1],
                "registers per thread": 32,
            }
        )
    if cat == "cpu_op":
        args.update({"Input Dims": [[i % 4, 8]], "Input type": ["float"], "Call stack": f"f{i % 5}.py(1): g"})
    if cat == "python_function":
        args.update({"Python id": i, "Python parent id": i - 1})
    event = {
        "ph": "X",
        "cat": cat,
        "name": f"op{i % 37}",
        "pid": 1,
        "tid": 2,
        "ts": 1.7e12 + i * 1.5,
        "dur": 1.25,
        "args": args,
    }
    return json.dumps(event)


#: Event texts the C scanner must refuse (chunk → pure Python), by the reason it gives.
HOSTILE = {
    "type": '{"ph": "X", "cat": "cpu_op", "name": "float pid", "pid": 1.0, "tid": 2, "ts": 1.7e12}',
    "duplicate key": '{"ph": "X", "name": "a", "name": "b", "pid": 1, "tid": 2, "ts": 1.7e12}',
    "escaped key": '{"ph": "X", "na\\u006de": "escaped", "pid": 1, "tid": 2, "ts": 1.7e12}',
    "syntax": '{"ph": "X", "name": "nan ts", "pid": 1, "tid": 2, "ts": NaN}',
    "phase": '{"ph": "Z", "name": "unknown phase", "pid": 1, "tid": 2, "ts": 1.7e12}',
    "not an object": "12345",
    "integer range": '{"ph": "X", "name": "big", "pid": 99999999999999999999, "tid": 2, "ts": 1.7e12}',
    "depth": '{"ph": "X", "name": "deep", "pid": 1, "tid": 2, "ts": 1.7e12, "args": {"x": '
    + "[" * 80
    + "]" * 80
    + "}}",
    "number": '{"ph": "X", "name": "long number", "pid": 1, "tid": 2, "ts": 1.' + "3" * 70 + "}",
}


def _trace_bytes(texts: list[str]) -> bytes:
    return ('{"schemaVersion": 1, "traceEvents": [\n' + ",\n".join(texts) + '\n], "traceName": "t"}').encode()


def test_refused_chunks_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    _require_native(monkeypatch)
    monkeypatch.setattr(parser, "CHUNK_BYTES", 1 << 13)
    texts = [_event_text(i) for i in range(4_000)]
    for j, text in enumerate(HOSTILE.values()):
        texts.insert(300 + j * 400, text)
    raw = _trace_bytes(texts)
    # Invalid UTF-8 in one name, in a chunk of its own.
    raw = raw.replace(
        b'"name": "op5", "pid": 1, "tid": 2, "ts": 1700000000007.5',
        b'"name": "op5\xff", "pid": 1, "tid": 2, "ts": 1700000000007.5',
        1,
    )
    assert b"\xff" in raw
    stats = _compare(raw, None, monkeypatch)
    refused = {k.removeprefix("refused: ") for k in stats if k.startswith("refused: ")}
    assert refused >= {*HOSTILE, "utf-8"}, stats
    assert stats["native"] > sum(v for k, v in stats.items() if k != "native"), "most chunks stay native"


def test_string_ids_are_read_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    """pid/tid/stream written as strings (Kineto's "Spans", ROCm's "0x0"): native, with the pure rules."""
    _require_native(monkeypatch)
    texts = [_event_text(i) for i in range(200)]
    texts += [
        '{"ph": "X", "cat": "cpu_op", "name": "lane", "pid": "Spans", "tid": "12", "ts": 1.7e12, "dur": 1}',
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.7e12, "dur": 1, "args": {"stream": "0x0"}}',
        '{"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 1.7e12, "dur": 1, "args": {"stream": "3"}}',
        '{"ph": "i", "name": "[memory]", "pid": "", "tid": "x", "ts": 1.7e12, "args": {"Bytes": 8, "Device Id": 0}}',
        '{"ph": "s", "cat": "ac2g", "id": 5, "pid": "Spans", "tid": 3, "ts": 1.7e12}',
        '{"ph": "f", "cat": "ac2g", "id": 5, "pid": 0, "tid": 7, "ts": 1.7e12}',
        '{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1.6e12, "dur": 9}',
        '{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}',
        '{"ph": "i", "name": "Iteration Start", "pid": "Traces", "tid": "x", "ts": 1.7e12, "s": "g"}',
        '{"ph": "B", "name": "ignored", "args": [1, {"a": null}]}',
    ]
    raw = _trace_bytes(texts)
    for defer in (True, False):
        stats = _compare(raw, None, monkeypatch, defer_flows=defer)
        assert set(stats) == {"native"}, stats
    fast, _, _ = _parse(raw, None, True, monkeypatch, defer_flows=False)
    assert len(fast.flows) == 2 and "PyTorch Profiler (0)" not in set(fast.events["name"])


# --------------------------------------------------------------------------- #
# random events: any mix of value types in the fields the parser reads

_VALUES = st.one_of(
    st.integers(-(2**63), 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(["Spans", "0x0", "12", " 7 ", "1e3", "", "é\u2028", "\ud7ff"]),
    st.none(),
    st.booleans(),
    st.lists(st.integers(0, 4), max_size=3),
)
_TOP = ["name", "cat", "pid", "tid", "ts", "dur", "id"]
_ARGS = [
    "External id", "correlation", "device", "stream", "bytes", "grid", "block", "registers per thread",
    "Input Dims", "Input type", "Concrete Inputs", "Call stack", "Module Hierarchy", "kernel_file",
    "Python id", "Python parent id", "Bytes", "Total Allocated", "Device Type", "Device Id",
]  # fmt: skip
_PHASES = st.sampled_from(["X", "X", "X", "i", "s", "f", "M", "B", "Z"])
_CATS = st.sampled_from(
    ["cpu_op", "kernel", "cuda_runtime", "python_function", "gpu_memcpy", "ac2g", "Trace", None]
)


@st.composite
def _event(draw: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "ph": draw(_PHASES),
        "cat": draw(_CATS),
        "name": draw(st.sampled_from(["a", "b", "[memory]", ""])),
    }
    event.update({"pid": 1, "tid": 2, "ts": draw(st.floats(0, 1e6)), "dur": 1.0})
    for key in draw(st.lists(st.sampled_from(_TOP), max_size=2)):
        event[key] = draw(_VALUES)
    args = {key: draw(_VALUES) for key in draw(st.lists(st.sampled_from(_ARGS), max_size=4))}
    if args or draw(st.booleans()):
        event["args"] = args
    return event


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(_event(), min_size=1, max_size=30), ascii_only=st.booleans(), defer=st.booleans())
def test_random_events_identical(
    events: list[dict], ascii_only: bool, defer: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    _require_native(monkeypatch)
    monkeypatch.setattr(parser, "CHUNK_BYTES", 256)
    texts = [json.dumps(e, ensure_ascii=ascii_only) for e in events]
    _compare(_trace_bytes(texts), None, monkeypatch, defer_flows=defer)


@pytest.mark.parametrize("special", ['\\"', "\\\\", "\\n", "\\u00e9", "é", "\u2028", "\x01"])
def test_a_special_character_at_every_offset_of_a_word(special: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The scanner reads strings eight bytes at a time and jumps to the first
    # special byte of a word (a quote, backslash, control or non-ASCII byte):
    # one at each offset, and two in one word, must read as the pure path does.
    _require_native(monkeypatch)
    monkeypatch.setattr(parser, "CHUNK_BYTES", 256)  # a refused chunk leaves the others native
    texts = []
    for offset in range(18):
        for second in ("", special):
            name = "n" * offset + special + "m" * (offset % 3) + second + "tail"
            # Raw JSON text, not json.dumps: "\x01" stays a raw control byte (refused, then read the pure way).
            texts.append(
                f'{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 1, "ts": {offset}, "dur": 1,'
                f' "args": {{"Call stack": "x{name}"}}}}'
            )
    stats = _compare(_trace_bytes(texts), None, monkeypatch)
    if special == "\x01":  # every event holds one: all refused, all read the pure way
        assert stats["native"] == 0 and sum(stats.values()) > 0
    else:
        assert stats["native"] > 0 and not any(k.startswith("refused") for k in stats)


# --------------------------------------------------------------------------- #
# building and loading


def test_off_switch_and_light_import() -> None:
    code = (
        "import sys, jupyter_torchprof\n"
        "from jupyter_torchprof.trace import native\n"
        "assert 'jupyter_torchprof.trace.native.digest' not in sys.modules\n"
        "assert not native._state, native._state\n"
        "import os; os.environ['TORCHPROF_NATIVE'] = '0'\n"
        "assert native.library() is None and not native._state\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)


def test_build_into_a_fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if native.compiler() is None:
        pytest.skip("no C compiler on this machine")
    built = native.build(tmp_path)
    assert built is not None and built.name == native.library_name()
    assert [p.name for p in tmp_path.iterdir()] == [built.name], "no temporary file left behind"
    assert native._open(built) is not None


def test_no_compiler_means_pure_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHPROF_NATIVE", "1")
    monkeypatch.setenv("TORCHPROF_NATIVE_CACHE", str(tmp_path))
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setattr(native, "_candidates", lambda tag: [tmp_path / native.library_name(tag)])
    monkeypatch.setattr(native, "_build_dirs", lambda: [tmp_path])
    monkeypatch.setattr(native, "compiler", lambda: None)
    assert native.library() is None
    digest.STATS.clear()
    data = parser.parse_bytes(_trace_bytes([_event_text(i) for i in range(50)]))
    assert len(data.events) == 50 and not digest.STATS


def test_numbers_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    """Number literals of every form (digits, zeros, exponents, 17+ digits) convert as msgspec does."""
    _require_native(monkeypatch)
    import random

    rng = random.Random(7)
    texts = []
    for i in range(3_000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 24)))
        cut = rng.randint(0, len(digits))
        num = (digits[:cut].lstrip("0") or "0") + ("." + digits[cut:] if cut < len(digits) else "")
        if rng.random() < 0.3:
            num += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.randint(0, 40))
        num = rng.choice(["", "-"]) + num
        integer = str(rng.randint(-(2**63) + 1, 2**63 - 1))
        texts.append(
            f'{{"ph": "X", "cat": "kernel", "name": "n{i % 7}", "pid": {integer}, "tid": 1, "ts": {num},'
            f' "dur": {integer}, "args": {{"bytes": {num}, "correlation": {integer}}}}}'
        )
    monkeypatch.setattr(parser, "CHUNK_BYTES", 1 << 14)
    stats = _compare(_trace_bytes(texts), None, monkeypatch)
    assert stats["native"] >= 10, stats


def test_broken_cached_library_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached file that is no library (cut short, another machine's) is replaced, not trusted."""
    if native.compiler() is None:
        pytest.skip("no C compiler on this machine")
    monkeypatch.setenv("TORCHPROF_NATIVE", "1")
    monkeypatch.setattr(native, "_state", {})
    target = tmp_path / native.library_name()
    target.write_bytes(b"\x7fELF cut short")
    monkeypatch.setattr(native, "_candidates", lambda tag: [target])
    monkeypatch.setattr(native, "_build_dirs", lambda: [tmp_path])
    assert native.library() is not None
    assert target.stat().st_size > 1000
    digest.STATS.clear()
    assert len(parser.parse_bytes(_trace_bytes([_event_text(i) for i in range(20)])).events) == 20
    assert digest.STATS["native"] == 1


@pytest.mark.parametrize("name", REAL_TRACES)
def test_flows_read_on_demand_identical(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The flows-only pass (`parser.read_flows`, for deferred flows) reads the same flows natively."""
    path = real_trace(name)
    _require_native(monkeypatch)
    flows = []
    for on in ("0", "1"):
        monkeypatch.setenv("TORCHPROF_NATIVE", on)
        digest.STATS.clear()
        flows.append(parser.read_flows(path, 1.5e15))
        assert bool(digest.STATS) == (on == "1") and set(digest.STATS) <= {"native"}, digest.STATS
    assert_same_frames(*flows)
    raw = [e for e in raw_events(path) if isinstance(e, dict) and e.get("ph") in ("s", "f")]
    launch = [e for e in raw if e.get("cat") in ("ac2g", "async_cpu_to_gpu", "async_gpu") and "id" in e]
    assert len(flows[1]) == len(launch)


def test_concurrent_parses_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan runs without the GIL: parses in threads at once give what one parse alone gives."""
    from concurrent.futures import ThreadPoolExecutor

    _require_native(monkeypatch)
    path = tmp_path / "synthetic.pt.trace.json.gz"
    _synthetic_module().write_trace(path, 20_000, steps=2)
    data = read_trace_bytes(path)
    monkeypatch.setattr(parser, "CHUNK_BYTES", 1 << 16)
    alone, _, stats = _parse(data, str(path), True, monkeypatch)
    assert stats["native"] > 10
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: parser.parse_bytes(data, str(path)), range(8)))
    for result in results:
        assert_same(alone, result, tables=False)


@pytest.mark.parametrize(
    "name", ["mi250_rocm_train.pt.trace.json.gz", "gp100_sgd_step_user_annotation.pt.trace.json.gz"]
)
def test_mutated_real_traces_identical(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real traces with a few bytes changed, inserted or deleted: the same result or the same error."""
    import random

    path = real_trace(name)
    _require_native(monkeypatch)
    monkeypatch.setattr(parser, "CHUNK_BYTES", 2048)
    text = read_trace_bytes(path)
    rng = random.Random(name)
    alphabet = b'{}[]",:\\0123456789.eE-+ \n\tnulltrueXMisf\xff\xc3\xa9\x1f'
    used = Counter()
    for _ in range(40):
        b = bytearray(text)
        for _ in range(rng.randint(1, 4)):
            i, op = rng.randrange(len(b) // 10, len(b) - 200), rng.random()
            if op < 0.5:
                b[i] = rng.choice(alphabet)
            elif op < 0.8:
                b.insert(i, rng.choice(alphabet))
            else:
                del b[i]
        used.update(_compare(bytes(b), None, monkeypatch, defer_flows=rng.random() < 0.5))
    assert used["native"] > 40 and len(used) > 2, used  # native chunks, and refusals of more than one kind


def test_repaired_and_dropped_events_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    """Torch's unescaped quotes and lone surrogate escapes (refused natively, repaired in
    Python) and timestamps beyond 2^53 µs (dropped after either path) give the same trace."""
    _require_native(monkeypatch)
    monkeypatch.setattr(parser, "CHUNK_BYTES", 1 << 13)
    texts = [_event_text(i) for i in range(3_000)]
    quoted = json.dumps(json.loads(_event_text(5)) | {"name": 'say "hi"'}, indent=2)
    texts.insert(400, quoted.replace('"say \\"hi\\""', '"say "hi""'))  # as torch 2.13 writes it
    texts.insert(1200, _event_text(7).replace('"op7"', '"lone \\ud800 half"'))
    texts.insert(2000, _event_text(9).replace('"ts": 1700000000013.5', '"ts": 1e308'))
    raw = _trace_bytes(texts)
    assert b'"say "hi""' in raw and b"\\ud800" in raw and b"1e308" in raw
    stats = _compare(raw, None, monkeypatch)
    assert stats["native"] > 1 and sum(v for k, v in stats.items() if k.startswith("refused")) >= 2, stats
    data = parser.parse_bytes(raw)
    names = set(data.events["name"].astype(str))
    assert {'say "hi"', "lone \ufffd half"} <= names
    assert data.meta.skipped == 1 and len(data.events) == len(texts) - 1


def test_a_bare_slice_scans_as_its_bracketed_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk given bare (events without the array's brackets, where they lie) reads what its copy in brackets reads."""
    _require_native(monkeypatch)
    texts = [_event_text(i) for i in range(300)]
    body = ",\n".join(texts).encode()
    bracketed, bare = native.digester(parser), native.digester(parser)
    assert bracketed.scan(b"[" + body + b"]", True) == 0
    assert bare.scan(memoryview(b"  " + body + b" ")[2:], True, bare=True) == 0
    cnt = bracketed.counts
    assert bare.counts[: digest.C_ERRPOS].tolist() == cnt[: digest.C_ERRPOS].tolist()
    used = {"x": cnt[digest.C_X], "m": cnt[digest.C_MEM], "f": cnt[digest.C_FLOW], "md": cnt[digest.C_META]}
    used |= {"s": cnt[digest.C_STR], "r": cnt[digest.C_RAW]}
    for name, col in bracketed.cols.items():
        if name.endswith("_slots"):
            continue  # hash-table slots: where values sit, not what they are
        n = int(used[name.split("_")[0]])
        shift = 1 if name in ("s_off", "r_off") else 0  # offsets in the chunk: the copy has its "[" first
        np.testing.assert_array_equal(bare.cols[name][:n] + shift, col[:n], err_msg=name)
    # Brackets, a trailing comma or a cut event are syntax in a bare chunk: refused, never misread.
    for bad in (b"[" + body + b"]", body + b",", body[:-5]):
        assert bare.scan(bad, True, bare=True) != 0
