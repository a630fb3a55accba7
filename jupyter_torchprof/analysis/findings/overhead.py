"""Rules 1 and 3: overhead-bound and launch-bound steps.

Overhead-bound: the device is idle for most of the step while the host is
busy in ops (dispatch, Python, launches), so the device waits on the host.
Host time spent blocked in syncs is not host work and is taken out first.

Launch-bound: the typical kernel finishes faster than the host can launch
the next, so however fast the device is, it waits.
"""

from __future__ import annotations

import numpy as np

from ...format import fmt_time
from ...trace import categories as K
from .model import HIGH, INFO, MEDIUM, NOT_CHECKED, Finding, Inputs, limit_rows, unique_rows
from .sync import blocked_time, blocking_rows
from .thresholds import Thresholds


def sync_wait_per_step(inp: Inputs) -> float:
    """Host time per step spent inside blocking sync calls (overlaps once)."""
    return blocked_time(inp, blocking_rows(inp)) / inp.n_steps


def _top_self_cpu_ops(inp: Inputs, n: int = 5) -> list[str]:
    ops = np.flatnonzero(inp.is_kind(K.CPU_OP))
    if inp.has_steps and len(ops):
        ops = ops[inp.in_steps(ops)]
    if not len(ops) or "self_cpu_us" not in inp.events:
        return []
    sums = inp.count_names(ops, inp.events["self_cpu_us"].to_numpy()[ops])
    return list(sums)[:n]


def find_overhead(inp: Inputs, th: Thresholds) -> list[Finding]:
    """One finding when the device is idle for most of the step."""
    if not inp.device_traced:
        return []
    s = inp.summary
    wall = float(s.get("wall_per_step_us") or 0.0)
    dev = float(s.get("device_busy_per_step_us") or 0.0)
    cpu = float(s.get("cpu_busy_per_step_us") or 0.0)
    if wall <= 0:
        return []
    # The summary's share: busy time over the steps' time until their device
    # work ended, so a device lagging behind the host never reads above 100%.
    busy_pct = float(s.get("device_busy_pct", np.nan))
    if not np.isfinite(busy_pct):
        busy_pct = 100 * dev / wall
    if busy_pct >= th.overhead_device_busy_max_pct:
        return []
    idle_pct = 100 - busy_pct
    sync = min(sync_wait_per_step(inp), cpu)
    work = cpu - sync
    cpu_pct = 100 * cpu / wall
    severity = HIGH if idle_pct >= th.overhead_high_idle_pct else MEDIUM
    top = _top_self_cpu_ops(inp)
    u = inp.unit
    if cpu_pct < th.untraced_cpu_busy_max_pct:
        title = f"Device idle {idle_pct:.0f}% of the {u}; host ops cover only {cpu_pct:.0f}% of it"
        detail = (
            "Most of the step runs outside profiled ops: Python between ops, data loading, "
            "compilation, or waiting on another process. Profile with --stack to see the Python "
            "side, move data loading into DataLoader workers, and warm up (--warmup) so "
            "compilation stays out of the measured steps."
        )
        kind = "untraced"
    elif work >= th.overhead_cpu_over_device * dev:
        title = (
            f"Overhead-bound {u}: device idle {idle_pct:.0f}%, host ops {fmt_time(work)}{inp.per} "
            f"vs device busy {fmt_time(dev)}{inp.per}"
        )
        detail = (
            "The host spends longer dispatching ops than the device spends computing them, so "
            "kernels arrive slower than they run. Give each launch more work (larger batches), "
            "cut per-step Python overhead, fuse ops with torch.compile, or replay the step as a "
            "CUDA graph (torch.compile(mode='reduce-overhead'), torch.cuda.graphs). "
            "Most host time: " + ", ".join(top[:3]) + "."
        )
        kind = "overhead"
    else:
        title = (
            f"Device idle {idle_pct:.0f}% of the {u} (host ops {fmt_time(work)}{inp.per}, "
            f"syncs {fmt_time(sync)}{inp.per})"
        )
        detail = (
            "Neither the host's ops nor the device's work fill the step: the device waits "
            "between bursts. The idle-gap findings show when, and what the host did meanwhile."
        )
        kind = "idle"
    steps = np.flatnonzero(inp.is_step_range)
    return [
        Finding(
            rule="overhead",
            severity=severity,
            title=title,
            detail=detail,
            evidence={
                "kind": kind,
                "wall_per_step_us": wall,
                "cpu_busy_per_step_us": cpu,
                "sync_wait_per_step_us": sync,
                "host_work_per_step_us": work,
                "device_busy_per_step_us": dev,
                "device_busy_pct": busy_pct,
                "device_idle_pct": idle_pct,
                "steps": int(s.get("steps") or 0),
            },
            impact_us=wall * idle_pct / 100,
            event_rows=limit_rows(steps, th.max_event_rows),
            ops=top,
        )
    ]


