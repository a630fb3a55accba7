"""`Comparison`: the result of ``%%torchprof --compare`` (eager vs compiled)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from .. import columns
from ..format import fmt_time

if TYPE_CHECKING:  # pragma: no cover
    from ..analysis.compile_stats import CompileStats
    from .profile import Profile
    from .profile_diff import ProfileDiff


class Comparison:
    """An eager and a compiled profile of the same cell, and what changed.

    Parameters
    ----------
    eager
        Profile of the eager run (None with ``--compile`` alone).
    compiled
        Profile of the compiled run (None when compilation failed).
    compile_stats
        What the compiler did (graphs, graph breaks, recompiles, time,
        generated kernels, or the error).
    paired
        Eager and compiled runs that alternated after the two profiled runs,
        each timed (`capture.runner.interleave`): the wall and process CPU
        verdicts rest on them, so a load that shifts on the machine hits
        both sides alike. None when they did not run.
    """

    def __init__(
        self,
        eager: Profile | None,
        compiled: Profile | None,
        compile_stats: CompileStats,
        paired: Any = None,
    ) -> None:
        self.eager = eager
        self.compiled = compiled
        self.compile_stats = compile_stats
        self.paired = paired
        self.row_limit = 20

    @property
    def name(self) -> str:
        """Name of the compared cell."""
        p = self.eager or self.compiled
        return p.name.removesuffix(" [eager]").removesuffix(" [compiled]") if p else "comparison"

    @cached_property
    def _diff(self) -> ProfileDiff | None:
        if self.eager is None or self.compiled is None:
            return None
        from .profile_diff import ProfileDiff

        return ProfileDiff(self.eager, self.compiled, labels=("eager", "compiled"), paired=self.paired)

    @cached_property
    def diff(self) -> pd.DataFrame:
        """Ops and kernels, eager vs compiled, per step (``level`` says which).

        Columns: ``level`` (``op``/``kernel``), ``name``, ``status``
        (``both``, ``only_a`` = gone when compiled, ``only_b`` = new), calls
        and times for ``_a`` (eager), ``_b`` (compiled) and ``_delta``, and
        ``ratio``. Empty when one side is missing.
        """
        d = self._diff
        if d is None:
            return pd.DataFrame(columns=["level", "name", "status"])
        ops = d.ops.assign(level="op")
        kernels = d.kernels.assign(level="kernel")
        kernels = kernels.rename(columns={c: c.replace("total_us", "device_us") for c in kernels.columns})
        out = pd.concat([ops, kernels], ignore_index=True, sort=False)
        return out[["level", *[c for c in out.columns if c != "level"]]]

    @property
    def diff_ops(self) -> pd.DataFrame:
        """Per-op diff (empty when one side is missing)."""
        return self._diff.ops if self._diff is not None else pd.DataFrame()

    @property
    def diff_kernels(self) -> pd.DataFrame:
        """Per-kernel diff (empty when one side is missing)."""
        return self._diff.kernels if self._diff is not None else pd.DataFrame()

    @property
    def headline(self) -> pd.DataFrame:
        """Wall / CPU busy / device busy / process CPU per step, eager vs compiled: spread, speed-up, verdict.

        See `ProfileDiff.headline`; ``evidence`` says what each verdict rests
        on (``interleaved`` runs or two ``separate runs``), ``reason`` says it
        in words.
        """
        return self._diff.headline if self._diff is not None else pd.DataFrame()

    @property
    def verdict(self) -> tuple[str, str]:
        """The comparison's one verdict and its sentence (``("", "")`` when a side is missing)."""
        return self._diff.verdict if self._diff is not None else ("", "")

    def export(self, path: str | Path, force: bool = False, table: str = "ops") -> Any:
        """Write both sides and the diff, as ``--compare --export`` does.

        ``pair.html``: one report with both sides and the diff; other
        suffixes write ``pair.eager.*`` and ``pair.compiled.*``; an existing
        folder gets ``eager/``, ``compiled/`` and ``comparison.html``.
        Existing files are kept unless ``force``. Returns an
        `export.ExportResult` (the files written and what to know about them).
        """
        from .. import presentation  # a presentation hook (see `presentation`)

        return presentation.export_comparison(self, path, force, table)

    # ------------------------------------------------------------------ #

    def headline_lines(self) -> list[str]:
        """Short lines: compile facts, then eager → compiled per step."""
        s = self.compile_stats
        lines = []
        facts = [f"backend {s.backend}" + (f", mode {s.mode}" if s.mode else "")]
        if s.compile_s is not None:
            facts.append(f"compile ≈ {s.compile_s:.1f} s")
        facts.append(f"{s.graphs} graph(s)")
        facts.append(f"{s.graph_break_count} graph break(s)")
        if s.recompiles:
            facts.append(f"{len(s.recompiles)} recompile(s)")
        if len(s.kernels):
            facts.append(f"{len(s.kernels)} generated kernel(s)")
        lines.append("torch.compile: " + ", ".join(facts))
        if s.error:
            lines.append(f"compilation failed: {s.error}")
        for r in self.headline.itertuples(index=False):
            if pd.isna(r.a_us) and pd.isna(r.b_us):
                continue
            verdict = f": {r.reason}" if r.reason else ""
            lines.append(f"{r.metric}: eager {fmt_time(r.a_us)} → compiled {fmt_time(r.b_us)}{verdict}")
        for b in s.graph_breaks[:5]:
            lines.append(f"graph break at {b.location}: {b.reason}")
        return lines

    def text(self) -> str:
        """Everything a terminal shows: headline, breaks, top diff rows."""
        parts = [f"{self.name}: eager vs compiled", *self.headline_lines()]
        d = self.diff_ops
        if not d.empty:
            metric = columns.default_sort(
                "self_device_us_delta" in d and d["self_device_us_delta"].abs().sum() > 0
            )
            parts.append(f"biggest op changes ({metric.replace('_us', '')} per step):")
            for r in d.head(self.row_limit).itertuples(index=False):
                rd = r._asdict()
                tag = {"only_a": " (gone)", "only_b": " (new)"}.get(rd["status"], "")
                parts.append(
                    f"  {str(rd['name'])[:60]:<60} {fmt_time(rd[f'{metric}_a']):>10} → {fmt_time(rd[f'{metric}_b']):>10}{tag}"
                )
        return "\n".join(parts)

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from .. import presentation  # a presentation hook (see `presentation`)

        return presentation.comparison_bundle(self, include, exclude)

    def _display_(self) -> Any:
        # marimo's hook (it has no ipykernel): eager | compiled | diff as one anywidget.
        from .. import presentation  # a presentation hook (see `presentation`)

        return presentation.hosted_comparison(self)
