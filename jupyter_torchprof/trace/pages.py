"""Parse and analyse without asking the kernel for huge pages (`small_pages`); tables reuse the heap (`reused_heap`).

numpy asks Linux for transparent huge pages (``madvise(MADV_HUGEPAGE)``)
on every array of 4 MB or more. Where THP is in ``madvise`` mode with
``defrag=madvise`` (Ubuntu's default, and this project's machine), the
kernel then compacts memory synchronously at the first touch of each such
array, at a cost that swings with how fragmented memory is. A parse makes
its columns once and reads them in order, so huge pages buy it little: on
the 1M-event trace, six fresh loads each, the load took 769–837 ms of CPU
without the advice and 756–1053 ms with it (the tables after it, which
stay as numpy sets them, barely moved in that run).

The tables do suffer from it, in a way that hides in medians: on the same
trace, five fresh processes each, the op table took 156–172 ms of CPU
without the advice and 161–281 ms with it (`Profile`'s tables and findings
are therefore computed inside `small_pages` too).

The switch is numpy's own (what ``NUMPY_MADVISE_HUGEPAGE=0`` sets), and
process-wide: it is turned off while any parse or table runs, in any
thread, and back to what it was when the last one ends. Without the switch (another
numpy, another system) nothing changes.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np


def _switch() -> Callable[[bool], bool] | None:
    """The switch ``_set_madvise_hugepage`` of numpy (it returns the previous setting), or None without one."""
    for holder in ("_core", "core"):
        module = getattr(getattr(np, holder, None), "multiarray", None)
        setter = getattr(module, "_set_madvise_hugepage", None)
        if callable(setter):
            return setter
    return None


_SET = _switch()
_LOCK = threading.Lock()
_state = {"inside": 0, "before": False}


@contextmanager
def small_pages() -> Iterator[None]:
    """The huge-page advice of numpy off inside (in every thread), restored when the last user leaves."""
    if _SET is None:
        yield
        return
    with _LOCK:
        if _state["inside"] == 0:
            _state["before"] = bool(_SET(False))
        _state["inside"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _state["inside"] -= 1
            if _state["inside"] == 0:
                _SET(_state["before"])


# Heap reuse for the tables.
#
# glibc hands out every block over its mmap threshold (128 KB at first,
# growing to 32 MB as such blocks are freed) as a fresh mapping and unmaps
# it when freed, so each full-length temporary of a ten-million-event table
# (80 MB) is faulted in anew, page by page: on the 4 GB trace the steps,
# kernel table and findings took 378k, 127k and 283k minor faults, and
# 1.08, 0.83 and 1.18 s of CPU, against 109k, 15k, 41k faults and 0.63,
# 0.61, 0.77 s with the blocks taken from the heap (one fresh process
# each). The peak grew by ~350 MB of freed blocks kept for reuse, which
# the trim at the end hands back (39 ms there).

#: Blocks up to this size come from the heap while a table runs.
HEAP_BLOCKS_UP_TO = 1 << 30
#: Events from which a profile's tables reuse the heap (`table_memory`):
#: below, a column of float64 is under glibc's grown threshold (32 MB), so
#: its temporaries come from the heap anyway, and the trim after each table
#: cost more than it gave (the 1M-event findings 61 vs 55 ms; eleven small
#: real traces' steps, kernels and findings ~10% slower).
HEAP_FROM_ROWS = 1 << 22
#: What the thresholds go back to: glibc's own once its dynamic threshold
#: has grown to its most (64-bit), as a parse's freed columns make it; glibc
#: has no call that turns the dynamic threshold back on.
_GROWN_MMAP, _GROWN_TRIM = 32 << 20, 64 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_heap = {"inside": 0, "libc": None}


def _libc() -> Any:
    """The C library (`mallopt`, `malloc_trim`) where it is glibc, or False elsewhere (musl, macOS, Windows)."""
    if _heap["libc"] is None:
        try:
            lib = ctypes.CDLL("libc.so.6")
            lib.mallopt, lib.malloc_trim  # noqa: B018 - a libc without them is not glibc
            _heap["libc"] = lib
        except (OSError, AttributeError):
            _heap["libc"] = False
    return _heap["libc"]


@contextmanager
def reused_heap() -> Iterator[None]:
    """Large blocks come from glibc's heap inside (reused, not faulted in anew); the last user to leave trims it.

    Process-wide, as `small_pages`: on the outermost exit, in any thread,
    the thresholds go to glibc's grown ones and ``malloc_trim`` hands the
    freed blocks back. Without glibc nothing changes.
    """
    lib = _libc()
    if not lib:
        yield
        return
    with _LOCK:
        if _heap["inside"] == 0:
            lib.mallopt(_M_MMAP_THRESHOLD, HEAP_BLOCKS_UP_TO)
            lib.mallopt(_M_TRIM_THRESHOLD, HEAP_BLOCKS_UP_TO)
        _heap["inside"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _heap["inside"] -= 1
            if _heap["inside"] == 0:
                lib.mallopt(_M_MMAP_THRESHOLD, _GROWN_MMAP)
                lib.mallopt(_M_TRIM_THRESHOLD, _GROWN_TRIM)
                lib.malloc_trim(0)


@contextmanager
def table_memory(rows: int | None = None) -> Iterator[None]:
    """What a table is computed in: `small_pages`, and `reused_heap` for ``rows`` of `HEAP_FROM_ROWS` or more (None: always)."""
    if rows is not None and rows < HEAP_FROM_ROWS:
        with small_pages():
            yield
        return
    with small_pages(), reused_heap():
        yield
