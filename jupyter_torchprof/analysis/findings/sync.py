"""Rule 4: synchronisation points, and the op that caused each.

Three kinds of evidence, all device-neutral:

* host runtime calls that block until the device catches up
  (``*Synchronize`` of any backend, blocking ``*Memcpy`` calls);
* the driver's own sync records (Kineto ``cuda_sync``: ``Event Sync``,
  ``Context Sync``, ``Stream Wait Event``), linked to the host call that made
  them by correlation id;
* ops whose result lives on the host, so they must wait (``aten::item``,
  ``aten::_local_scalar_dense``, data-dependent shapes such as
  ``aten::nonzero``) — used by themselves only where the trace has no runtime
  calls to show the wait.

Each sync is charged to its op chain in the host call tree, so the finding
says "``aten::item`` in ``fbgemm::permute_sparse_features`` →
``cudaStreamSynchronize``", not just "there were syncs".
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import numpy as np
import pandas as pd

from ...format import fmt_time
from ...trace import categories as K
from .intervals import merge
from .model import HIGH, INFO, MEDIUM, Finding, Inputs, limit_rows
from .thresholds import Thresholds
from .vocab import SYNC_OPS, cause_label, parse_copy_name

#: Host calls that block until the device has finished the work queued before.
BLOCKING_CALL = re.compile(
    r"synchroni[sz]e|^(cuda|hip)Memcpy(WithStream|2D|3D)?$|^cuMemcpy(DtoH|HtoD|DtoD)?(_v2)?$",
    re.IGNORECASE,
)
#: Driver sync records that are a wait on the device, not of the host.
DEVICE_SIDE_SYNC = ("Stream Wait Event",)


def is_blocking_call(name: str) -> bool:
    """Whether a runtime call blocks the host until the device is done."""
    return bool(BLOCKING_CALL.search(name))


def blocking_rows(inp: Inputs) -> np.ndarray:
    """Rows of host runtime calls that block on the device."""
    rt = np.flatnonzero(inp.is_kind(K.RUNTIME))
    if not len(rt):
        return rt
    # Once per distinct name (no name reads "", which matches no call).
    return rt[inp.name_flags(rt, is_blocking_call)]


def _hint(label: str, copy_dirs: set[str], call: str, kind: str) -> str:
    head = label.split(" in ")[0]
    if kind == "device":
        return (
            "A stream waits on an event recorded on another stream: the device, not the host, "
            "waits. Fine when intended; many of them serialise streams that could overlap."
        )
    if kind == "query":
        return (
            "Non-blocking event queries (e.g. the caching allocator checking blocks used on "
            "other streams); they cost host time but do not stall the device."
        )
    if head in ("aten::item", "aten::_local_scalar_dense"):
        return (
            "`.item()` (also `float(t)`, `if t:`, printing a tensor) copies a value to the host "
            "and waits for all queued work. Keep the value on the device, or read it once "
            "every N steps."
        )
    if head in ("aten::nonzero", "aten::masked_select", "aten::_unique2", "aten::unique_consecutive"):
        return (
            "The output size depends on the data, so the host waits for the device to learn "
            "it. Use fixed-size variants (e.g. torch.nonzero_static, torch.where with a mask) "
            "where you can."
        )
    if head == "aten::repeat_interleave":
        return "Pass output_size= so the host does not wait to learn the result size."
    if "DtoH" in copy_dirs:
        return (
            "A copy to the host (`.cpu()`, `.to('cpu')`, `.numpy()`, `.tolist()`) waits for the "
            "device. Copy into pinned memory with non_blocking=True and read it later, or keep "
            "the data on the device."
        )
    if "HtoD" in copy_dirs:
        return (
            "A host→device copy that blocks: copies from pageable (unpinned) memory synchronise. "
            "Pin the source (`pin_memory()`, DataLoader(pin_memory=True)) and pass "
            "non_blocking=True."
        )
    if head.startswith("(no op: a direct call"):
        return (
            f"`{call}` called directly (e.g. torch.cuda.synchronize() or timing code) drains "
            "the device queue inside the step; keep it out of the loop."
        )
    return "This call makes the host wait for the device, which then idles while the host catches up."


def find_syncs(inp: Inputs, th: Thresholds) -> list[Finding]:
    """Synchronisation points inside the profiled steps, grouped by cause."""
    if not inp.device_traced:
        return []
    recs = np.flatnonzero(inp.is_kind(K.SYNC))
    rec_call = inp.column("launch")[recs] if len(recs) else np.array([], dtype=np.int64)
    call_rows, counts = _calls_in_steps(inp, blocking_rows(inp), rec_call)
    recs_by_call, orphan_recs = _records_by_call(inp, recs, rec_call)
    groups = _group_calls(inp, call_rows, recs_by_call)
    _add_orphan_records(inp, groups, orphan_recs)
    if not groups:
        return _inferred_from_ops(inp, th)
    out = [_group_finding(inp, th, label, call, g, counts) for (label, call), g in groups.items()]
    out.sort(key=lambda f: -f.impact_us)
    return out[: th.sync_groups_reported]


def _calls_in_steps(inp: Inputs, host: np.ndarray, rec_call: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """The host calls to report, and how many were left out as outside the steps or ending one.

    The calls are the blocking ones and the call behind each driver record.
    """
    calls = set(host.tolist()) | {int(c) for c in rec_call.tolist() if c >= 0}
    call_rows = np.array(sorted(calls), dtype=np.int64)
    outside = 0
    trailing = 0
    if len(call_rows):
        inside = inp.in_steps(call_rows) if inp.has_steps else np.ones(len(call_rows), dtype=bool)
        outside = int((~inside).sum())
        call_rows = call_rows[inside]
        tail = _trailing(inp, call_rows)
        trailing = int(tail.sum())
        call_rows = call_rows[~tail]
    return call_rows, {"outside_steps": outside, "step_end_syncs": trailing}


def _records_by_call(
    inp: Inputs, recs: np.ndarray, rec_call: np.ndarray
) -> tuple[dict[int, list[int]], list[int]]:
    """The driver's sync records of each host call, and those (inside the steps) without one."""
    recs_by_call: dict[int, list[int]] = defaultdict(list)
    orphan_recs: list[int] = []
    for r, c in zip(recs.tolist(), rec_call.tolist(), strict=True):
        if c >= 0:
            recs_by_call[int(c)].append(int(r))
        elif not inp.has_steps or inp.in_steps(np.array([r]))[0]:
            orphan_recs.append(int(r))
    return recs_by_call, orphan_recs


