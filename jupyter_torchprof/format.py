"""Number formatting shared by every renderer and by the findings' text (µs, bytes, counts, labels)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

# Every number is rounded as JavaScript's toFixed / toPrecision round it (the
# sidebar and the bokeh tables format in the browser): an exact tie goes away
# from zero (0.25 -> "0.3"), where Python's format would go to the even digit
# ("0.2"). tests/data/format_cases/ holds the three renderers to one table.


def _tie(x: float, digits: int) -> bool:
    """Whether ``x`` lies exactly halfway between two values of ``digits`` decimals (a binary-exact tie)."""
    scaled = abs(x) * 10.0**digits
    # A true tie scales exactly (both are exact binary numbers); the Decimal check weeds out rounding.
    return scaled % 1 == 0.5 and (Decimal(abs(x)).scaleb(digits) % 1) == Decimal("0.5")


def fixed(x: float, digits: int, sep: bool = False) -> str:
    """``x`` with ``digits`` decimals (``sep``: thousands separators), ties away from zero as JavaScript's toFixed."""
    spec = f"{',' if sep else ''}.{digits}f"
    if math.isfinite(x) and _tie(x, digits):
        q = Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
        return format(q, spec)
    return format(x, spec)


def sig3(x: float) -> str:
    """Three significant digits, trailing zeros dropped, never an exponent (JavaScript's ``Number(x.toPrecision(3))``)."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    digits = 2 - math.floor(math.log10(abs(x)))
    if digits < 0:
        # Whole numbers of four digits or more: keep three, zero the rest (1234 -> 1230).
        return str(int(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)))
    text = fixed(x, digits)
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    # 9.996 rounds up to "10.00" (four digits): toPrecision gives "10.0", shown "10".
    return text


def _missing(x: float | None) -> bool:
    """None, NaN or ±inf: a duration, share, size or count that is not known."""
    return x is None or not math.isfinite(x)


def _three_digits(v: float) -> str:
    # Three significant digits and never an exponent: 12.3, 812; whole numbers
    # from there (999.7 is "1000", not "1e+03"; 1234 stays 1234).
    return fixed(v, 0) if abs(v) >= 99.95 else sig3(v)


def fmt_time(us: float | None) -> str:
    """A duration in µs as a short human string: ``812 ns``, ``12.3 µs``, ``4.56 ms``, ``1234 s``."""
    if _missing(us):
        return "–"
    a = abs(us)
    if a == 0:
        return "0"
    if a < 1:
        return f"{fixed(us * 1e3, 0)} ns"
    if a < 1e3:
        return f"{_three_digits(us)} µs"
    if a < 1e6:
        return f"{_three_digits(us / 1e3)} ms"
    return f"{_three_digits(us / 1e6)} s"


def fmt_pct(p: float | None) -> str:
    """A percentage with one decimal (``–`` when unknown)."""
    if _missing(p):
        return "–"
    return f"{fixed(p, 1)}%"


def fmt_bytes(b: float | None) -> str:
    """A byte count with a binary unit (``–`` when unknown)."""
    if _missing(b):
        return "–"
    a = abs(b)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if a >= scale:
            return f"{sig3(b / scale)} {unit}"
    return f"{fixed(b, 0)} B"


def fmt_calls(n: float | None) -> str:
    """A count that may be fractional (calls per step): separators, at most two decimals, ``1,234.5``."""
    if _missing(n):
        return "–"
    text = fixed(n, 2, sep=True).rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def fmt_count(n: float | None) -> str:
    """An integer count with thousands separators; a fractional one (per step) as `fmt_calls`."""
    if _missing(n):
        return "–"
    if n != int(n):
        return fmt_calls(n)
    return f"{int(n):,}"


#: SI prefixes of FLOP counts and rates, largest first.
_SI_PREFIXES = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


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
