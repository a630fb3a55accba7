"""`small_pages`: numpy's huge-page advice is off while a parse runs, in any thread, and restored after."""

from __future__ import annotations

import threading

import pytest
from tracefiles import real_trace

from jupyter_torchprof.trace import pages, parser
from jupyter_torchprof.trace.reader import read_trace_bytes

pytestmark = pytest.mark.skipif(pages._SET is None, reason="this numpy has no huge-page switch")


def _advice() -> bool:
    before = pages._SET(True)
    pages._SET(before)
    return bool(before)


@pytest.mark.parametrize("initially", [True, False])
def test_off_inside_and_restored_after(initially: bool) -> None:
    before = pages._SET(initially)
    try:
        with pages.small_pages():
            assert _advice() is False
            with pages.small_pages():  # nested: still off, and not restored by the inner exit
                assert _advice() is False
            assert _advice() is False
        assert _advice() is initially
    finally:
        pages._SET(before)


def test_restored_after_an_error() -> None:
    before = pages._SET(True)
    try:
        with pytest.raises(ZeroDivisionError), pages.small_pages():
            1 / 0  # noqa: B018
        assert _advice() is True
    finally:
        pages._SET(before)


def test_overlapping_threads_restore_once_the_last_leaves() -> None:
    before = pages._SET(True)
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with pages.small_pages():
            entered.set()
            release.wait(10)

    t = threading.Thread(target=other)
    try:
        with pages.small_pages():
            t.start()
            assert entered.wait(10)
        assert _advice() is False  # the other thread is still inside
        release.set()
        t.join(10)
        assert _advice() is True
    finally:
        release.set()
        pages._SET(before)


def test_a_parse_runs_with_the_advice_off_and_leaves_it_as_it_was(monkeypatch) -> None:
    seen: list[bool] = []
    real_finish = parser._Builder.finish

    def finish(self):
        seen.append(_advice())
        return real_finish(self)

    monkeypatch.setattr(parser._Builder, "finish", finish)
    before = pages._SET(True)
    try:
        parser.parse_bytes(read_trace_bytes(real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz")))
        assert seen == [False] and _advice() is True
    finally:
        pages._SET(before)


def test_tables_and_findings_run_with_the_advice_off_and_leave_it_as_it_was(monkeypatch) -> None:
    from jupyter_torchprof.analysis import findings as findings_mod
    from jupyter_torchprof.analysis import ops as ops_mod
    from jupyter_torchprof.analysis import steps as steps_mod
    from jupyter_torchprof.results.profile import Profile

    seen: dict[str, bool] = {}

    def spy(name, real):
        def wrapped(*args, **kwargs):
            seen[name] = _advice()
            return real(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(ops_mod, "op_table", spy("ops", ops_mod.op_table))
    monkeypatch.setattr(steps_mod, "step_table", spy("steps", steps_mod.step_table))
    monkeypatch.setattr(findings_mod, "find", spy("findings", findings_mod.find))
    before = pages._SET(True)
    try:
        p = Profile.from_file(real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz"))
        assert _advice() is True
        p.op_table(group_by="shape")
        assert p.steps is not None and p.findings is not None
        assert seen == {"ops": False, "steps": False, "findings": False}
        assert _advice() is True  # as the caller had it, after every table
    finally:
        pages._SET(before)