def _new_group(kind: str) -> dict[str, Any]:
    """An empty group of syncs: its members, and what they tell about the cause."""
    return {"kind": kind, "calls": [], "recs": [], "ops": set(), "chains": set(), "ann": set(), "dirs": set()}


def _call_kind(call: str, rec_names: list[str]) -> str:
    """``blocking`` (the host waits), ``device`` (a stream waits) or ``query`` (nobody waits)."""
    if is_blocking_call(call):
        return "blocking"
    if rec_names and all(n in DEVICE_SIDE_SYNC for n in rec_names):
        return "device"
    return "query"


def _group_calls(
    inp: Inputs, call_rows: np.ndarray, recs_by_call: dict[int, list[int]]
) -> dict[tuple[str, str], dict[str, Any]]:
    """The host calls and their records grouped by (cause, call)."""
    copies = _copies_by_op(inp)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for c in call_rows.tolist():
        ops = inp.op_chain(c)
        call = str(inp.names[c])
        rec_names = sorted({str(inp.names[r]) for r in recs_by_call.get(c, [])})
        kind = _call_kind(call, rec_names)
        label = cause_label(inp, ops, c)
        key_call = call if kind == "blocking" or not rec_names else f"{call} ({', '.join(rec_names)})"
        g = groups.setdefault((label, key_call), _new_group(kind))
        g["calls"].append(c)
        g["recs"] += recs_by_call.get(c, [])
        g["ops"].update(ops)
        g["chains"].add(" › ".join(inp.op_name(r) for r in ops))
        a = inp.annotation_of(c)
        if a >= 0:
            g["ann"].add(str(inp.names[a]))
        for r in ops:
            g["dirs"].update(copies.get(r, ()))
    return groups


