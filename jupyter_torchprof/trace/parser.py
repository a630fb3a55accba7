"""Kineto JSON document → columnar events.

The work is split so that no Python code runs once per event per column:

1. msgspec reads the top level of the document, keeping ``traceEvents`` as a
   raw view of the file's bytes (located by pattern first, so that the
   events are not scanned twice; see `_decode_around_events`), which is then
   cut into pieces of about `CHUNK_BYTES` at event boundaries;
2. each piece is decoded straight into small typed structs
   (`schema.Complete` ...), skipping every key no analysis reads, and digested
   into columns before the next one is decoded, so only one piece of
   structs is alive at a time (peak memory stays close to the size of the
   file, and a malformed piece costs only itself the slow path);
3. each column is pulled out of the structs by a list comprehension feeding
   ``np.fromiter``, subsets of events (device work, host ops, flows) are
   gathered with ``itemgetter``, and arguments read only by some events are
   read only from those;
4. strings are interned into integer codes as they arrive and become pandas
   categoricals, so a million kernel launches cost a few integer arrays plus
   one table of distinct names;
5. flow events (a quarter of a GPU trace) are only counted when the file
   can be read again: correlation ids link launches without them, and a
   flows-only pass runs when some id is missing (`_flows_needed`) or when
   someone asks for them (`read_flows`).

Where a C compiler is (see `native`), steps 2-4 run instead in C: one pass
over each chunk's bytes writes its columns and per-chunk tables of distinct
strings, which are mapped to the interners once per distinct value. A chunk
the C scanner does not fully understand is refused and takes the path below,
so both paths give the same `TraceData` (``TORCHPROF_NATIVE=0`` forces this
one).

A chunk that breaks the typed schema anywhere is decoded again with loose
structs and coerced column by column (see `schema`), and a chunk holding
items that are not events at all is decoded item by item; events that
make no sense (no name, no finite timestamp, a negative or absurd duration)
are skipped and counted, with one warning that says how many and why.

The result, `TraceData`, is what every analysis function takes. Nothing here
knows about devices beyond the category → kind mapping in `categories`.
"""

from __future__ import annotations

import math
import re
import stat
import sys
import threading
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import orjson
import pandas as pd

from ..errors import TraceError
from . import categories as K
from . import native as _native
from .column_store import SLACK, ColumnStore
from .pages import small_pages
from .progress import report
from .reader import (
    full_disk,
    gc_paused,
    give_back_memory,
    iter_trace_bytes,
    read_ahead,
    read_trace_bytes,
)
from .repair import repair_quotes, replace_lone_surrogates
from .schema import (
    DOCUMENT_DECODER,
    EVENTS_DECODER,
    EVENTS_DECODER_WITHOUT_FLOWS,
    FLOWS_DECODER,
    LOOSE_EVENT_DECODER,
    LOOSE_EVENTS_DECODER,
    NO_LOOSE_ARGS,
    PHASE_OF_TYPE,
    RAW_DECODER,
    RAW_LIST_DECODER,
    LooseTraceEvent,
    TraceDocument,
)
from .spill import spill_details
from .window import ByteWindow

#: Durations above this (one day, in µs) are not real measurements.
MAX_DURATION_US = 86_400e6
#: Timestamps beyond this (2**53 µs, 285 years from the clock's zero) are
#: not clock readings: a float64 no longer holds every microsecond there,
#: and spans built from them overflow (a kernel at 1e308 µs broke the timeline).
MAX_TIMESTAMP_US = 2.0**53
#: Names longer than this are cut (with a warning). Real C++ kernel names
#: reach a few thousand characters; anything far beyond is a broken writer,
#: and would make every table and view unreadable.
MAX_NAME_CHARS = 16_384


