"""Many short device bursts per step: a program split by graph breaks or host syncs.

A compiled XLA device (TPU) runs a whole step as one program when nothing
stops the trace: its timeline is one long burst of ops. A graph break, or a
host sync such as ``.item()`` or printing a tensor, ends the program; the
device then idles while the host catches up and launches the next piece.
TorchTPU's docs name "many short TPU bursts" as that warning sign. The rule
counts bursts (device work separated by idle gaps) per step on devices read
from an XPlane; on other non-CUDA backends it says it was not checked (their
programs are not one per step by design), and on CUDA it stays silent (the
idle-gap rule covers those traces).
"""

from __future__ import annotations

import numpy as np

from ...trace import categories as K
from .intervals import merge
from .model import HIGH, MEDIUM, NOT_CHECKED, Finding, Inputs, limit_rows
from .thresholds import Thresholds

#: Backends whose device work is compiled XLA programs (read from an XPlane).
_XLA = "xla"
#: Non-CUDA backends the rule cannot judge.
_OTHERS = ("xpu", "hpu", "mtia", "privateuse1", "neuron")


def _bursts(start: np.ndarray, end: np.ndarray, gap_us: float) -> tuple[np.ndarray, np.ndarray]:
    """Blocks of device work whose gaps are shorter than ``gap_us``, merged."""
    bs, be = merge(start, end)
    if len(bs) < 2:
        return bs, be
    new = np.empty(len(bs), dtype=bool)
    new[0] = True
    new[1:] = bs[1:] - be[:-1] >= gap_us
    idx = np.flatnonzero(new)
    return bs[idx], np.maximum.reduceat(be, idx)


def find_device_bursts(inp: Inputs, th: Thresholds) -> list[Finding]:
    """Steps in which an XLA device ran many short bursts (graph breaks, ``.item()``)."""
    backends = K.backends_in(inp.events)
    if _XLA not in backends:
        others = sorted(b for b in backends if b in _OTHERS)
        if not others:
            return []
        return [
            Finding(
                rule="device_bursts",
                severity=NOT_CHECKED,
                title="Short device bursts (graph breaks) not checked on this backend",
                detail=(
                    f"Not checked because the rule reads compiled XLA programs (a TPU's XPlane), and "
                    f"this trace's device work comes from {', '.join(others)}."
                ),
                evidence={"backends": others},
            )
        ]
    ev = inp.events
    dev_rows = np.flatnonzero(K.kind_mask(ev, K.DEVICE_ACTIVITY))
    steps = inp.steps
    if not len(dev_rows) or steps is None or steps.empty:
        return []
    found = []
    devices = ev["device"].to_numpy()[dev_rows]
    for dev in np.unique(devices):
        rows = dev_rows[devices == dev]
        s, e = inp.ts[rows], inp.end[rows]
        bs, be = _bursts(s, e, th.burst_gap_us)
        for _, step in steps.iterrows():
            lo, hi = float(step["start_us"]), float(step["start_us"] + step["wall_us"])
            inside = (bs >= lo) & (bs < hi)
            n = int(inside.sum())
            if n < th.burst_min_per_step:
                continue
            lengths = (be - bs)[inside]
            median = float(np.median(lengths))
            if median > th.burst_short_us:
                continue
            idle = (hi - lo) - float(lengths.sum())
            share = 100.0 * idle / max(hi - lo, 1e-9)
            in_step = rows[(s >= lo) & (s < hi)]
            found.append(
                Finding(
                    rule="device_bursts",
                    severity=HIGH if share >= th.overhead_high_idle_pct else MEDIUM,
                    title=f"Device {int(dev)} ran {n} short bursts in step {step['step']} (graph breaks?)",
                    detail=(
                        f"The device ran {n} separate bursts (median {median:.0f} µs) and idled "
                        f"{share:.0f}% of the step between them. On a TPU the step should be one "
                        "program: graph breaks or host syncs (.item(), printing or branching on a "
                        "tensor's value) split it. Keep values on the device, and check "
                        "torch.compile's graph breaks (fullgraph=True shows where)."
                    ),
                    evidence={"bursts": n, "median_burst_us": median, "idle_pct": share, "device": int(dev)},
                    impact_us=idle,
                    event_rows=limit_rows(in_step, th.max_event_rows),
                )
            )
    return found
