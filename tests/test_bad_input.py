"""Bad input: one clear TraceError naming the file, or a load with a warning. Never a crash."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tracefiles import real_trace

from jupyter_torchprof import load
from jupyter_torchprof.errors import TraceError
from jupyter_torchprof.results.profile import Profile

#: Small real traces the mutations start from (read once).
SMALL_TRACES = [
    "gp100_sgd_step_user_annotation.pt.trace.json.gz",
    "mi250_rocm_train.pt.trace.json.gz",
    "triton_kernel.pt.trace.json.gz",
    "cpu_only.pt.trace.json.gz",
    "cuda_event_sync_multi_stream.pt.trace.json.gz",
]


def _event(name="aten::mm", ts=10.0, dur=5.0, cat="cpu_op", **extra):
    e = {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}
    e.update(extra)
    return e


def _good_events(n=5):
    return [_event(ts=10.0 * i, dur=5.0) for i in range(n)]


def _write(tmp_path: Path, doc, name="trace.json") -> Path:
    path = tmp_path / name
    path.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    return path


def _error(path: Path, match: str) -> TraceError:
    with pytest.raises(TraceError) as info:
        load(str(path))
    err = info.value
    assert str(path) in str(err), str(err)
    assert match in str(err).lower(), str(err)
    assert "\n" not in str(err)
    return err


def _tables(p: Profile) -> None:
    for attr in (
        "events",
        "ops",
        "kernels",
        "steps",
        "streams",
        "summary",
        "memcpy",
        "launches",
        "launch_summary",
    ):
        getattr(p, attr)
    p.table()
    p._repr_mimebundle_()


# --------------------------------------------------------------------------- #
# one clear error


def test_missing_path(tmp_path):
    _error(tmp_path / "nope.json.gz", "no such file")


def test_empty_file(tmp_path):
    _error(_write(tmp_path, b""), "empty")
    _error(_write(tmp_path, b"  \n", "blank.json"), "empty")


def test_truncated_gzip(tmp_path):
    data = real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz").read_bytes()
    _error(_write(tmp_path, data[: len(data) // 2], "cut.json.gz"), "truncated")


def test_corrupt_gzip(tmp_path):
    data = bytearray(real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz").read_bytes())
    for i in range(100, 200):
        data[i] ^= 0xFF
    _error(_write(tmp_path, bytes(data), "corrupt.json.gz"), "gzip")


def test_truncated_json(tmp_path):
    text = json.dumps({"traceEvents": _good_events()})
    _error(_write(tmp_path, text[: len(text) // 2].encode()), "cut short")


def test_invalid_json(tmp_path):
    _error(_write(tmp_path, b'{"traceEvents": [{"ph": "X",, }]}'), "not valid json")
    _error(_write(tmp_path, b"<html>not a trace</html>", "page.json"), "not valid json")


def test_json_without_trace_events(tmp_path):
    _error(_write(tmp_path, {"schemaVersion": 1, "events": []}), "no 'traceevents'")
    _error(_write(tmp_path, b"42", "number.json"), "not a trace")


def test_trace_events_not_a_list(tmp_path):
    _error(_write(tmp_path, {"traceEvents": {"ph": "X"}}), "not a list")
    _error(_write(tmp_path, {"traceEvents": None}, "null.json"), "not a list")


def test_folder_without_traces(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    _error(tmp_path, "no trace files")


def test_folder_of_unreadable_traces(tmp_path):
    _write(tmp_path, b"", "a.pt.trace.json")
    _write(tmp_path, b"{", "b.pt.trace.json")
    _error(tmp_path / "a.pt.trace.json", "empty")
    with pytest.raises(TraceError) as info:
        load(str(tmp_path))
    assert "a.pt.trace.json" in str(info.value)


def test_magic_reports_one_line_and_the_kernel_survives(shell, tmp_path):
    bad = _write(tmp_path, b"{", "bad.json")
    result = shell.run_cell(f"%torchprof --load {bad}")
    assert result.error_in_exec is not None
    assert "bad.json" in str(result.error_in_exec)
    assert shell.run_cell("1 + 1").result == 2


# --------------------------------------------------------------------------- #
# loads, with a warning that says how many events were skipped


def _load_warns(path: Path, match: str) -> Profile:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = load(str(path))
    messages = [str(w.message) for w in caught]
    assert any(match in m for m in messages), messages
    _tables(p)
    return p


def test_events_missing_fields(tmp_path):
    events = _good_events()
    events.append({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 70.0, "dur": 1.0})  # no name
    events.append({"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "dur": 1.0})  # no ts
    events.append({"cat": "cpu_op", "name": "y", "ts": 1.0})  # no ph
    p = _load_warns(_write(tmp_path, {"traceEvents": events}), "skipped 3 malformed")
    assert len(p.events) == 5
    assert p.meta.skipped == 3


def test_negative_and_absurd_durations(tmp_path):
    events = _good_events()
    events.append(_event(ts=80.0, dur=-5.0))
    events.append(_event(ts=90.0, dur=1e30))
    events.append(_event(ts=95.0, dur="soon"))
    p = _load_warns(_write(tmp_path, {"traceEvents": events}), "skipped 3 malformed")
    assert len(p.events) == 5
    assert p.ops["cpu_total_us"].sum() == pytest.approx(25.0)


def test_items_that_are_not_events(tmp_path):
    text = json.dumps({"traceEvents": _good_events()})
    text = text.replace('{"ph"', '5, "x", [1], {"ph"', 1)
    p = _load_warns(_write(tmp_path, text.encode()), "skipped 3 malformed")
    assert len(p.events) == 5


def test_non_utf8_names(tmp_path):
    text = json.dumps({"traceEvents": _good_events()}).encode()
    text = text.replace(b"aten::mm", b"aten::\xff\xfemm", 1)
    p = _load_warns(_write(tmp_path, text), "invalid UTF-8")
    assert any("\ufffd" in n for n in p.ops["name"])
    assert len(p.events) == 5


def test_two_million_character_name(tmp_path):
    events = _good_events()
    events.append(_event(name="x" * 2_000_000, ts=100.0))
    p = _load_warns(_write(tmp_path, {"traceEvents": events}), "shortened")
    assert len(p.events) == 6
    assert p.ops["name"].str.len().max() < 20_000
    assert len(p.table()) < 200_000


def test_bare_event_array_loads(tmp_path):
    p = load(str(_write(tmp_path, _good_events())))
    assert len(p.events) == 5
    _tables(p)


# --------------------------------------------------------------------------- #
# property: any mutation of a real trace gives a TraceError or a working Profile

_BASES: dict[str, str] = {}


def _base(name: str) -> str:
    if name not in _BASES:
        with gzip.open(real_trace(name), "rt", encoding="utf-8") as fh:
            _BASES[name] = fh.read()
    return _BASES[name]


_json_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


@st.composite
def mutated(draw):
    """A real trace's bytes after one kind of damage, and whether to gzip them."""
    name = draw(st.sampled_from(SMALL_TRACES))
    text = _base(name)
    how = draw(st.sampled_from(["truncate", "flip", "delete", "retype"]))
    if how in ("truncate", "flip"):
        data = bytearray(text.encode())
        if how == "truncate":
            data = data[: draw(st.integers(0, len(data)))]
        else:
            for _ in range(draw(st.integers(1, 8))):
                i = draw(st.integers(0, len(data) - 1))
                data[i] = draw(st.integers(0, 255))
        return name, how, bytes(data), draw(st.booleans())
    doc = json.loads(text)
    events = doc["traceEvents"]
    for _ in range(draw(st.integers(1, 6))):
        e = events[draw(st.integers(0, len(events) - 1))]
        target = e
        if isinstance(e.get("args"), dict) and e["args"] and draw(st.booleans()):
            target = e["args"]
        if not target:
            continue
        key = draw(st.sampled_from(sorted(target)))
        if how == "delete":
            del target[key]
        else:
            target[key] = draw(_json_values)
    return name, how, json.dumps(doc).encode(), draw(st.booleans())


@settings(
    max_examples=int(os.environ.get("TORCHPROF_HYPOTHESIS_EXAMPLES", 60)),
    deadline=10_000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated())
def test_mutated_real_traces_error_cleanly_or_load(case):
    name, how, data, gz = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / ("mutated.json.gz" if gz else "mutated.json")
        path.write_bytes(gzip.compress(data, compresslevel=1) if gz else data)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p = load(str(path))
        except TraceError as err:
            assert str(path) in str(err)
            assert "\n" not in str(err)
            return
        assert isinstance(p, Profile)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _tables(p)
