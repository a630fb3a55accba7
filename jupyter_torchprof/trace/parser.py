"""Kineto JSON document → columnar events.

The parser makes one pass per column over the decoded events (list
comprehensions run at C speed) instead of one Python-level pass per event, and
stores strings as pandas categoricals so that a million kernel launches cost a
few integer arrays plus one table of distinct names.

The result, `TraceData`, is what every analysis function takes. Nothing here
knows about devices beyond the category → kind mapping in `categories`.
"""

from __future__ import annotations

import math
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import orjson
import pandas as pd

from ..errors import TraceError
from . import categories as K
from .reader import gc_paused, read_trace_bytes
from .schema import EVENTS_DECODER, NO_ARGS, RAW_MISSING, TOP_LEVEL_DECODER, TraceEvent

#: Durations above this (one day, in µs) are not real measurements.
MAX_DURATION_US = 86_400e6


@dataclass
class TraceMeta:
    """What the trace says about itself, besides its events.

    Attributes
    ----------
    path
        File it came from, or None for a document parsed from memory.
    t0_us
        Absolute timestamp (µs, trace clock) that the ``ts`` column is relative to.
    device_properties
        ``deviceProperties`` as written by Kineto (name, memory, SMs ...).
    distributed
        ``distributedInfo`` (rank, world size, backend), empty when absent.
    rank
        The rank that wrote the trace, or None.
    options
        Capture options recorded in the trace: ``record_shapes``,
        ``profile_memory``, ``with_stack``, ``with_flops``, ``with_modules``.
    process_names, thread_names
        From the ``M`` metadata events, for lane labels.
    skipped
        Number of events dropped because they were malformed.
    top_level
        The remaining top-level keys (small values only), for display.
    """

    path: str | None = None
    t0_us: float = 0.0
    span_us: float = 0.0
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    distributed: dict[str, Any] = field(default_factory=dict)
    rank: int | None = None
    world_size: int | None = None
    options: dict[str, bool] = field(default_factory=dict)
    process_names: dict[int, str] = field(default_factory=dict)
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    process_labels: dict[int, str] = field(default_factory=dict)
    skipped: int = 0
    warnings: list[str] = field(default_factory=list)
    top_level: dict[str, Any] = field(default_factory=dict)
    time_precision_us: float = 0.001


@dataclass
class TraceData:
    """A parsed trace.

    Attributes
    ----------
    events
        One row per complete (``ph: X``) event. Columns: ``name``, ``cat``,
        ``kind`` (categoricals); ``pid``, ``tid`` (int64); ``ts`` (µs since
        ``meta.t0_us``), ``dur`` (µs); ``external_id``, ``correlation``,
        ``device``, ``stream`` (int64, -1 when absent); ``bytes`` (float);
        ``grid``, ``block`` (categoricals); ``registers``, ``shared_memory``,
        ``occupancy`` (float); ``input_dims``, ``input_types``, ``stack``,
        ``module``, ``kernel_file`` (categoricals, may be all missing);
        ``python_id``, ``python_parent_id`` (int64).
    memory
        ``[memory]`` instant events: ``ts``, ``pid``, ``tid``, ``bytes``,
        ``total_allocated``, ``total_reserved``, ``device_type``, ``device_id``.
    flows
        Launch flow events (``ac2g`` / ``async_cpu_to_gpu``): ``id``,
        ``is_start`` (``s`` start, else ``f`` finish), ``pid``, ``tid``, ``ts``.
    meta
        `TraceMeta`.
    """

    events: pd.DataFrame
    memory: pd.DataFrame
    flows: pd.DataFrame
    meta: TraceMeta


# --------------------------------------------------------------------------- #
# column helpers


def _floats(values: list[Any]) -> np.ndarray:
    """Numbers (or None) → float64 array; anything else becomes NaN."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(np.float64)


def _ints(values: list[Any], missing: int = -1) -> np.ndarray:
    """Integers (or None, or numeric strings) → int64 array with ``missing``."""
    arr = _floats(values)
    out = np.full(arr.shape, missing, dtype=np.int64)
    ok = np.isfinite(arr) & (np.abs(arr) < 9.2e18)
    out[ok] = arr[ok].astype(np.int64)
    return out


def _ids(values: list[Any]) -> np.ndarray:
    """pid/tid columns: ints normally, but Kineto also writes strings."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        out = _ints(values)
        # Strings that are not numbers (lane names) get stable negative ids.
        for i, v in enumerate(values):
            if isinstance(v, str) and out[i] == -1:
                out[i] = -2 - (zlib.crc32(v.encode()) & 0xFFFF)
        return out


