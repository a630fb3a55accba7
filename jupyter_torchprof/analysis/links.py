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

from typing import Any

import numpy as np
import pandas as pd

from ..trace import categories as K
from .tree import ancestor_of, nest, pair_groups


def first_match(
    keys: np.ndarray, positions: np.ndarray, wanted: np.ndarray, unique: bool = False
) -> np.ndarray:
    """For each of ``wanted``, the first of ``positions`` whose key equals it (-1 if none).

    With ``unique``, keys held by more than one position match nothing
    (an ambiguous link is no link).
    """
    out = np.full(len(wanted), -1, dtype=np.int64)
    if not len(keys) or not len(wanted):
        return out
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    at = np.searchsorted(sk, wanted, side="left")
    inside = at < len(sk)
    hit = np.zeros(len(wanted), dtype=bool)
    hit[inside] = sk[at[inside]] == wanted[inside]
    if unique:
        nxt = at + 1
        dup = np.zeros(len(wanted), dtype=bool)
        more = hit & (nxt < len(sk))
        dup[more] = sk[nxt[more]] == wanted[more]
        hit &= ~dup
    out[hit] = positions[order[at[hit]]]
    return out


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
    start minus launch start, NaN when unknown), ``link`` (how the launch was
    found: ``correlation``, ``flow``, ``external id`` or empty).
    """
    n = len(events)
    corr = events["correlation"].to_numpy()
    ts = events["ts"].to_numpy()
    launch = np.full(n, -1, dtype=np.int64)
    how = np.zeros(n, dtype=np.int8)  # 0 none, 1 correlation, 2 flow, 3 external id

    dev_idx = np.flatnonzero(K.kind_mask(events, K.LAUNCHED_KINDS))
    is_rt = K.kind_mask(events, K.RUNTIME)
    rt_idx = np.flatnonzero(is_rt & (corr >= 0))
    if len(dev_idx) and len(rt_idx):
        dc = corr[dev_idx]
        found = first_match(corr[rt_idx], rt_idx, dc)
        ok = (found >= 0) & (dc >= 0)
        launch[dev_idx[ok]] = found[ok]
        how[dev_idx[ok]] = 1

    if flows is not None and len(flows) and len(dev_idx):
        before = launch >= 0
        _link_by_flows(events, flows, launch, dev_idx, np.flatnonzero(is_rt))
        how[(launch >= 0) & ~before] = 2

    is_op = K.kind_mask(events, (K.CPU_OP, K.USER_ANNOTATION))
    op = np.full(n, -1, dtype=np.int64)
    has_launch = launch >= 0
    # The op above each launch only (not every event's: a walk of the tree).
    op[has_launch] = ancestor_of(parent, is_op, launch[has_launch])

    # Fallback: External id shared with exactly one CPU op.
    ext = events["external_id"].to_numpy()
    missing = dev_idx[(op[dev_idx] < 0) & (ext[dev_idx] >= 0)]
    if len(missing):
        op_idx = np.flatnonzero(K.kind_mask(events, K.CPU_OP) & (ext >= 0))
        found = first_match(ext[op_idx], op_idx, ext[missing], unique=True)
        ok = found >= 0
        op[missing[ok]] = found[ok]
        how[missing[ok & (launch[missing] < 0)]] = 3

    delay = np.full(n, np.nan)
    delay[has_launch] = ts[has_launch] - ts[launch[has_launch]]
    link = pd.Categorical.from_codes(how - 1, categories=["correlation", "flow", "external id"])
    return pd.DataFrame(
        {"launch": launch, "op": op, "launch_delay_us": delay, "link": link}, index=events.index, copy=False
    )


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
    starts = flows[flows["is_start"]]
    ends = flows[~flows["is_start"]]
    rt = pd.DataFrame(
        {
            "pid": events["pid"].to_numpy()[rt_idx],
            "tid": events["tid"].to_numpy()[rt_idx],
            "ts": events["ts"].to_numpy()[rt_idx],
            "row": rt_idx,
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
    op_idx = np.flatnonzero(K.kind_mask(events, (K.CPU_OP, K.USER_ANNOTATION)))
    m = len(point_ts)
    if m == 0 or len(op_idx) == 0:
        return np.full(m, -1, dtype=np.int64)
    pid = np.concatenate([events["pid"].to_numpy()[op_idx], point_pid])
    tid = np.concatenate([events["tid"].to_numpy()[op_idx], point_tid])
    ts = np.concatenate([events["ts"].to_numpy()[op_idx], point_ts])
    end = np.concatenate([events["ts"].to_numpy()[op_idx] + events["dur"].to_numpy()[op_idx], point_ts])
    parent, _ = nest(pair_groups(pid, tid), ts, end, tolerance)
    p = parent[len(op_idx) :]
    # A point can only be enclosed by ops (points have no duration), so the
    # parent is a position in op_idx.
    return np.where(p >= 0, op_idx[np.clip(p, 0, len(op_idx) - 1)], -1)


def _labels_at(labels: pd.Index, codes: np.ndarray, missing: Any = np.nan) -> Any:
    """The label of each code (-1: ``missing``) as the column a DataFrame would make of their objects.

    Taken by code from a string array of the few distinct labels: strings
    made and checked per row cost most of the launch table. Where no code is
    valid the objects themselves are kept (an empty or all-missing column
    stays ``object``, as pandas infers it).
    """
    if not (codes >= 0).any():
        return np.append(np.asarray(labels, dtype=object), np.array([missing], dtype=object))[codes]
    strings = pd.array(np.asarray(labels, dtype=object), dtype="str")
    built = _arrow_strings_at(strings, codes)
    return strings.take(codes, allow_fill=True) if built is None else built


def _arrow_strings_at(strings: Any, codes: np.ndarray) -> Any:
    """``strings.take(codes, allow_fill=True)`` for a pyarrow-backed string array, its buffers made by numpy.

    Arrow's take copies each row's bytes into memory of its own pool,
    which on a fresh process costs ~2.5 ms per MB it asks the system for
    (the 19 MB name column of a million-event trace: ~50-80 ms); one
    ``bytes.join`` and a cumulative sum of lengths make the same array in
    a tenth of that. None where the array is not pyarrow's (pandas
    without pyarrow): the caller takes.
    """
    if getattr(strings.dtype, "storage", None) != "pyarrow":
        return None
    import pyarrow as pa

    # One bytes object per label, and a sentinel (empty, length 0) last:
    # code -1 (missing) indexes it.
    encoded = [s.encode() for s in strings.to_numpy(dtype=object).tolist()] + [b""]
    lengths = np.array([len(b) for b in encoded], dtype=np.int64)
    codes = np.asarray(codes, dtype=np.int64)
    valid = codes >= 0
    row_lengths = lengths[codes]
    width = int(row_lengths[0]) if len(codes) else 0
    if width and valid.all() and (row_lengths == width).all():
        # Rows whose labels are of one length (the kinds of device work, a
        # link): their bytes are rows of a table of the labels, gathered by
        # numpy (a join spends its time on the 100k small objects, not on
        # the bytes). Labels of another length are never picked: zeros.
        table = np.zeros((len(encoded) - 1, width), dtype=np.uint8)
        for k, label in enumerate(encoded[:-1]):
            if len(label) == width:
                table[k] = np.frombuffer(label, dtype=np.uint8)
        data: Any = table[codes].reshape(-1)
        offsets = np.arange(len(codes) + 1, dtype=np.int64) * width
    else:
        offsets = np.zeros(len(codes) + 1, dtype=np.int64)
        np.cumsum(row_lengths, out=offsets[1:])
        data = b"".join(np.array(encoded, dtype=object)[codes].tolist())
    nulls = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    array = pa.LargeStringArray.from_buffers(len(codes), pa.py_buffer(offsets), pa.py_buffer(data), nulls)
    return type(strings)(pa.chunked_array([array]), dtype=strings.dtype)


def launch_table(events: pd.DataFrame, links: pd.DataFrame) -> pd.DataFrame:
    """One row per piece of device work, with its launch and launching op.

    Columns: ``row`` (position in the events frame), ``name``, ``kind``,
    ``device``, ``stream``, ``ts``, ``dur``, ``correlation``; the launch:
    ``launch_row`` (-1 when unknown), ``launch_name`` (the runtime or driver
    call, e.g. ``cudaLaunchKernel``), ``launch_ts``, ``launch_dur``,
    ``launch_tid``; ``op_row`` and ``op_name`` (the innermost op or
    annotation enclosing the launch); ``launch_delay_us`` (kernel start
    minus launch start: queueing plus launch overhead) and ``link`` (how the
    launch was found).
    """
    rows = np.flatnonzero(K.kind_mask(events, K.LAUNCHED_KINDS))
    launch = links["launch"].to_numpy()[rows]
    op = links["op"].to_numpy()[rows]
    has_l = launch >= 0
    has_o = op >= 0
    names = events["name"].cat.codes.to_numpy()
    name_labels = events["name"].cat.categories
    ts = events["ts"].to_numpy()
    dur = events["dur"].to_numpy()

    def name_at(pos: np.ndarray, ok: np.ndarray) -> Any:
        return _labels_at(name_labels, np.where(ok, names[np.where(ok, pos, 0)], -1), None)

    def labels(col: pd.Series) -> Any:
        if not isinstance(col.dtype, pd.CategoricalDtype):
            return col.to_numpy()[rows]
        return _labels_at(col.cat.categories, col.cat.codes.to_numpy()[rows])

    def at(col: np.ndarray, pos: np.ndarray, ok: np.ndarray, fill: float) -> np.ndarray:
        out = np.full(len(pos), fill, dtype=np.float64 if isinstance(fill, float) else col.dtype)
        out[ok] = col[pos[ok]]
        return out

    return pd.DataFrame(
        {
            "row": rows,
            "name": labels(events["name"]),
            "kind": labels(events["kind"]),
            "device": events["device"].to_numpy()[rows],
            "stream": events["stream"].to_numpy()[rows],
            "ts": ts[rows],
            "dur": dur[rows],
            "correlation": events["correlation"].to_numpy()[rows],
            "launch_row": launch,
            "launch_name": name_at(launch, has_l),
            "launch_ts": at(ts, launch, has_l, np.nan),
            "launch_dur": at(dur, launch, has_l, np.nan),
            "launch_tid": at(events["tid"].to_numpy(), launch, has_l, -1),
            "op_row": op,
            "op_name": name_at(op, has_o),
            "launch_delay_us": links["launch_delay_us"].to_numpy()[rows],
            "link": labels(links["link"]),
        }
    )


def launch_summary(launches: pd.DataFrame) -> pd.DataFrame:
    """Launch overhead per runtime call (``cudaLaunchKernel`` ...), and over all.

    Columns: ``launch_name``, ``launches``, ``api_total_us`` and
    ``api_mean_us`` (time the host spent in the call), and the delay from
    launch start to device start: ``delay_mean_us``, ``delay_median_us``,
    ``delay_p90_us``, ``delay_max_us``. The last row (``launch_name`` =
    ``"all"``) summarises every linked launch.
    """
    cols = [
        "launch_name", "launches", "api_total_us", "api_mean_us",
        "delay_mean_us", "delay_median_us", "delay_p90_us", "delay_max_us",
    ]  # fmt: skip
    linked = launches[launches["launch_row"] >= 0]
    if linked.empty:
        return pd.DataFrame(columns=cols)
    # A launch that enqueued several pieces of work is counted once.
    first = linked.drop_duplicates("launch_row")

    def row(label: str, part: pd.DataFrame, once: pd.DataFrame) -> dict:
        d = part["launch_delay_us"].to_numpy()
        return {
            "launch_name": label,
            "launches": len(once),
            "api_total_us": float(once["launch_dur"].sum()),
            "api_mean_us": float(once["launch_dur"].mean()),
            "delay_mean_us": float(np.mean(d)),
            "delay_median_us": float(np.median(d)),
            "delay_p90_us": float(np.percentile(d, 90)),
            "delay_max_us": float(np.max(d)),
        }

    out = [
        row(str(name), part, first[first["launch_name"] == name])
        for name, part in linked.groupby("launch_name", sort=True, observed=True)
    ]
    out.append(row("all", linked, first))
    return pd.DataFrame(out, columns=cols)


def linked_events(events: pd.DataFrame, rows: np.ndarray, device_activity: np.ndarray) -> np.ndarray:
    """Rows of the events linked to ``rows`` (sorted, unique).

    For host ops: the device work launched at any depth below them, and
    its launches. For device work: its launch and the op that launched it.
    ``device_activity`` are the rows of device work with a launching op
    (``events["op"] >= 0``), the candidates for the first case.
    """
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return rows
    kind = events["kind"].to_numpy(object)
    is_dev = np.isin(kind[rows], K.DEVICE_KINDS)
    op = events["op"].to_numpy()
    launch = events["launch"].to_numpy()
    out = []
    dev_rows = rows[is_dev]
    if len(dev_rows):
        out += [op[dev_rows], launch[dev_rows]]
    host_rows = rows[~is_dev]
    if len(host_rows) and len(device_activity):
        # Walk each device activity's launching op up the call tree, all at
        # once, and keep those that pass through a wanted row.
        parent = events["parent"].to_numpy()
        cur = op[device_activity]
        hit = np.zeros(len(cur), dtype=bool)
        wanted = np.zeros(len(events), dtype=bool)
        wanted[host_rows] = True
        while True:
            valid = cur >= 0
            if not valid.any():
                break
            hit[valid] |= wanted[cur[valid]]
            cur = np.where(valid, parent[np.maximum(cur, 0)], -1)
        kernels = device_activity[hit]
        out += [kernels, launch[kernels]]
    if not out:
        return np.array([], dtype=np.int64)
    linked = np.concatenate(out)
    return np.unique(linked[linked >= 0])
