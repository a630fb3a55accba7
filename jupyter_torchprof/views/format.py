"""Number formatting for the views: `jupyter_torchprof.format` (moved there so analysis can use it)."""

from __future__ import annotations

from ..format import (
    ellipsize,
    fmt_bytes,
    fmt_count,
    fmt_flops,
    fmt_pct,
    fmt_time,
    headline_chips,
    per_step_label,
    totals_label,
)

__all__ = [
    "ellipsize",
    "fmt_bytes",
    "fmt_count",
    "fmt_flops",
    "fmt_pct",
    "fmt_time",
    "headline_chips",
    "per_step_label",
    "totals_label",
]
