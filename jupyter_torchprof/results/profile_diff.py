"""`ProfileDiff`: two Profiles compared (``Profile.diff(other)``)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .. import columns
from ..analysis import diff as diff_mod
from ..analysis.names import readable_op
from ..format import fmt_time

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
    paired
        Timed runs of both sides that alternated (``--compare``); the
        verdicts on wall and process CPU time then rest on them, not on two
        separate runs.
    """

    def __init__(
        self, a: Profile, b: Profile, labels: tuple[str, str] | None = None, paired: Any = None
    ) -> None:
        self.a = a
        self.b = b
        self.labels = labels or (a.name, b.name)
        self.paired = paired

    def _steps(self, p: Profile) -> int:
        return max(p.summary["steps"], 1)

    @cached_property
    def ops(self) -> pd.DataFrame:
        """Per-op calls and times per step, a vs b (see `analysis.diff.diff_tables`), and a readable ``label``.

        The columns compared are the catalog's (`columns.diff_metrics`).
        """
        table = diff_mod.diff_tables(
            self.a.ops, self.b.ops, columns.diff_metrics(), self._steps(self.a), self._steps(self.b),
            sort_by=columns.default_sort(self._device),
        )  # fmt: skip
        # Empty where the name already reads well: the column shows only for compiled runs.
        labels = [readable_op(str(n)) for n in table["name"]]
        table.insert(
            1, "label", [lb if lb != str(n) else "" for lb, n in zip(labels, table["name"], strict=True)]
        )
        return table

    @cached_property
    def kernels(self) -> pd.DataFrame:
        """Per-kernel calls and device time per step, a vs b (see `analysis.diff.diff_tables`).

        The columns compared are the catalog's (``columns.diff_metrics(columns.KERNELS)``).
        """
        metrics = columns.diff_metrics(columns.KERNELS)
        empty = pd.DataFrame({"name": pd.Series(dtype=object), **{m: [] for m in metrics}})
        ka = self.a.kernels if not self.a.kernels.empty else empty
        kb = self.b.kernels if not self.b.kernels.empty else empty
        return diff_mod.diff_tables(
            ka, kb, metrics, self._steps(self.a), self._steps(self.b), sort_by=columns.KERNEL_DIFF_SORT
        )

    @cached_property
    def headline(self) -> pd.DataFrame:
        """Wall / CPU busy / device busy / process CPU per step, a vs b: spread, speed-up, verdict, evidence.

        See `analysis.diff.headline`: ``a_us``/``b_us`` are means per
        profiled step, ``a_median_us``, ``a_min_us``, ``a_max_us`` (and
        ``b_…``) the spread, ``speedup`` a / b with a 90 % bootstrap
        interval (``speedup_low``, ``speedup_high``), ``verdict`` (``faster``,
        ``slower``, ``within noise``, ``too few steps``, ``no spread``,
        ``busier machine``), ``evidence`` (``interleaved`` or ``separate
        runs``) and ``reason``, the verdict in words. The ``process CPU per
        step`` row (this process's CPU time, which the capture measures
        around each step) is there when both runs have it.
        """
        paired = None
        if self.paired is not None and self.paired.pairs:
            pw, pc = self.paired.wall_us, self.paired.cpu_us
            paired = {
                "wall per step": (np.asarray(pw[0], float), np.asarray(pw[1], float)),
                diff_mod.PROCESS_CPU: (np.asarray(pc[0], float), np.asarray(pc[1], float)),
            }
        return diff_mod.headline(
            self.a.summary, self.b.summary, self.a.steps, self.b.steps,
            step_cpu(self.a), step_cpu(self.b), paired,
        )  # fmt: skip

    @property
    def verdict(self) -> tuple[str, str]:
        """The comparison's one verdict and its sentence (see `analysis.diff.overall`)."""
        return diff_mod.overall(self.headline)

    @property
    def notes(self) -> list[str]:
        """What to keep in mind when reading this comparison."""
        out = []
        ca, cb = self.a.capture, self.b.capture
        same_cell = (
            ca is not None and cb is not None and ca.cell.strip() and ca.cell.strip() == cb.cell.strip()
        )
        # One side through torch.compile is other code, whatever the cell's text.
        if same_cell and not (went_through_compile(self.a) or went_through_compile(self.b)):
            out.append(
                "both runs profiled the same cell source: a difference is the machine's load "
                "unless the inputs or the data changed"
            )
        if self.paired is None and (step_cpu(self.a) is None or step_cpu(self.b) is None):
            out.append(
                "this process's CPU time per step is not known for both runs (a trace from a file): "
                "the verdict rests on wall time, which another process's load inflates"
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
            sp = f"  {r.reason}" if r.reason else ""
            lines.append(f"  {r.metric:<22} {fmt_time(r.a_us):>10} → {fmt_time(r.b_us):>10}{sp}")
        word, sentence = self.verdict
        if word:
            lines.append(f"  verdict: {sentence}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from .. import presentation  # a presentation hook (see `presentation`)

        return presentation.diff_bundle(self)


def went_through_compile(p: Profile) -> bool:
    """Whether a profile ran torch.compile'd code: its capture says so, or its trace does."""
    if getattr(p, "compile_stats", None) is not None:
        return True
    if p.capture is not None and p.capture.compile_s is not None:
        return True
    names = p.ops["name"].astype(str)
    return bool(
        names.str.startswith("Torch-Compiled Region").any() or names.str.contains("CompiledFxGraph").any()
    )


def step_cpu(p: Profile) -> np.ndarray | None:
    """The CPU time this process spent in each (non-empty) step of ``p``; None when not measured.

    From the capture (a live run, or a run reopened from its table cache),
    else from the run's record (`Profile.recorded_step_cpu_us`, which the
    layer that opens a run folder fills in). None when the counts do not
    match the steps of the trace (a partial run).
    """
    values = list(p.capture.step_cpu_us) if p.capture is not None else []
    values = values or list(p.recorded_step_cpu_us)
    steps = p.steps
    if not values or len(values) != len(steps):
        return None
    out = np.asarray(values, dtype=np.float64)
    if "empty" in steps.columns:
        out = out[~steps["empty"].astype(bool).to_numpy()]
    return out if len(out) else None
