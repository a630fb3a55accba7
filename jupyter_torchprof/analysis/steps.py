"""Per-step breakdown and the headline numbers of a profile."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..trace import categories as K
from ..trace.parser import TraceMeta
from .kernels import (
    activity_rows,
    clip_intervals,
    merge_intervals,
    overlap_per_window,
    union_length,
)
from .names import describe_kernel

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
#: Host-side collective communication (``gloo:all_reduce``, ``c10d::allreduce_``,
#: ``nccl:all_reduce`` ...): time a rank spends waiting for the others.
_COLLECTIVE = re.compile(
    r"^(?:gloo|nccl|rccl|mpi|ucc|xccl|hccl|c10d)[:_]|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|"
    r"broadcast|barrier",
    re.IGNORECASE,
)


def collective_rows(events: pd.DataFrame) -> np.ndarray:
    """Row positions of host ops and annotations that are collective communication."""
    cats = events["name"].cat.categories
    hit = np.array([bool(_COLLECTIVE.search(c)) if isinstance(c, str) else False for c in cats] + [False])
    is_coll = hit[events["name"].cat.codes.to_numpy()]
    return np.flatnonzero(is_coll & K.kind_mask(events, (K.CPU_OP, K.USER_ANNOTATION)))


def step_rows(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Row positions of the ``ProfilerStep#k`` ranges and their step numbers.

    The name pattern is matched once per distinct name, not per row.
    """
    names = events["name"]
    cats = names.cat.categories
    numbers = np.full(len(cats) + 1, -1, dtype=np.int64)  # last slot: missing name
    for i, c in enumerate(cats):
        m = _STEP.match(c) if isinstance(c, str) else None
        if m:
            numbers[i] = int(m.group(1))
    step_no = numbers[names.cat.codes.to_numpy()]
    rows = np.flatnonzero((step_no >= 0) & K.kind_mask(events, K.USER_ANNOTATION))
    return rows, step_no[rows]