@dataclass
class TraceMeta:
    """What the trace says about itself, besides its events.

    Attributes
    ----------
    path
        File it came from, or None for a document parsed from memory.
    t0_us
        Absolute timestamp (µs, trace clock) that the ``ts`` column is relative to.
    span_us
        From the first event's start to the last event's end (µs).
    device_properties
        ``deviceProperties`` as written by Kineto (name, memory, SMs ...).
    distributed
        ``distributedInfo`` (rank, world size, backend), empty when absent.
    rank, world_size
        From ``distributedInfo``, or None.
    options
        Capture options recorded in the trace: ``record_shapes``,
        ``profile_memory``, ``with_stack``, ``with_flops``, ``with_modules``.
    process_names, thread_names, process_labels
        From the ``M`` metadata events, for lane labels.
    skipped
        Number of events dropped because they were malformed.
    skipped_reasons
        The same, by reason (``"no name"``, ``"negative duration"`` ...).
    warnings
        Messages about the file that the user should see (skipped events,
        replaced bytes, shortened names).
    top_level
        The remaining top-level keys (small values only), for display.
    time_precision_us
        Smallest time difference the ``ts`` column can resolve; used as the
        tolerance when nesting events.
    flows_unread
        Flow events left in the file because correlation ids already link
        every launch (see `parse_bytes`); 0 when flows were read.
    fallback_reason
        Why the events were not read by the fast path (the events array
        located by pattern and decoded in chunks), or None when they were.
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
    skipped_reasons: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    top_level: dict[str, Any] = field(default_factory=dict)
    time_precision_us: float = 0.001
    flows_unread: int = 0
    fallback_reason: str | None = None


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
        ``occupancy``, ``blocks_per_sm``, ``warps_per_sm`` (float);
        ``input_dims``, ``input_types``, ``concrete_inputs``, ``stack``,
        ``module``, ``kernel_file`` (categoricals, may be all missing);
        ``python_id``, ``python_parent_id`` (int64); ``sequence`` (int64, host
        ops only: the autograd ``Sequence number``, shared by a forward op
        and its backward node; -1 where none).
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
#
# Values are pulled out of the structs by ``map(attrgetter(...))`` straight
# into ``np.fromiter`` (no list in between: about twice as fast as a list
# comprehension), which succeeds whenever every value has the expected type
# (always, for pieces that decoded with the typed schema); the slow path
# coerces whatever a loose decode produced.


def _take(seq: Sequence[Any], idx: np.ndarray) -> Sequence[Any]:
    """``[seq[i] for i in idx]``, gathered in C."""
    if len(idx) == 0:
        return ()
    if len(idx) == 1:
        return (seq[int(idx[0])],)
    return itemgetter(*idx.tolist())(seq)


def _floats(values: Sequence[Any]) -> np.ndarray:
    """Numbers (or None, or numeric strings) → float64 array; anything else becomes NaN.

    A value that is a list (``"ts": [1, 2]``) must not make the column two-dimensional.
    """
    try:
        arr = np.array(values, dtype=np.float64)
        if arr.ndim == 1:
            return arr
    except (TypeError, ValueError, OverflowError):
        pass
    return np.fromiter(map(_as_float, values), np.float64, count=len(values))


def _as_float(value: Any) -> float:
    """One loose value as a float: numbers and numeric strings; NaN for anything else."""
    if type(value) is float:
        return value
    if type(value) in (int, str):
        try:
            return float(value)
        except (ValueError, OverflowError):
            return math.nan
    return math.nan


def _ints(values: Sequence[Any], missing: int = -1) -> np.ndarray:
    """Integers (or None, or numeric strings) → int64 array with ``missing``."""
    arr = _floats(values)
    out = np.full(arr.shape, missing, dtype=np.int64)
    ok = np.isfinite(arr) & (np.abs(arr) < 9.2e18)
    out[ok] = arr[ok].astype(np.int64)
    return out


def _floats_of(values: list[Any]) -> np.ndarray:
    """Python floats → float64 array (fast); anything else is coerced (NaN)."""
    try:
        return np.fromiter(values, np.float64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        return _floats(values)


def _floats_at(objs: Sequence[Any], attr: str) -> np.ndarray:
    """``_floats_of`` of one attribute of every object (read in C, no list in between)."""
    try:
        return np.fromiter(map(attrgetter(attr), objs), np.float64, count=len(objs))
    except (TypeError, ValueError, OverflowError):
        return _floats(list(map(attrgetter(attr), objs)))


def _ints_at(objs: Sequence[Any], attr: str) -> np.ndarray:
    """One attribute of every object → int64 array; anything not an int is coerced (-1 when not a number)."""
    try:
        return np.fromiter(map(attrgetter(attr), objs), np.int64, count=len(objs))
    except (TypeError, ValueError, OverflowError):
        return _ints(list(map(attrgetter(attr), objs)))


#: pid/tid of an event whose value is neither a number nor a name (a list, an
#: object, a boolean): such events are skipped and counted.
BAD_ID = np.iinfo(np.int64).min


def _ids_at(objs: Sequence[Any], attr: str) -> np.ndarray:
    """pid/tid columns: ints normally, but Kineto also writes strings."""
    try:
        return np.fromiter(map(attrgetter(attr), objs), np.int64, count=len(objs))
    except (TypeError, ValueError, OverflowError):
        return _ids(list(map(attrgetter(attr), objs)))


def _ids(values: list[Any]) -> np.ndarray:
    """`_ids_at` of values already taken out of their objects (also used by the native path)."""
    try:
        return np.fromiter(values, np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        pass
    out = _ints(values)
    for i, v in enumerate(values):
        if isinstance(v, str):
            if out[i] == -1:
                # Strings that are not numbers (lane names) get stable negative ids.
                out[i] = -2 - (zlib.crc32(v.encode("utf-8", "replace")) & 0xFFFF)
        elif v is not None and type(v) not in (int, float):
            out[i] = BAD_ID
    return out


def _ints_of(values: list[Any]) -> np.ndarray:
    """`_ints_at` of values already taken out of their objects (used by the native path)."""
    try:
        return np.fromiter(values, np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        return _ints(values)


def _any_of(objs: Sequence[Any], *attrs: str, raw: bool = False) -> bool:
    """Whether any object has a non-empty value in any of ``attrs`` (checked in C)."""
    for attr in attrs:
        values = map(attrgetter(attr), objs)
        if any(map(len, values) if raw else values):
            return True
    return False


def _str(value: Any) -> str | None:
    """A loose value as a name: strings only."""
    return value if type(value) is str else None


def _text_value(value: Any) -> str | None:
    """A loose value as text: strings as they are, other JSON values serialised."""
    if value is None or type(value) is str:
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_PASSTHROUGH_SUBCLASS).decode("utf-8", "replace")
    except TypeError:  # nested deeper than orjson writes: no text a person could use
        return None


def _compact_json(raw: bytes) -> str:
    try:
        return orjson.dumps(orjson.loads(raw)).decode()
    except (orjson.JSONDecodeError, TypeError):  # TypeError: nested deeper than orjson writes
        return raw.decode("utf-8", "replace")


def _missing_text(n: int) -> pd.Categorical:
    return pd.Categorical.from_codes(np.full(n, -1, dtype=np.int8), categories=pd.Index([], dtype=object))


def _scatter(n: int, idx: np.ndarray, values: np.ndarray, fill: float | int) -> np.ndarray:
    out = np.full(n, fill, dtype=values.dtype)
    if len(idx):
        out[idx] = values
    return out


# --------------------------------------------------------------------------- #

#: Events decoded at a time when splitting by items.
CHUNK_EVENTS = 16_384


class _Interner:
    """Integer codes for hashable values, stable across chunks.

    ``None``, ``""`` and ``b""`` (absent values in the typed schema) get -1.
    The per-value lookup runs in C (``map(dict.__getitem__)``); only when a
    chunk holds values never seen before are its distinct values looked at
    in Python. After the first few chunks of a trace that is rare (names,
    categories and shapes repeat every step), so most chunks cost one pass.
    """

    def __init__(self) -> None:
        self.index: dict[Any, int] = {None: -1, "": -1, b"": -1}
        self.values: list[Any] = []

    def codes(self, values: Sequence[Any]) -> np.ndarray:
        index = self.index
        try:
            return np.fromiter(map(index.__getitem__, values), np.int32, count=len(values))
        except KeyError:
            pass
        for v in dict.fromkeys(values):
            if v not in index:
                index[v] = len(self.values)
                self.values.append(v)
        return np.fromiter(map(index.__getitem__, values), np.int32, count=len(values))

    def codes_at(self, objs: Sequence[Any], attr: str) -> np.ndarray:
        """`codes` of one attribute of every object, without a list in between when all are known."""
        try:
            return np.fromiter(
                map(self.index.__getitem__, map(attrgetter(attr), objs)), np.int32, count=len(objs)
            )
        except KeyError:
            return self.codes(list(map(attrgetter(attr), objs)))

    def code(self, value: Any) -> int:
        """The code of ``value``, or -2 if it was never seen."""
        return self.index.get(value, -2)


_KIND_CODE = {k: i for i, k in enumerate(K.KINDS)}
_DEVICE_KIND_CODES = np.array([_KIND_CODE[k] for k in K.DEVICE_KINDS], dtype=np.int8)
#: Phase codes used to partition a decoded chunk.
_PHASE_CODE = {"X": 0, "s": 1, "f": 2, "M": 3, "i": 4, "I": 4}
_IGNORED_PHASE = 5
_NO_PHASE = -1
_TYPE_CODE = {t: _PHASE_CODE.get(ph, _IGNORED_PHASE) for t, ph in PHASE_OF_TYPE.items()}
#: The kinds `_flows_needed` looks at: flows link them where their correlation id is missing.
_FLOW_LINKED_KINDS = (*K.LAUNCHED_KINDS, K.RUNTIME)
_FLOW_LINKED_KIND_CODES = np.array([_KIND_CODE[k] for k in _FLOW_LINKED_KINDS], dtype=np.int8)
_LAUNCHED_KIND_CODES = np.array([_KIND_CODE[k] for k in K.LAUNCHED_KINDS], dtype=np.int8)
_CORRELATED_KIND_CODES = np.array([_KIND_CODE[k] for k in (*K.DEVICE_KINDS, K.RUNTIME)], dtype=np.int8)
#: Groups of text arguments interned together (one pass per group, not per
#: column): their values are joined with a separator that cannot occur in
#: JSON text (raw control characters are not allowed in it) and split again
#: once per distinct value at the end.
_GROUPS = {
    "launch": ("grid", "block"),
    "shapes": ("input_dims", "input_types", "concrete_inputs"),
    "python": ("stack", "module"),
    "kernel_file": ("kernel_file",),
}
_LAUNCH_FLOW = frozenset(K.LAUNCH_FLOW_CATEGORIES)
#: Numeric device arguments (fields of `schema.EventArgs`), read from device events only.
_DEVICE_NUMBERS = ("bytes", "registers", "shared_memory", "occupancy", "blocks_per_sm", "warps_per_sm")
_RAW_COLUMNS = frozenset({"grid", "block", "input_dims", "input_types", "concrete_inputs"})
_SEP = b"\x1f"
_BAD_ID_REASON = "event(s) with a pid or tid that is neither a number nor a name"


#: Per thread, the bytes of JSON decoded the Python way so far (msgspec
#: objects by the million, whose memory glibc keeps in its arenas once they
#: are freed). A parse trims (`give_back_memory`) by what it decoded that way:
#: chunks the native scanner read leave nothing to hand back, and trimming
#: after them cost ~15 ms on 1M events, and the tables then fault the pages in again.
_PYTHON_WAY = threading.local()


def _count_python_way(n: int) -> None:
    _PYTHON_WAY.bytes = _python_way_bytes() + n


def _python_way_bytes() -> int:
    return getattr(_PYTHON_WAY, "bytes", 0)


class _Builder:
    """Accumulates the columns of a trace, one chunk of events at a time.

    ``flows`` False counts flow events without reading them (see
    `schema.UnreadFlowStart`); ``events`` False reads flow events only
    (the second pass that `_flows_only` makes when they are needed).
    """

    def __init__(
        self, meta: TraceMeta, *, events: bool = True, flows: bool = True, json_bytes: int = 0
    ) -> None:
        self.meta = meta
        #: About how many bytes of JSON the events come from (0: unknown), and
        #: how many were added so far: how many rows to reserve (`_append_events`).
        self.json_bytes = json_bytes
        self.bytes_added = 0
        self.read_events = events
        self.read_flows = flows
        self.decoder = (
            EVENTS_DECODER if events and flows else EVENTS_DECODER_WITHOUT_FLOWS if events else FLOWS_DECODER
        )
        self.flows_unread = 0
        self.cat = _Interner()
        self.names = _Interner()
        self.groups = {g: _Interner() for g in _GROUPS}
        self.kind_of_cat = np.zeros(0, dtype=np.int8)
        self.cols = ColumnStore()
        self.flows: dict[str, list[np.ndarray]] = {}
        self.memory: dict[str, list[np.ndarray]] = {}
        self.no_ph = 0
        self.not_events = 0
        #: Faults repaired in chunks that failed to decode, by kind (see `repaired_text`).
        self.repaired: dict[str, int] = {}
        # The C column builder (None: pure Python; see `native`).
        self.native = _native.digester(sys.modules[__name__])
        #: Deferred flow events read all the same by the native builder (it
        #: sees them anyway), kept aside in case the links need them: what
        #: the flows-only pass (`_flows_only`) would read, without a second
        #: pass over the file. None once a chunk went the Python way.
        self.flows_aside: dict[str, list[np.ndarray]] | None = (
            {} if self.native is not None and events and not flows else None
        )
        #: Whether a chunk had launches or runtime calls without correlation ids (see `flows_aside`).
        self.flows_wanted = False

    # -- decoding ---------------------------------------------------------- #

    def add(self, chunk: bytes | memoryview, items: list[Any] | None, bare: bool = False) -> None:
        """Decode and digest one chunk: a JSON array of events.

        ``items`` are the chunk's raw items when known; without them a chunk
        that is not valid JSON means its boundaries were guessed wrong.
        ``bare``: the chunk is the array's events without its brackets (a
        slice of the file, not copied unless the Python way needs it).
        A chunk the native builder reads is digested there; any chunk it
        refuses (anything it does not fully understand) goes the Python way.
        """
        self.bytes_added += len(chunk)
        if self.native is not None and self.native.digest(self, chunk, bare):
            return
        _count_python_way(len(chunk))
        if bare:
            chunk = b"".join((b"[", chunk, b"]"))
        self.flows_aside = None
        events, loose = self._decode(chunk, items)
        self._digest(events, loose)

    def _decode(self, chunk: bytes | memoryview, items: list[Any] | None) -> tuple[Sequence[Any], bool]:
        try:
            return self.decoder.decode(chunk), False
        except msgspec.ValidationError:
            pass
        except msgspec.DecodeError as exc:
            repaired = self._repair(chunk, exc)
            if repaired is None:
                if items is None:
                    raise _MisSplit from None
                return self._decode_items(items), True
            # The repaired text has other item boundaries than ``items``.
            chunk, known = repaired, items
            items = None
            try:
                return self.decoder.decode(chunk), False
            except msgspec.ValidationError:
                pass
            except msgspec.DecodeError:
                if known is None:
                    raise _MisSplit from None
                return self._decode_items(known), True
        try:
            return LOOSE_EVENTS_DECODER.decode(chunk), True
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
        if items is None:
            try:
                items = RAW_LIST_DECODER.decode(chunk)
            except msgspec.DecodeError:
                raise _MisSplit from None
        return self._decode_items(items), True

    def _repair(self, chunk: bytes, exc: msgspec.DecodeError) -> bytes | None:
        """The chunk with its known faults repaired (see `repaired_text`), or None if it has none."""
        chunk = bytes(chunk)
        fixed, counts = repaired_text(chunk, "utf-8" in str(exc).lower())
        for key, n in counts.items():
            self.repaired[key] = self.repaired.get(key, 0) + n
        return None if fixed is chunk else bytes(fixed)

    def _decode_items(self, items: Sequence[Any]) -> list[LooseTraceEvent]:
        """Slow path: one item at a time, skipping those that are not events."""
        events: list[LooseTraceEvent] = []
        for raw in items:
            try:
                events.append(LOOSE_EVENT_DECODER.decode(raw))
                continue
            except (msgspec.ValidationError, msgspec.DecodeError):
                pass
            try:
                item = msgspec.json.decode(raw)
                if isinstance(item, dict) and not isinstance(item.get("args", {}), dict):
                    item = {k: v for k, v in item.items() if k != "args"}
                events.append(msgspec.convert(item, LooseTraceEvent, strict=False))
            except (msgspec.ValidationError, msgspec.DecodeError, TypeError):
                self.not_events += 1
        return events

    # -- digesting ----------------------------------------------------------- #

    def _append(self, store: dict[str, list[np.ndarray]], **columns: np.ndarray) -> None:
        for k, v in columns.items():
            store.setdefault(k, []).append(v)

    def _append_events(self, columns: dict[str, np.ndarray]) -> None:
        """One chunk's event columns; the first chunk, and any that overflows the reserve, renew the guess of the rows to come."""
        rows = self.cols.rows + len(columns["ts"])
        if self.json_bytes and self.bytes_added and (not self.cols or rows > self.cols.capacity):
            per_byte = rows / self.bytes_added
            self.cols.expect(int(per_byte * max(self.json_bytes, self.bytes_added) * SLACK))
        self.cols.append(columns)

    def _kinds(self, cat_codes: np.ndarray) -> np.ndarray:
        known = len(self.kind_of_cat)
        if len(self.cat.values) > known:
            new = [_KIND_CODE[K.kind_of_category(c)] for c in self.cat.values[known:]]
            self.kind_of_cat = np.concatenate([self.kind_of_cat, np.array(new, dtype=np.int8)])
        # code -1 (no category) picks the trailing OTHER
        lut = np.append(self.kind_of_cat, np.int8(_KIND_CODE[K.OTHER]))
        return lut[cat_codes]

    def _digest(self, ev: Sequence[Any], loose: bool) -> None:
        if not len(ev):
            return
        # Partition by phase: typed events carry it as their struct type.
        if loose:
            phase = np.fromiter(
                (_PHASE_CODE.get(_str(e.ph), _NO_PHASE if e.ph is None else _IGNORED_PHASE) for e in ev),
                np.int8,
                count=len(ev),
            )
        else:
            phase = np.fromiter(map(_TYPE_CODE.__getitem__, map(type, ev)), np.int8, count=len(ev))
        self.no_ph += int((phase == _NO_PHASE).sum())
        other = np.flatnonzero((phase == _PHASE_CODE["M"]) | (phase == _PHASE_CODE["i"]))
        if len(other) and self.read_events:
            rest = _take(ev, other)
            _apply_metadata_events([e for e in rest if _phase_of(e) == "M"], self.meta)
            inst = [e for e in rest if _phase_of(e) in ("i", "I") and e.name == "[memory]"]
            if inst:
                self._digest_memory(inst)
        flow_pos = np.flatnonzero((phase == _PHASE_CODE["s"]) | (phase == _PHASE_CODE["f"]))
        if len(flow_pos) and not self.read_flows:
            self.flows_unread += len(flow_pos)
        elif len(flow_pos):
            flows = _take(ev, flow_pos)
            cats = map(attrgetter("cat"), flows)
            # Only launch flows are kept; a membership test (C) is all their
            # category is needed for. Loose values may be unhashable.
            is_launch = _LAUNCH_FLOW.__contains__
            keep = np.fromiter(
                map(is_launch, map(_str, cats)) if loose else map(is_launch, cats), bool, count=len(flows)
            )
            if keep.any():
                if not keep.all():
                    flows = _take(flows, np.flatnonzero(keep))
                self._append(
                    self.flows,
                    id=_ints_at(flows, "id"),
                    is_start=phase[flow_pos[keep]] == _PHASE_CODE["s"],
                    pid=_ids_at(flows, "pid"),
                    tid=_ids_at(flows, "tid"),
                    ts=_floats_at(flows, "ts"),
                )
        x_pos = np.flatnonzero(phase == _PHASE_CODE["X"])
        if len(x_pos) and self.read_events:
            xs = _take(ev, x_pos)
            cat = self.cat.codes([_str(e.cat) for e in xs]) if loose else self.cat.codes_at(xs, "cat")
            # The profiler's own span (cat "Trace", pid "Spans") is not an
            # event of the program; it only marks the capture window.
            spans = cat == self.cat.code("Trace")
            if spans.any():
                keep = np.flatnonzero(~spans)
                xs, cat = _take(xs, keep), cat[keep]
            if len(xs):
                self._digest_x(xs, cat, loose)

    def _digest_memory(self, inst: list[Any]) -> None:
        args = [NO_LOOSE_ARGS if e.args is None else e.args for e in inst]
        self._append(
            self.memory,
            ts=_floats_at(inst, "ts"),
            pid=_ids_at(inst, "pid"),
            tid=_ids_at(inst, "tid"),
            bytes=_floats_at(args, "mem_bytes"),
            total_allocated=_floats_at(args, "total_allocated"),
            total_reserved=_floats_at(args, "total_reserved"),
            device_type=_ints_at(args, "device_type"),
            device_id=_ints_at(args, "device_id"),
        )

    def _digest_x(self, xs: Sequence[Any], cat: np.ndarray, loose: bool) -> None:
        m = len(xs)
        kind = self._kinds(cat)
        if loose:
            names = self.names.codes([_str(e.name) for e in xs])
            args = [NO_LOOSE_ARGS if e.args is None else e.args for e in xs]
            dur = _floats_of([0.0 if e.dur is None else e.dur for e in xs])
        else:
            names = self.names.codes_at(xs, "name")
            args = [e.args for e in xs]
            dur = _floats_at(xs, "dur")
        pid = _ids_at(xs, "pid")
        tid = _ids_at(xs, "tid")
        out: dict[str, np.ndarray] = {
            "name": names,
            "cat": cat,
            "kind": kind,
            "pid": pid,
            "tid": tid,
            "ts": _floats_at(xs, "ts"),
            "dur": dur,
            "external_id": _ints_at(args, "external_id"),
        }

        # Device-side arguments are read only from device events (host events
        # never carry them); correlation ids also from runtime calls.
        dev = np.flatnonzero(np.isin(kind, _DEVICE_KIND_CODES))
        corr_rows = np.flatnonzero(np.isin(kind, _CORRELATED_KIND_CODES))
        out["correlation"] = _scatter(m, corr_rows, _ints_at(_take(args, corr_rows), "correlation"), -1)
        dargs = _take(args, dev)
        device = _ints_at(dargs, "device")
        stream = _ints_at(dargs, "stream")
        # Kineto puts the device in pid and the stream in tid of device
        # events; the args are authoritative when present.
        out["device"] = _scatter(m, dev, np.where(device >= 0, device, pid[dev]), -1)
        out["stream"] = _scatter(m, dev, np.where(stream >= 0, stream, tid[dev]), -1)
        for column in _DEVICE_NUMBERS:
            out[column] = _scatter(m, dev, _floats_at(dargs, column), np.nan)
        join = _SEP.join
        launch = None
        if _any_of(dargs, "grid", "block", raw=True):
            launch = [join((a.grid, a.block)) for a in dargs]
        out["launch"] = self._group_codes(m, dev, "launch", launch)
        kf = None
        if _any_of(dargs, "kernel_file"):
            kf = [_text_value(a.kernel_file) for a in dargs] if loose else [a.kernel_file for a in dargs]
        out["kernel_file"] = self._group_codes(m, dev, "kernel_file", kf)
        del dargs

        # Host-op arguments, only where the trace recorded them at all.
        ops = np.flatnonzero(kind == _KIND_CODE[K.CPU_OP])
        oargs = _take(args, ops)
        shapes = None
        if _any_of(oargs, "input_dims", "input_types", raw=True):
            # Concrete inputs are rarer (torch >= 2.2, scalars only): a
            # two-part key where no op of the chunk has them.
            if _any_of(oargs, "concrete_inputs", raw=True):
                shapes = [join((a.input_dims, a.input_types, a.concrete_inputs)) for a in oargs]
            else:
                shapes = [join((a.input_dims, a.input_types)) for a in oargs]
        elif _any_of(oargs, "concrete_inputs", raw=True):
            shapes = [join((b"", b"", a.concrete_inputs)) for a in oargs]
        out["shapes"] = self._group_codes(m, ops, "shapes", shapes)
        python = None
        if _any_of(oargs, "call_stack", "module_hierarchy"):
            if loose:
                python = [(_text_value(a.call_stack), _text_value(a.module_hierarchy)) for a in oargs]
            else:
                python = [(a.call_stack, a.module_hierarchy) for a in oargs]
        out["python"] = self._group_codes(m, ops, "python", python)
        out["sequence"] = _scatter(m, ops, _ints_at(oargs, "sequence"), -1)
        del oargs

        py = np.flatnonzero(kind == _KIND_CODE[K.PYTHON_FUNCTION])
        pargs = _take(args, py)
        out["python_id"] = _scatter(m, py, _ints_at(pargs, "python_id"), -1)
        out["python_parent_id"] = _scatter(m, py, _ints_at(pargs, "python_parent_id"), -1)
        self._append_events(out)

    def _group_codes(self, m: int, idx: np.ndarray, group: str, values: list[Any] | None) -> np.ndarray:
        codes = np.full(m, -1, dtype=np.int32)
        if values is not None and len(idx):
            codes[idx] = self.groups[group].codes(values)
        return codes

    # -- the result ---------------------------------------------------------- #

    def finish(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        meta = self.meta
        if self.not_events:
            meta.skipped_reasons["item(s) that are not event objects"] = self.not_events
        if self.no_ph:
            meta.skipped_reasons["event(s) without a 'ph' type"] = self.no_ph
        meta.warnings.extend(repair_notes(meta.path, self.repaired))
        events = self._events_frame() if self.cols else empty_events()
        if len(events):
            ts_abs = events["ts"].to_numpy()
            t0 = float(ts_abs.min())
            meta.t0_us = t0
            events["ts"] = ts_abs - t0
            meta.span_us = float((events["ts"].to_numpy() + events["dur"].to_numpy()).max())
            # Timestamps were decoded as float64 µs: far from zero (epoch
            # clocks) their spacing exceeds a nanosecond. Nesting uses this
            # as its tolerance.
            meta.time_precision_us = max(0.001, 2 * math.ulp(float(np.abs(ts_abs).max())))
        return events, self._memory_frame(), self._flow_frame()

    def _events_frame(self) -> pd.DataFrame:
        meta = self.meta
        c = self.cols.take()
        ts, dur = c["ts"], c["dur"]
        reasons = {
            _BAD_ID_REASON.removeprefix("event(s) "): (c["pid"] == BAD_ID) | (c["tid"] == BAD_ID),
            "without a name": (c["name"] < 0) | self._quoted_names()[np.maximum(c["name"], 0)],
            "without a finite timestamp": ~np.isfinite(ts),
            "with a timestamp beyond 2^53 µs (no clock reads that)": np.abs(ts) > MAX_TIMESTAMP_US,
            "with a negative duration": dur < 0,
            "with a duration that is not finite or longer than a day": ~np.isfinite(dur)
            | (dur > MAX_DURATION_US),
        }
        bad = np.zeros(len(ts), dtype=bool)
        for reason, mask in reasons.items():
            # Each event is counted once, under the first reason that applies.
            new = mask & ~bad
            if new.any():
                meta.skipped_reasons[f"event(s) {reason}"] = int(new.sum())
                bad |= new

        cols: dict[str, Any] = {}
        for name, values in c.items():
            if name == "name":
                cols[name] = self._name_column(values)
            elif name == "cat":
                cols[name] = pd.Categorical.from_codes(
                    values, categories=pd.Index(self.cat.values, dtype=object)
                ).remove_unused_categories()
            elif name == "kind":
                cols[name] = pd.Categorical.from_codes(values, categories=list(K.KINDS))
            elif name in _GROUPS:
                cols.update(self._group_columns(name, values))
            else:
                cols[name] = values
        frame = pd.DataFrame(cols, copy=False)
        if bad.any():
            frame = frame.loc[~bad].reset_index(drop=True)
        return frame

    def _quoted_names(self) -> np.ndarray:
        """Per name code: whether the "name" was a NaN/Infinity literal (see `quote_nonfinite`)."""
        return np.array([str(n).startswith(NONFINITE_MARK) for n in self.names.values] + [False], dtype=bool)

    def _name_column(self, codes: np.ndarray) -> pd.Categorical:
        cats = self.names.values
        long = [len(n) > MAX_NAME_CHARS for n in cats]
        if any(long):
            cats = [n[:MAX_NAME_CHARS] + "…" if is_long else n for n, is_long in zip(cats, long, strict=True)]
            self.meta.warnings.append(
                f"{self.meta.path or 'trace'}: {sum(long)} name(s) longer than {MAX_NAME_CHARS} "
                "characters were shortened"
            )
        return _from_codes(codes, cats)

    def _group_columns(self, group: str, codes: np.ndarray) -> dict[str, pd.Categorical]:
        """Split an interned group (e.g. grid + block) into its text columns."""
        columns = _GROUPS[group]
        values = self.groups[group].values
        parts: list[Sequence[Any]]
        if not values:
            parts = [() for _ in values]
        elif isinstance(values[0], bytes):
            parts = [v.split(_SEP) for v in values]
        elif isinstance(values[0], tuple):
            parts = values
        else:
            parts = [(v,) for v in values]
        out = {}
        for i, column in enumerate(columns):
            texts = [p[i] if i < len(p) else None for p in parts]
            if column in _RAW_COLUMNS:
                # Once per distinct text: combinations repeat their parts
                # (HTA's MTIA trace: 33k shape combinations of 5.6k texts).
                compact = {t: _compact_json(t) for t in set(texts) if t}
                texts = [compact[t] if t else None for t in texts]
            else:
                texts = [t or None for t in texts]
            sub, uniques = pd.factorize(np.array(texts + [None], dtype=object), use_na_sentinel=True)
            lut = sub.astype(np.int32)  # the trailing None maps code -1 to -1
            out[column] = pd.Categorical.from_codes(lut[codes], categories=pd.Index(uniques, dtype=object))
        return out

    def _memory_frame(self) -> pd.DataFrame:
        cols = {k: np.concatenate(v) for k, v in self.memory.items()} or {
            "ts": np.array([], dtype=np.float64),
            "pid": np.array([], dtype=np.int64),
            "tid": np.array([], dtype=np.int64),
            "bytes": np.array([], dtype=np.float64),
            "total_allocated": np.array([], dtype=np.float64),
            "total_reserved": np.array([], dtype=np.float64),
            "device_type": np.array([], dtype=np.int64),
            "device_id": np.array([], dtype=np.int64),
        }
        frame = pd.DataFrame(cols)
        good = _on_the_clock(frame["ts"].to_numpy()) & np.isfinite(frame["bytes"].to_numpy())
        frame["ts"] -= self.meta.t0_us
        good &= self._count_bad_ids(frame)
        if not good.all():
            frame = frame[good].reset_index(drop=True)
        return frame

    def _count_bad_ids(self, frame: pd.DataFrame) -> np.ndarray:
        """Rows whose pid and tid are usable; the others are counted as skipped."""
        ok = (frame["pid"].to_numpy() != BAD_ID) & (frame["tid"].to_numpy() != BAD_ID)
        bad = len(ok) - int(ok.sum())
        if bad:
            reasons = self.meta.skipped_reasons
            reasons[_BAD_ID_REASON] = reasons.get(_BAD_ID_REASON, 0) + bad
        return ok

    def _flow_frame(self) -> pd.DataFrame:
        cols = {k: np.concatenate(v) for k, v in self.flows.items()} or {
            "id": np.array([], dtype=np.int64),
            "is_start": np.array([], dtype=bool),
            "pid": np.array([], dtype=np.int64),
            "tid": np.array([], dtype=np.int64),
            "ts": np.array([], dtype=np.float64),
        }
        frame = pd.DataFrame(cols)
        good = (frame["id"].to_numpy() >= 0) & _on_the_clock(frame["ts"].to_numpy())
        frame["ts"] -= self.meta.t0_us
        good &= self._count_bad_ids(frame)
        if not good.all():
            frame = frame[good].reset_index(drop=True)
        return frame


def _on_the_clock(ts: np.ndarray) -> np.ndarray:
    """Which absolute timestamps are finite and within `MAX_TIMESTAMP_US` of the clock's zero."""
    with np.errstate(invalid="ignore"):
        return np.isfinite(ts) & (np.abs(ts) <= MAX_TIMESTAMP_US)


def _from_codes(codes: np.ndarray, values: list[Any]) -> pd.Categorical:
    """Categorical from codes into ``values``, merging values that became equal."""
    if len(set(values)) == len(values):
        return pd.Categorical.from_codes(codes, categories=pd.Index(values, dtype=object))
    uniq, remap = np.unique(np.array(values, dtype=object), return_inverse=True)
    lut = np.append(remap, -1)  # code -1 stays missing
    return pd.Categorical.from_codes(lut[codes], categories=pd.Index(list(uniq), dtype=object))


# --------------------------------------------------------------------------- #


def parse_bytes(
    data: bytes | bytearray, path: str | Path | None = None, *, defer_flows: bool | None = None
) -> TraceData:
    """Decode and parse the JSON bytes of a Kineto trace.

    Raises `TraceError` when the bytes are not a trace at all; malformed
    individual events are skipped and counted in ``meta.skipped`` (with a
    warning), so one bad record never costs the whole file.

    ``defer_flows`` (default: when the bytes came from the file at ``path``)
    leaves flow events unread whenever the correlation ids link every launch
    without them: ``flows`` is then empty, ``meta.flows_unread`` counts them,
    and `read_flows` reads them from the file on demand.
    """
    meta = TraceMeta(path=str(path) if path is not None else None)
    if defer_flows is None:
        defer_flows = path is not None
    if data[:3] == _BOM:
        data = data[3:]  # files lose theirs without a copy (`read_trace_bytes`)
    python_way = _python_way_bytes()
    with gc_paused(), small_pages(), _bounded(path):
        doc, data = _decode_document(data, path, meta)
        _read_document(doc, meta)
        try:
            events, memory, flows = _parse_events(data, doc.traceEvents, meta, False, defer_flows)
        except _MisSplit:
            # Chunk boundaries guessed from the layout fell inside an event
            # (an unusual writer), or the events array was not where the
            # pattern said: decode the whole document and split on the true
            # item boundaries instead.
            meta.skipped_reasons.clear()
            meta.fallback_reason = "chunk boundaries were not between events; events decoded item by item"
            _count_python_way(len(data))
            doc, data = _decode_document(data, path, meta, whole=True)
            _read_document(doc, meta)
            events, memory, flows = _parse_events(data, doc.traceEvents, meta, True, defer_flows)
        del doc
    _warn_skipped(meta)
    give_back_memory(_python_way_bytes() - python_way)
    return TraceData(events=events, memory=memory, flows=flows, meta=meta)


def _warn_skipped(meta: TraceMeta) -> None:
    """Count the skipped items in ``meta`` and warn once per line of ``meta.warnings``."""
    if meta.skipped_reasons:
        meta.skipped = sum(meta.skipped_reasons.values())
        why = ", ".join(f"{n} {reason}" for reason, n in meta.skipped_reasons.items())
        meta.warnings.append(f"{meta.path or 'trace'}: skipped {meta.skipped} malformed item(s): {why}")
    for msg in meta.warnings:
        warnings.warn(msg, stacklevel=3)


def parse_document(doc: Any, path: str | Path | None = None) -> TraceData:
    """Parse an already decoded JSON document (dict or bare event list).

    Used for documents built in memory; files go through `parse_bytes`.
    There is no file to read flows from later, so they are read at once.
    """
    return parse_bytes(orjson.dumps(doc), path, defer_flows=False)


_BOM = b"\xef\xbb\xbf"


@contextmanager
def _bounded(path: str | Path | None) -> Iterator[None]:
    """Turn what a hostile document does to the decoder into one `TraceError`.

    JSON nested deeper than the interpreter's recursion limit (a ``[[[[``
    bomb, or one event holding a 100k-level value) makes msgspec raise
    RecursionError; no trace nests more than a few levels.
    """
    try:
        yield
    except RecursionError:
        raise TraceError(
            path, f"JSON nested too deeply (over about {sys.getrecursionlimit()} levels); not a trace"
        ) from None
    except MemoryError:
        raise TraceError(path, "does not fit in the memory left; refusing to parse it") from None


class _MisSplit(Exception):
    """A chunk boundary found by pattern was not between two events."""


#: Bytes of JSON decoded at a time (about ten thousand events).
CHUNK_BYTES = 4 << 20
#: Where one event ends and the next begins: ``}`` ``,`` ``{``. Raw newlines
#: cannot occur inside JSON strings, and a boundary inside an event leaves
#: unbalanced brackets on both sides, so a wrong guess never decodes.
_BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*\{")


def _parse_events(
    data: bytes, raw: msgspec.Raw, meta: TraceMeta, by_items: bool, defer_flows: bool
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    builder = _Builder(meta, flows=not defer_flows, json_bytes=len(data))
    done, total = 0, len(data)
    for chunk, items, bare in _chunks(data, raw, by_items):
        builder.add(chunk, items, bare)
        done += len(chunk)
        report("parsing", min(done, total - 1), total)
    report("parsing", total, total)  # the chunks leave out the brackets and what surrounds the events
    return _finish(builder, meta, lambda t0_us: _flows_only(data, raw, by_items, t0_us))


def _finish(
    builder: _Builder, meta: TraceMeta, flows_pass: Callable[[float], pd.DataFrame]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The builder's frames; flow events left unread are read by ``flows_pass(t0_us)`` only if needed.

    Otherwise ``meta.flows_unread`` counts them, for `read_flows` to read on demand.
    """
    events, memory, flows = builder.finish()
    if builder.flows_unread:
        if _flows_needed(events):
            flows = _flows_aside(builder, meta.t0_us)
            if flows is None:
                flows = flows_pass(meta.t0_us)
        else:
            meta.flows_unread = builder.flows_unread
    return events, memory, flows


def _flows_aside(builder: _Builder, t0_us: float) -> pd.DataFrame | None:
    """The flows frame `_flows_only` would give, from the flows the native builder kept aside; None without them.

    The same columns of the same chunks, made into a frame the same way
    (what it counts as skipped goes nowhere, as in that pass).
    """
    if builder.flows_aside is None:
        return None
    side = _Builder(TraceMeta(t0_us=t0_us), events=False)
    side.flows = builder.flows_aside
    return side._flow_frame()


def _flows_needed(events: pd.DataFrame) -> bool:
    """Whether some launch can only be found through flow events.

    Launch links are made by correlation id first, by flows only for the
    device work left unlinked. A flow's id is its correlation id, so flows
    can link something only where an id is missing: on a launched device
    event or on a runtime call.
    """
    linked = K.kind_mask(events, _FLOW_LINKED_KINDS)
    return bool((linked & (events["correlation"].to_numpy() < 0)).any())


def _flows_only(data: bytes, raw: msgspec.Raw, by_items: bool, t0_us: float) -> pd.DataFrame:
    """The flow events of a document, read in a pass that skips everything else."""
    builder = _Builder(TraceMeta(t0_us=t0_us), events=False)
    for chunk, items, bare in _chunks(data, raw, by_items):
        builder.add(chunk, items, bare)
    return builder._flow_frame()


def read_flows(path: str | Path, t0_us: float) -> pd.DataFrame:
    """The launch flow events of a trace file (``ts`` relative to ``t0_us``).

    For profiles parsed with their flows deferred (``meta.flows_unread``).
    """
    if too_big_to_hold(path):
        try:
            with gc_paused(), small_pages(), _bounded(path):
                return _streamed_flows(path, t0_us)
        except (_NotStreamable, _MisSplit):
            pass
    meta = TraceMeta(path=str(path))
    with gc_paused(), small_pages(), _bounded(path):
        doc, data = _decode_document(read_trace_bytes(path), path, meta)
        try:
            return _flows_only(data, doc.traceEvents, False, t0_us)
        except _MisSplit:
            doc, data = _decode_document(data, path, meta, whole=True)
            return _flows_only(data, doc.traceEvents, True, t0_us)


def _chunks(
    data: bytes, raw: msgspec.Raw, by_items: bool
) -> Iterator[tuple[bytes | memoryview, list[Any] | None, bool]]:
    """The ``traceEvents`` array as a sequence of smaller JSON arrays: (chunk, its raw items or None, bare).

    The fast way slices the file's bytes at event boundaries found by a
    pattern (`_BETWEEN_EVENTS`); ``by_items`` decodes the array into raw
    items first (slower, but exact for any layout). A slice is given bare
    (the events without brackets, where they lie in ``data``): the native
    builder scans it so, and only a chunk it refuses is copied into an array.
    """
    view = memoryview(data)
    start = _offset_in(data, raw)
    if by_items or start < 0:
        items = RAW_LIST_DECODER.decode(raw)
        for i in range(0, len(items), CHUNK_EVENTS):
            part = items[i : i + CHUNK_EVENTS]
            yield b"[" + b",".join(part) + b"]", part, False
        return
    end = start + len(raw) - 1  # the closing bracket
    a = start + 1
    while a < end:
        b = end
        if end - a > 2 * CHUNK_BYTES:
            m = _BETWEEN_EVENTS.search(data, a + CHUNK_BYTES, end)
            if m is not None:
                b = data.index(b",", m.start(), m.end())
        if a == start + 1 and b == end:
            # The whole array in one piece (every small trace, or one that
            # offers no boundary): decoded where it lies, not copied.
            yield view[start : end + 1], None, False
        else:
            yield view[a:b], None, True
        a = b + 1


def _offset_in(data: bytes, raw: msgspec.Raw) -> int:
    """Where a Raw (a view into ``data``) starts in ``data``, or -1.

    The array must start with ``[``; anything else is not a list of events.
    """
    n = len(raw)
    if n < 2:
        return -1
    base = np.frombuffer(data, np.uint8).ctypes.data
    off = np.frombuffer(raw, np.uint8).ctypes.data - base
    if off < 0 or off + n > len(data) or data[off : off + 1] != b"[" or data[off + n - 1 : off + n] != b"]":
        return -1
    return off


def _decode_document(
    data: bytes, path: str | Path | None, meta: TraceMeta, whole: bool = False
) -> tuple[TraceDocument, bytes]:
    """The top level of the document (with ``traceEvents`` still raw), and the bytes it views.

    Unless ``whole``, the events array is first located by pattern (see
    `_decode_around_events`), which spares a pass over the whole file.
    """
    if not whole:
        doc = _decode_around_events(data)
        if doc is not None:
            return doc, data
        meta.fallback_reason = "events array not located by pattern; top level decoded whole"
    try:
        doc = DOCUMENT_DECODER.decode(data)
    except msgspec.ValidationError as exc:
        # Not an object: the Chrome format also allows a bare event array.
        first = _FIRST_CHAR.search(data)
        opener = first.group() if first is not None else b""
        if opener == b"{":  # an object, with a value no decoder takes (a 5,000-digit number)
            raise TraceError(path, f"not a trace ({_describe_decode_error(exc, path)})") from None
        if opener != b"[":
            raise TraceError(path, "not a trace: the top level is not a JSON object") from None
        try:
            doc = TraceDocument(traceEvents=RAW_DECODER.decode(data))
        except msgspec.DecodeError as exc:
            return _decode_repaired(data, path, meta, exc)
    except msgspec.DecodeError as exc:
        return _decode_repaired(data, path, meta, exc)
    if not len(doc.traceEvents):
        raise TraceError(path, "not a Kineto/Chrome trace: no 'traceEvents' key")
    if bytes(memoryview(doc.traceEvents)[:1]) != b"[":
        raise TraceError(path, "'traceEvents' is not a list of events")
    return doc, data


def _decode_repaired(
    data: bytes, path: str | Path | None, meta: TraceMeta, exc: msgspec.DecodeError
) -> tuple[TraceDocument, bytes]:
    """`_decode_document` of ``data`` with its known faults repaired (`repaired_text`), or the error."""
    fixed, counts = repaired_text(data, "utf-8" in str(exc).lower())
    if fixed is data:
        raise TraceError(path, f"not valid JSON ({_describe_decode_error(exc, path)})") from None
    meta.warnings.extend(repair_notes(path, counts))
    return _decode_document(fixed, path, meta, whole=True)


def repaired_text(data: bytes, utf8: bool) -> tuple[bytes, dict[str, int]]:
    """``data`` with the faults known writers leave repaired, and how many of each.

    Tried only on text that failed to decode: invalid UTF-8 (when ``utf8``,
    the decoder said so), lone surrogate escapes, torch's unescaped quotes
    (see `repair`) and NaN/Infinity literals (`quote_nonfinite`). Returns
    ``data`` itself when there was nothing to repair.
    """
    counts: dict[str, int] = {}
    fixed = data
    if utf8:
        text = bytes(data).decode("utf-8", errors="replace")
        counts["utf-8"] = max(1, text.count("\ufffd") - bytes(data).count("\ufffd".encode()))
        fixed = text.encode("utf-8")
    for key, step in (
        ("surrogates", replace_lone_surrogates),
        ("quotes", repair_quotes),
        ("nonfinite", quote_nonfinite),
    ):
        fixed, n = step(fixed)
        if n:
            counts[key] = n
    return fixed, counts


def repair_notes(path: str | Path | None, counts: dict[str, int]) -> list[str]:
    """One line per kind of fault `repaired_text` repaired, for ``meta.warnings``."""
    where = path or "trace"
    notes = []
    if counts.get("nonfinite"):
        notes.append(_nonfinite_warning(path, counts["nonfinite"]))
    if counts.get("utf-8"):
        notes.append(f"{where}: {counts['utf-8']} invalid UTF-8 sequence(s) replaced with U+FFFD")
    if counts.get("surrogates"):
        notes.append(
            f"{where}: {counts['surrogates']} lone surrogate escape(s) (\\ud800 ...) replaced with U+FFFD"
        )
    if counts.get("quotes"):
        notes.append(
            f"{where}: {counts['quotes']} string(s) with an unescaped '\"' repaired (torch's "
            "export_chrome_trace writes a quote inside a record_function name unescaped)"
        )
    return notes


#: A JSON string, or (group 1) a literal that JSON does not allow but some
#: writers emit for non-finite floats (Python's json module among them).
#: What `quote_nonfinite` puts before a quoted literal.
NONFINITE_MARK = "\x1e"
_NONFINITE = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|(-?Infinity|NaN)')


def quote_nonfinite(data: bytes | bytearray | memoryview) -> tuple[bytes | bytearray | memoryview, int]:
    """``NaN``, ``Infinity`` and ``-Infinity`` outside strings, turned into strings.

    The events holding them then decode loosely, their value reads as a
    non-finite number, and only those events are skipped (a ``ts`` or ``dur``
    that is not finite), instead of the whole file failing to decode.
    Returns the text and how many literals were quoted (0: ``data`` as it was).
    """
    if b"NaN" not in data and b"Infinity" not in data:
        return data, 0
    found = 0

    def quote(m: re.Match[bytes]) -> bytes:
        nonlocal found
        if m.group(1) is None:
            return m.group(0)
        found += 1
        # Marked (U+001E first), so a literal that stood where a name goes is
        # told from a real name; as a number it reads as not finite either way.
        return b'"\\u001e' + m.group(1) + b'"'

    quoted = _NONFINITE.sub(quote, data)
    return (quoted, found) if found else (data, 0)


def _nonfinite_warning(path: str | Path | None, n: int) -> str:
    return f"{path or 'trace'}: {n} NaN/Infinity literal(s) (not JSON) read as non-finite numbers"


#: The first character that is not JSON whitespace (found without copying the document).
_FIRST_CHAR = re.compile(rb"[^ \t\r\n]")
#: The key of the events array and the array's opening bracket.
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


def _decode_around_events(data: bytes) -> TraceDocument | None:
    """The top level of a document, decoded without reading its events, or None.

    Decoding the top level means skipping over ``traceEvents``, a pass over
    nearly the whole file (half a second for 300 MB). Kineto writes the
    array as the value of the first ``"traceEvents"`` key, followed only by
    small values: names, units and the profiler's log lines (``"INFO"``,
    ``"ERROR"`` arrays of strings, which hold ``]`` themselves). The array's
    end is looked for from the end of the file (`_array_ends`): a ``]``
    closing an object or an empty array, after which the document with the
    array cut out decodes, and before which the last event decodes on its
    own. A wrong guess (another writer's layout) is still caught: the guess
    can only lie at or after the true end, what lies between them holds
    ``"key": value`` pairs, which no event array can, so some chunk fails
    to decode and the caller decodes the whole document (see `parse_bytes`).
    None means: decode the whole document.
    """
    m = _EVENTS_KEY.search(data, 0, 1 << 20)
    if m is None:
        return None
    start = m.end() - 1
    for end in _array_ends(data, start):
        try:
            doc = DOCUMENT_DECODER.decode(data[:start] + b"[]" + data[end + 1 :])
        except (msgspec.ValidationError, msgspec.DecodeError):
            continue
        if bytes(doc.traceEvents) != b"[]":
            continue
        doc.traceEvents = memoryview(data)[start : end + 1]
        return doc
    return None


#: Where an events array may end: ``]`` after an object or an opening
#: bracket, before the next key or the end of the document (group 1: the ``]``).
_ARRAY_END = re.compile(rb"[}\[]\s*(\])\s*[,}]")
#: Tails searched for the end of the events array, shortest first; Kineto's
#: log arrays are a few kilobytes.
_TAIL_WINDOWS = (1 << 16, 1 << 22)
#: Candidate ends tried per window before giving up on the pattern.
_MAX_END_TRIES = 16


def _array_ends(data: bytes, start: int) -> Iterator[int]:
    """Candidate positions of the ``]`` closing the array that opens at ``start``, last first.

    A candidate is offered only when the item before it decodes as the end
    of an array (``[`` + last item + ``]``), which rules out the ``]`` of a
    trailing array of strings. The file's last ``]`` comes last, as before.
    """
    tried: set[int] = set()
    for window in _TAIL_WINDOWS:
        lo = max(start, len(data) - window)
        found = [m.start(1) for m in _ARRAY_END.finditer(data, lo)]
        for end in reversed(found[-_MAX_END_TRIES:]):
            if end not in tried and _ends_an_array(data, start, end):
                tried.add(end)
                yield end
        if lo == start:
            break
    last = data.rfind(b"]")
    if last > start and last not in tried:
        yield last


def _ends_an_array(data: bytes, start: int, end: int) -> bool:
    """Whether the items before ``data[end]`` (a ``]``) decode as the tail of a JSON array.

    The tail starts at one of the last few event boundaries (a boundary can
    also lie inside an event, between objects of a list in its args).
    """
    lo = max(start + 1, end - (1 << 16))
    firsts = [m.end() - 1 for m in _BETWEEN_EVENTS.finditer(data, lo, end)][-4:]
    if lo == start + 1:
        firsts.insert(0, lo)
    if not firsts:
        return True  # one item longer than the window: let the chunks decide
    for first in reversed(firsts):
        try:
            RAW_LIST_DECODER.decode(b"[" + data[first : end + 1])
        except msgspec.DecodeError:
            continue
        return True
    return False


def _describe_decode_error(exc: Exception, path: str | Path | None = None) -> str:
    msg = str(exc)
    if "truncated" in msg:
        full = full_disk(path, "the trace was cut short") if path is not None else None
        return full or "the file ends in the middle of the document; it was probably cut short"
    return msg if len(msg) < 160 else msg[:159] + "…"


def _read_document(doc: TraceDocument, meta: TraceMeta) -> None:
    props = doc.deviceProperties
    if isinstance(props, list):
        meta.device_properties = [p for p in props if isinstance(p, dict)]
    dist = doc.distributedInfo
    if isinstance(dist, dict):
        meta.distributed = dist
        meta.rank = _as_int(dist.get("rank"))
        meta.world_size = _as_int(dist.get("world_size"))
    for key in ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules"):
        value = getattr(doc, key)
        if value is not None:
            meta.options[key] = bool(value)
    for key in doc.__struct_fields__:
        value = getattr(doc, key)
        if key in ("traceEvents", "deviceProperties", "distributedInfo") or value is None:
            continue
        if isinstance(value, (str, int, float, bool)) and len(str(value)) < 500:
            meta.top_level[key] = value


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if math.isfinite(value) else None


def _phase_of(e: Any) -> str | None:
    """The phase of a typed or loose event."""
    ph = PHASE_OF_TYPE.get(type(e))
    return ph if ph is not None else _str(getattr(e, "ph", None))


def _apply_metadata_events(metas: Sequence[Any], meta: TraceMeta) -> None:
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
    "registers": np.float64,
    "shared_memory": np.float64,
    "occupancy": np.float64,
    "blocks_per_sm": np.float64,
    "warps_per_sm": np.float64,
    "grid": "category",
    "block": "category",
    "kernel_file": "category",
    "input_dims": "category",
    "input_types": "category",
    "concrete_inputs": "category",
    "stack": "category",
    "module": "category",
    "python_id": np.int64,
    "python_parent_id": np.int64,
    "sequence": np.int64,
}


def empty_events() -> pd.DataFrame:
    """An events frame with every column and no rows."""
    cols: dict[str, Any] = {}
    for name, dtype in _EVENT_COLUMNS.items():
        cols[name] = _missing_text(0) if dtype == "category" else np.array([], dtype=dtype)
    cols["kind"] = pd.Categorical([], categories=list(K.KINDS))
    return pd.DataFrame(cols)


# --------------------------------------------------------------------------- #
# traces too big to hold: parsed as they inflate

#: JSON above this size (estimated from the file: `estimated_json_bytes`) is
#: parsed as it is read, never whole in memory.
STREAM_JSON_BYTES = 128 << 20
#: How much a gzip'd Kineto trace inflates, about (10-15x is usual); only decides when to stream.
GZIP_RATIO = 12
#: Bytes kept back from the chunks while streaming: the end of the events
#: array and the keys after it are found in the last of these (`_TAIL_WINDOWS`).
STREAM_TAIL_BYTES = _TAIL_WINDOWS[-1] + (1 << 20)
#: The streaming window's first size: two pieces read, a tail and two chunks fit.
WINDOW_BYTES = 48 << 20


class _NotStreamable(Exception):
    """The file does not look like a Kineto trace whose events can be cut while reading."""


def estimated_json_bytes(path: str | Path) -> int:
    """About how many bytes of JSON a trace file holds (its size, times `GZIP_RATIO` when gzip'd)."""
    p = Path(path)
    try:
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):
            return 0  # a pipe or a device: opening it could block; the reader refuses it
        with open(p, "rb") as fh:
            gzipped = fh.read(2) == b"\x1f\x8b"
    except OSError:
        return 0
    return st.st_size * (GZIP_RATIO if gzipped else 1)


