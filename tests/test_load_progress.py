"""Progress while a trace is read: what the reader and parser report, and how it is shown."""

from __future__ import annotations

import gzip
import io
import sys

import pytest
from tracefiles import real_trace

import jupyter_torchprof
from jupyter_torchprof.runs.load import load
from jupyter_torchprof.trace import progress as trace_progress
from jupyter_torchprof.trace.progress import reporting
from jupyter_torchprof.views.progress import Progress, showing_trace_progress

TRACE = "v100_ddp_ns_timestamps.pt.trace.json.gz"


def _reports(path, monkeypatch) -> list[tuple[str, int, int]]:
    monkeypatch.setattr(trace_progress, "MIN_INTERVAL_S", 0.0)
    seen: list[tuple[str, int, int]] = []
    with reporting(lambda *r: seen.append(r)):
        load(path)
    return seen


def test_reading_reports_bytes_inflated_then_bytes_parsed(monkeypatch) -> None:
    path = real_trace(TRACE)
    seen = _reports(path, monkeypatch)
    inflating = [r for r in seen if r[0] == "inflating"]
    parsing = [r for r in seen if r[0] == "parsing"]
    assert inflating and parsing
    # every inflate report comes before the first parse report
    assert max(i for i, r in enumerate(seen) if r[0] == "inflating") < min(
        i for i, r in enumerate(seen) if r[0] == "parsing"
    )
    size = path.stat().st_size
    json_size = len(gzip.decompress(path.read_bytes()))
    assert {r[2] for r in inflating} == {size}
    assert {r[2] for r in parsing} == {json_size}
    for part in (inflating, parsing):
        done = [r[1] for r in part]
        assert done == sorted(done) and done[-1] == part[-1][2]


def test_reports_are_spaced_but_the_last_always_comes(monkeypatch) -> None:
    path = real_trace(TRACE)
    monkeypatch.setattr(trace_progress, "MIN_INTERVAL_S", 3600.0)
    seen: list[tuple[str, int, int]] = []
    with reporting(lambda *r: seen.append(r)):
        load(path)
    parsing = [r for r in seen if r[0] == "parsing"]
    assert len(parsing) <= 2 and parsing[-1][1] == parsing[-1][2]


def test_nothing_is_reported_outside_a_reporting_block(monkeypatch) -> None:
    seen: list = []
    with reporting(lambda *r: seen.append(r)):
        pass
    load(real_trace(TRACE))
    assert seen == []


def test_a_broken_sink_costs_nothing_but_ctrl_c_goes_through(monkeypatch) -> None:
    path = real_trace(TRACE)
    reference = load(path).ops

    def broken(*_: object) -> None:
        raise RuntimeError("display gone")

    with reporting(broken):
        assert load(path).ops.equals(reference)

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    with reporting(interrupted), pytest.raises(KeyboardInterrupt):
        load(path)


def test_byte_phases_read_as_sizes() -> None:
    p = Progress(enabled=False, notebook=False)
    text = p._text("parsing", 2**30, 2**32)
    assert "reading trace 1 GiB of 4 GiB (25 %)" in text
    assert "inflating trace 512 MiB of 1 GiB (50 %)" in p._text("inflating", 2**29, 2**30)
    assert "warming up 2/5" in p._text("warm-up", 1, 5)


def test_a_script_whose_stderr_is_a_log_shows_nothing(monkeypatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with showing_trace_progress():
        jupyter_torchprof.load(real_trace(TRACE), progress=True)
    assert err.getvalue() == ""


class _TTY(io.StringIO):
    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:  # not descriptor 2: Progress writes to this stream itself
        raise io.UnsupportedOperation


def test_a_terminal_sees_the_line_rewritten_then_cleared(monkeypatch) -> None:
    err = _TTY()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(trace_progress, "MIN_INTERVAL_S", 0.0)
    shown = []
    real_update = Progress.update

    def update(self, phase, done, total):
        self.delay_s = 0.0  # show at once: the trace here reads in well under the real delay
        shown.append(phase)
        real_update(self, phase, done, total)

    monkeypatch.setattr(Progress, "update", update)
    jupyter_torchprof.load(real_trace(TRACE))
    out = err.getvalue()
    assert "\rtorchprof: reading trace" in out and "%)" in out
    assert out.endswith("\r")  # cleared when done
    assert {"inflating", "parsing"} <= set(shown)
