"""Links between host and device: kernel → launch → the op that launched it.

Kineto gives three kinds of evidence, tried in order:

1. ``args.correlation``, shared by a runtime/driver launch and the device work
   it enqueued (every trace since 2020 carries it on both sides);
2. launch flow events (``ac2g``, older ``async_cpu_to_gpu``) whose start sits
   on the launch and whose finish sits on the kernel;
3. ``args."External id"``, shared by a CPU op and the device work of its
   launches, for traces that lost the runtime events.

The op of a kernel is the innermost op or annotation enclosing its launch on
the host thread (what torch's ``key_averages()`` charges device time to).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import categories as K
from .tree import lane_keys, nearest_ancestor, nest


def _first_index_by(keys: np.ndarray, positions: np.ndarray) -> pd.Series:
    s = pd.Series(positions, index=keys)
    return s[~s.index.duplicated(keep="first")]


def link_device_events(
    events: pd.DataFrame, parent: np.ndarray, depth: np.ndarray, flows: pd.DataFrame | None = None
) -> pd.DataFrame:
    """For every event, its launch and its launching op (device events only).

    Parameters
    ----------
    events
        The events frame of a `TraceData`.
    parent, depth
        The host tree (see `tree.host_tree`).
    flows
        Launch flow events, used where correlation ids are missing.

    Returns
    -------
    DataFrame aligned with ``events``: ``launch`` (row of the runtime event,
    -1), ``op`` (row of the launching op, -1), ``launch_delay_us`` (kernel
    start minus launch start, NaN when unknown).
    """
    n = len(events)
    kind = events["kind"].to_numpy()
    corr = events["correlation"].to_numpy()
    ts = events["ts"].to_numpy()
    launch = np.full(n, -1, dtype=np.int64)

    dev_idx = np.flatnonzero(np.isin(kind, K.DEVICE_KINDS))
    rt_idx = np.flatnonzero((kind == K.RUNTIME) & (corr >= 0))
    if len(dev_idx) and len(rt_idx):
        by_corr = _first_index_by(corr[rt_idx], rt_idx)
        found = by_corr.reindex(corr[dev_idx]).to_numpy()
        ok = ~np.isnan(found) & (corr[dev_idx] >= 0)
        launch[dev_idx[ok]] = found[ok].astype(np.int64)

    if flows is not None and len(flows) and len(dev_idx):
        _link_by_flows(events, flows, launch, dev_idx, rt_idx)

    is_op = np.isin(kind, (K.CPU_OP, K.USER_ANNOTATION))
    op_of_host = nearest_ancestor(parent, depth, is_op)
    op = np.full(n, -1, dtype=np.int64)
    has_launch = launch >= 0
    op[has_launch] = op_of_host[launch[has_launch]]

    # Fallback: External id shared with a CPU op.
    ext = events["external_id"].to_numpy()
    missing = dev_idx[(op[dev_idx] < 0) & (ext[dev_idx] >= 0)]
    if len(missing):
        op_idx = np.flatnonzero((kind == K.CPU_OP) & (ext >= 0))
        if len(op_idx):
            by_ext = pd.Series(op_idx, index=ext[op_idx])
            unique = by_ext[~by_ext.index.duplicated(keep=False)]
            found = unique.reindex(ext[missing]).to_numpy()
            ok = ~np.isnan(found)
            op[missing[ok]] = found[ok].astype(np.int64)

    delay = np.full(n, np.nan)
    delay[has_launch] = ts[has_launch] - ts[launch[has_launch]]
    return pd.DataFrame({"launch": launch, "op": op, "launch_delay_us": delay}, index=events.index)


def _link_by_flows(
    events: pd.DataFrame,
    flows: pd.DataFrame,
    launch: np.ndarray,
    dev_idx: np.ndarray,
    rt_idx: np.ndarray,
) -> None:
    """Fill ``launch`` for device events still unlinked, from flow pairs.

    A flow start sits at the launch's (pid, tid, ts), its finish at the device
    event's (pid, tid, ts); both ends carry the same flow id.
    """
    todo = dev_idx[launch[dev_idx] < 0]
    if not len(todo) or not len(rt_idx):
        return
    kind = events["kind"].to_numpy()
    all_rt = np.flatnonzero(kind == K.RUNTIME)
    starts = flows[flows["is_start"]]
    ends = flows[~flows["is_start"]]
    rt = pd.DataFrame(
        {
            "pid": events["pid"].to_numpy()[all_rt],
            "tid": events["tid"].to_numpy()[all_rt],
            "ts": events["ts"].to_numpy()[all_rt],
            "row": all_rt,
        }
    )
    dv = pd.DataFrame(
        {
            "pid": events["pid"].to_numpy()[todo],
            "tid": events["tid"].to_numpy()[todo],
            "ts": events["ts"].to_numpy()[todo],
            "row": todo,
        }
    )
    s = starts.merge(rt, on=["pid", "tid", "ts"])[["id", "row"]].drop_duplicates("id")
    f = ends.merge(dv, on=["pid", "tid", "ts"])[["id", "row"]].drop_duplicates("row")
    pairs = f.merge(s, on="id", suffixes=("_dev", "_rt"))
    launch[pairs["row_dev"].to_numpy()] = pairs["row_rt"].to_numpy()


def attribute_points(
    events: pd.DataFrame,
    point_pid: np.ndarray,
    point_tid: np.ndarray,
    point_ts: np.ndarray,
    tolerance: float = 0.001,
) -> np.ndarray:
    """Innermost op/annotation on the same thread enclosing each instant.

    Used for ``[memory]`` events: an allocation belongs to the op that was
    running on its thread when it happened.
    """
    kind = events["kind"].to_numpy()
    op_idx = np.flatnonzero(np.isin(kind, (K.CPU_OP, K.USER_ANNOTATION)))
    m = len(point_ts)
    if m == 0 or len(op_idx) == 0:
        return np.full(m, -1, dtype=np.int64)
    pid = np.concatenate([events["pid"].to_numpy()[op_idx], point_pid])
    tid = np.concatenate([events["tid"].to_numpy()[op_idx], point_tid])
    ts = np.concatenate([events["ts"].to_numpy()[op_idx], point_ts])
    end = np.concatenate([events["ts"].to_numpy()[op_idx] + events["dur"].to_numpy()[op_idx], point_ts])
    parent, _ = nest(lane_keys(pid, tid), ts, end, tolerance)
    p = parent[len(op_idx) :]
    # A point can only be enclosed by ops (points have no duration), so the
    # parent is a position in op_idx.
    return np.where(p >= 0, op_idx[np.clip(p, 0, len(op_idx) - 1)], -1)