def inflated_size_hint(path: str | Path) -> int:
    """About how many bytes of JSON a trace file holds, as closely as the file tells (0: unknown).

    A gzip file ends with its inflated size modulo 2^32 (ISIZE); of the
    sizes that leaves, the one whose ratio to the file's is nearest the
    usual `GZIP_RATIO` is taken (a file of several members tells only its
    last one's: then a guess too small, which only costs the column store
    a copy). Only a hint for reserving rows, never a limit.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        with open(p, "rb") as fh:
            if fh.read(2) != b"\x1f\x8b":
                return size
            fh.seek(-4, 2)
            isize = int.from_bytes(fh.read(4), "little")
    except OSError:
        return 0
    candidates = [isize + k * (1 << 32) for k in range(64) if isize + k * (1 << 32) >= size]
    if not candidates:
        return 0
    return min(candidates, key=lambda c: abs(math.log(c / (size * GZIP_RATIO))))


def too_big_to_hold(path: str | Path) -> bool:
    """Whether the trace at ``path`` is parsed as it is read (`parse_streaming`) rather than whole."""
    return estimated_json_bytes(path) > STREAM_JSON_BYTES


def parse_streaming(path: str | Path) -> TraceData:
    """`parse_bytes` of a trace file, read and parsed piece by piece.

    Memory holds one piece of the JSON and the columns built so far, not the
    whole text: a trace of gigabytes costs its columns, not its bytes. The
    events array is cut into chunks as it arrives; the last few megabytes
    (where the array ends and the document's last keys are) are parsed as a
    small document of their own, with the head of the file. Flow events are
    deferred, as for any file (`read_flows`). A file this cannot cut (no
    ``traceEvents`` key at the top, a cut inside an event) is parsed the
    whole way instead, with the same result.
    """
    meta = TraceMeta(path=str(path))
    python_way = _python_way_bytes()
    try:
        with gc_paused(), small_pages(), _bounded(path):
            builder = _Builder(meta, flows=False, json_bytes=inflated_size_hint(path))
            _stream_into(builder, path, meta)
            events, memory, flows = _finish(builder, meta, lambda t0_us: _streamed_flows(path, t0_us))
    except (_NotStreamable, _MisSplit):
        return parse_bytes(read_trace_bytes(path), path)
    _warn_skipped(meta)
    events = spill_details(events)
    give_back_memory(_python_way_bytes() - python_way)
    return TraceData(events=events, memory=memory, flows=flows, meta=meta)


def _streamed_flows(path: str | Path, t0_us: float) -> pd.DataFrame:
    """`read_flows` of a big file, streamed."""
    builder = _Builder(TraceMeta(t0_us=t0_us), events=False)
    _stream_into(builder, path, TraceMeta(path=str(path)))
    return builder._flow_frame()


def _stream_into(builder: _Builder, path: str | Path, meta: TraceMeta) -> None:
    """Feed the events of the file at ``path`` to ``builder`` as it is read; read its top level into ``meta``."""
    prefix: bytes | None = None
    window = ByteWindow(WINDOW_BYTES)
    for piece in read_ahead(iter_trace_bytes(path, phase="parsing")):
        window.append(piece)
        del piece
        if prefix is None:
            m = _EVENTS_KEY.search(window.buf, window.lo, min(window.hi, window.lo + (1 << 20)))
            if m is None:
                if len(window) >= 1 << 20:
                    raise _NotStreamable
                continue
            prefix = window.take(m.end())
        _add_ready_chunks(builder, window)
    if prefix is None:
        raise _NotStreamable
    # The head and what is left (the last events, the array's end, the
    # keys after it) make a small document of the same shape.
    tail = prefix + window.take(window.hi)
    del window
    doc, tail = _decode_document(tail, path, meta)
    _read_document(doc, meta)
    for chunk, items, bare in _chunks(tail, doc.traceEvents, False):
        builder.add(chunk, items, bare)


def _add_ready_chunks(builder: _Builder, window: ByteWindow) -> None:
    """Parse the chunks of ``window`` (events after the array's ``[``) that the tail does not need; consume them.

    Each chunk is scanned bare, where it lies in the window (`_Builder.add`).
    """
    buf = window.buf
    while len(window) > STREAM_TAIL_BYTES + 2 * CHUNK_BYTES:
        m = _BETWEEN_EVENTS.search(buf, window.lo + CHUNK_BYTES, window.hi - STREAM_TAIL_BYTES)
        if m is None:
            return  # one event longer than a chunk: wait for more
        b = buf.index(b",", m.start(), m.end())
        chunk = window.view(window.lo, b)
        builder.add(chunk, None, True)
        chunk.release()
        window.lo = b + 1
