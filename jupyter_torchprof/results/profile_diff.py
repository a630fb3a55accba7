"""`ProfileDiff`: two Profiles compared (``Profile.diff(other)``)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

import pandas as pd

from .. import columns
from ..analysis import diff as diff_mod
from ..format import fmt_time
from . import seams

if TYPE_CHECKING:  # pragma: no cover
    from .profile import Profile


class ProfileDiff:
    """What changed from profile ``a`` to profile ``b``, per step.

    Parameters
    ----------
    a, b
        The baseline and the changed run (e.g. eager and compiled).
    labels
        Names of the two sides in views (default: the profiles' names).
    """

    def __init__(self, a: Profile, b: Profile, labels: tuple[str, str] | None = None) -> None:
        self.a = a
        self.b = b
        self.labels = labels or (a.name, b.name)

    def _steps(self, p: Profile) -> int:
        return max(p.summary["steps"], 1)

    @cached_property
    def ops(self) -> pd.DataFrame:
        """Per-op calls and times per step, a vs b (see `analysis.diff.diff_tables`)."""
        return diff_mod.diff_tables(
            self.a.ops, self.b.ops, diff_mod.OP_METRICS, self._steps(self.a), self._steps(self.b),
            sort_by=columns.default_sort(self._device),
        )  # fmt: skip

    @cached_property
    def kernels(self) -> pd.DataFrame:
        """Per-kernel calls and device time per step, a vs b."""
        empty = pd.DataFrame({"name": pd.Series(dtype=object), "calls": [], "total_us": []})
        ka = self.a.kernels if not self.a.kernels.empty else empty
        kb = self.b.kernels if not self.b.kernels.empty else empty
        return diff_mod.diff_tables(ka, kb, diff_mod.KERNEL_METRICS, self._steps(self.a), self._steps(self.b))

    @cached_property
    def headline(self) -> pd.DataFrame:
        """Wall / CPU busy / device busy per step, a vs b: means, spread, speed-up and verdict.

        See `analysis.diff.headline`: ``a_us``/``b_us`` are means per step,
        ``a_median_us``, ``a_min_us``, ``a_max_us`` (and ``b_…``) the spread
        over the steps, ``speedup`` a / b with a 90 % bootstrap interval
        (``speedup_low``, ``speedup_high``), and ``verdict`` ``faster``,
        ``slower``, ``within noise`` or ``no spread``.
        """
        return diff_mod.headline(self.a.summary, self.b.summary, self.a.steps, self.b.steps)

    @property
    def notes(self) -> list[str]:
        """What to keep in mind when reading this comparison."""
        out = []
        ca, cb = self.a.capture, self.b.capture
        if ca is not None and cb is not None and ca.cell.strip() and ca.cell.strip() == cb.cell.strip():
            same_mode = (ca.compile_s is None) == (cb.compile_s is None)
            if same_mode:
                out.append(
                    "both runs profiled the same cell source: any difference is run-to-run noise "
                    "unless the inputs, the data or the machine changed"
                )
        return out

    @property
    def _device(self) -> bool:
        return bool(self.a.summary["device_traced"] or self.b.summary["device_traced"])

    def text(self) -> str:
        """The headline and the biggest op changes as text."""
        la, lb = self.labels
        lines = [f"{la} → {lb}"]
        for r in self.headline.itertuples(index=False):
            if pd.isna(r.a_us) and pd.isna(r.b_us):
                continue
            verdict = diff_mod.verdict_text(r, fmt_time)
            sp = f"  {verdict}" if verdict else ""
            lines.append(f"  {r.metric:<22} {fmt_time(r.a_us):>10} → {fmt_time(r.b_us):>10}{sp}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return seams.views().diff_bundle(self)
