"""`reader.read_ahead`: pieces made one step ahead in a thread, with errors and early exits handled."""

from __future__ import annotations

import threading

import pytest

from jupyter_torchprof.trace.reader import read_ahead


def _pieces(n: int, fail_at: int | None = None, closed: list | None = None):
    try:
        for i in range(n):
            if i == fail_at:
                raise ValueError(f"bad piece {i}")
            yield bytes([i % 256]) * 10
    finally:
        if closed is not None:
            closed.append(threading.current_thread().name)


def test_every_piece_comes_in_order() -> None:
    assert list(read_ahead(_pieces(50))) == list(_pieces(50))


def test_an_error_is_raised_at_the_piece_it_stood_for() -> None:
    got = []
    with pytest.raises(ValueError, match="bad piece 7"):
        for piece in read_ahead(_pieces(20, fail_at=7)):
            got.append(piece)
    assert got == list(_pieces(7))


def test_leaving_early_stops_the_producer_and_closes_its_source() -> None:
    closed: list = []
    before = threading.active_count()
    reader = read_ahead(_pieces(10_000, closed=closed), depth=2)
    for i, _ in enumerate(reader):
        if i == 3:
            break
    reader.close()  # what a for loop's exit does when the generator is dropped
    assert closed == ["torchprof-read-ahead"]
    assert threading.active_count() == before


def test_ctrl_c_in_the_parse_stops_the_producer() -> None:
    closed: list = []
    with pytest.raises(KeyboardInterrupt):
        for i, _ in enumerate(read_ahead(_pieces(10_000, closed=closed))):
            if i == 2:
                raise KeyboardInterrupt
    assert closed == ["torchprof-read-ahead"]
