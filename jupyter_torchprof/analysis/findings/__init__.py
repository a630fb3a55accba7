"""Findings: the trace-reading rules of an expert, run on every profile.

Each rule is a small pure function ``rule(inputs, thresholds) -> [Finding]``
in the module of its family; every number it compares against lives in
`Thresholds`. `find` runs them all and returns one table:

``severity, title, detail, evidence, rule, impact_us, event_rows, ops, kernels``

sorted by severity (``high``, ``medium``, ``info``, ``not checked``) and then
by the time per step at stake. ``event_rows`` are positions in
``Profile.events`` and ``ops`` / ``kernels`` are names of rows in the op and
kernel tables, so a view can link each finding to its evidence.

Severity follows the time at stake: a rule proposes one, and `find` caps
it by the share of the step its ``impact_us`` is (`scale_severity`, with the
scale's two thresholds in `Thresholds`): ``high`` needs a fifth of the step,
``medium`` 3%, anything smaller is ``info``. The evidence keeps the share
(``impact_step_pct``) and, when the cap lowered it, the rule's own
``rule_severity``.

A rule that needs device data never reports "fine" on a trace without it:
it yields a ``not checked`` row that says why. The CPU rules (step-time
variance, tiny ops, time outside ops, thread count, DataLoader, host copies)
run on every trace, so a CPU-only run gets advice too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .bursts import find_device_bursts
from .compile import find_compile
from .copies import find_copies
from .cpu import (
    find_dataloader,
    find_host_copies,
    find_outside_ops,
    find_step_variance,
    find_threads,
    find_tiny_ops,
)
from .distributed import find_exposed_communication, find_stragglers, find_unchecked_ranks
from .gaps import find_idle_gaps
from .model import (
    COLUMNS,
    HIGH,
    INFO,
    MEDIUM,
    NOT_CHECKED,
    SEVERITIES,
    Finding,
    Inputs,
    findings_frame,
    limit_rows,
)
from .overhead import find_launch_bound, find_overhead
from .precision import find_precision
from .sync import count_names, describe_unchecked, find_syncs, sync_op_rows
from .thresholds import THRESHOLDS, Thresholds
from .variance import find_cold_start, find_kernel_variance

__all__ = [
    "COLUMNS",
    "HIGH",
    "INFO",
    "MEDIUM",
    "NOT_CHECKED",
    "RULES",
    "RULES_VERSION",
    "SEVERITIES",
    "THRESHOLDS",
    "Finding",
    "Inputs",
    "Thresholds",
    "find",
    "find_stragglers",
    "findings_frame",
    "inputs_from_profile",
    "merge_rank_findings",
    "scale_severity",
]

Rule = Callable[[Inputs, Thresholds], list[Finding]]

#: Bumped whenever a rule changes what it reports, so cached findings of an
#: older version are recomputed (`runs.cache.code_fingerprint`).
#: 2: the addmm bias copy is no copy finding; repeating idle gaps merged.
RULES_VERSION = 2

#: Every rule: (id, label, needs device data, function).
RULES: list[tuple[str, str, bool, Rule]] = [
    ("overhead", "Overhead-bound step", True, find_overhead),
    ("idle_gaps", "Device idle gaps", True, find_idle_gaps),
    ("launch", "Launch-bound kernels", True, find_launch_bound),
    ("sync", "Synchronisation points", True, find_syncs),
    ("copies", "Copies", True, find_copies),
    ("precision", "Precision (tensor cores)", True, find_precision),
    ("variance", "Kernel time variance", True, find_kernel_variance),
    ("cold_start", "Cold start", False, find_cold_start),
    ("compile", "torch.compile graph breaks and recompiles", False, find_compile),
    ("communication", "Communication overlap", True, find_exposed_communication),
    ("stragglers", "Stragglers", False, find_unchecked_ranks),
    ("device_bursts", "Short device bursts (graph breaks)", True, find_device_bursts),
    ("step_variance", "Step-time variance", False, find_step_variance),
    ("tiny_ops", "Many tiny ops (Python overhead)", False, find_tiny_ops),
    ("outside_ops", "Time outside ops", False, find_outside_ops),
    ("threads", "CPU thread count", False, find_threads),
    ("dataloader", "DataLoader time", False, find_dataloader),
    ("host_copies", "Host copies", False, find_host_copies),
]

#: Rules whose ``impact_us`` is not a measured time (graph breaks and
#: recompiles cost what the trace cannot attribute): they keep their own
#: severity; every other rule's is capped by `scale_severity`.
UNSCALED_RULES = frozenset({"compile"})


def scale_severity(severity: str, impact_us: float, step_us: float, th: Thresholds = THRESHOLDS) -> str:
    """The severity a finding may have, given the time per step it puts at stake.

    A finding is ``high`` only from ``severity_high_step_pct`` of the step,
    ``medium`` only from ``severity_medium_step_pct``; below that it is
    ``info``. The rule's own severity is kept when it is lower (a rule may be
    stricter than the scale). ``not checked`` rows and a step of unknown
    length are left as they are.
    """
    if severity not in (HIGH, MEDIUM) or not step_us or step_us <= 0:
        return severity
    pct = 100 * max(float(impact_us), 0.0) / step_us
    allowed = (
        HIGH if pct >= th.severity_high_step_pct else MEDIUM if pct >= th.severity_medium_step_pct else INFO
    )
    return max(severity, allowed, key=SEVERITIES.index)


def _apply_scale(found: list[Finding], inputs: Inputs, th: Thresholds) -> None:
    step = inputs.wall_per_step
    for f in found:
        if f.severity == NOT_CHECKED or f.rule in UNSCALED_RULES:
            continue
        if step > 0:
            f.evidence.setdefault("impact_step_pct", 100 * max(float(f.impact_us), 0.0) / step)
            f.evidence.setdefault("impact_unit", inputs.unit)  # "step", or "trace" without steps
        scaled = scale_severity(f.severity, f.impact_us, step, th)
        if scaled != f.severity:
            f.evidence["rule_severity"] = f.severity
            f.severity = scaled


def no_device_reason(inp: Inputs) -> str:
    """Why a trace has no device data, in one sentence."""
    kind = (inp.device_kind or "").lower()
    if kind == "mps":
        return "torch.profiler cannot trace MPS kernels; only the CPU side was recorded."
    if kind == "cpu":
        return "this run used the CPU; no accelerator was profiled."
    if kind:
        return f"the {kind} device recorded no activity in this trace."
    names = sorted({str(p.get("name")) for p in inp.device_properties if p.get("name")})
    if names:
        return (
            f"the trace lists {', '.join(names)} but recorded no device activity "
            "(profiled without the device activity)."
        )
    return "the trace has no device activity (a CPU-only profile)."


def _not_checked(inp: Inputs, rule: str, label: str, th: Thresholds) -> Finding:
    reason = no_device_reason(inp)
    finding = Finding(
        rule=rule,
        severity=NOT_CHECKED,
        title=f"{label} not checked: no device traced",
        detail=f"Not checked because {reason}",
        evidence={"reason": reason},
    )
    if rule == "sync":
        # Host ops that would wait for a device are still worth naming.
        rows = sync_op_rows(inp)
        if len(rows):
            finding.detail += describe_unchecked(inp)
            finding.evidence["ops_that_would_sync"] = count_names(inp, rows)
            finding.event_rows = limit_rows(rows, th.max_event_rows)
            finding.ops = list(finding.evidence["ops_that_would_sync"])
    return finding


def find(
    inputs: Inputs, thresholds: Thresholds = THRESHOLDS, rules: Sequence[str] | None = None
) -> pd.DataFrame:
    """Run the rules on one profile's tables.

    Parameters
    ----------
    inputs
        The profile's tables (see `inputs_from_profile`).
    thresholds
        Sensitivity of the rules.
    rules
        Rule ids to run (default: all of `RULES`).

    Returns
    -------
    DataFrame with `COLUMNS`, most severe and costly first. A rule that fails
    on an unusual trace becomes a ``not checked`` row naming the error rather
    than taking the whole view down.
    """
    found: list[Finding] = []
    for rule_id, label, needs_device, fn in RULES:
        if rules is not None and rule_id not in rules:
            continue
        if needs_device and not inputs.device_traced:
            found.append(_not_checked(inputs, rule_id, label, thresholds))
            continue
        try:
            found.extend(fn(inputs, thresholds))
        except Exception as exc:  # noqa: BLE001 - one odd trace must not hide the other rules
            found.append(
                Finding(
                    rule=rule_id,
                    severity=NOT_CHECKED,
                    title=f"{label} not checked: the rule failed on this trace",
                    detail=f"{type(exc).__name__}: {exc}",
                    evidence={"error": f"{type(exc).__name__}: {exc}"},
                )
            )
    _apply_scale(found, inputs, thresholds)
    return findings_frame(found)


def inputs_from_profile(profile: Any) -> Inputs:
    """The `Inputs` of a `Profile` (duck-typed, so analysis never imports it)."""
    capture = getattr(profile, "capture", None)
    stats = getattr(profile, "compile_stats", None)
    if stats is None and capture is not None:
        stats = getattr(capture, "compile_stats", None)
    meta = profile.meta
    steps, launch_step = _counted_steps_and_launches(profile)
    # A profile's frame without the columns no rule reads, where it offers one.
    events = getattr(profile, "_findings_events", None)
    return Inputs(
        events=profile.events if events is None else events,
        steps=steps,
        summary=profile.summary,
        kernels=profile.kernels,
        device_properties=list(meta.device_properties),
        world_size=meta.world_size,
        rank=meta.rank,
        device_kind=getattr(capture, "device_kind", None) if capture is not None else None,
        compile_stats=stats,
        launch_step=launch_step,
        activity_order=getattr(profile, "_start_order", None),
        **_threads_of(capture),
    )


def _threads_of(capture: Any) -> dict[str, Any]:
    """The thread count of torch and the usable cores, for a run profiled in this process.

    A capture that recorded them (``num_threads``, ``cpu_cores``) is read;
    otherwise a live run's process is asked after the run (the setting
    persists, and the cell ran here). torch is never imported for it: a
    loaded trace gets None, and the thread rule says "not checked".
    """
    if capture is None:
        return {"num_threads": None, "cpu_cores": None, "threads_source": None}
    threads = getattr(capture, "num_threads", None)
    cores = getattr(capture, "cpu_cores", None)
    source = "capture" if threads is not None else None
    torch = sys.modules.get("torch")
    if threads is None and torch is not None:
        try:
            threads, source = int(torch.get_num_threads()), "process after the run"
        except Exception:  # noqa: BLE001 - a half-imported torch: leave it unchecked
            threads = None
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # not on Linux
            cores = os.cpu_count()
    return {"num_threads": threads, "cpu_cores": cores, "threads_source": source}


def _counted_steps_and_launches(profile: Any) -> tuple[pd.DataFrame, np.ndarray | None]:
    """The counted steps, and for every event the counted step that launched it (-1)."""
    from ..kernels import activity_rows
    from ..steps import counted_steps

    steps = profile.steps
    owner = getattr(profile, "_device_steps", None)
    if owner is None or steps.empty or "counted" not in steps:
        return counted_steps(steps), None
    # Positions in the full table -> positions among the counted rows.
    counted = steps["counted"].to_numpy(bool)
    remap = np.full(len(steps) + 1, -1, dtype=np.int64)
    remap[np.flatnonzero(counted)] = np.arange(int(counted.sum()))
    events = profile.parsed_events
    launch_step = np.full(len(events), -1, dtype=np.int64)
    launch_step[activity_rows(events)] = remap[np.where(owner >= 0, owner, len(steps))]
    return counted_steps(steps), launch_step


def merge_rank_findings(cross: pd.DataFrame, per_rank: Sequence[tuple[Any, pd.DataFrame]]) -> pd.DataFrame:
    """Cross-rank findings and each rank's own in one table with a ``rank`` column.

    Every rank's "stragglers not checked" row is dropped once several ranks
    are loaded together: the cross-rank check has run.
    """
    frames = []
    if not cross.empty:
        frames.append(cross.assign(rank=[e.get("rank") for e in cross["evidence"]]))
    for rank, frame in per_rank:
        if len(per_rank) > 1:
            frame = frame[~((frame["rule"] == "stragglers") & (frame["severity"] == NOT_CHECKED))]
        frames.append(frame.assign(rank=rank))
    if not frames:
        return findings_frame([]).assign(rank=pd.Series(dtype=object))
    merged = pd.concat(frames, ignore_index=True)
    order = merged["severity"].map({s: i for i, s in enumerate(SEVERITIES)}).fillna(len(SEVERITIES))
    merged = merged.assign(_o=order, _i=-merged["impact_us"]).sort_values(["_o", "_i"], kind="stable")
    return merged.drop(columns=["_o", "_i"]).reset_index(drop=True)