def _add_orphan_records(
    inp: Inputs, groups: dict[tuple[str, str], dict[str, Any]], orphan_recs: list[int]
) -> None:
    """Group the driver's records whose host call is not in the trace, by record name."""
    for r in orphan_recs:
        name = str(inp.names[r])
        kind = "device" if name in DEVICE_SIDE_SYNC else "query"
        g = groups.setdefault(("(host call not in the trace)", name), _new_group(kind))
        g["recs"].append(r)


def _group_finding(
    inp: Inputs, th: Thresholds, label: str, call: str, g: dict[str, Any], counts: dict[str, int]
) -> Finding:
    """The finding of one (cause, call) group of syncs."""
    wall = inp.wall_per_step
    per = inp.n_steps
    tid = inp.column("tid")
    n = len(g["calls"]) or len(g["recs"])
    calls_g = np.array(g["calls"], dtype=np.int64)
    threads = len(set(tid[calls_g].tolist())) if len(calls_g) else 0
    blocking = g["kind"] == "blocking" and len(calls_g) > 0
    # Threads blocking at the same time block the host once: the union
    # over time, cut to the steps, not the sum of the calls.
    blocked = blocked_time(inp, calls_g) if blocking else 0.0
    summed = float(inp.dur[calls_g].sum()) if blocking else 0.0
    blocked_step = blocked / per
    pct = 100 * blocked_step / wall if wall > 0 else 0.0
    if g["kind"] == "blocking":
        sev = HIGH if pct >= th.sync_high_step_pct else MEDIUM if pct >= th.sync_medium_step_pct else INFO
        on = f" on {threads} threads" if threads > 1 else ""
        title = (
            f"Sync: {label} → {call} ×{n}{_rate(n, inp)}, host blocked "
            f"{fmt_time(blocked_step)}{inp.per}{on} ({pct:.1f}% of the {inp.unit})"
        )
    else:
        sev = INFO
        what = "device-side waits" if g["kind"] == "device" else "non-blocking syncs"
        title = f"{what.capitalize()}: {label} → {call} ×{n}{_rate(n, inp)}"
    detail = _hint(label, g["dirs"], call, g["kind"])
    if g["ann"]:
        detail += " Inside: " + ", ".join(sorted(g["ann"])[:3]) + "."
    op_rows = sorted(g["ops"])
    stack = inp.stack_of(op_rows)
    evidence: dict[str, Any] = {
        "cause": label,
        "call": call,
        "kind": g["kind"],
        "count": n,
        "per_step": n / per,
        "blocked_us": blocked,
        "blocked_summed_us": summed,
        "threads": threads,
        "blocked_per_step_us": blocked_step,
        "blocked_step_pct": pct,
        "op_chains": sorted(g["chains"]),
        "sync_records": sorted({str(inp.names[r]) for r in g["recs"]}),
        "copy_directions": sorted(g["dirs"]),
        "annotations": sorted(g["ann"]),
        **counts,
    }
    if stack:
        evidence["stack"] = stack
    return Finding(
        rule="sync",
        severity=sev,
        title=title,
        detail=detail,
        evidence=evidence,
        impact_us=blocked_step,
        event_rows=limit_rows([*g["calls"], *g["recs"], *op_rows], th.max_event_rows),
        ops=sorted({inp.op_name(r) for r in op_rows}),
    )


def blocked_time(inp: Inputs, rows: np.ndarray) -> float:
    """Time (overlaps counted once) some of ``rows`` ran, inside the steps (or the recording window)."""
    total = 0.0
    for lo, hi in inp.windows:
        s = np.clip(inp.ts[rows], lo, hi)
        e = np.clip(inp.end[rows], lo, hi)
        bs, be = merge(s, e)
        total += float((be - bs).sum())
    return total


