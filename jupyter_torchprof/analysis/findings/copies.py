"""Rule 5: copies between host and device, and inside the device.

Kineto names copies after their direction and, on CUDA, the kind of host
memory: ``Memcpy HtoD (Pageable -> Device)``, ``Memcpy DtoH (Device ->
Pinned)``, ``Memcpy DtoD (Device -> Device)``. ROCm writes ``Host`` instead,
which does not say pinned or pageable, so that check only runs where the
trace tells.

A copy launched by the ``aten::copy_`` with which ``aten::addmm`` (and its
kin, `cpu.BIAS_SEED_OPS`) seeds its output with the bias is left out: it is
how torch computes ``nn.Linear``, and no advice here removes it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...format import fmt_bytes, fmt_time
from ...trace import categories as K
from .cpu import bias_seed_copies
from .model import INFO, MEDIUM, Finding, Inputs, limit_rows
from .thresholds import Thresholds
from .vocab import cause_labels, parse_copy_name


@dataclass(frozen=True)
class _Copies:
    """The copies the rule looks at, one array entry per copy event."""

    rows: np.ndarray
    names: np.ndarray
    direction: np.ndarray
    pageable: np.ndarray
    nbytes: np.ndarray
    dur: np.ndarray
    op: np.ndarray
    #: The distinct launching ops (sorted), their `Inputs.op_levels` and cause labels.
    chain_ops: np.ndarray
    levels: np.ndarray
    causes: dict[int, str]


def find_copies(inp: Inputs, th: Thresholds) -> list[Finding]:
    """Pageable copies, device→host copies in the step, hidden device→device copies."""
    if not inp.device_traced:
        return []
    rows = np.flatnonzero(inp.is_kind(K.MEMCPY))
    if inp.has_steps and len(rows):
        rows = rows[inp.launched_in_steps(rows)]
    op = inp.column("op")[rows]
    launched_by_op = op >= 0
    seed = np.zeros(len(rows), dtype=bool)
    seed[launched_by_op] = bias_seed_copies(inp, op[launched_by_op])
    rows = rows[~seed]
    if not len(rows):
        return []
    c = _copies_of(inp, rows)
    checks = (_pageable, _device_to_host, _device_to_device, _host_to_device, _peer_to_peer)
    return [f for check in checks if (f := check(inp, th, c)) is not None]


def _copies_of(inp: Inputs, rows: np.ndarray) -> _Copies:
    """Direction, memory kinds, bytes, time and launching op of the copies at ``rows``."""
    names = inp.names[rows].astype(str)
    # Parsed once per distinct name, then spread by code (not a lookup per copy).
    _, first, inv = np.unique(inp.name_codes[rows], return_index=True, return_inverse=True)
    parsed = [parse_copy_name(n) for n in names[first].tolist()]
    op = inp.column("op")[rows]
    chain_ops = np.unique(op[op >= 0])
    levels = inp.op_levels(chain_ops)
    return _Copies(
        rows=rows,
        names=names,
        direction=np.array([p[0] for p in parsed])[inv],
        pageable=np.array(["pageable" in (p[1] + p[2]).lower() for p in parsed], dtype=bool)[inv],
        nbytes=np.nan_to_num(inp.events["bytes"].to_numpy()[rows]),
        dur=inp.dur[rows],
        op=op,
        chain_ops=chain_ops,
        levels=levels,
        causes=dict(zip(chain_ops.tolist(), cause_labels(inp, levels), strict=True)),
    )


def _stats(inp: Inputs, c: _Copies, mask: np.ndarray) -> dict[str, Any]:
    """The evidence of the copies in ``mask``: counts, bytes and time (total and per step), causes."""
    per = inp.n_steps
    # Labelled once per distinct op (counted in order of first appearance,
    # so ties keep the order a per-copy count gave them).
    causes: Counter[str] = Counter()
    for o, n in Counter(c.op[mask].tolist()).items():
        causes[c.causes[o] if o >= 0 else "(unlinked)"] += n
    return {
        "count": int(mask.sum()),
        "per_step": float(mask.sum()) / per,
        "bytes": float(c.nbytes[mask].sum()),
        "bytes_per_step": float(c.nbytes[mask].sum()) / per,
        "time_us": float(c.dur[mask].sum()),
        "time_per_step_us": float(c.dur[mask].sum()) / per,
        "by_name": {k: int(v) for k, v in Counter(c.names[mask].tolist()).most_common()},
        "causes": dict(causes.most_common(5)),
    }


def _finding(
    inp: Inputs,
    th: Thresholds,
    c: _Copies,
    mask: np.ndarray,
    ev: dict[str, Any],
    severity: str,
    title: str,
    detail: str,
) -> Finding:
    """The finding of the copies in ``mask``, whose `_stats` are ``ev``."""
    # The ops of the chains above the copies' launching ops.
    launched = c.op[mask]
    levels = c.levels[:, np.searchsorted(c.chain_ops, np.unique(launched[launched >= 0]))]
    ops = sorted(set(inp.name_text(levels[levels >= 0])))
    return Finding(
        rule="copies",
        severity=severity,
        title=title,
        detail=detail + " Caused by: " + ", ".join(f"{k} ×{v}" for k, v in ev["causes"].items()) + ".",
        evidence=ev,
        impact_us=ev["time_per_step_us"],
        event_rows=limit_rows(c.rows[mask], th.max_event_rows),
        ops=ops,
        kernels=list(ev["by_name"]),
    )


def _pageable(inp: Inputs, th: Thresholds, c: _Copies) -> Finding | None:
    """Copies from or to pageable host memory."""
    if not c.pageable.any():
        return None
    ev = _stats(inp, c, c.pageable)
    return _finding(
        inp,
        th,
        c,
        c.pageable,
        ev,
        MEDIUM,
        f"{ev['count']} copies with pageable host memory ({fmt_bytes(ev['bytes_per_step'])}{inp.per})",
        "Pageable memory is staged through a driver buffer and the copy blocks the host. "
        "Pin it (`tensor.pin_memory()`, DataLoader(pin_memory=True)) and copy with "
        "non_blocking=True so the copy overlaps compute.",
    )


def _device_to_host(inp: Inputs, th: Thresholds, c: _Copies) -> Finding | None:
    """Copies to the host inside the steps: each one waits for the device."""
    dtoh = c.direction == "DtoH"
    if not dtoh.any():
        return None
    ev = _stats(inp, c, dtoh)
    u = inp.per
    step_pct = 100 * ev["time_per_step_us"] / max(inp.wall_per_step, 1e-9)
    return _finding(
        inp,
        th,
        c,
        dtoh,
        ev,
        MEDIUM if step_pct >= th.copy_medium_step_pct else INFO,
        f"Device→host copies inside the {inp.unit}: {ev['per_step']:.3g}{u}, {fmt_bytes(ev['bytes_per_step'])}{u}",
        "Every copy to the host (`.item()`, `.cpu()`, `.tolist()`, printing, logging a "
        "tensor) waits for the device's queue to drain. Accumulate metrics on the device "
        "and read them every N steps.",
    )


def _device_to_device(inp: Inputs, th: Thresholds, c: _Copies) -> Finding | None:
    """Copies inside device memory, against the device's busy time."""
    dtod = c.direction == "DtoD"
    if not dtod.any():
        return None
    ev = _stats(inp, c, dtod)
    u = inp.per
    dev_busy = float(inp.summary.get("device_busy_per_step_us") or 0.0)
    share = 100 * ev["time_per_step_us"] / dev_busy if dev_busy > 0 else 0.0
    return _finding(
        inp,
        th,
        c,
        dtod,
        ev,
        MEDIUM if share >= th.copy_dtod_medium_pct else INFO,
        f"Device→device copies: {ev['per_step']:.3g}{u}, {fmt_bytes(ev['bytes_per_step'])}{u}, "
        f"{fmt_time(ev['time_per_step_us'])}{u} ({share:.1f}% of device busy time)",
        "Copies inside device memory are pure data movement, often not asked for: "
        "`.contiguous()` after a transpose/permute, `.clone()`, dtype casts, torch.cat of "
        "freshly made tensors, or gradient bucket copies (DDP). Match layouts and dtypes "
        "so the copy disappears, or let torch.compile fuse it away.",
    )


