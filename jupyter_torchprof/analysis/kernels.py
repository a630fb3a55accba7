"""Device-side tables: kernels, copies, streams and busy time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import categories as K
from .names import describe_kernel


def device_activity(events: pd.DataFrame) -> pd.DataFrame:
    """The events that occupied a device: kernels, memcpys and memsets."""
    return events.loc[np.isin(events["kind"].to_numpy(), K.DEVICE_ACTIVITY)]


def union_length(start: np.ndarray, end: np.ndarray) -> float:
    """Total length covered by a set of intervals (overlaps counted once)."""
    if len(start) == 0:
        return 0.0
    order = np.argsort(start, kind="stable")
    s = start[order]
    e = np.maximum.accumulate(end[order])
    # A new block starts where an interval begins after everything before ended.
    new_block = np.empty(len(s), dtype=bool)
    new_block[0] = True
    new_block[1:] = s[1:] > e[:-1]
    block_id = np.cumsum(new_block) - 1
    block_start = s[new_block]
    block_end = np.zeros(block_id[-1] + 1)
    np.maximum.at(block_end, block_id, e)
    return float((block_end - block_start).sum())


def clip_intervals(start: np.ndarray, end: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Intervals cut to the window [lo, hi] (those outside become empty)."""
    s = np.clip(start, lo, hi)
    e = np.clip(end, lo, hi)
    return s, e


