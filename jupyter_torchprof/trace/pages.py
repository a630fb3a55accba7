"""Parse and analyse without asking the kernel for huge pages: `small_pages`.

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

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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