def _rate(n: int, inp: Inputs) -> str:
    return f" ({n / inp.n_steps:.3g}/step)" if inp.has_steps else ""


def _trailing(inp: Inputs, rows: np.ndarray) -> np.ndarray:
    """Syncs that end a step: called outside any op, with no op after them.

    That is how a benchmark loop (and our own capture) ends each step so that
    the step's time includes its device work; it costs nothing extra.
    """
    out = np.zeros(len(rows), dtype=bool)
    if not len(rows):
        return out
    ops = np.flatnonzero(inp.is_kind(K.CPU_OP))
    tid = inp.column("tid")
    # Start of the last op of each (step, thread): one pass over the ops.
    last = pd.Series(inp.ts[ops]).groupby([inp.step_of(ops), tid[ops]]).max().to_dict()
    step = inp.step_of(rows)
    for i, r in enumerate(rows.tolist()):
        if step[i] < 0 or inp.op_chain(r):
            continue
        out[i] = last.get((int(step[i]), int(tid[r])), -np.inf) < inp.end[r]
    return out


def _copies_by_op(inp: Inputs) -> dict[int, set[str]]:
    """Copy directions (HtoD, DtoH ...) of the copies each op row launched itself."""
    mem = np.flatnonzero(inp.is_kind(K.MEMCPY))
    op = inp.column("op")[mem]
    out: dict[int, set[str]] = defaultdict(set)
    directions = {c: parse_copy_name(inp.name_of_code(c))[0] for c in inp.codes_in(mem).tolist()}
    for o, c in zip(op.tolist(), inp.name_codes[mem].tolist(), strict=True):
        if o >= 0:
            out[o].add(directions[c])
    return out


def _inferred_from_ops(inp: Inputs, th: Thresholds) -> list[Finding]:
    """Sync-causing ops in a device trace without runtime calls to show the wait."""
    if inp.is_kind(K.RUNTIME).any():
        return []
    rows = sync_op_rows(inp)
    if inp.has_steps and len(rows):
        rows = rows[inp.in_steps(rows)]
    if not len(rows):
        return []
    counts = count_names(inp, rows)
    per = inp.n_steps
    return [
        Finding(
            rule="sync",
            severity=MEDIUM,
            title=f"Likely syncs: {', '.join(f'{k} ×{v}' for k, v in counts.items())} (no runtime calls recorded)",
            detail=(
                "These ops bring a value to the host and so wait for the device; the trace has no "
                "runtime calls to measure how long. " + _hint(next(iter(counts)), set(), "", "blocking")
            ),
            evidence={"ops": counts, "per_step": len(rows) / per, "inferred": True},
            event_rows=limit_rows(rows, th.max_event_rows),
            ops=list(counts),
        )
    ]


def sync_op_rows(inp: Inputs) -> np.ndarray:
    """Rows of ops that must bring a value to the host (`SYNC_OPS`).

    Only the outermost of nested ones (``aten::item`` calls
    ``aten::_local_scalar_dense``): one sync, counted once.
    """
    rows = inp.rows_named(SYNC_OPS, np.flatnonzero(inp.is_kind(K.CPU_OP)))
    return rows[~np.isin(inp.parent[rows], rows)]


def count_names(inp: Inputs, rows: np.ndarray) -> dict[str, int]:
    """Occurrences of each name among ``rows``, most frequent first."""
    return {k: int(v) for k, v in inp.count_names(rows).items()}


def describe_unchecked(inp: Inputs) -> str:
    """For a trace without device data: which host ops would sync on a device."""
    rows = sync_op_rows(inp)
    if not len(rows):
        return ""
    counts = count_names(inp, rows)
    listed = ", ".join(f"{k} ×{v}" for k, v in counts.items())
    return f" Found {listed}: on an accelerator each call would wait for the device."
