"""Rule 5: copies between host and device, and inside the device.

Kineto names copies after their direction and, on CUDA, the kind of host
memory: ``Memcpy HtoD (Pageable -> Device)``, ``Memcpy DtoH (Device ->
Pinned)``, ``Memcpy DtoD (Device -> Device)``. ROCm writes ``Host`` instead,
which does not say pinned or pageable, so that check only runs where the
trace tells.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

from ...format import fmt_bytes, fmt_time
from ...trace import categories as K
from .model import INFO, MEDIUM, Finding, Inputs, limit_rows
from .sync import cause_label
from .thresholds import Thresholds

_COPY = re.compile(
    r"memcpy\s+(HtoD|DtoH|DtoD|PtoP|HtoH|DtoA|AtoD|AtoH|HtoA)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.I
)
_DIRECTION_LABEL = {
    "HtoD": "host→device",
    "DtoH": "device→host",
    "DtoD": "device→device",
    "PtoP": "peer-to-peer",
}


def parse_copy_name(name: str) -> tuple[str, str, str]:
    """(direction, source memory, destination memory) of a memcpy event name.

    Unknown parts are ``""``; the direction is ``"other"`` when the name does
    not say.
    """
    m = _COPY.search(name)
    if not m:
        return "other", "", ""
    d = m.group(1)
    direction = d[0].upper() + "to" + d[-1].upper()
    return direction, (m.group(2) or ""), (m.group(3) or "")


def find_copies(inp: Inputs, th: Thresholds) -> list[Finding]:
    """Pageable copies, device→host copies in the step, hidden device→device copies."""
    if not inp.device_traced:
        return []
    rows = np.flatnonzero(inp.kind == K.MEMCPY)
    if inp.has_steps and len(rows):
        rows = rows[inp.launched_in_steps(rows)]
    if not len(rows):
        return []
    names = inp.names[rows].astype(str)
    parsed = {n: parse_copy_name(n) for n in set(names.tolist())}
    direction = np.array([parsed[n][0] for n in names])
    pageable = np.array(["pageable" in (parsed[n][1] + parsed[n][2]).lower() for n in names])
    nbytes = np.nan_to_num(inp.events["bytes"].to_numpy()[rows])
    dur = inp.dur[rows]
    op = inp.column("op")[rows]
    per = inp.n_steps
    u = inp.per
    wall = inp.wall_per_step
    dev_busy = float(inp.summary.get("device_busy_per_step_us") or 0.0)
    out: list[Finding] = []

    def stats(mask: np.ndarray) -> dict[str, Any]:
        causes = Counter(cause_label(inp, inp.op_chain(int(o))) if o >= 0 else "(unlinked)" for o in op[mask])
        return {
            "count": int(mask.sum()),
            "per_step": float(mask.sum()) / per,
            "bytes": float(nbytes[mask].sum()),
            "bytes_per_step": float(nbytes[mask].sum()) / per,
            "time_us": float(dur[mask].sum()),
            "time_per_step_us": float(dur[mask].sum()) / per,
            "by_name": {k: int(v) for k, v in Counter(names[mask].tolist()).most_common()},
            "causes": dict(causes.most_common(5)),
        }

    def finding(mask: np.ndarray, severity: str, title: str, detail: str) -> Finding:
        ev = stats(mask)
        ops = sorted({inp.op_name(r) for o in op[mask] if o >= 0 for r in inp.op_chain(int(o))})
        return Finding(
            rule="copies",
            severity=severity,
            title=title,
            detail=detail + " Caused by: " + ", ".join(f"{k} ×{v}" for k, v in ev["causes"].items()) + ".",
            evidence=ev,
            impact_us=ev["time_per_step_us"],
            event_rows=limit_rows(rows[mask].tolist(), th.max_event_rows),
            ops=ops,
            kernels=list(ev["by_name"]),
        )

    if pageable.any():
        ev = stats(pageable)
        out.append(
            finding(
                pageable,
                MEDIUM,
                f"{ev['count']} copies with pageable host memory ({fmt_bytes(ev['bytes_per_step'])}{u})",
                "Pageable memory is staged through a driver buffer and the copy blocks the host. "
                "Pin it (`tensor.pin_memory()`, DataLoader(pin_memory=True)) and copy with "
                "non_blocking=True so the copy overlaps compute.",
            )
        )
    dtoh = direction == "DtoH"
    if dtoh.any():
        ev = stats(dtoh)
        out.append(
            finding(
                dtoh,
                MEDIUM if 100 * ev["time_per_step_us"] / max(wall, 1e-9) >= th.copy_medium_step_pct else INFO,
                f"Device→host copies inside the {inp.unit}: {ev['per_step']:.3g}{u}, "
                f"{fmt_bytes(ev['bytes_per_step'])}{u}",
                "Every copy to the host (`.item()`, `.cpu()`, `.tolist()`, printing, logging a "
                "tensor) waits for the device's queue to drain. Accumulate metrics on the device "
                "and read them every N steps.",
            )
        )
    dtod = direction == "DtoD"
    if dtod.any():
        ev = stats(dtod)
        share = 100 * ev["time_per_step_us"] / dev_busy if dev_busy > 0 else 0.0
        out.append(
            finding(
                dtod,
                MEDIUM if share >= th.copy_dtod_medium_pct else INFO,
                f"Device→device copies: {ev['per_step']:.3g}{u}, {fmt_bytes(ev['bytes_per_step'])}{u}, "
                f"{fmt_time(ev['time_per_step_us'])}{u} ({share:.1f}% of device busy time)",
                "Copies inside device memory are pure data movement, often not asked for: "
                "`.contiguous()` after a transpose/permute, `.clone()`, dtype casts, torch.cat of "
                "freshly made tensors, or gradient bucket copies (DDP). Match layouts and dtypes "
                "so the copy disappears, or let torch.compile fuse it away.",
            )
        )
    htod = direction == "HtoD"
    if htod.any():
        small = htod & (nbytes > 0) & (nbytes < th.copy_small_bytes)
        ev = stats(htod)
        step_pct = 100 * ev["time_per_step_us"] / wall if wall > 0 else 0.0
        if small.sum() / per >= th.copy_small_min_per_step:
            es = stats(small)
            out.append(
                finding(
                    small,
                    MEDIUM,
                    f"Many small host→device copies: {es['per_step']:.3g}{u} under "
                    f"{fmt_bytes(th.copy_small_bytes)}",
                    "Small tensors built on the CPU every step (torch.tensor(...) then .to(device), "
                    "Python scalars turned into tensors) each cost a copy and a launch. Create them "
                    "once on the device (torch.tensor(..., device=...), register_buffer).",
                )
            )
        elif step_pct >= th.copy_medium_step_pct:
            out.append(
                finding(
                    htod,
                    MEDIUM,
                    f"Host→device copies take {step_pct:.0f}% of the {inp.unit} "
                    f"({fmt_bytes(ev['bytes_per_step'])}{u} at "
                    f"{_gbps(ev['bytes'], ev['time_us'])})",
                    "Input transfers are not hidden behind compute. Pin the host buffers, copy with "
                    "non_blocking=True and prefetch the next batch while this one computes.",
                )
            )
    p2p = direction == "PtoP"
    if p2p.any():
        ev = stats(p2p)
        out.append(
            finding(
                p2p,
                INFO,
                f"Peer-to-peer copies: {ev['per_step']:.3g}{u}, {fmt_bytes(ev['bytes_per_step'])}{u}",
                "Copies between devices (tensor.to('cuda:1'), model parallelism).",
            )
        )
    return out


def _gbps(nbytes: float, us: float) -> str:
    return f"{nbytes / (us * 1e3):.3g} GB/s" if us > 0 and nbytes > 0 else "unknown bandwidth"