def _categorical(values: list[Any]) -> pd.Categorical:
    """Intern a list of strings (None = missing) as a categorical.

    ``pd.factorize`` on an object array is a single hash pass; building the
    categorical from codes avoids pandas re-inferring a string dtype.
    """
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    codes, uniques = pd.factorize(arr, use_na_sentinel=True)
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniques, dtype=object))


def _text(values: list[Any]) -> pd.Categorical:
    """Strings (or None) → categorical; other JSON values are serialised."""
    types = set(map(type, values))
    if not types <= {str, type(None)}:
        values = [v if (v is None or type(v) is str) else orjson.dumps(v).decode() for v in values]
    return _categorical(values)


def _raw_text(values: list[msgspec.Raw]) -> pd.Categorical:
    """Raw JSON values (input shapes, grids) → compact JSON text as categories.

    Only the distinct values are re-serialised, so differently spaced copies
    of one value fall into one group at the cost of a handful of decodes.
    """
    cat = _categorical([bytes(v) or None for v in values])
    names = [_compact_json(b) for b in cat.categories]
    if len(set(names)) == len(names):
        return pd.Categorical.from_codes(cat.codes, categories=pd.Index(names, dtype=object))
    return _categorical([None if c < 0 else names[c] for c in cat.codes])


def _compact_json(raw: bytes) -> str:
    try:
        return orjson.dumps(orjson.loads(raw)).decode()
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace")


def _missing_text(n: int) -> pd.Categorical:
    return pd.Categorical.from_codes(np.full(n, -1, dtype=np.int8), categories=pd.Index([], dtype=object))


def _scatter_text(n: int, idx: np.ndarray, values: list[Any], raw: bool = False) -> pd.Categorical:
    """A categorical column of length ``n`` filled only at positions ``idx``."""
    if len(idx) == 0:
        return _missing_text(n)
    sub = _raw_text(values) if raw else _text(values)
    codes = np.full(n, -1, dtype=np.int32)
    codes[idx] = sub.codes
    return pd.Categorical.from_codes(codes, categories=sub.categories)


def _scatter(n: int, idx: np.ndarray, values: np.ndarray, fill: float | int) -> np.ndarray:
    out = np.full(n, fill, dtype=values.dtype)
    if len(idx):
        out[idx] = values
    return out


# --------------------------------------------------------------------------- #


def parse_bytes(data: bytes, path: str | Path | None = None) -> TraceData:
    """Decode and parse the JSON bytes of a Kineto trace.

    Raises `TraceError` when the bytes are not a trace at all; malformed
    individual events are skipped and counted in ``meta.skipped`` (with a
    warning), so one bad record never costs the whole file.
    """
    with gc_paused():
        top, events, bad = _decode(data, path)
        meta = _parse_meta(top, path)
        frames = _parse_events(events, meta)
        bad += meta.skipped
        meta.skipped = bad
        del events, top
    if meta.skipped:
        msg = f"{meta.path or 'trace'}: skipped {meta.skipped} malformed event(s)"
        meta.warnings.append(msg)
        warnings.warn(msg, stacklevel=2)
    return TraceData(events=frames[0], memory=frames[1], flows=frames[2], meta=meta)


def parse_document(doc: Any, path: str | Path | None = None) -> TraceData:
    """Parse an already decoded JSON document (dict or bare event list).

    Used for documents built in memory; files go through `parse_bytes`.
    """
    return parse_bytes(orjson.dumps(doc), path)


def parse_trace(path: str | Path) -> TraceData:
    """Read, decode and parse one trace file."""
    return parse_bytes(read_trace_bytes(path), path)


