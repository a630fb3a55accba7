"""The cross-rank table: one row per rank of a distributed job, and who straggles.

Each rank's row comes from its profile's summary and tables (a `Profile`,
duck-typed: ``summary``, ``kernels``, ``steps``, ``parsed_events``,
``meta``, ``name``); the columns that compare ranks need all the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..trace.files import worker_of
from . import steps as steps_mod
from .findings.thresholds import THRESHOLDS
from .kernels import union_length

#: A rank whose step takes this much longer than the median is a straggler
#: (defined with the other findings thresholds).
STRAGGLER_RATIO = THRESHOLDS.straggler_ratio


def cross_rank_table(profiles: Sequence[Any]) -> pd.DataFrame:
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
    rows = []
    for i, p in enumerate(profiles):
        row = rank_row(p)
        if row["rank"] is None:
            row["rank"] = i
        rows.append(row)
    return finish_rank_table(rows)


def rank_row(p: Any) -> dict[str, Any]:
    """One rank's row of `cross_rank_table`, before the columns that compare ranks.

    ``rank`` is None when the trace does not record it (the table then
    uses the rank's position).
    """
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
            ev = p.parsed_events
            rows_c = steps_mod.collective_rows(ev)
            t = ev["ts"].to_numpy()[rows_c]
            comm = union_length(t, t + ev["dur"].to_numpy()[rows_c])
    return {
        "rank": p.meta.rank,
        "worker": worker_of(Path(p.meta.path)) if p.meta.path else p.name,
        "file": Path(p.meta.path).name if p.meta.path else "",
        "steps": s["steps"],
        "wall_per_step_us": s["wall_per_step_us"],
        "cpu_busy_per_step_us": s["cpu_busy_per_step_us"],
        "device_busy_per_step_us": s["device_busy_per_step_us"],
        "device_idle_per_step_us": (
            max(s["wall_per_step_us"] - s["device_busy_per_step_us"], 0.0) if s["device_traced"] else np.nan
        ),
        "device_busy_pct": s["device_busy_pct"],
        "comm_per_step_us": comm / per,
        "compute_per_step_us": compute / per,
        "work_per_step_us": max(s["wall_per_step_us"] - comm / per, 0.0),
    }


def finish_rank_table(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The cross-rank table from the ranks' rows: medians, ratios, stragglers, sorted by rank."""
    table = pd.DataFrame(list(rows))
    if table.empty:
        return table
    for col, out in (("wall_per_step_us", "vs_median"), ("work_per_step_us", "work_vs_median")):
        median = float(np.median(table[col]))
        table[out] = table[col] / median if median > 0 else np.nan
    table["straggler"] = (table["vs_median"] > STRAGGLER_RATIO) | (table["work_vs_median"] > STRAGGLER_RATIO)
    return table.sort_values(["rank", "file"], kind="stable").reset_index(drop=True)
