"""Several ranks of one distributed job, side by side."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .profile import Profile
from .views.format import fmt_pct, fmt_time
from .views.text import render_table

#: A rank whose step takes this much longer than the median is a straggler.
STRAGGLER_RATIO = 1.10


def cross_rank_table(profiles: Sequence[Profile]) -> pd.DataFrame:
    """One row per rank: step time, busy times and communication time.

    Columns: ``rank``, ``file``, ``steps``, ``wall_per_step_us``,
    ``cpu_busy_per_step_us``, ``device_busy_per_step_us``,
    ``device_busy_pct``, ``comm_per_step_us`` (communication kernels such as
    NCCL collectives), ``compute_per_step_us`` (all other kernels),
    ``vs_median`` (step time over the median rank's) and ``straggler``.
    """
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
        rows.append(
            {
                "rank": p.meta.rank if p.meta.rank is not None else i,
                "file": Path(p.meta.path).name if p.meta.path else "",
                "steps": s["steps"],
                "wall_per_step_us": s["wall_per_step_us"],
                "cpu_busy_per_step_us": s["cpu_busy_per_step_us"],
                "device_busy_per_step_us": s["device_busy_per_step_us"],
                "device_busy_pct": s["device_busy_pct"],
                "comm_per_step_us": comm / per,
                "compute_per_step_us": compute / per,
            }
        )
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    median = float(np.median(table["wall_per_step_us"]))
    table["vs_median"] = table["wall_per_step_us"] / median if median > 0 else np.nan
    table["straggler"] = table["vs_median"] > STRAGGLER_RATIO
    return table.sort_values("rank").reset_index(drop=True)


class RankSet:
    """The Profiles of several ranks, indexed by rank.

    Parameters
    ----------
    profiles
        One Profile per rank.
    name
        Label for the set (usually the folder name).
    """

    def __init__(self, profiles: Sequence[Profile], name: str = "ranks") -> None:
        self.profiles = sorted(profiles, key=lambda p: (p.meta.rank is None, p.meta.rank or 0))
        self.name = name

    @classmethod
    def from_files(cls, files: Sequence[Path], name: str = "ranks") -> RankSet:
        """Load one Profile per trace file."""
        return cls([Profile.from_file(f) for f in files], name=name)

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

    _HEADERS = ["Rank", "Steps", "Wall/step", "Device busy/step", "Busy %", "Comm/step", "vs median"]

    def _rows(self) -> list[list[str]]:
        return [
            [
                str(r.rank),
                str(r.steps),
                fmt_time(r.wall_per_step_us),
                fmt_time(r.device_busy_per_step_us),
                fmt_pct(r.device_busy_pct),
                fmt_time(r.comm_per_step_us),
                f"{r.vs_median:.2f}×" + (" straggler" if r.straggler else ""),
            ]
            for r in self.table.itertuples(index=False)
        ]

    def text(self) -> str:
        """The cross-rank table as text."""
        return f"{self.name}: {len(self)} ranks\n" + render_table(self._rows(), self._HEADERS, 12)

    def __repr__(self) -> str:
        return f"<RankSet {self.name!r}: ranks {self.ranks}>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from .views.html import table_html

        body = table_html(self._rows(), self._HEADERS, caption=f"{self.name}: {len(self)} ranks")
        return {"text/plain": self.text(), "text/html": f'<div class="jp-TorchProf-static">{body}</div>'}