def _decode(data: bytes, path: str | Path | None) -> tuple[dict[str, Any], list[TraceEvent], int]:
    """Split the document into its top level and its decoded events."""
    try:
        try:
            top_raw = TOP_LEVEL_DECODER.decode(data)
        except msgspec.ValidationError:
            # Not an object: the Chrome format also allows a bare event array.
            if data.lstrip()[:1] == b"[":
                top_raw = {"traceEvents": msgspec.Raw(data)}
            else:
                raise TraceError(path, "not a trace: the top level is not a JSON object") from None
    except msgspec.DecodeError as exc:
        if "utf-8" not in str(exc).lower():
            raise TraceError(path, f"not valid JSON ({_describe_decode_error(exc)})") from None
        data = _replace_invalid_utf8(data, path)
        return _decode(data, path)

    raw_events = top_raw.get("traceEvents")
    if raw_events is None:
        raise TraceError(path, "not a Kineto/Chrome trace: no 'traceEvents' key")
    top: dict[str, Any] = {}
    for key, raw in top_raw.items():
        if key == "traceEvents":
            continue
        try:
            top[key] = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            continue
    bad = 0
    try:
        events = EVENTS_DECODER.decode(raw_events)
    except msgspec.ValidationError:
        events, bad = _decode_leniently(raw_events, path)
    return top, events, bad


def _decode_leniently(raw: msgspec.Raw, path: str | Path | None) -> tuple[list[TraceEvent], int]:
    """Slow path for arrays holding some events of the wrong shape."""
    try:
        items = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise TraceError(path, f"not valid JSON ({_describe_decode_error(exc)})") from None
    if not isinstance(items, list):
        raise TraceError(path, "'traceEvents' is not a list")
    events: list[TraceEvent] = []
    bad = 0
    convert = msgspec.convert
    for item in items:
        try:
            events.append(convert(item, TraceEvent, strict=False))
        except (msgspec.ValidationError, TypeError):
            bad += 1
    return events, bad


def _describe_decode_error(exc: Exception) -> str:
    msg = str(exc)
    if "truncated" in msg:
        return "the file ends in the middle of the document; it was probably cut short"
    return msg if len(msg) < 160 else msg[:159] + "…"


def _replace_invalid_utf8(data: bytes, path: str | Path | None) -> bytes:
    text = data.decode("utf-8", errors="replace")
    fixed = text.encode("utf-8")
    replaced = text.count("\ufffd") - data.decode("utf-8", errors="ignore").count("\ufffd")
    warnings.warn(
        f"{path or 'trace'}: {max(replaced, 1)} invalid UTF-8 sequence(s) replaced with U+FFFD",
        stacklevel=4,
    )
    return fixed


def _parse_meta(doc: dict[str, Any], path: str | Path | None) -> TraceMeta:
    meta = TraceMeta(path=str(path) if path is not None else None)
    props = doc.get("deviceProperties")
    if isinstance(props, list):
        meta.device_properties = [p for p in props if isinstance(p, dict)]
    dist = doc.get("distributedInfo")
    if isinstance(dist, dict):
        meta.distributed = dist
        meta.rank = _as_int(dist.get("rank"))
        meta.world_size = _as_int(dist.get("world_size"))
    for key in ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules"):
        if key in doc:
            meta.options[key] = bool(doc[key])
    for key, value in doc.items():
        if key in ("deviceProperties", "distributedInfo"):
            continue
        if isinstance(value, (str, int, float, bool)) and len(str(value)) < 500:
            meta.top_level[key] = value
    return meta


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if math.isfinite(value) else None


def _parse_events(raw: list[TraceEvent], meta: TraceMeta) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    # The profiler's own span ("PyTorch Profiler (0)", pid "Spans") is not an
    # event of the program; it only marks the capture window.
    xs = [e for e in raw if e.ph == "X" and e.cat != "Trace"]
    others = [e for e in raw if e.ph != "X"]
    instants = [e for e in others if e.name == "[memory]" and (e.ph == "i" or e.ph == "I")]
    flows = [e for e in others if (e.ph == "s" or e.ph == "f") and e.cat in K.LAUNCH_FLOW_CATEGORIES]
    _apply_metadata_events([e for e in others if e.ph == "M"], meta)

    events, meta.skipped = _events_frame(xs)
    if len(events):
        ts_abs = events["ts"].to_numpy()
        t0 = float(ts_abs.min())
        meta.t0_us = t0
        events["ts"] = ts_abs - t0
        meta.span_us = float((events["ts"] + events["dur"]).max())
        # Timestamps were decoded as float64 µs: far from zero (epoch clocks)
        # their spacing exceeds a nanosecond. Nesting uses this as tolerance.
        meta.time_precision_us = max(0.001, 2 * math.ulp(float(np.abs(ts_abs).max())))
    return events, _memory_frame(instants, meta.t0_us), _flow_frame(flows, meta.t0_us)