def step_table(events: pd.DataFrame) -> pd.DataFrame:
    """One row per ``ProfilerStep#k`` range.

    Columns: ``step``, ``start_us``, ``wall_us`` (the range's duration),
    ``cpu_busy_us`` (time the host spent inside ops or runtime calls during
    the step, over all threads, overlaps counted once), ``device_busy_us``
    (time some device was busy during the step, overlaps counted once),
    ``device_idle_us`` (``wall_us - device_busy_us``, 0 without device work),
    ``host_comm_us`` (time inside host-side collective ops such as
    ``gloo:all_reduce`` or ``c10d::allreduce_``, overlaps counted once),
    ``device_activities`` (kernels, copies, memsets starting in the step), and
    the device time of each kind of work in the step (overlaps counted per
    activity, cut at the step's edges): ``kernel_us``, ``comm_us`` (the
    communication kernels among them, e.g. NCCL collectives), ``memcpy_us``,
    ``memset_us``.
    """
    cols = [
        "step", "start_us", "wall_us", "cpu_busy_us", "device_busy_us", "device_idle_us",
        "host_comm_us", "device_activities", "kernel_us", "comm_us", "memcpy_us", "memset_us",
    ]  # fmt: skip
    rows, numbers = step_rows(events)
    if not len(rows):
        return pd.DataFrame(columns=cols)
    ts = events["ts"].to_numpy()
    dur = events["dur"].to_numpy()
    order = np.argsort(ts[rows], kind="stable")
    rows, numbers = rows[order], numbers[order]
    lo = ts[rows]
    hi = lo + dur[rows]

    host = np.flatnonzero(K.kind_mask(events, (K.CPU_OP, K.RUNTIME)))
    act = activity_rows(events)
    d_s = ts[act]
    d_e = d_s + dur[act]
    if len(rows) > 1 and (lo[1:] < hi[:-1]).any():
        # Overlapping step ranges (several threads stepping): each on its own.
        per = [_one_step(events, host, act, a, b) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
        cpu_busy = np.array([p[0] for p in per])
        dev_busy = np.array([p[1] for p in per])
        by_kind = {k: np.array([p[2][k] for p in per]) for k in _KIND_COLUMNS}
    else:
        h_s = ts[host]
        cpu_busy = overlap_per_window(*merge_intervals(h_s, h_s + dur[host]), lo, hi)
        dev_busy = overlap_per_window(*merge_intervals(d_s, d_e), lo, hi)
        by_kind = {
            col: overlap_per_window(d_s, d_e, lo, hi, w) for col, w in _kind_weights(events, act).items()
        }
    coll = collective_rows(events)
    if len(coll) and not (len(rows) > 1 and (lo[1:] < hi[:-1]).any()):
        host_comm = overlap_per_window(*merge_intervals(ts[coll], ts[coll] + dur[coll]), lo, hi)
    else:
        host_comm = np.array(
            [
                union_length(*clip_intervals(ts[coll], ts[coll] + dur[coll], a, b))
                for a, b in zip(lo, hi, strict=True)
            ]
        )
    first_in = np.searchsorted(np.sort(d_s), lo, side="left")
    last_in = np.searchsorted(np.sort(d_s), hi, side="left")
    table = pd.DataFrame(
        {
            "step": numbers,
            "start_us": lo,
            "wall_us": hi - lo,
            "cpu_busy_us": cpu_busy,
            "device_busy_us": dev_busy,
            "device_idle_us": np.where(len(act) > 0, np.maximum(hi - lo - dev_busy, 0.0), 0.0),
            "host_comm_us": host_comm,
            "device_activities": last_in - first_in,
            **by_kind,
        }
    )
    return table[cols].sort_values("step", kind="stable").reset_index(drop=True)


_KIND_COLUMNS = ("kernel_us", "comm_us", "memcpy_us", "memset_us")


def _kind_weights(events: pd.DataFrame, act: np.ndarray) -> dict[str, np.ndarray]:
    """0/1 weights selecting each kind of device work among ``act``."""
    kind = events["kind"].cat.codes.to_numpy()[act]
    names = events["name"].cat.codes.to_numpy()[act]
    cats = events["name"].cat.categories
    used = np.unique(names)
    comm = np.zeros(len(cats) + 1, dtype=bool)
    comm[used] = [
        used_code >= 0 and describe_kernel(str(cats[used_code])).family == "communication"
        for used_code in used
    ]
    is_comm = comm[names]
    is_kernel = kind == K.KIND_INDEX[K.KERNEL]
    return {
        "kernel_us": is_kernel.astype(np.float64),
        "comm_us": (is_kernel & is_comm).astype(np.float64),
        "memcpy_us": (kind == K.KIND_INDEX[K.MEMCPY]).astype(np.float64),
        "memset_us": (kind == K.KIND_INDEX[K.MEMSET]).astype(np.float64),
    }


def _one_step(
    events: pd.DataFrame, host: np.ndarray, act: np.ndarray, lo: float, hi: float
) -> tuple[float, float, dict[str, float]]:
    ts = events["ts"].to_numpy()
    dur = events["dur"].to_numpy()
    h_s, h_e = ts[host], ts[host] + dur[host]
    d_s, d_e = ts[act], ts[act] + dur[act]
    hm = (h_e > lo) & (h_s < hi)
    dm = (d_e > lo) & (d_s < hi)
    cs, ce = clip_intervals(h_s[hm], h_e[hm], lo, hi)
    ds, de = clip_intervals(d_s[dm], d_e[dm], lo, hi)
    weights = _kind_weights(events, act)
    by_kind = {k: float(((de - ds) * w[dm]).sum()) for k, w in weights.items()}
    return union_length(cs, ce), union_length(ds, de), by_kind


def step_window(steps: pd.DataFrame) -> tuple[float, float] | None:
    """(start, end) of the profiled steps, or None without steps."""
    if steps.empty:
        return None
    return float(steps["start_us"].min()), float((steps["start_us"] + steps["wall_us"]).max())


def device_label(meta: TraceMeta, events: pd.DataFrame) -> str:
    """Human name of the device(s) the trace ran on."""
    names = [str(p.get("name")) for p in meta.device_properties if p.get("name")]
    act = activity_rows(events)
    if names:
        used = sorted(set(events["device"].to_numpy()[act].tolist()))
        if used and all(0 <= d < len(meta.device_properties) for d in used):
            names = [str(meta.device_properties[d].get("name", f"device {d}")) for d in used]
        distinct = sorted(set(names))
        label = distinct[0] if len(distinct) == 1 else ", ".join(distinct)
        return f"{label} ×{len(names)}" if len(names) > 1 and len(distinct) == 1 else label
    if len(act):
        return "device"
    return "CPU"


def summarize(meta: TraceMeta, events: pd.DataFrame, steps: pd.DataFrame) -> dict[str, Any]:
    """Headline numbers: device, steps, wall, CPU and device time per step.

    Without ``ProfilerStep`` ranges (a trace captured without a schedule) the
    whole trace counts as one step.
    """
    act = activity_rows(events)
    has_device = bool(len(act))
    window = step_window(steps)
    ts = events["ts"].to_numpy()
    dur = events["dur"].to_numpy()
    if window is None:
        lo, hi = 0.0, float(meta.span_us)
        n_steps = 0
        wall = hi - lo
        host = np.flatnonzero(K.kind_mask(events, (K.CPU_OP, K.RUNTIME)))
        cpu_busy = union_length(ts[host], ts[host] + dur[host])
        dev_busy = union_length(ts[act], ts[act] + dur[act]) if has_device else 0.0
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
        "kernels": int(K.kind_mask(events, K.KERNEL).sum()),
        "span_us": float(meta.span_us),
        "rank": meta.rank,
        "world_size": meta.world_size,
    }
    if n_steps > 1:
        out["first_step_wall_us"] = float(steps["wall_us"].iloc[0])
        out["rest_wall_per_step_us"] = float(steps["wall_us"].iloc[1:].mean())
    return out
