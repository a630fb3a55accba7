"""Findings: the trace-reading rules of an expert, run on every profile.

Each rule is a small pure function ``rule(inputs, thresholds) -> [Finding]``
in the module of its family; every number it compares against lives in
`Thresholds`. `find` runs them all and returns one table:

``severity, title, detail, evidence, rule, impact_us, event_rows, ops, kernels``

sorted by severity (``high``, ``medium``, ``info``, ``not checked``) and then
by the time per step at stake. ``event_rows`` are positions in
``Profile.events`` and ``ops`` / ``kernels`` are names of rows in the op and
kernel tables, so a view can link each finding to its evidence.

A rule that needs device data never reports "fine" on a trace without it:
it yields a ``not checked`` row that says why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .bursts import find_device_bursts
from .compile import find_compile
from .copies import find_copies
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
]

Rule = Callable[[Inputs, Thresholds], list[Finding]]

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
]


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
            finding.event_rows = limit_rows(rows.tolist(), th.max_event_rows)
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
    return findings_frame(found)


def inputs_from_profile(profile: Any) -> Inputs:
    """The `Inputs` of a `Profile` (duck-typed, so analysis never imports it)."""
    capture = getattr(profile, "capture", None)
    stats = getattr(profile, "compile_stats", None)
    if stats is None and capture is not None:
        stats = getattr(capture, "compile_stats", None)
    meta = profile.meta
    steps, launch_step = _counted_steps_and_launches(profile)
    return Inputs(
        events=profile.events,
        steps=steps,
        summary=profile.summary,
        kernels=profile.kernels,
        device_properties=list(meta.device_properties),
        world_size=meta.world_size,
        rank=meta.rank,
        device_kind=getattr(capture, "device_kind", None) if capture is not None else None,
        compile_stats=stats,
        launch_step=launch_step,
    )


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
    events = profile._data.events
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