def _apply_metadata_events(metas: list[TraceEvent], meta: TraceMeta) -> None:
    for e in metas:
        args = e.args
        if args is None or not isinstance(e.pid, int):
            continue
        if e.name == "process_name" and isinstance(args.name, str):
            meta.process_names[e.pid] = args.name
        elif e.name == "process_labels" and isinstance(args.labels, str):
            meta.process_labels[e.pid] = args.labels
        elif e.name == "thread_name" and isinstance(args.name, str) and isinstance(e.tid, int):
            meta.thread_names[(e.pid, e.tid)] = args.name


_EVENT_COLUMNS = {
    "name": "category",
    "cat": "category",
    "kind": "category",
    "pid": np.int64,
    "tid": np.int64,
    "ts": np.float64,
    "dur": np.float64,
    "external_id": np.int64,
    "correlation": np.int64,
    "device": np.int64,
    "stream": np.int64,
    "bytes": np.float64,
    "grid": "category",
    "block": "category",
    "registers": np.float64,
    "shared_memory": np.float64,
    "occupancy": np.float64,
    "kernel_file": "category",
    "input_dims": "category",
    "input_types": "category",
    "concrete_inputs": "category",
    "stack": "category",
    "module": "category",
    "python_id": np.int64,
    "python_parent_id": np.int64,
}


def empty_events() -> pd.DataFrame:
    """An events frame with every column and no rows."""
    cols: dict[str, Any] = {}
    for name, dtype in _EVENT_COLUMNS.items():
        cols[name] = _missing_text(0) if dtype == "category" else np.array([], dtype=dtype)
    cols["kind"] = pd.Categorical([], categories=list(K.KINDS))
    return pd.DataFrame(cols)


_KIND_CODE = {k: i for i, k in enumerate(K.KINDS)}


