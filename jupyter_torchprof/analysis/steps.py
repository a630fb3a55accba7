"""Per-step breakdown and the headline numbers of a profile."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..trace import categories as K
from ..trace.parser import TraceMeta
from .kernels import clip_intervals, device_activity, union_length

_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def step_table(events: pd.DataFrame) -> pd.DataFrame:
    """One row per ``ProfilerStep#k`` range.

    Columns: ``step``, ``start_us``, ``wall_us`` (the range's duration),
    ``cpu_busy_us`` (time the host spent inside ops during the step, over all
    threads, overlaps counted once), ``device_busy_us`` (time some device was
    busy during the step), ``device_activities`` (kernels, copies, memsets
    starting in the step).
    """
    cols = ["step", "start_us", "wall_us", "cpu_busy_us", "device_busy_us", "device_activities"]
    is_ann = events["kind"].to_numpy() == K.USER_ANNOTATION
    ann = events.loc[is_ann]
    numbers = ann["name"].astype(object).str.extract(_STEP, expand=False)
    steps = ann.loc[numbers.notna()]
    if steps.empty:
        return pd.DataFrame(columns=cols)
    step_no = numbers.loc[steps.index].astype(int).to_numpy()

    host = events.loc[np.isin(events["kind"].to_numpy(), (K.CPU_OP, K.RUNTIME))]
    h_s = host["ts"].to_numpy()
    h_e = h_s + host["dur"].to_numpy()
    act = device_activity(events)
    d_s = act["ts"].to_numpy()
    d_e = d_s + act["dur"].to_numpy()

    rows = []
    for k, (_, st) in zip(step_no, steps.iterrows(), strict=True):
        lo, hi = float(st["ts"]), float(st["ts"] + st["dur"])
        hm = (h_e > lo) & (h_s < hi)
        cs, ce = clip_intervals(h_s[hm], h_e[hm], lo, hi)
        dm = (d_e > lo) & (d_s < hi)
        ds, de = clip_intervals(d_s[dm], d_e[dm], lo, hi)
        rows.append(
            (
                int(k),
                lo,
                hi - lo,
                union_length(cs, ce),
                union_length(ds, de),
                int(((d_s >= lo) & (d_s < hi)).sum()),
            )
        )
    return pd.DataFrame(rows, columns=cols).sort_values("step").reset_index(drop=True)


def step_window(steps: pd.DataFrame) -> tuple[float, float] | None:
    """(start, end) of the profiled steps, or None without steps."""
    if steps.empty:
        return None
    return float(steps["start_us"].min()), float((steps["start_us"] + steps["wall_us"]).max())


def device_label(meta: TraceMeta, events: pd.DataFrame) -> str:
    """Human name of the device(s) the trace ran on."""
    names = [str(p.get("name")) for p in meta.device_properties if p.get("name")]
    act = device_activity(events)
    if names:
        used = sorted(set(act["device"].tolist())) if not act.empty else []
        if used and all(0 <= d < len(meta.device_properties) for d in used):
            names = [str(meta.device_properties[d].get("name", f"device {d}")) for d in used]
        distinct = sorted(set(names))
        label = distinct[0] if len(distinct) == 1 else ", ".join(distinct)
        return f"{label} ×{len(names)}" if len(names) > 1 and len(distinct) == 1 else label
    if not act.empty:
        return "device"
    return "CPU"


def summarize(meta: TraceMeta, events: pd.DataFrame, steps: pd.DataFrame) -> dict[str, Any]:
    """Headline numbers: device, steps, wall, CPU and device time per step.

    Without ``ProfilerStep`` ranges (a trace captured without a schedule) the
    whole trace counts as one step.
    """
    act = device_activity(events)
    has_device = not act.empty
    window = step_window(steps)
    if window is None:
        lo, hi = 0.0, float(meta.span_us)
        n_steps = 0
        wall = hi - lo
        host = events.loc[np.isin(events["kind"].to_numpy(), (K.CPU_OP, K.RUNTIME))]
        hs = host["ts"].to_numpy()
        cpu_busy = union_length(hs, hs + host["dur"].to_numpy())
        d_s = act["ts"].to_numpy()
        dev_busy = union_length(d_s, d_s + act["dur"].to_numpy()) if has_device else 0.0
        per = 1
    else:
        lo, hi = window
        n_steps = len(steps)
        wall = float(steps["wall_us"].sum())
        cpu_busy = float(steps["cpu_busy_us"].sum())
        dev_busy = float(steps["device_busy_us"].sum())
        per = n_steps
    out: dict[str, Any] = {
        "device": device_label(meta, events),
        "device_traced": has_device,
        "steps": n_steps,
        "wall_per_step_us": wall / per,
        "cpu_busy_per_step_us": cpu_busy / per,
        "device_busy_per_step_us": dev_busy / per if has_device else np.nan,
        "device_busy_pct": 100 * dev_busy / wall if has_device and wall > 0 else np.nan,
        "events": len(events),
        "kernels": int((events["kind"].to_numpy() == K.KERNEL).sum()),
        "span_us": float(meta.span_us),
        "rank": meta.rank,
        "world_size": meta.world_size,
    }
    if n_steps > 1:
        out["first_step_wall_us"] = float(steps["wall_us"].iloc[0])
        out["rest_wall_per_step_us"] = float(steps["wall_us"].iloc[1:].mean())
    return out
