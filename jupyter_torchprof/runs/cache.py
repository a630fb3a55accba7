"""Tables kept beside a run's trace, so a run reopens without parsing it again.

A run folder holds, beside each trace ``T`` (``trace.json.gz`` or a kept rank's
file), the files `paths` names::

    T.tables.npz      summary, ops, kernels, steps, findings, memory peaks
    T.timeline.npz    the sidebar timeline's first level of detail (bokeh JSON)

Both are NumPy ``.npz`` archives: one array per table column plus a
``__meta__`` entry (JSON) naming the schema version, the trace's name, size
and modification time, and how each column was encoded. NumPy is a
dependency of the package (pyarrow is only an extra), an ``.npz`` is read
with ``allow_pickle=False`` (no code can ride in it), and a small table
decodes in milliseconds.

This module only encodes and reads; `keep` writes the files (atomically).

A cache is used only when it is current: same schema version, same trace
name, size and ``st_mtime_ns``, and (tables) made by code with the same
column catalog and finding rules (`code_fingerprint`). One that is absent is silently ignored; one
that is older, corrupted, truncated or hostile is a `CacheWarning` and the
trace is parsed as before. The reader never opens any path but the cache
file itself (no name inside it is ever used as a path), refuses symlinks,
FIFOs and devices, and checks every array's declared size against the bytes
it occupies before reading it.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..analysis import ops as ops_mod
from ..analysis.memory import memory_peaks
from ..results.profile import CaptureInfo, Profile
from ..safe_files import UnfitFile, read_small_file
from ..trace.files import parse_with_device
from ..trace.parser import TraceData, TraceMeta
from .paths import tables_path, timeline_path

#: Bumped whenever what is stored, or how, changes; an older cache is re-made.
SCHEMA_VERSION = 2  # 2: the kernel table holds the counted steps' work only (issue 27)
#: Tables of a run are kilobytes to a few MB; anything far larger is not ours.
MAX_CACHE_BYTES = 256 << 20
MAX_UNPACKED_BYTES = 1 << 30
MAX_MEMBERS = 4096
#: The tables a cache holds, in the order they are written.
TABLES = ("ops", "kernels", "steps", "findings", "memory_peaks")


class CacheWarning(UserWarning):
    """A table cache that could not be used (the trace is parsed instead)."""


class CacheProblem(ValueError):
    """Why a cache file is unusable, in words."""


def code_fingerprint() -> str:
    """What the cached tables depend on in the code: the column catalog and the findings' rule ids.

    A version that adds a column (`columns`) or a finding rule
    (`analysis.findings.RULES`) computes tables an older cache lacks, with
    the same `SCHEMA_VERSION` and the same trace: this fingerprint, kept in
    the cache and compared on read, makes that cache stale. A hash of the
    sorted names (not Python's ``hash``), so every process agrees; read from
    the modules each time (about 0.5 ms), so it is always the running code's.
    """
    import hashlib

    from .. import columns
    from ..analysis import findings, notes

    catalog = sorted(
        f"{table}.{col.key}"
        for table, value in vars(columns).items()
        if isinstance(value, tuple) and value and all(isinstance(c, columns.Column) for c in value)
        for col in value
    )
    rules = sorted(str(rule[0]) for rule in findings.RULES)
    # A rule that changes what it reports (not only a new rule) bumps this.
    rules.append(f"version {findings.RULES_VERSION}")
    # The notes on op and kernel rows are stored in the tables too.
    rules += [f"note {r}" for r in notes.rule_ids()]
    return hashlib.sha256(json.dumps([catalog, rules]).encode()).hexdigest()[:16]


def trace_identity(trace: str | Path) -> dict[str, Any]:
    """What a cache must match to be current: the trace's name, size and mtime (ns)."""
    st = os.stat(trace)
    return {"trace": Path(trace).name, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


# ---------------------------------------------------------------------- #
# values → JSON and back (summary, findings' evidence, trace metadata)


#: Marks of the values JSON has no type for; the key starts with a NUL, which
#: no name in a trace or a table holds.
_TUPLE, _ITEMS, _ARRAY = "\x00tuple", "\x00items", "\x00array"


def _tag(value: Any) -> Any:
    """``value`` in plain JSON types, tuples, non-string keys and arrays marked so `_untag` restores them."""
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("\x00") for k in value):
            return {k: _tag(v) for k, v in value.items()}
        return {_ITEMS: [[_tag(k), _tag(v)] for k, v in value.items()]}
    if isinstance(value, list):
        return [_tag(v) for v in value]
    if isinstance(value, tuple):
        return {_TUPLE: [_tag(v) for v in value]}
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return [_tag(v) for v in value.tolist()]
        return {_ARRAY: [value.tolist(), value.dtype.str]}
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise CacheProblem(f"cannot keep a {type(value).__name__} in a table cache")


def _untag(value: Any) -> Any:
    if isinstance(value, list):
        return [_untag(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, inner),) = value.items()
        if key == _TUPLE:
            return tuple(_untag(v) for v in inner)
        if key == _ITEMS:
            return {_hashable(_untag(k)): _untag(v) for k, v in inner}
        if key == _ARRAY:
            return np.array(inner[0], dtype=np.dtype(inner[1]))
    return {k: _untag(v) for k, v in value.items()}


def _hashable(key: Any) -> Any:
    if isinstance(key, (list, dict)):
        raise CacheProblem("a key that is not a plain value")
    return key


def _dumps(value: Any) -> str:
    # NaN and inf are kept as JSON's NaN/Infinity tokens, so they come back as floats.
    return json.dumps(_tag(value), ensure_ascii=False)


def _loads(text: str) -> Any:
    return _untag(json.loads(text))


# ---------------------------------------------------------------------- #
# DataFrame columns → arrays and back


def _encode_column(series: pd.Series) -> tuple[str, list[np.ndarray]]:
    """(codec, arrays) of one column: native numbers, strings with a null mask, or JSON per cell."""
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biuf":
        return "num", [series.to_numpy()]
    if isinstance(dtype, pd.StringDtype):
        mask = series.isna().to_numpy()
        values = np.array(
            ["" if m else str(v) for v, m in zip(series.tolist(), mask, strict=True)], dtype=str
        )
        return "str", [values, mask]
    return "json", [np.array([_dumps(v) for v in series.tolist()], dtype=str)]


def _decode_column(codec: str, dtype: str, arrays: list[np.ndarray], rows: int) -> pd.Series:
    """One column back from its arrays; the arrays must be what `_encode_column` writes for ``codec``.

    Nothing is converted to a type the file names (a hostile ``dtype`` could
    ask for gigabytes per row): the file's arrays must already have it.
    """
    if any(a.ndim != 1 or len(a) != rows for a in arrays):
        raise CacheProblem("a column's length does not match its table")
    kinds = "".join(a.dtype.kind for a in arrays)
    if codec == "num" and kinds in ("b", "i", "u", "f") and str(arrays[0].dtype) == dtype:
        return pd.Series(arrays[0])
    if codec == "str" and kinds == "Ub":
        target = pd.api.types.pandas_dtype(dtype)
        if not isinstance(target, pd.StringDtype):
            raise CacheProblem(f"a string column of type {dtype!r}")
        values = arrays[0].astype(object)
        values[arrays[1]] = None
        return pd.Series(values, dtype=target)
    if codec == "json" and kinds == "U":
        return pd.Series([_loads(str(v)) for v in arrays[0]], dtype=object)
    raise CacheProblem(f"a column encoded as {codec!r} with arrays of kinds {kinds!r}")


def _encode_frame(name: str, frame: pd.DataFrame, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    if not isinstance(frame.index, pd.RangeIndex) or not frame.index.equals(pd.RangeIndex(len(frame))):
        # Every table is numbered 0..n-1; one that is not would not come back equal.
        raise CacheProblem(f"table {name!r} has an index other than 0..n-1")
    columns = []
    for i, col in enumerate(frame.columns):
        codec, parts = _encode_column(frame[col])
        for j, part in enumerate(parts):
            arrays[f"{name}/{i}/{j}"] = part
        columns.append(
            {"name": str(col), "codec": codec, "dtype": str(frame[col].dtype), "parts": len(parts)}
        )
    return {"rows": len(frame), "columns": columns}


def _decode_frame(name: str, spec: dict[str, Any], arrays: dict[str, np.ndarray]) -> pd.DataFrame:
    rows = int(spec["rows"])
    cols: dict[str, pd.Series] = {}
    for i, col in enumerate(spec["columns"]):
        try:
            parts = [arrays[f"{name}/{i}/{j}"] for j in range(int(col["parts"]))]
        except KeyError:
            raise CacheProblem(f"table {name!r} lacks column {col.get('name')!r}") from None
        cols[str(col["name"])] = _decode_column(str(col["codec"]), str(col["dtype"]), parts, rows)
    if not cols:
        return pd.DataFrame(index=pd.RangeIndex(rows))
    return pd.DataFrame(cols)


# ---------------------------------------------------------------------- #
# the container: an .npz with a JSON ``__meta__``


def _pack(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    # Deflated: string columns are padded to their longest value and shrink tenfold.
    np.savez_compressed(buf, __meta__=np.array(_dumps(meta)), **arrays)
    return buf.getvalue()


def _read_regular(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` itself: no symlink followed, no FIFO or device opened for long."""
    try:
        return read_small_file(path, limit, "a table cache")
    except UnfitFile as exc:
        raise CacheProblem(str(exc)) from None


def _checked_array(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    """One member's array, its header checked against the bytes that follow it (read once)."""
    with zf.open(info) as fh:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise CacheProblem(f"array format {version} is not one NumPy writes for us")
        if dtype.hasobject:
            raise CacheProblem("holds Python objects (pickles are never loaded)")
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > info.file_size:
            raise CacheProblem(f"{info.filename} declares more data than it holds")
        data = fh.read(nbytes + 1)
    if len(data) != nbytes:
        raise CacheProblem(f"{info.filename} holds {len(data)} bytes, not the {nbytes} it declares")
    # A copy: the tables are the user's to change, and bytes are read-only.
    flat = np.frombuffer(data, dtype=dtype).copy()
    return flat.reshape(shape, order="F" if fortran else "C")


def _unpack(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(meta, arrays) of a cache file; `CacheProblem` for anything not a cache of ours."""
    data = _read_regular(path, MAX_CACHE_BYTES)
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise CacheProblem(f"not an .npz archive ({exc})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS or sum(i.file_size for i in infos) > MAX_UNPACKED_BYTES:
            raise CacheProblem("unpacks to far more than a run's tables")
        arrays = {}
        for info in infos:
            if not info.filename.endswith(".npy"):
                raise CacheProblem(f"holds {info.filename!r}, not an array")
            arrays[info.filename.removesuffix(".npy")] = _checked_array(zf, info)
    raw = arrays.pop("__meta__", None)
    if raw is None or raw.shape != () or raw.dtype.kind != "U":
        raise CacheProblem("has no metadata")
    meta = _loads(str(raw))
    if not isinstance(meta, dict):
        raise CacheProblem("metadata is not an object")
    return meta, arrays


def _current(meta: dict[str, Any], kind: str, trace: Path) -> None:
    """Raise `CacheProblem` unless ``meta`` is a current cache of ``kind`` for ``trace``."""
    if meta.get("kind") != kind:
        raise CacheProblem(f"is not a {kind} cache")
    if meta.get("schema") != SCHEMA_VERSION:
        raise CacheProblem(
            f"schema {meta.get('schema')!r} is not {SCHEMA_VERSION} (written by another version)"
        )
    if meta.get("identity") != trace_identity(trace):
        raise CacheProblem("was made from another version of the trace (size or time differ)")
    if kind == "tables" and meta.get("code") != code_fingerprint():
        raise CacheProblem("was made by a version with other table columns or finding rules")


def _open_cache(path: Path, kind: str, trace: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """A current cache's (meta, arrays); None when absent; a warning and None when unusable."""
    try:
        meta, arrays = _unpack(path)
        _current(meta, kind, trace)
    except FileNotFoundError:
        return None
    except (
        CacheProblem,
        OSError,
        ValueError,
        KeyError,
        TypeError,
        EOFError,
        RecursionError,
        zlib.error,
    ) as exc:
        _warn(path, exc)
        return None
    return meta, arrays


def _warn(path: Path, exc: BaseException) -> None:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    warnings.warn(f"{path.name}: {text[:200]}; reading the trace instead", CacheWarning, stacklevel=3)


# ---------------------------------------------------------------------- #
# tables


def encode_tables(profile: Profile, trace: str | Path) -> bytes:
    """The table cache of ``profile`` (made from ``trace``), as the bytes of an ``.npz``.

    Computes whatever tables the profile had not computed yet. Raises
    `CacheProblem` for a table that cannot be kept exactly.
    """
    frames = {
        "ops": profile.ops,
        "kernels": profile.kernels,
        "steps": profile.steps,
        "findings": profile.findings,
        "memory_peaks": memory_peaks(profile.memory_events),
    }
    arrays: dict[str, np.ndarray] = {}
    specs = {name: _encode_frame(name, frames[name], arrays) for name in TABLES}
    capture = dataclasses.asdict(profile.capture) if profile.capture is not None else None
    meta = {
        "kind": "tables",
        "schema": SCHEMA_VERSION,
        "identity": trace_identity(trace),
        "code": code_fingerprint(),
        "tables": specs,
        "summary": dict(profile.summary),
        "profile": {
            "name": profile.name,
            "partial": bool(profile.partial),
            "error": profile.error,
            "notes": list(profile.notes),
            "capture": capture,
            "meta": {f.name: getattr(profile.meta, f.name) for f in dataclasses.fields(profile.meta)},
        },
    }
    return _pack(meta, arrays)


@dataclass
class CachedTables:
    """What a current table cache holds.

    Attributes
    ----------
    frames
        ``ops``, ``kernels``, ``steps``, ``findings``, ``memory_peaks``.
    summary
        `Profile.summary` of the profile that wrote it.
    state
        The rest of that profile: name, partial, error, notes,
        capture info and trace metadata (`CachedProfile` restores them).
    """

    frames: dict[str, pd.DataFrame]
    summary: dict[str, Any]
    state: dict[str, Any]


def read_tables(trace: str | Path) -> CachedTables | None:
    """The current cached tables of ``trace``, or None (absent, or unusable: a `CacheWarning`)."""
    trace = Path(trace)
    path = tables_path(trace)
    opened = _open_cache(path, "tables", trace)
    if opened is None:
        return None
    meta, arrays = opened
    try:
        specs = meta["tables"]
        frames = {name: _decode_frame(name, specs[name], arrays) for name in TABLES}
        summary, state = meta["summary"], meta["profile"]
        if not isinstance(summary, dict) or not isinstance(state, dict):
            raise CacheProblem("summary or profile state is not an object")
    except (CacheProblem, KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        _warn(path, exc)
        return None
    return CachedTables(frames, summary, state)


class CachedProfile(Profile):
    """A `Profile` whose tables come from a table cache; the trace is parsed on first need.

    ``summary``, ``ops``, ``kernels``, ``steps``, ``findings`` and the notes
    are those the cache holds; anything else (events, streams, the
    timeline, other groupings of the op table) parses the trace, once, as
    a plain Profile would have at load.

    Parameters
    ----------
    trace
        The trace file the cache was made from.
    tables
        What `read_tables` returned for it.
    name
        Label (default: the one the cache was written with).
    run_dir
        Folder of the run store holding this run, if any.
    """

    def __init__(
        self,
        trace: str | Path,
        tables: CachedTables,
        name: str | None = None,
        run_dir: str | Path | None = None,
    ) -> None:
        # Not Profile.__init__: it needs the parsed trace, which is what we avoid.
        state = tables.state
        self._trace = Path(trace)
        self.meta = TraceMeta(**state["meta"])
        # The store may have moved since the cache was written (a copied folder).
        self.meta.path = str(self._trace)
        self.name = name or str(state["name"])
        capture = state.get("capture")
        self.capture = CaptureInfo(**capture) if capture else None
        self._notes = [str(n) for n in state["notes"]]
        self._step_notes_added = True
        self.partial = bool(state["partial"])
        self.error = state["error"]
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.row_limit = 20
        self.sort = None
        frames = tables.frames
        summary = dict(tables.summary)
        summary["name"] = self.name
        # cached_property values live in the instance dict: filling it is "already computed".
        self.__dict__.update(
            summary=summary, kernels=frames["kernels"], steps=frames["steps"], findings=frames["findings"]
        )
        self._cached_ops = frames["ops"]
        self.cached_memory_peaks = frames["memory_peaks"]

    @cached_property
    def _data(self) -> TraceData:  # type: ignore[override]
        data = parse_with_device(self._trace)
        self.meta = data.meta
        return data

    def op_table(
        self,
        group_by: str = "name",
        flops: bool | None = None,
        include_python: bool = False,
        per_step: bool = False,
    ) -> pd.DataFrame:
        """`Profile.op_table`; the default grouping (`ops`) comes from the cache."""
        if group_by == "name" and flops is None and not include_python:
            table = self._cached_ops
            return ops_mod.per_step(table, self.step_count) if per_step else table
        return super().op_table(group_by, flops, include_python, per_step)


def cached_profile(
    trace: str | Path, name: str | None = None, run_dir: str | Path | None = None
) -> CachedProfile | None:
    """A `CachedProfile` of ``trace`` when its table cache is current, else None (see `read_tables`)."""
    tables = read_tables(trace)
    if tables is None:
        return None
    try:
        return CachedProfile(trace, tables, name=name, run_dir=run_dir)
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        _warn(tables_path(trace), exc)
        return None


def memory_peaks_of(profile: Profile) -> pd.DataFrame:
    """`analysis.memory.memory_peaks` of a profile, from its cache when it has one."""
    cached = getattr(profile, "cached_memory_peaks", None)
    return cached if cached is not None else memory_peaks(profile.memory_events)


# ---------------------------------------------------------------------- #
# the timeline's first level of detail


#: Glyphs of the sidebar's timeline (``server.runs.TIMELINE_GLYPHS``, the same
#: number: a capture caches the timeline the sidebar will ask for).
SIDEBAR_GLYPHS = 20000


def timeline_stamp(max_glyphs: int) -> dict[str, Any]:
    """What a timeline payload depends on besides the trace: glyph budget, bokeh and our version."""
    import bokeh

    from .._version import __version__

    return {"max_glyphs": int(max_glyphs), "bokeh": bokeh.__version__, "version": __version__}


def encode_timeline(payload: bytes, trace: str | Path, key: dict[str, Any]) -> bytes:
    """A timeline cache: ``payload`` (the JSON bytes the server sends) for ``trace`` under ``key``.

    ``key`` says what the payload depends on besides the trace (glyph
    budget, bokeh version); `read_timeline` returns it only for the same key.
    """
    meta = {"kind": "timeline", "schema": SCHEMA_VERSION, "identity": trace_identity(trace), "key": key}
    return _pack(meta, {"payload": np.frombuffer(zlib.compress(payload, 1), dtype=np.uint8)})


def read_timeline(trace: str | Path, key: dict[str, Any]) -> bytes | None:
    """The cached timeline JSON of ``trace`` for ``key``, or None (absent, other key, unusable)."""
    trace = Path(trace)
    path = timeline_path(trace)
    opened = _open_cache(path, "timeline", trace)
    if opened is None:
        return None
    meta, arrays = opened
    if meta.get("key") != key:
        return None  # another glyph budget or bokeh version: not stale, just not this one
    try:
        packed = arrays["payload"]
        if packed.dtype != np.uint8 or packed.ndim != 1:
            raise CacheProblem("timeline payload is not bytes")
        inflate = zlib.decompressobj()
        out = inflate.decompress(packed.tobytes(), MAX_UNPACKED_BYTES)
        if inflate.unconsumed_tail or not inflate.eof:
            raise CacheProblem("timeline payload is truncated or too large")
    except (CacheProblem, KeyError, zlib.error) as exc:
        _warn(path, exc)
        return None
    return out
