"""Notes on rows the profiler itself makes: step ranges, its own overhead records, its synchronisations.

What the real traces in tests/data/kineto hold: one ``ProfilerStep#N``
range per step; one ``cudaDeviceSynchronize`` (``hipDeviceSynchronize`` on
the MI250 trace) after the last step, under no op, the last host call of the
trace: torch's profiler synchronises the device when it stops
(``torch.autograd.profiler.profile.__exit__``) so that every kernel is in the
trace. The clean-capture recipe (``capture/runner.py``) also synchronises at
the end of every profiled step, inside the step's range, so that a step's
wall time includes the device work it queued. Kineto writes its own costs
(``Activity Buffer Request``: CUPTI asking for a new record buffer) in the
``overhead`` category.
"""

from __future__ import annotations

import re

import numpy as np

from ...trace import categories as K
from ..ops import STEP_ROW
from .base import OPS, Annotation, Hit, NoteContext
from .ops_common import name_rows, of_calls, of_kinds, verdicts

_STEP = re.compile(r"^ProfilerStep#\d+$")
DEVICE_SYNCS = ("cudaDeviceSynchronize", "hipDeviceSynchronize")

STEP_RANGE = Annotation(
    "profiler-step",
    OPS,
    "the profiler's step range, not your code",
    "torch.profiler opens one ProfilerStep#N range per prof.step(); the table merges them into one row. Its "
    "total time is the step's wall time; its self time is what no op inside it covers: Python between ops, "
    "the profiler's own bookkeeping at the step boundary, and (with %%torchprof) the wait for the step's "
    "device work.",
)
PROFILER_OVERHEAD = Annotation(
    "profiler-overhead",
    OPS,
    "the profiler, not your code",
    "Kineto records its own costs in the 'overhead' category: 'Activity Buffer Request' is CUPTI handing the "
    "profiler a new buffer for device activity records. Its time would not be spent without the profiler; "
    "a gap it sits in is the profiler's, not a stall in your program.",
)
FINAL_SYNC = Annotation(
    "profiler-final-sync",
    OPS,
    "the profiler's own final synchronisation",
    "torch.profiler synchronises the device when it stops (profile.__exit__ calls the device's synchronize) "
    "so that every kernel it launched is recorded. The call sits under no op, after the last step, as the "
    "trace's last host call. Its time is the device finishing queued work, caused by the profiler, not by "
    "your code.",
)
STEP_SYNC = Annotation(
    "step-end-sync",
    OPS,
    "the step's closing sync (waits for its device work)",
    "The clean-capture recipe (%%torchprof) synchronises the device at the end of every profiled step, inside "
    "the step's range and under no op, so that a step's wall time includes the device work it queued. Its "
    "time is the host waiting for the device to finish the step, which the recipe adds on purpose; in a "
    "plain torch.profiler run it is the code's own synchronize at the end of the step.",
)


def profiler_rows(ctx: NoteContext) -> list[Hit]:
    """ProfilerStep ranges and Kineto overhead records."""
    hits = []
    steps = name_rows(ctx, _STEP.match, (K.USER_ANNOTATION,))
    if len(steps):
        # the merged row as a whole shows it, not one ProfilerStep#N
        hits.append(Hit(OPS, STEP_ROW, STEP_RANGE.id))
    if "cat" in ctx.events.columns:
        overhead = np.flatnonzero((ctx.events["cat"] == "overhead").to_numpy())
        for name, first, _, _ in verdicts(ctx, overhead, np.ones(len(overhead), dtype=bool)):
            hits.append(Hit(OPS, name, PROFILER_OVERHEAD.id, event=first))
    return hits


def _last_child(ctx: NoteContext, parents: np.ndarray) -> np.ndarray:
    """Per event: True where it is the last-starting host event directly under one of ``parents``."""
    is_parent = np.zeros(len(ctx.parent) + 1, dtype=bool)
    is_parent[parents] = True
    host = np.flatnonzero(is_parent[ctx.parent])  # parent -1 reads the last slot, never set
    host = host[of_kinds(ctx, host, K.HOST_KINDS)]
    out = np.zeros(len(ctx.parent), dtype=bool)
    if len(host):
        # Per parent, the child with the latest start, the first such in row
        # order on a tie (pandas' idxmax): sorted by parent, then latest
        # start; lexsort is stable and ``host`` ascending. numpy, not a
        # pandas groupby: that cost a fifth of a small trace's notes.
        parent = ctx.parent[host]
        order = np.lexsort((-ctx.events["ts"].to_numpy()[host], parent))
        first = np.r_[True, parent[order][1:] != parent[order][:-1]]
        out[host[order[first]]] = True
    return out


def _last_top_level(ctx: NoteContext, rows: np.ndarray) -> np.ndarray:
    """Per row of ``rows``: True where no host event at the top of its thread starts after it."""
    tid, ts = ctx.events["tid"].to_numpy(), ctx.events["ts"].to_numpy()
    top = np.flatnonzero((ctx.parent < 0) & np.isin(tid, np.unique(tid[rows])))
    top = top[of_kinds(ctx, top, K.HOST_KINDS)]
    # The latest top-level start per thread (threads with none: never true).
    threads, which = np.unique(tid[top], return_inverse=True)
    latest = np.full(len(threads), -np.inf)
    np.fmax.at(latest, which, ts[top])
    at = np.minimum(np.searchsorted(threads, tid[rows]), max(len(threads) - 1, 0))
    if not len(threads):
        return np.zeros(len(rows), dtype=bool)
    return (threads[at] == tid[rows]) & (ts[rows] >= latest[at])


def profiler_syncs(ctx: NoteContext) -> list[Hit]:
    """Device-wide syncs under no op: the profiler's final one, and the one closing each step."""
    rows = name_rows(ctx, DEVICE_SYNCS.__contains__, (K.RUNTIME,))
    if not len(rows):
        return []
    parent = ctx.parent[rows]
    steps = name_rows(ctx, _STEP.match, (K.USER_ANNOTATION,))
    closing = _last_child(ctx, steps)[rows] & (parent >= 0)
    final = (parent < 0) & _last_top_level(ctx, rows)
    hits = []
    for note, ok in ((FINAL_SYNC, final), (STEP_SYNC, closing)):
        for name, first, n_ok, n in verdicts(ctx, rows, ok):
            hits.append(Hit(OPS, name, note.id, note.text + of_calls(n_ok, n), first))
    return hits


PROFILER_ANNOTATIONS = (STEP_RANGE, PROFILER_OVERHEAD, FINAL_SYNC, STEP_SYNC)
PROFILER_RULES = (profiler_rows, profiler_syncs)