def find_launch_bound(inp: Inputs, th: Thresholds) -> list[Finding]:
    """Median kernel shorter than the median launch call, with many kernels per step."""
    if not inp.device_traced:
        return []
    kern = np.flatnonzero(inp.is_kind(K.KERNEL))
    if inp.has_steps and len(kern):
        kern = kern[inp.launched_in_steps(kern)]
    per = inp.n_steps
    kps = len(kern) / per
    if kps < th.launch_min_kernels_per_step:
        return []
    launch = inp.column("launch")[kern]
    launches = unique_rows(launch[launch >= 0])
    if not len(launches):
        return [
            Finding(
                rule="launch",
                severity=NOT_CHECKED,
                title="Launch overhead not checked: no kernel launch calls in the trace",
                detail=(
                    f"{kps:.0f} kernels/step, but the trace holds no host runtime calls linked to "
                    "them, so kernel time cannot be compared with launch time."
                ),
                evidence={"kernels_per_step": kps},
            )
        ]
    k_dur = inp.dur[kern]
    med_k = float(np.median(k_dur))
    med_l = float(np.median(inp.dur[launches]))
    if med_k >= med_l:
        return []
    short = k_dur < med_l
    busy_pct = float(inp.summary.get("device_busy_pct") or 0.0)
    severity = INFO if busy_pct >= th.launch_busy_ok_pct else MEDIUM
    top = list(inp.count_names(kern[short]))[:5]
    idle = max(
        float(inp.summary.get("wall_per_step_us") or 0.0)
        - float(inp.summary.get("device_busy_per_step_us") or 0.0),
        0.0,
    )
    impact = min(idle, float(short.sum()) / per * (med_l - med_k))
    detail = (
        f"{100 * short.mean():.0f}% of kernels are shorter than a typical launch call. Kernels this "
        "small finish before the host can launch the next, so the device waits on the launcher. "
        "Fuse them (torch.compile), use fused/foreach implementations (e.g. fused optimizers), "
        "batch small ops into larger ones, or replay the step as a CUDA graph."
    )
    if severity == INFO:
        detail += f" The device is still {busy_pct:.0f}% busy, so queued work hides it for now."
    return [
        Finding(
            rule="launch",
            severity=severity,
            title=(
                f"Launch-bound: median kernel {fmt_time(med_k)} < median launch {fmt_time(med_l)}, "
                f"{kps:.0f} kernels{inp.per}"
            ),
            detail=detail,
            evidence={
                "kernels": int(len(kern)),
                "kernels_per_step": kps,
                "median_kernel_us": med_k,
                "median_launch_us": med_l,
                "launch_calls": int(len(launches)),
                "short_kernel_pct": 100 * float(short.mean()),
                "device_busy_pct": busy_pct,
            },
            impact_us=impact,
            event_rows=limit_rows(kern[short], th.max_event_rows),
            kernels=top,
        )
    ]