def kernel_table(events: pd.DataFrame, links: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per device kernel (or copy, or memset) name.

    Columns: ``name, short_name, kind, family, calls, total_us, mean_us,
    min_us, median_us, max_us, pct`` (share of all device activity time, so
    rows sum to 100), ``devices``, ``streams``, the most common ``grid`` and
    ``block``, mean ``registers``, ``shared_memory`` and ``occupancy`` where
    the trace has them, ``bytes`` and ``bandwidth_gbps`` for copies, mean
    ``launch_delay_us`` where launches are linked, and ``fused_ops`` for
    generated kernels.
    """
    act = device_activity(events)
    columns = [
        "name", "short_name", "kind", "family", "calls", "total_us", "mean_us", "min_us",
        "median_us", "max_us", "pct", "devices", "streams",
    ]  # fmt: skip
    if act.empty:
        return pd.DataFrame(
            {
                c: pd.Series(
                    dtype=object
                    if c in ("name", "short_name", "kind", "family", "devices", "streams")
                    else float
                )
                for c in columns
            }
        )
    frame = pd.DataFrame(
        {
            "name": act["name"].astype(object).to_numpy(),
            "kind": act["kind"].astype(str).to_numpy(),
            "dur": act["dur"].to_numpy(),
            "device": act["device"].to_numpy(),
            "stream": act["stream"].to_numpy(),
            "grid": act["grid"].astype(object).to_numpy(),
            "block": act["block"].astype(object).to_numpy(),
            "registers": act["registers"].to_numpy(),
            "shared_memory": act["shared_memory"].to_numpy(),
            "occupancy": act["occupancy"].to_numpy(),
            "bytes": act["bytes"].to_numpy(),
        }
    )
    if links is not None:
        frame["launch_delay_us"] = links.loc[act.index, "launch_delay_us"].to_numpy()
    g = frame.groupby("name", sort=False)
    table = g.agg(
        kind=("kind", "first"),
        calls=("dur", "size"),
        total_us=("dur", "sum"),
        mean_us=("dur", "mean"),
        min_us=("dur", "min"),
        median_us=("dur", "median"),
        max_us=("dur", "max"),
        registers=("registers", "mean"),
        shared_memory=("shared_memory", "mean"),
        occupancy=("occupancy", "mean"),
        bytes=("bytes", "sum"),
    )
    total = table["total_us"].sum()
    table["pct"] = 100 * table["total_us"] / total if total > 0 else 0.0
    table["devices"] = g["device"].agg(_join_unique)
    table["streams"] = g["stream"].agg(_join_unique)
    table["grid"] = _most_common_by_name(frame, "grid")
    table["block"] = _most_common_by_name(frame, "block")
    if "launch_delay_us" in frame:
        table["launch_delay_us"] = g["launch_delay_us"].mean()
    table = table.reset_index()
    described = [describe_kernel(n) for n in table["name"]]
    table["short_name"] = [d.short for d in described]
    table["family"] = [d.family for d in described]
    table["fused_ops"] = [", ".join(d.fused_ops) for d in described]
    has_bytes = table["bytes"] > 0
    table["bandwidth_gbps"] = np.where(
        has_bytes & (table["total_us"] > 0), table["bytes"] / (table["total_us"] * 1e3), np.nan
    )
    table.loc[~has_bytes, "bytes"] = np.nan
    # Launch-argument columns only when the trace recorded any.
    optional = [
        "grid",
        "block",
        "registers",
        "shared_memory",
        "occupancy",
        "bytes",
        "bandwidth_gbps",
        "fused_ops",
    ]
    keep_optional = [c for c in optional if table[c].replace("", np.nan).notna().any()]
    order = [*columns, *keep_optional]
    if "launch_delay_us" in table:
        order.append("launch_delay_us")
    table = table[order]
    return table.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


def _join_unique(values: pd.Series) -> str:
    return ",".join(str(v) for v in sorted(set(values.tolist())))


def _most_common_by_name(frame: pd.DataFrame, column: str) -> pd.Series:
    """The most frequent value of ``column`` for each kernel name."""
    counts = frame.groupby(["name", column], sort=False, dropna=True).size()
    if counts.empty:
        return pd.Series(dtype=object)
    top = counts.reset_index(name="n").sort_values("n", ascending=False, kind="stable")
    return top.drop_duplicates("name").set_index("name")[column]


def stream_table(events: pd.DataFrame, window: tuple[float, float] | None = None) -> pd.DataFrame:
    """Busy and idle time per device stream, and per device (``stream = "all"``).

    ``window`` (start, end in µs) limits the accounting to e.g. the profiled
    steps; by default the span from first to last device activity is used.
    """
    act = device_activity(events)
    cols = ["device", "stream", "kernels", "busy_us", "idle_us", "window_us", "utilization_pct"]
    if act.empty:
        return pd.DataFrame(columns=cols)
    start = act["ts"].to_numpy()
    end = start + act["dur"].to_numpy()
    lo, hi = window if window is not None else (float(start.min()), float(end.max()))
    span = max(hi - lo, 0.0)
    s, e = clip_intervals(start, end, lo, hi)
    dev = act["device"].to_numpy()
    stream = act["stream"].to_numpy()
    rows = []
    for d in sorted(set(dev.tolist())):
        dm = dev == d
        for st in sorted(set(stream[dm].tolist())):
            m = dm & (stream == st)
            busy = union_length(s[m], e[m])
            rows.append((d, str(st), int(m.sum()), busy))
        busy = union_length(s[dm], e[dm])
        rows.append((d, "all", int(dm.sum()), busy))
    table = pd.DataFrame(rows, columns=["device", "stream", "kernels", "busy_us"])
    table["window_us"] = span
    table["idle_us"] = np.maximum(span - table["busy_us"], 0.0)
    table["utilization_pct"] = 100 * table["busy_us"] / span if span > 0 else np.nan
    return table[cols]


def memcpy_table(events: pd.DataFrame) -> pd.DataFrame:
    """Copies and memsets grouped by name (direction, memory kinds)."""
    sel = events.loc[np.isin(events["kind"].to_numpy(), (K.MEMCPY, K.MEMSET))]
    cols = ["name", "kind", "calls", "total_us", "bytes", "bandwidth_gbps"]
    if sel.empty:
        return pd.DataFrame(columns=cols)
    frame = pd.DataFrame(
        {
            "name": sel["name"].astype(object).to_numpy(),
            "kind": sel["kind"].astype(str).to_numpy(),
            "dur": sel["dur"].to_numpy(),
            "bytes": sel["bytes"].to_numpy(),
        }
    )
    table = frame.groupby("name", sort=False).agg(
        kind=("kind", "first"), calls=("dur", "size"), total_us=("dur", "sum"), bytes=("bytes", "sum")
    )
    table["bandwidth_gbps"] = np.where(
        table["total_us"] > 0, table["bytes"] / (table["total_us"] * 1e3), np.nan
    )
    return (
        table.reset_index()
        .sort_values("total_us", ascending=False, kind="stable")
        .reset_index(drop=True)[cols]
    )
