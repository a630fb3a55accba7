"""Several ranks of one distributed job, side by side."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .analysis.findings.thresholds import THRESHOLDS
from .profile import Profile
from .views.format import fmt_pct, fmt_time
from .views.text import render_table

#: A rank whose step takes this much longer than the median is a straggler
#: (defined with the other findings thresholds).
STRAGGLER_RATIO = THRESHOLDS.straggler_ratio


def cross_rank_table(profiles: Sequence[Profile]) -> pd.DataFrame:
    """One row per rank: step time, busy times and communication time.

    Columns: ``rank`` (from the trace's ``distributedInfo``, else the
    position), ``worker`` (from the file name), ``file``, ``steps``,
    ``wall_per_step_us``, ``cpu_busy_per_step_us``,
    ``device_busy_per_step_us``, ``device_idle_per_step_us``,
    ``device_busy_pct``, ``comm_per_step_us`` (communication kernels such as
    NCCL collectives; for a trace without device work, the time inside
    host-side collectives such as ``gloo:all_reduce``),
    ``compute_per_step_us`` (all other kernels), ``work_per_step_us`` (step
    time outside communication), ``vs_median`` (step time over the median
    rank's), ``work_vs_median`` (the same for ``work_per_step_us``) and
    ``straggler``.

    Collectives make every rank wait for the slowest, so in steady state all
    ranks' steps last about as long: the straggler is the rank whose *work*
    takes longest (and which waits least in its collectives). A rank is
    flagged when its step time or its work is more than `STRAGGLER_RATIO`
    times the median rank's.
    """
    from .analysis import steps as steps_mod
    from .analysis.kernels import union_length
    from .trace.loader import worker_of

    rows = []
    for i, p in enumerate(profiles):
        s = p.summary
        per = max(s["steps"], 1)
        k = p.kernels
        comm = float(k.loc[k["family"] == "communication", "total_us"].sum()) if not k.empty else 0.0
        compute = (
            float(k.loc[(k["family"] != "communication") & (k["kind"] == "kernel"), "total_us"].sum())
            if not k.empty
            else 0.0
        )
        if not s["device_traced"]:
            if s["steps"]:
                comm = float(p.steps["host_comm_us"].sum())
            else:
                ev = p._data.events
                rows_c = steps_mod.collective_rows(ev)
                t = ev["ts"].to_numpy()[rows_c]
                comm = union_length(t, t + ev["dur"].to_numpy()[rows_c])
        rows.append(
            {
                "rank": p.meta.rank if p.meta.rank is not None else i,
                "worker": worker_of(Path(p.meta.path)) if p.meta.path else p.name,
                "file": Path(p.meta.path).name if p.meta.path else "",
                "steps": s["steps"],
                "wall_per_step_us": s["wall_per_step_us"],
                "cpu_busy_per_step_us": s["cpu_busy_per_step_us"],
                "device_busy_per_step_us": s["device_busy_per_step_us"],
                "device_idle_per_step_us": (
                    max(s["wall_per_step_us"] - s["device_busy_per_step_us"], 0.0)
                    if s["device_traced"]
                    else np.nan
                ),
                "device_busy_pct": s["device_busy_pct"],
                "comm_per_step_us": comm / per,
                "compute_per_step_us": compute / per,
                "work_per_step_us": max(s["wall_per_step_us"] - comm / per, 0.0),
            }
        )
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    for col, out in (("wall_per_step_us", "vs_median"), ("work_per_step_us", "work_vs_median")):
        median = float(np.median(table[col]))
        table[out] = table[col] / median if median > 0 else np.nan
    table["straggler"] = (table["vs_median"] > STRAGGLER_RATIO) | (table["work_vs_median"] > STRAGGLER_RATIO)
    return table.sort_values(["rank", "file"], kind="stable").reset_index(drop=True)


class RankSet:
    """The Profiles of several ranks, indexed by rank.

    Parameters
    ----------
    profiles
        One Profile per rank.
    name
        Label for the set (usually the folder name).
    """

    def __init__(self, profiles: Sequence[Profile], name: str = "ranks", notes: Sequence[str] = ()) -> None:
        self.profiles = sorted(
            profiles, key=lambda p: (p.meta.rank is None, p.meta.rank or 0, str(p.meta.path or p.name))
        )
        self.name = name
        #: Files of the folder that could not be read (one line each).
        self.notes = list(notes)

    @classmethod
    def from_files(cls, files: Sequence[Path], name: str = "ranks") -> RankSet:
        """Load one Profile per trace file.

        Files that are not readable traces are skipped with a warning that
        names each (and listed in `notes`); if none is readable, the first
        file's `TraceError` is raised.
        """
        import warnings

        from .errors import TraceError

        profiles, errors = [], []
        for f in files:
            try:
                profiles.append(Profile.from_file(f))
            except TraceError as exc:
                errors.append(exc)
        if not profiles:
            raise errors[0]
        notes = [f"skipped {e}" for e in errors]
        for note in notes:
            warnings.warn(note, stacklevel=2)
        return cls(profiles, name=name, notes=notes)

    @property
    def ranks(self) -> list[int | None]:
        """The rank of each profile (None when its trace does not say)."""
        return [p.meta.rank for p in self.profiles]

    def __len__(self) -> int:
        return len(self.profiles)

    def __iter__(self) -> Iterator[Profile]:
        return iter(self.profiles)

    def __getitem__(self, rank: int) -> Profile:
        """The profile of ``rank`` (by recorded rank, else by position)."""
        for p in self.profiles:
            if p.meta.rank == rank:
                return p
        return self.profiles[rank]

    @property
    def table(self) -> pd.DataFrame:
        """The cross-rank table (see `cross_rank_table`)."""
        if "_table" not in self.__dict__:
            self.__dict__["_table"] = cross_rank_table(self.profiles)
        return self.__dict__["_table"]

    @property
    def stragglers(self) -> list[int]:
        """Ranks whose step time is well above the median rank's."""
        t = self.table
        return [] if t.empty else t.loc[t["straggler"], "rank"].tolist()

    @property
    def straggler_findings(self) -> pd.DataFrame:
        """The stragglers as findings (see `Profile.findings` for the columns)."""
        if "_stragglers" not in self.__dict__:
            from .analysis.findings import find_stragglers, findings_frame

            self.__dict__["_stragglers"] = findings_frame(find_stragglers(self.table, THRESHOLDS))
        return self.__dict__["_stragglers"]

    @property
    def findings(self) -> pd.DataFrame:
        """Stragglers, then every rank's own findings, with a ``rank`` column.

        ``event_rows`` refer to the ``events`` of the rank in that column.
        """
        if "_findings" not in self.__dict__:
            from .analysis.findings import merge_rank_findings

            self.__dict__["_findings"] = merge_rank_findings(
                self.straggler_findings,
                [
                    (p.meta.rank if p.meta.rank is not None else i, p.findings)
                    for i, p in enumerate(self.profiles)
                ],
            )
        return self.__dict__["_findings"]

    _HEADERS = [
        "Rank", "Steps", "Wall/step", "Device busy/step", "Busy %", "Comm/step", "Work/step", "vs median",
    ]  # fmt: skip

    def _rows(self) -> list[list[str]]:
        return [
            [
                str(r.rank),
                str(r.steps),
                fmt_time(r.wall_per_step_us),
                fmt_time(r.device_busy_per_step_us),
                fmt_pct(r.device_busy_pct),
                fmt_time(r.comm_per_step_us),
                fmt_time(r.work_per_step_us),
                f"{r.vs_median:.2f}× step, {r.work_vs_median:.2f}× work"
                + (" straggler" if r.straggler else ""),
            ]
            for r in self.table.itertuples(index=False)
        ]

    def text(self) -> str:
        """The cross-rank table as text."""
        from .views.findings import findings_text

        text = f"{self.name}: {len(self)} ranks\n" + render_table(self._rows(), self._HEADERS, 12)
        if self.notes:
            text += "\n" + "\n".join(f"note: {n}" for n in self.notes)
        found = findings_text(self.straggler_findings)
        return text + "\n" + found if found else text

    def __repr__(self) -> str:
        return f"<RankSet {self.name!r}: ranks {self.ranks}>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from .views.findings import findings_html
        from .views.html import table_html

        body = table_html(self._rows(), self._HEADERS, caption=f"{self.name}: {len(self)} ranks")
        body += findings_html(self.straggler_findings)
        return {"text/plain": self.text(), "text/html": f'<div class="jp-TorchProf-static">{body}</div>'}
