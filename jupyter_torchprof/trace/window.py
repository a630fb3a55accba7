"""A window on a stream of bytes, kept in one reused buffer.

Pieces arrive at the end (`ByteWindow.append`) and are consumed from the
start (by moving ``lo``). A ``bytearray`` that is appended to and cut at
the front costs a fresh allocation and a copy of everything it holds at
each append once its start has moved (CPython's resize), and the fresh
memory is faulted in again every time: on a 287 MB trace streamed in
16 MB pieces that was ~60 ms of CPU under cProfile (side-by-side runs of
the whole load did not resolve the difference). Here the bytes left over
are moved to the front of the same buffer only when the next piece does
not fit.

Positions (``lo``, ``hi`` and the matches of a search on `buf`) are in the
buffer: search with ``pos=lo`` and ``endpos=hi``, since the bytes past
``hi`` are stale.
"""

from __future__ import annotations


class ByteWindow:
    """The bytes ``buf[lo:hi]``: what has arrived and is not consumed yet."""

    def __init__(self, capacity: int = 32 << 20) -> None:
        # Empty until the first piece, which makes it `capacity` long (`_grow`).
        self.capacity = capacity
        self.buf = bytearray()
        self.lo = 0
        self.hi = 0

    def __len__(self) -> int:
        return self.hi - self.lo

    def append(self, piece: bytes | bytearray | memoryview) -> None:
        """Add ``piece`` at the end (moving what is left to the front, or growing, when it does not fit)."""
        n = len(piece)
        if self.hi + n > len(self.buf):
            live = self.hi - self.lo
            if live + n > len(self.buf):
                self._grow(piece)
                return
            if live:
                view = memoryview(self.buf)
                view[:live] = view[self.lo : self.hi]  # overlapping: a memmove
                view.release()
            self.lo, self.hi = 0, live
        view = memoryview(self.buf)
        view[self.hi : self.hi + n] = piece
        view.release()
        self.hi += n

    def _grow(self, piece: bytes | bytearray | memoryview) -> None:
        """A new buffer: what is left, then ``piece``, then zeros up to `capacity` (if it is shorter)."""
        grown = bytearray(memoryview(self.buf)[self.lo : self.hi])
        grown += piece  # grown in place where it can
        filled = len(grown)
        if filled < self.capacity:
            grown += bytes(self.capacity - filled)
        self.buf, self.lo, self.hi = grown, 0, filled

    def view(self, start: int, end: int) -> memoryview:
        """The bytes ``buf[start:end]`` without a copy (valid until the next `append`)."""
        return memoryview(self.buf)[start:end]

    def take(self, end: int) -> bytes:
        """A copy of the bytes from ``lo`` to ``end``, consumed."""
        out = bytes(self.buf[self.lo : end])
        self.lo = end
        return out
