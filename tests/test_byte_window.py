"""`ByteWindow` holds exactly the bytes appended and not consumed, however it moves or grows."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_torchprof.trace.window import ByteWindow

#: (append these bytes, then consume this many from the start)
steps = st.lists(st.tuples(st.binary(max_size=40), st.integers(0, 60)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(capacity=st.integers(1, 64), script=steps)
def test_the_window_holds_what_was_appended_and_not_consumed(capacity: int, script) -> None:
    window, model = ByteWindow(capacity), b""
    for piece, consume in script:
        window.append(piece)
        model += piece
        assert bytes(window.view(window.lo, window.hi)) == model
        n = min(consume, len(model))
        assert window.take(window.lo + n) == model[:n]
        model = model[n:]
        assert len(window) == len(model)


def test_it_moves_before_it_grows() -> None:
    window = ByteWindow(10)
    window.append(b"abcdefgh")
    window.take(window.lo + 6)
    buf = window.buf
    window.append(b"ijklmnop")  # 2 left + 8 new fit in 10: moved to the front, same buffer
    assert window.buf is buf and (window.lo, window.hi) == (0, 10)
    assert bytes(window.view(0, 10)) == b"ghijklmnop"
    window.append(b"q")  # 11 do not fit: a bigger buffer
    assert window.buf is not buf and bytes(window.view(window.lo, window.hi)) == b"ghijklmnopq"
