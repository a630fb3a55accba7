"""Rule 8: graph breaks and recompiles of a ``--compile`` / ``--compare`` run.

The counts come from the capture (``compile_stats``), not from the trace, and
their shape is not fixed: a mapping or an object with ``graph_breaks`` /
``recompiles`` as counts, lists of reasons, or ``{reason: count}`` mappings.
Anything unreadable yields no finding; zero breaks and recompiles yield none
either (a finding never says "fine").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .model import MEDIUM, Finding, Inputs
from .thresholds import Thresholds


def _get(stats: Any, *names: str) -> Any:
    for n in names:
        value = stats.get(n) if isinstance(stats, Mapping) else getattr(stats, n, None)
        if value is not None:
            return value
    return None


def _count(value: Any) -> int:
    """A count from an int, a list of events, or a ``{reason: count}`` mapping."""
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, (int, float)):
        return max(int(value), 0)
    if isinstance(value, Mapping):
        nums = [v for v in value.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return int(sum(nums)) if len(nums) == len(value) else len(value)
    if isinstance(value, (list, tuple, set)):
        return len(value)
    return 0


def _reasons(value: Any, limit: int = 3) -> list[str]:
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: -kv[1] if isinstance(kv[1], (int, float)) else 0)
        return [str(k) for k, _ in items[:limit]]
    if isinstance(value, (list, tuple)):
        seen: list[str] = []
        for v in value:
            text = str(_get(v, "reason") if isinstance(v, Mapping) or hasattr(v, "reason") else v)
            if text not in seen:
                seen.append(text)
        return seen[:limit]
    return []


def find_compile(inp: Inputs, th: Thresholds) -> list[Finding]:
    """Graph breaks and recompiles, when the capture recorded them."""
    stats = inp.compile_stats
    if stats is None:
        return []
    out = []
    breaks_raw = _get(stats, "graph_breaks", "graph_break_count", "breaks")
    reasons = _reasons(_get(stats, "break_reasons", "graph_break_reasons") or breaks_raw)
    n_breaks = _count(breaks_raw)
    if n_breaks > 0:
        detail = (
            "Each break splits the compiled code and returns to Python between the pieces: "
            "less fusion, more launches. Find them with torch._dynamo.explain(fn)(*args) or "
            "TORCH_LOGS=graph_breaks; fullgraph=True turns them into errors."
        )
        if reasons:
            detail += " Reasons: " + "; ".join(reasons) + "."
        out.append(
            Finding(
                rule="compile",
                severity=MEDIUM,
                title=f"torch.compile: {n_breaks} graph break{'s' if n_breaks != 1 else ''}",
                detail=detail,
                evidence={"graph_breaks": n_breaks, "reasons": reasons},
            )
        )
    rec_raw = _get(stats, "recompiles", "recompile_count", "recompilations")
    rec_reasons = _reasons(_get(stats, "recompile_reasons") or rec_raw)
    n_rec = _count(rec_raw)
    if n_rec > 0:
        detail = (
            "A guard of the compiled code failed (a new shape, dtype or Python value), so it "
            "compiled again. Mark varying dimensions dynamic (torch._dynamo.mark_dynamic, "
            "dynamic=True); TORCH_LOGS=recompiles names the failing guard."
        )
        if rec_reasons:
            detail += " Reasons: " + "; ".join(rec_reasons) + "."
        out.append(
            Finding(
                rule="compile",
                severity=MEDIUM,
                title=f"torch.compile recompiled {n_rec} time{'s' if n_rec != 1 else ''}",
                detail=detail,
                evidence={"recompiles": n_rec, "reasons": rec_reasons},
            )
        )
    return out
