"""`reused_heap`: glibc's thresholds raised while a table runs, glibc's grown ones and a trim after the last one."""

from __future__ import annotations

import threading

import pytest
from tracefiles import real_trace

from jupyter_torchprof.trace import pages


class _FakeLibc:
    """Records the calls `reused_heap` makes, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("trim", pad))
        return 1


RAISED = [("mallopt", -3, pages.HEAP_BLOCKS_UP_TO), ("mallopt", -1, pages.HEAP_BLOCKS_UP_TO)]
RESTORED = [("mallopt", -3, 32 << 20), ("mallopt", -1, 64 << 20), ("trim", 0)]


@pytest.fixture
def fake(monkeypatch) -> _FakeLibc:
    lib = _FakeLibc()
    monkeypatch.setitem(pages._heap, "libc", lib)
    monkeypatch.setitem(pages._heap, "inside", 0)
    return lib


def test_raised_inside_restored_and_trimmed_once_after_nested_uses(fake) -> None:
    with pages.reused_heap():
        assert fake.calls == RAISED
        with pages.reused_heap():  # nested: nothing set again, nothing restored by the inner exit
            pass
        assert fake.calls == RAISED
    assert fake.calls == RAISED + RESTORED


def test_restored_after_an_error(fake) -> None:
    with pytest.raises(ZeroDivisionError), pages.reused_heap():
        1 / 0  # noqa: B018
    assert fake.calls == RAISED + RESTORED and pages._heap["inside"] == 0


def test_overlapping_threads_restore_once_the_last_leaves(fake) -> None:
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with pages.reused_heap():
            entered.set()
            release.wait(10)

    t = threading.Thread(target=other)
    try:
        with pages.reused_heap():
            t.start()
            assert entered.wait(10)
        assert fake.calls == RAISED  # the other thread is still inside
        release.set()
        t.join(10)
        assert fake.calls == RAISED + RESTORED
    finally:
        release.set()


def test_without_glibc_nothing_is_called(monkeypatch) -> None:
    monkeypatch.setitem(pages._heap, "libc", False)
    with pages.reused_heap(), pages.table_memory():
        pass


def test_profile_tables_run_inside_and_leave_the_heap_as_glibc_grows_it(fake, monkeypatch) -> None:
    from jupyter_torchprof.analysis import findings as findings_mod
    from jupyter_torchprof.analysis import steps as steps_mod
    from jupyter_torchprof.results.profile import Profile

    seen: dict[str, int] = {}

    def spy(name, real):
        def wrapped(*args, **kwargs):
            seen[name] = pages._heap["inside"]
            return real(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(steps_mod, "step_table", spy("steps", steps_mod.step_table))
    monkeypatch.setattr(findings_mod, "find", spy("findings", findings_mod.find))
    p = Profile.from_file(real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz"))
    fake.calls.clear()
    # As large as the profiles that reuse the heap.
    monkeypatch.setattr(pages, "HEAP_FROM_ROWS", len(p._data.events))
    assert p.findings is not None
    assert seen["steps"] >= 1 and seen["findings"] >= 1
    # One raise on the way in, one restore and trim when the outermost table ends.
    assert fake.calls == RAISED + RESTORED


def test_a_smaller_profile_leaves_glibc_alone(fake, monkeypatch) -> None:
    from jupyter_torchprof.results.profile import Profile

    p = Profile.from_file(real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz"))
    monkeypatch.setattr(pages, "HEAP_FROM_ROWS", len(p._data.events) + 1)
    fake.calls.clear()
    assert p.findings is not None and p.kernels is not None
    assert fake.calls == []


def test_table_memory_by_rows(fake, monkeypatch) -> None:
    monkeypatch.setattr(pages, "HEAP_FROM_ROWS", 100)
    with pages.table_memory(99):
        assert fake.calls == []
    with pages.table_memory(100):
        assert fake.calls == RAISED
    with pages.table_memory():
        pass
    assert fake.calls == RAISED + RESTORED + RAISED + RESTORED


def test_real_glibc_round_trip() -> None:
    if not pages._libc():
        pytest.skip("not glibc")
    with pages.table_memory():
        blocks = [bytearray(64 << 20) for _ in range(2)]
        del blocks
    assert pages._heap["inside"] == 0
