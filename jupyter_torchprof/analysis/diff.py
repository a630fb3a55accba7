"""Two profiles side by side: what changed per op, per kernel, per step.

Used for eager vs torch.compile, for two cells, for a run against a saved
trace, and by the sidebar's Compare. Every function here is pure: tables in,
table out. Times are per step (divided by each side's step count) so that runs
with different ``--steps`` compare fairly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

#: Columns compared for each kind of table: (column, per-step?)
OP_METRICS = ("calls", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us")
KERNEL_METRICS = ("calls", "total_us")


def _per_step(table: pd.DataFrame, metrics: tuple[str, ...], steps: int) -> pd.DataFrame:
    out = table[["name", *metrics]].groupby("name", sort=False).sum()
    return out / max(steps, 1)


def diff_tables(
    a: pd.DataFrame,
    b: pd.DataFrame,
    metrics: tuple[str, ...],
    steps_a: int = 1,
    steps_b: int = 1,
    sort_by: str | None = None,
) -> pd.DataFrame:
    """Join two tables on ``name`` and compare ``metrics`` per step.

    Returns one row per name present on either side with ``<metric>_a``,
    ``<metric>_b``, ``<metric>_delta`` (b - a) for each metric, ``ratio``
    (b / a of the sort metric; inf when new, 0 when gone) and ``status``:
    ``both``, ``only_a`` (gone in b) or ``only_b`` (new in b). Sorted by the
    absolute change of ``sort_by`` (default: the last metric).
    """
    sort_by = sort_by or metrics[-1]
    pa = _per_step(a, metrics, steps_a)
    pb = _per_step(b, metrics, steps_b)
    joined = pa.add_suffix("_a").join(pb.add_suffix("_b"), how="outer")
    in_a = joined.index.isin(pa.index)
    in_b = joined.index.isin(pb.index)
    joined = joined.fillna(0.0)
    for m in metrics:
        joined[f"{m}_delta"] = joined[f"{m}_b"] - joined[f"{m}_a"]
    va = joined[f"{sort_by}_a"].to_numpy()
    vb = joined[f"{sort_by}_b"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(va > 0, vb / va, np.where(vb > 0, np.inf, np.nan))
    joined["ratio"] = ratio
    joined["status"] = np.where(in_a & in_b, "both", np.where(in_a, "only_a", "only_b"))
    order = joined[f"{sort_by}_delta"].abs().sort_values(ascending=False, kind="stable").index
    joined = joined.loc[order].reset_index().rename(columns={"index": "name"})
    cols = ["name", "status"] + [f"{m}_{s}" for m in metrics for s in ("a", "b", "delta")] + ["ratio"]
    return joined[cols]


def headline(summary_a: dict[str, Any], summary_b: dict[str, Any]) -> pd.DataFrame:
    """Wall, CPU-busy and device-busy time per step, a vs b, with the speed-up.

    ``speedup`` is a / b: above 1 means b is faster. Device rows are NaN when
    either side did not trace a device.
    """
    rows = []
    for label, key in (
        ("wall per step", "wall_per_step_us"),
        ("CPU busy per step", "cpu_busy_per_step_us"),
        ("device busy per step", "device_busy_per_step_us"),
    ):
        va = summary_a.get(key, np.nan)
        vb = summary_b.get(key, np.nan)
        va = np.nan if va is None else float(va)
        vb = np.nan if vb is None else float(vb)
        speedup = va / vb if vb and not np.isnan(vb) and vb > 0 else np.nan
        rows.append({"metric": label, "a_us": va, "b_us": vb, "delta_us": vb - va, "speedup": speedup})
    return pd.DataFrame(rows)