def _host_to_device(inp: Inputs, th: Thresholds, c: _Copies) -> Finding | None:
    """Many small host→device copies, or else host→device copies taking a large share of the step."""
    htod = c.direction == "HtoD"
    if not htod.any():
        return None
    u = inp.per
    wall = inp.wall_per_step
    small = htod & (c.nbytes > 0) & (c.nbytes < th.copy_small_bytes)
    ev = _stats(inp, c, htod)
    step_pct = 100 * ev["time_per_step_us"] / wall if wall > 0 else 0.0
    if small.sum() / inp.n_steps >= th.copy_small_min_per_step:
        es = _stats(inp, c, small)
        return _finding(
            inp,
            th,
            c,
            small,
            es,
            MEDIUM,
            f"Many small host→device copies: {es['per_step']:.3g}{u} under {fmt_bytes(th.copy_small_bytes)}",
            "Small tensors built on the CPU every step (torch.tensor(...) then .to(device), "
            "Python scalars turned into tensors) each cost a copy and a launch. Create them "
            "once on the device (torch.tensor(..., device=...), register_buffer).",
        )
    if step_pct < th.copy_medium_step_pct:
        return None
    return _finding(
        inp,
        th,
        c,
        htod,
        ev,
        MEDIUM,
        f"Host→device copies take {step_pct:.0f}% of the {inp.unit} "
        f"({fmt_bytes(ev['bytes_per_step'])}{u} at {_gbps(ev['bytes'], ev['time_us'])})",
        "Input transfers are not hidden behind compute. Pin the host buffers, copy with "
        "non_blocking=True and prefetch the next batch while this one computes.",
    )


def _peer_to_peer(inp: Inputs, th: Thresholds, c: _Copies) -> Finding | None:
    """Copies between devices (reported for information)."""
    p2p = c.direction == "PtoP"
    if not p2p.any():
        return None
    ev = _stats(inp, c, p2p)
    u = inp.per
    return _finding(
        inp,
        th,
        c,
        p2p,
        ev,
        INFO,
        f"Peer-to-peer copies: {ev['per_step']:.3g}{u}, {fmt_bytes(ev['bytes_per_step'])}{u}",
        "Copies between devices (tensor.to('cuda:1'), model parallelism).",
    )


def _gbps(nbytes: float, us: float) -> str:
    return f"{nbytes / (us * 1e3):.3g} GB/s" if us > 0 and nbytes > 0 else "unknown bandwidth"