def _events_frame(xs: list[TraceEvent]) -> tuple[pd.DataFrame, int]:
    if not xs:
        return empty_events(), 0

    names = [e.name for e in xs]
    ts = _floats([e.ts for e in xs])
    dur = _floats([0.0 if e.dur is None else e.dur for e in xs])

    # Validity: a name, a finite time, a sane non-negative duration.
    name_ok = np.fromiter(map(str.__instancecheck__, names), dtype=bool, count=len(names))
    ok = name_ok & np.isfinite(ts) & np.isfinite(dur) & (dur >= 0) & (dur <= MAX_DURATION_US)
    bad = int(len(xs) - ok.sum())
    if bad:
        keep = np.flatnonzero(ok)
        xs = [xs[i] for i in keep]
        names = [names[i] for i in keep]
        ts, dur = ts[keep], dur[keep]
    n = len(xs)
    if n == 0:
        return empty_events(), bad

    cat_raw = _text([e.cat for e in xs])
    kind_of_cat = np.array(
        [_KIND_CODE[K.kind_of_category(c)] for c in cat_raw.categories] + [_KIND_CODE[K.OTHER]],
        dtype=np.int8,
    )
    kind_arr = kind_of_cat[cat_raw.codes]  # code -1 (no category) picks the trailing OTHER
    kind = pd.Categorical.from_codes(kind_arr, categories=list(K.KINDS))

    pid = _ids([e.pid for e in xs])
    tid = _ids([e.tid for e in xs])
    args = [NO_ARGS if e.args is None else e.args for e in xs]

    cols: dict[str, Any] = {
        "name": _categorical(names),
        "cat": cat_raw,
        "kind": kind,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "external_id": _ints([a.external_id for a in args]),
        "correlation": _ints([a.correlation for a in args]),
    }

    # Device-side arguments are read only from device events: there are far
    # fewer of them than host events, and host events never carry these keys.
    dev_idx = np.flatnonzero(np.isin(kind_arr, [_KIND_CODE[k] for k in K.DEVICE_KINDS]))
    dargs = [args[i] for i in dev_idx]
    device = _ints([a.device for a in dargs])
    stream = _ints([a.stream for a in dargs])
    # Kineto puts the device in pid and the stream in tid of device events;
    # the args are authoritative when present.
    device = np.where(device >= 0, device, pid[dev_idx])
    stream = np.where(stream >= 0, stream, tid[dev_idx])
    cols["device"] = _scatter(n, dev_idx, device, -1)
    cols["stream"] = _scatter(n, dev_idx, stream, -1)
    cols["bytes"] = _scatter(n, dev_idx, _floats([a.bytes for a in dargs]), np.nan)
    cols["grid"] = _scatter_text(n, dev_idx, [a.grid for a in dargs], raw=True)
    cols["block"] = _scatter_text(n, dev_idx, [a.block for a in dargs], raw=True)
    cols["registers"] = _scatter(n, dev_idx, _floats([a.registers for a in dargs]), np.nan)
    cols["shared_memory"] = _scatter(n, dev_idx, _floats([a.shared_memory for a in dargs]), np.nan)
    cols["occupancy"] = _scatter(n, dev_idx, _floats([a.occupancy for a in dargs]), np.nan)
    cols["kernel_file"] = _scatter_text(n, dev_idx, [a.kernel_file for a in dargs])

    # Host-op arguments, only when the trace recorded them at all.
    op_idx = np.flatnonzero(kind_arr == _KIND_CODE[K.CPU_OP])
    oargs = [args[i] for i in op_idx]
    for column, attr, raw in (
        ("input_dims", "input_dims", True),
        ("input_types", "input_types", True),
        ("concrete_inputs", "concrete_inputs", True),
        ("stack", "call_stack", False),
        ("module", "module_hierarchy", False),
    ):
        values = [getattr(a, attr) for a in oargs]
        missing = RAW_MISSING if raw else None
        if any(v != missing and v != "" for v in values[:: max(1, len(values) // 64)]):
            if not raw:
                values = [None if v == "" else v for v in values]
            cols[column] = _scatter_text(n, op_idx, values, raw=raw)
        else:
            cols[column] = _missing_text(n)

    py_idx = np.flatnonzero(kind_arr == _KIND_CODE[K.PYTHON_FUNCTION])
    pargs = [args[i] for i in py_idx]
    cols["python_id"] = _scatter(n, py_idx, _ints([a.python_id for a in pargs]), -1)
    cols["python_parent_id"] = _scatter(n, py_idx, _ints([a.python_parent_id for a in pargs]), -1)
    return pd.DataFrame(cols, copy=False), bad


def _memory_frame(instants: list[TraceEvent], t0: float) -> pd.DataFrame:
    args = [NO_ARGS if e.args is None else e.args for e in instants]
    frame = pd.DataFrame(
        {
            "ts": _floats([e.ts for e in instants]) - t0,
            "pid": _ids([e.pid for e in instants]),
            "tid": _ids([e.tid for e in instants]),
            "bytes": _floats([a.mem_bytes for a in args]),
            "total_allocated": _floats([a.total_allocated for a in args]),
            "total_reserved": _floats([a.total_reserved for a in args]),
            "device_type": _ints([a.device_type for a in args]),
            "device_id": _ints([a.device_id for a in args]),
        }
    )
    good = np.isfinite(frame["ts"].to_numpy()) & np.isfinite(frame["bytes"].to_numpy())
    if not good.all():
        frame = frame[good].reset_index(drop=True)
    return frame


def _flow_frame(flows: list[TraceEvent], t0: float) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "id": _ints([e.id for e in flows]),
            "is_start": np.array([e.ph == "s" for e in flows], dtype=bool),
            "pid": _ids([e.pid for e in flows]),
            "tid": _ids([e.tid for e in flows]),
            "ts": _floats([e.ts for e in flows]) - t0,
        }
    )
    good = (frame["id"].to_numpy() >= 0) & np.isfinite(frame["ts"].to_numpy())
    if not good.all():
        frame = frame[good].reset_index(drop=True)
    return frame
