"""The timeline's lanes: which events go in which lane and row, and what each lane is called.

Top to bottom: the thread that ran the steps, then threads by number of
events, each thread's op lane (ops nested by their depth among ops) with its
Python lane right below, then one lane per device stream (nested by depth on
the stream). Rows deeper than a lane's cap are not drawn, and counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..analysis.frames import machinery_frames
from ..analysis.lod import ancestor_count
from ..format import ellipsize
from ..trace import categories as K

if TYPE_CHECKING:  # pragma: no cover
    from ..results.profile import Profile

#: Host kinds drawn in a thread's op lane.
OP_LANE_KINDS = (K.CPU_OP, K.USER_ANNOTATION, K.RUNTIME)
#: Most rows a lane may take (deeper events are not drawn, and counted).
ROW_CAP = {"ops": 16, "python": 12, "device": 6}
#: Most timeline rows one device nesting level takes.
DEVICE_SCALE_MAX = 3


@dataclass
class Lane:
    """One lane of the timeline.

    Attributes
    ----------
    label
        What the y axis shows (thread or stream name).
    side
        ``ops``, ``python`` or ``device``.
    first, rows
        First timeline row of the lane and how many rows it takes.
    events
        Events drawn in this lane.
    scale
        Timeline rows per nesting level (1 on host lanes; `device_row_scale` on device lanes).
    key
        ``(pid, tid)`` of a host lane, ``(device, stream)`` of a device lane.
    """

    label: str
    side: str
    first: int
    rows: int
    events: int
    scale: int = 1
    key: tuple[int, int] = (0, 0)

    @property
    def levels(self) -> int:
        """Nesting levels the lane shows."""
        return self.rows // self.scale


def device_row_scale(host_rows: int, device_rows: int) -> int:
    """Timeline rows per device nesting level.

    The rule: device lanes together get at least a third of the lane area
    (host rows / (2 x device rows), rounded up), a device row is never
    thinner than a host row (at least 1) and at most `DEVICE_SCALE_MAX` host
    rows tall. With one shallow thread that is one row per level; under
    several threads of deeply nested ops (where the plot's rows shrink to
    fit its height) each kernel row becomes two or three op rows tall:
    device work is what a person reads a GPU timeline for.
    """
    if device_rows <= 0:
        return 1
    want = -(-host_rows // (2 * device_rows))  # ceil
    return int(min(DEVICE_SCALE_MAX, max(1, want)))


# --------------------------------------------------------------------------- #
# layout


def _thread_label(meta: Any, pid: int, tid: int) -> str:
    name = meta.thread_names.get((pid, tid))
    if name:
        name = name.strip()
        # Kineto writes "thread 123 (pt_main_thread)": the name first reads better.
        if name.startswith("thread ") and name.endswith(")") and " (" in name:
            num, _, rest = name[len("thread ") :].partition(" (")
            return f"{rest[:-1]} · {num}"
        return name
    # Negative ids stand for thread names Kineto wrote as strings.
    return f"thread {tid}" if tid >= 0 else "other thread"


def _device_label(meta: Any, device: int, stream: int) -> str:
    base = meta.process_labels.get(device) or f"device {device}"
    return f"{base} · stream {stream}"


def hidden_frames(profile: Profile, all_frames: bool = False) -> np.ndarray:
    """Which events are Python frames of the kernel machinery the timeline leaves out.

    See `analysis.frames.machinery_frames`; nothing with ``all_frames``.
    """
    ev = profile.events
    if all_frames or not K.kind_mask(ev, K.PYTHON_FUNCTION).any():
        return np.zeros(len(ev), dtype=bool)
    return machinery_frames(ev, ev["parent"].to_numpy(), ev["depth"].to_numpy())


def layout(
    profile: Profile, all_frames: bool = False, hidden: np.ndarray | None = None
) -> tuple[list[Lane], np.ndarray, np.ndarray]:
    """Lanes and the timeline row of every event.

    Python frames of the kernel machinery (ipykernel, tornado, IPython, our
    own progress thread: `hidden_frames`) are left out unless ``all_frames``;
    threads that ran only those disappear with them. ``hidden`` is that mask
    when the caller has it already.

    Returns
    -------
    lanes
        Top to bottom.
    row
        Timeline row per event (-1: not drawn).
    lane_of
        Lane index per event (-1: not drawn).
    """
    ev = profile.events
    if hidden is None:
        hidden = hidden_frames(profile, all_frames)
    side, a, b, level = _lane_keys(ev, hidden)
    idx = np.flatnonzero((side >= 0) & (level >= 0))
    lanes_df = _ordered_lanes(profile, side, a, b, level, idx)
    lanes, lane_key = _lanes(profile.meta, lanes_df)
    row, lane_of = _rows(len(ev), side, a, b, level, idx, lanes, lane_key)
    return lanes, row, lane_of


def _lane_keys(ev: pd.DataFrame, hidden: np.ndarray) -> tuple[np.ndarray, ...]:
    """(side, a, b, level) per event: ops 0 / python 1 / device 2 (-1 not drawn), thread or device/stream, nesting level."""
    n = len(ev)
    parent = ev["parent"].to_numpy()
    depth = ev["depth"].to_numpy()
    is_op = K.kind_mask(ev, OP_LANE_KINDS)
    is_py = K.kind_mask(ev, K.PYTHON_FUNCTION) & ~hidden
    is_dev = K.kind_mask(ev, K.DEVICE_KINDS)
    level = np.full(n, -1, dtype=np.int64)
    if is_op.any():
        level[is_op] = ancestor_count(parent, depth, is_op)[is_op]
    if is_py.any():
        level[is_py] = ancestor_count(parent, depth, is_py)[is_py]
    level[is_dev] = ev["device_depth"].to_numpy()[is_dev]
    side = np.full(n, -1, dtype=np.int64)
    side[is_op] = 0
    side[is_py] = 1
    side[is_dev] = 2
    a = np.where(is_dev, ev["device"].to_numpy(), ev["pid"].to_numpy())
    b = np.where(is_dev, ev["stream"].to_numpy(), ev["tid"].to_numpy())
    return side, a, b, level


def _ordered_lanes(
    profile: Profile, side: np.ndarray, a: np.ndarray, b: np.ndarray, level: np.ndarray, idx: np.ndarray
) -> pd.DataFrame:
    """One row per lane (side, a, b, events n, deepest level), top to bottom.

    The thread that ran the steps first, then threads by number of events,
    each thread's Python lane right below its op lane, then devices and
    streams in order.
    """
    ev = profile.events
    frame = pd.DataFrame(
        {"side": side[idx], "a": a[idx], "b": b[idx], "level": level[idx], "ts": ev["ts"].to_numpy()[idx]},
        copy=False,  # fresh arrays already: stacking them into one block would copy them again
    )
    lanes_df = (
        frame.groupby(["side", "a", "b"], sort=False)
        .agg(n=("level", "size"), maxl=("level", "max"), t=("ts", "min"))
        .reset_index()
    )
    host = lanes_df["side"] < 2
    thread_n = lanes_df.loc[host].groupby(["a", "b"])["n"].transform("sum")
    lanes_df["rank"] = 0
    lanes_df.loc[host, "rank"] = -thread_n
    if not profile.steps.empty:
        cats = ev["name"].cat.categories
        step_cat = np.array([str(c).startswith("ProfilerStep#") for c in cats] + [False])
        is_step = K.kind_mask(ev, K.USER_ANNOTATION) & step_cat[ev["name"].cat.codes.to_numpy()]
        if is_step.any():
            first = int(np.flatnonzero(is_step)[0])
            pid, tid = ev["pid"].to_numpy(), ev["tid"].to_numpy()
            main = (lanes_df["a"] == pid[first]) & (lanes_df["b"] == tid[first]) & host
            lanes_df.loc[main, "rank"] = -(2**62)
    lanes_df["host"] = (~host).astype(int)
    return lanes_df.sort_values(["host", "rank", "a", "b", "side"], kind="stable").reset_index(drop=True)


def _lanes(meta: Any, lanes_df: pd.DataFrame) -> tuple[list[Lane], dict[tuple[int, int, int], int]]:
    """The `Lane` list (labels, first row, rows capped per kind) and the lane index of each (side, a, b)."""
    lanes: list[Lane] = []
    first = 0
    lane_key: dict[tuple[int, int, int], int] = {}
    levels = [
        int(min(int(m) + 1, ROW_CAP[("ops", "python", "device")[int(s)]]))
        for s, m in zip(lanes_df["side"], lanes_df["maxl"], strict=True)
    ]
    is_dev = (lanes_df["side"] == 2).to_numpy()
    scale = device_row_scale(
        sum(n for n, d in zip(levels, is_dev, strict=True) if not d),
        sum(n for n, d in zip(levels, is_dev, strict=True) if d),
    )
    for rec, n in zip(lanes_df.itertuples(index=False), levels, strict=True):
        s = int(rec.side)
        name = ("ops", "python", "device")[s]
        k = scale if s == 2 else 1
        rows = n * k
        if s == 2:
            label = _device_label(meta, int(rec.a), int(rec.b))
        else:
            label = _thread_label(meta, int(rec.a), int(rec.b))
            if s == 1:
                label += " · python"
        lane_key[(s, int(rec.a), int(rec.b))] = len(lanes)
        lanes.append(Lane(ellipsize(label, 34), name, first, rows, int(rec.n), k, (int(rec.a), int(rec.b))))
        first += rows
    return lanes, lane_key


def _rows(
    n: int,
    side: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    level: np.ndarray,
    idx: np.ndarray,
    lanes: list[Lane],
    lane_key: dict[tuple[int, int, int], int],
) -> tuple[np.ndarray, np.ndarray]:
    """Timeline row and lane of every event (-1: not drawn, or deeper than its lane's cap)."""
    row = np.full(n, -1, dtype=np.int64)
    lane_of = np.full(n, -1, dtype=np.int64)
    if len(idx):
        keys = pd.MultiIndex.from_arrays([side[idx], a[idx], b[idx]])
        lookup = pd.Series(list(lane_key.values()), index=pd.MultiIndex.from_tuples(list(lane_key.keys())))
        li = lookup.reindex(keys).to_numpy()
        firsts = np.array([ln.first for ln in lanes], dtype=np.int64)
        caps = np.array([ln.levels for ln in lanes], dtype=np.int64)
        scales = np.array([ln.scale for ln in lanes], dtype=np.int64)
        lv = level[idx]
        ok = lv < caps[li]
        row[idx[ok]] = firsts[li[ok]] + lv[ok] * scales[li[ok]]
        lane_of[idx[ok]] = li[ok]
    return row, lane_of
