"""Number formatting shared by every renderer and by the findings' text (µs, bytes, counts, labels)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any


def fmt_time(us: float | None) -> str:
    """A duration in µs as a short human string: ``812 ns``, ``12.3 µs``, ``4.56 ms``."""
    if us is None or (isinstance(us, float) and math.isnan(us)):
        return "–"
    a = abs(us)
    if a == 0:
        return "0"
    if a < 1:
        return f"{us * 1e3:.0f} ns"
    if a < 1e3:
        return f"{us:.3g} µs" if a < 100 else f"{us:.0f} µs"
    if a < 1e6:
        return f"{us / 1e3:.3g} ms" if a < 1e5 else f"{us / 1e3:.0f} ms"
    return f"{us / 1e6:.3g} s"


def fmt_pct(p: float | None) -> str:
    """A percentage with one decimal (``–`` when unknown)."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "–"
    return f"{p:.1f}%"


def fmt_bytes(b: float | None) -> str:
    """A byte count with a binary unit (``–`` when unknown)."""
    if b is None or (isinstance(b, float) and math.isnan(b)):
        return "–"
    a = abs(b)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if a >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def fmt_count(n: float | None) -> str:
    """An integer count with thousands separators."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "–"
    return f"{int(n):,}"


#: SI prefixes of FLOP counts and rates, largest first.
_SI_PREFIXES = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


def _three_digits(v: float) -> str:
    # Three significant digits and never an exponent: 999.7 is "1000", not "1e+03".
    return f"{v:.0f}" if abs(v) >= 99.95 else f"{v:.3g}"


def fmt_flops(f: float | None, unit: str = "FLOP") -> str:
    """A FLOP count (or, with ``unit="FLOP/s"``, a rate) with an SI prefix: ``537 MFLOP``, ``1.61 GFLOP``.

    ``–`` where nothing was counted (0, unknown or not finite): torch gives
    ops without a formula 0 FLOPs, which is "not counted", not "free".
    `views.tables.FMT_FLOPS_JS` is the same rule in the browser.
    """
    if f is None or not math.isfinite(f) or f == 0:
        return "–"
    a = abs(f)
    for prefix, scale in _SI_PREFIXES:
        # 0.9995 of the prefix rounds up to it: "1 GFLOP", not "1000 MFLOP".
        if a >= 0.9995 * scale:
            return f"{_three_digits(f / scale)} {prefix}{unit}"
    return f"{_three_digits(f)} {unit}"


def ellipsize(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` characters, marking the cut with ``…``."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def headline_chips(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Device, steps and wall / CPU / device time per step as ``(label, value)`` pairs.

    The headline of the inline view and of the HTML report; each adds its own
    chips after these.
    """
    steps = int(summary.get("steps") or 0)
    per = "/step" if steps else ""
    chips = [
        ("device", str(summary.get("device", "?"))),
        ("steps", str(steps) if steps else "whole trace"),
        ("wall", f"{fmt_time(summary.get('wall_per_step_us'))}{per}"),
        ("CPU busy", f"{fmt_time(summary.get('cpu_busy_per_step_us'))}{per}"),
    ]
    if summary.get("device_traced"):
        busy = fmt_time(summary.get("device_busy_per_step_us"))
        chips.append(("device busy", f"{busy}{per} ({fmt_pct(summary.get('device_busy_pct'))})"))
    return chips


def totals_label(steps: int) -> str:
    """What the op and kernel tables hold: ``totals over 3 steps`` (or the whole trace).

    The tables sum over every profiled step, as ``key_averages()`` does,
    while the summary chips are per step; every table says which it shows.
    """
    steps = int(steps or 0)
    if steps <= 0:
        return "totals over the whole trace"
    return f"totals over {steps} step{'s' if steps != 1 else ''}"


def per_step_label(steps: int) -> str:
    """What a per-step table holds: ``per step (totals ÷ 3)``."""
    return f"per step (totals ÷ {max(int(steps or 0), 1)})"


def esc(value: Any) -> str:
    """Escape any value for HTML text and attribute context."""
    return html.escape(str(value), quote=True)
