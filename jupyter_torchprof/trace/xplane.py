"""XPlane (``*.xplane.pb``) files → device events in Kineto's shape.

TorchTPU, JAX and TensorFlow profilers write their timelines as an
``XSpace`` protobuf: planes (``/device:TPU:0``, ``/host:CPU`` ...) hold lines
(timelines: a TPU's ``XLA Ops``, a host thread), lines hold events whose
names and stat names live in per-plane metadata tables. The schema is
``xplane.proto`` (tsl/profiler/protobuf in the openxla/xla repository);
only these messages are read, by a small wire-format decoder of our own, so
reading a TPU profile needs no protobuf package. protobuf's C parser is
faster (about 2.5x, parse and walk, on the JAX files in tests/data and on a
260k-event TPU file: 1.0 s against 2.5 s; benchmarks/bench_xplane.py), which
is not worth a dependency for files read once per run.

Device planes become Kineto-style complete events (``cat: kernel`` for op
lines, ``gpu_user_annotation`` for the step/module/framework-op lines that
summarise them), with the device index in ``pid`` and the line in ``tid``,
as Kineto writes device work; `merge_into_kineto` splices them into the
Kineto JSON of the same run, so the parser, links and tables see one trace.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..errors import TraceError

_DOUBLE = struct.Struct("<d")
_FLOAT = struct.Struct("<f")


class _WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


# --------------------------------------------------------------------------- #
# wire format: varints and length-delimited fields
#
# A message is a sequence of (tag, value); tag = field number << 3 | wire
# type. Only wire types 0 (varint), 1 (8 bytes), 2 (length-delimited) and
# 5 (4 bytes) exist in proto3; groups (3, 4) are rejected.


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:  # most tags and small numbers: one byte
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        if pos >= len(buf) or shift > 63:
            raise _WireError("varint runs past the end of the message")
        b = buf[pos]
        result |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            return result, pos
        shift += 7


def _signed(v: int) -> int:
    """A varint read as two's-complement int64."""
    return v - (1 << 64) if v >= 1 << 63 else v


def _fields(buf: bytes, start: int, end: int) -> list[tuple[int, int, Any]]:
    """The (field number, wire type, value) triples of the message in ``buf[start:end]``.

    Length-delimited values are returned as ``(start, end)`` offsets into
    ``buf`` (no copy); fixed-width values as their raw 8 or 4 bytes.
    """
    out = []
    pos = start
    while pos < end:
        tag, pos = _varint(buf, pos)
        wt = tag & 7
        if wt == 0:
            value, pos = _varint(buf, pos)
        elif wt == 2:
            n, pos = _varint(buf, pos)
            if pos + n > end:
                raise _WireError("a length-delimited field runs past the end of its message")
            value = (pos, pos + n)
            pos += n
        elif wt == 1:
            value = buf[pos : pos + 8]
            pos += 8
        elif wt == 5:
            value = buf[pos : pos + 4]
            pos += 4
        else:
            raise _WireError(f"unsupported wire type {wt}")
        if pos > end:
            raise _WireError("a field runs past the end of its message")
        out.append((tag >> 3, wt, value))
    return out


def _text(buf: bytes, span: tuple[int, int]) -> str:
    return buf[span[0] : span[1]].decode("utf-8", "replace")


# --------------------------------------------------------------------------- #
# the messages


@dataclass(slots=True)
class XEvent:
    """One event of a line: times in picoseconds, stats by stat-metadata id."""

    metadata_id: int = 0
    offset_ps: int = 0
    duration_ps: int = 0
    num_occurrences: int = 0
    stats: dict[int, Any] = field(default_factory=dict)


@dataclass
class XLine:
    """A timeline (a host thread, a TPU's ``XLA Ops`` ...); ``timestamp_ns`` is epoch ns."""

    id: int = 0
    display_id: int = 0
    name: str = ""
    display_name: str = ""
    timestamp_ns: int = 0
    duration_ps: int = 0
    events: list[XEvent] = field(default_factory=list)


@dataclass
class XEventMetadata:
    """Name (and constant stats) shared by the events that point at it."""

    id: int = 0
    name: str = ""
    display_name: str = ""
    stats: dict[int, Any] = field(default_factory=dict)


@dataclass
class XPlane:
    """A plane: its lines, and the metadata tables their events refer to."""

    id: int = 0
    name: str = ""
    lines: list[XLine] = field(default_factory=list)
    event_metadata: dict[int, XEventMetadata] = field(default_factory=dict)
    stat_metadata: dict[int, str] = field(default_factory=dict)
    stats: dict[int, Any] = field(default_factory=dict)

    def stat_values(self, stats: dict[int, Any]) -> dict[str, Any]:
        """Stats keyed by their names; ``ref_value`` stats resolved to the text they point at."""
        names = self.stat_metadata
        out = {}
        for mid, value in stats.items():
            if isinstance(value, _Ref):
                value = names.get(int(value), "")
            out[names.get(mid, str(mid))] = value
        return out


@dataclass
class XSpace:
    """A whole ``.xplane.pb`` file."""

    planes: list[XPlane] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    hostnames: list[str] = field(default_factory=list)


class _Ref(int):
    """A ``ref_value`` stat: the id of the stat metadata whose name is the value."""


def _stat(buf: bytes, start: int, end: int) -> tuple[int, Any]:
    """One XStat: (stat metadata id, value); integers are decoded inline (the common case)."""
    mid = 0
    value: Any = None
    pos = start
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag in _STAT_VARINTS:
            v = buf[pos]
            pos += 1
            if v >= 0x80:
                v &= 0x7F
                shift = 7
                while True:
                    b = buf[pos]
                    pos += 1
                    v |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
            if tag == 0x08:
                mid = _signed(v)
            elif tag == 0x20:
                value = _signed(v)
            elif tag == 0x38:
                value = _Ref(v)
            else:
                value = v
        elif tag == 0x11:
            value = _DOUBLE.unpack_from(buf, pos)[0]
            pos += 8
        elif tag in (0x2A, 0x32):
            n, pos = _varint(buf, pos)
            raw = buf[pos : pos + n]
            value = raw.decode("utf-8", "replace") if tag == 0x2A else bytes(raw)
            pos += n
        else:
            pos = _skip(buf, pos - 1, end)
    if pos != end:
        raise _WireError("a stat runs past the end of its event")
    return mid, value


#: One-byte tags of the stat's varint fields: metadata_id, uint64, int64, ref.
_STAT_VARINTS = frozenset({0x08, 0x18, 0x20, 0x38})


def _event(buf: bytes, start: int, end: int, cache: dict[bytes, tuple[int, Any]]) -> XEvent:
    """One XEvent; the common fields are decoded inline (this loop runs once per event).

    Stats repeat (the same HLO category, program, module on thousands of
    events): ``cache`` maps a stat's bytes to its decoded value, which
    costs a slice and a lookup instead of a decode.
    """
    ev = XEvent()
    stats = ev.stats
    pos = start
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag == 0x22:  # stats (field 4, length-delimited)
            n = buf[pos]
            pos += 1
            if n >= 0x80:
                n, pos = _varint(buf, pos - 1)
            raw = buf[pos : pos + n]
            hit = cache.get(raw)
            if hit is None:
                hit = cache[raw] = _stat(buf, pos, pos + n)
            stats[hit[0]] = hit[1]
            pos += n
        elif tag in _EVENT_VARINTS:  # metadata_id, offset_ps, duration_ps, num_occurrences
            v = buf[pos]
            pos += 1
            if v >= 0x80:
                v &= 0x7F
                shift = 7
                while True:
                    b = buf[pos]
                    pos += 1
                    v |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                if v >= 1 << 63:
                    v -= 1 << 64
            setattr(ev, _EVENT_VARINTS[tag], v)
        else:  # a field this reader does not know
            pos = _skip(buf, pos - 1, end)
    if pos != end:
        raise _WireError("an event runs past the end of its line")
    return ev


_EVENT_FIELD_NAMES = {1: "metadata_id", 2: "offset_ps", 3: "duration_ps", 5: "num_occurrences"}
#: One-byte tags (field << 3 | varint) of the event's integer fields.
_EVENT_VARINTS = {num << 3: name for num, name in _EVENT_FIELD_NAMES.items()}


def _skip(buf: bytes, pos: int, end: int) -> int:
    """The position after the field starting at ``pos``."""
    tag, pos = _varint(buf, pos)
    wt = tag & 7
    if wt == 0:
        return _varint(buf, pos)[1]
    if wt == 2:
        n, pos = _varint(buf, pos)
        return pos + n
    if wt == 1:
        return pos + 8
    if wt == 5:
        return pos + 4
    raise _WireError(f"unsupported wire type {wt}")


def _line(buf: bytes, start: int, end: int, cache: dict[bytes, tuple[int, Any]]) -> XLine:
    line = XLine()
    events = line.events
    pos = start
    while pos < end:
        if buf[pos] == 0x22:  # events (field 4): most of the line, read without a field list
            n, p = _varint(buf, pos + 1)
            events.append(_event(buf, p, p + n, cache))
            pos = p + n
            continue
        nxt = _skip(buf, pos, end)
        for num, _wt, v in _fields(buf, pos, nxt):
            if num == 1:
                line.id = _signed(v)
            elif num == 2:
                line.name = _text(buf, v)
            elif num == 3:
                line.timestamp_ns = _signed(v)
            elif num == 9:
                line.duration_ps = _signed(v)
            elif num == 10:
                line.display_id = _signed(v)
            elif num == 11:
                line.display_name = _text(buf, v)
        pos = nxt
    if pos != end:
        raise _WireError("an event runs past the end of its line")
    return line


def _event_metadata(buf: bytes, start: int, end: int) -> XEventMetadata:
    md = XEventMetadata()
    for num, _wt, v in _fields(buf, start, end):
        if num == 1:
            md.id = _signed(v)
        elif num == 2:
            md.name = _text(buf, v)
        elif num == 4:
            md.display_name = _text(buf, v)
        elif num == 5:
            mid, value = _stat(buf, *v)
            md.stats[mid] = value
    return md


def _stat_metadata(buf: bytes, start: int, end: int) -> tuple[int, str]:
    mid, name = 0, ""
    for num, _wt, v in _fields(buf, start, end):
        if num == 1:
            mid = _signed(v)
        elif num == 2:
            name = _text(buf, v)
    return mid, name


def _map_entry(buf: bytes, start: int, end: int) -> tuple[int, tuple[int, int] | None]:
    """A ``map<int64, Message>`` entry: key (field 1) and the value's span (field 2)."""
    key, value = 0, None
    for num, _wt, v in _fields(buf, start, end):
        if num == 1:
            key = _signed(v)
        elif num == 2:
            value = v
    return key, value


def _plane(buf: bytes, start: int, end: int) -> XPlane:
    plane = XPlane()
    cache: dict[bytes, tuple[int, Any]] = {}
    for num, _wt, v in _fields(buf, start, end):
        if num == 3:
            plane.lines.append(_line(buf, *v, cache))
        elif num == 1:
            plane.id = _signed(v)
        elif num == 2:
            plane.name = _text(buf, v)
        elif num == 4:
            key, span = _map_entry(buf, *v)
            md = _event_metadata(buf, *span) if span else XEventMetadata(id=key)
            plane.event_metadata[key] = md
        elif num == 5:
            key, span = _map_entry(buf, *v)
            plane.stat_metadata[key] = _stat_metadata(buf, *span)[1] if span else ""
        elif num == 6:
            mid, value = _stat(buf, *v)
            plane.stats[mid] = value
    return plane


def decode_xspace(data: bytes) -> XSpace:
    """Decode the bytes of an ``XSpace`` message.

    Raises
    ------
    ValueError
        The bytes are not a well-formed protobuf message.
    """
    space = XSpace()
    buf = bytes(data)
    try:
        for num, wt, v in _fields(buf, 0, len(buf)):
            if wt != 2:
                continue
            if num == 1:
                space.planes.append(_plane(buf, *v))
            elif num == 2:
                space.errors.append(_text(buf, v))
            elif num == 3:
                space.warnings.append(_text(buf, v))
            elif num == 4:
                space.hostnames.append(_text(buf, v))
    except (IndexError, struct.error) as exc:
        raise _WireError(f"truncated message ({exc})") from None
    return space


def read_xspace(path: str | Path) -> XSpace:
    """Read an ``.xplane.pb`` file, or raise `TraceError` with a one-line reason."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise TraceError(p, f"cannot be read ({exc.strerror or exc})") from None
    if not data:
        raise TraceError(p, "XPlane file is empty (0 bytes): the device profiler wrote nothing")
    try:
        space = decode_xspace(data)
    except _WireError as exc:
        raise TraceError(p, f"not an XPlane protobuf ({exc})") from None
    if not space.planes:
        raise TraceError(p, "not an XPlane protobuf (no planes in it)")
    return space


# --------------------------------------------------------------------------- #
# planes → Kineto-style events

#: ``/device:TPU:0`` → ("TPU", 0); SparseCore planes add a suffix.
_DEVICE_PLANE = re.compile(r"^/device:(?P<type>[A-Za-z_]+):(?P<index>\d+)")
_HOST_PLANE = "/host:CPU"
#: Device lines that summarise the op line (steps, whole programs, framework
#: ops, name scopes): shown on the device timeline, not counted as busy time
#: twice. Names from tsl/profiler/utils/xplane_schema.cc.
_SUMMARY_LINES = frozenset(
    {
        "Steps",
        "XLA Modules",
        "TensorFlow Ops",
        "Framework Ops",
        "TensorFlow Name Scope",
        "Framework Name Scope",
        "Source code",
        "Launch Stats",
        "Async XLA Ops",
        "XLA TraceMe",
        "Sparse Core Steps",
        "Sparse Core Modules",
        "Host Offload Ops",
    }
)
#: Lines that are counters or bookkeeping, not intervals.
_SKIPPED_LINES = frozenset({"_counters_"})
#: Stats copied into a device event's args (the rest is dropped: hundreds of
#: distinct stat names exist and the tables read none of them).
_KEPT_STATS = (
    "hlo_category",
    "hlo_op",
    "hlo_module",
    "program_id",
    "long_name",
    "tf_op",
    "flops",
    "bytes_accessed",
    "group_id",
    "run_id",
)
#: Stats that carry the id a host launch shares with its device work.
_CORRELATION_STATS = ("correlation_id", "correlation")
#: Device lines get tids above this, so they never meet a host thread id.
_LINE_TID_BASE = 0


@dataclass
class DeviceEvents:
    """What `device_events` found in an XSpace.

    Attributes
    ----------
    events
        Kineto-style event dicts (``ph`` ``X`` and ``M``), ``ts`` in µs
        relative to ``base_ns``.
    devices
        Device planes read, as ``TPU:0`` ...
    properties
        Per device index, a ``deviceProperties``-like entry (``id``, ``name``).
    kernels
        Number of op-line events (``cat: kernel``).
    linked
        Kernels that carry a correlation id.
    host_events
        Host-plane events included (only when asked).
    """

    events: list[dict[str, Any]] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    kernels: int = 0
    linked: int = 0
    host_events: int = 0
    properties: dict[int, dict[str, Any]] = field(default_factory=dict)


def _ts_us(line: XLine, offset_ps: int, base_ns: int) -> float:
    # Integer picoseconds first: epoch nanoseconds do not fit a double exactly.
    return ((line.timestamp_ns - base_ns) * 1000 + offset_ps) / 1e6


#: Line timestamps below this (about eleven days after the epoch) are not
#: epoch times: the file was normalised to its profile's start.
_EPOCH_FLOOR_NS = 10**15


def profile_start_ns(space: XSpace) -> int:
    """Epoch ns that the line timestamps are relative to (0 when they are epoch times already).

    Profilers built on tsl (JAX's, TorchTPU's) may save an XSpace with every
    line's ``timestamp_ns`` made relative to the session's start, which they
    record as the ``profile_start_time`` stat of the ``Task Environment``
    plane.
    """
    stamps = [line.timestamp_ns for plane in space.planes for line in plane.lines if line.events]
    if not stamps or max(stamps) >= _EPOCH_FLOOR_NS:
        return 0
    for plane in space.planes:
        start = plane.stat_values(plane.stats).get("profile_start_time")
        if isinstance(start, int) and start >= _EPOCH_FLOOR_NS:
            return start
    return 0


def _device_plane_events(
    plane: XPlane, device: int, base_ns: int, out: DeviceEvents, tid_offset: int
) -> None:
    label = plane.name.removeprefix("/device:")
    out.devices.append(label)
    # Kineto's deviceProperties shape, so views name the device ("TPU ×2").
    kind = _DEVICE_PLANE.match(plane.name).group("type")  # type: ignore[union-attr]
    named = plane.stat_values(plane.stats).get("device_type_string")
    out.properties.setdefault(device, {"id": device, "name": str(named or kind), "source": plane.name})
    out.events.append({"ph": "M", "name": "process_name", "pid": device, "args": {"name": label}})
    for line in plane.lines:
        if line.name in _SKIPPED_LINES:
            continue
        kind_cat = "xla_annotation" if line.name in _SUMMARY_LINES else "xla_op"
        tid = tid_offset + line.id
        out.events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": device,
                "tid": tid,
                "args": {"name": line.display_name or line.name},
            }
        )
        for ev in line.events:
            if ev.num_occurrences:
                continue  # an aggregate count, not an interval in time
            md = plane.event_metadata.get(ev.metadata_id)
            name = (md.display_name or md.name) if md is not None else f"event {ev.metadata_id}"
            stats = plane.stat_values(md.stats) if md is not None and md.stats else {}
            if ev.stats:
                stats.update(plane.stat_values(ev.stats))
            args: dict[str, Any] = {"device": device, "stream": tid}
            for key in _KEPT_STATS:
                value = stats.get(key)
                if value is not None and not isinstance(value, bytes):
                    args[key] = value
            if kind_cat == "xla_op":
                out.kernels += 1
                corr = next((stats[k] for k in _CORRELATION_STATS if isinstance(stats.get(k), int)), None)
                if corr is not None:
                    args["correlation"] = int(corr)
                    out.linked += 1
            out.events.append(
                {
                    "ph": "X",
                    "cat": kind_cat,
                    "name": name,
                    "pid": device,
                    "tid": tid,
                    "ts": _ts_us(line, ev.offset_ps, base_ns),
                    "dur": ev.duration_ps / 1e6,
                    "args": args,
                }
            )


def _host_plane_events(plane: XPlane, base_ns: int, out: DeviceEvents, pid: int) -> None:
    out.events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": plane.name}})
    for line in plane.lines:
        out.events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": pid,
                "tid": line.id,
                "args": {"name": line.display_name or line.name},
            }
        )
        for ev in line.events:
            if ev.num_occurrences:
                continue
            md = plane.event_metadata.get(ev.metadata_id)
            name = (md.display_name or md.name) if md is not None else f"event {ev.metadata_id}"
            # Python frames (JAX's python tracer writes them as "$file:line fn").
            cat = "python_function" if name.startswith("$") else "cpu_op"
            out.events.append(
                {
                    "ph": "X",
                    "cat": cat,
                    "name": name,
                    "pid": pid,
                    "tid": line.id,
                    "ts": _ts_us(line, ev.offset_ps, base_ns),
                    "dur": ev.duration_ps / 1e6,
                }
            )
            out.host_events += 1


def device_events(space: XSpace, base_ns: int = 0, *, host: bool = False) -> DeviceEvents:
    """The device planes of ``space`` (and its ``/host:CPU`` plane if ``host``) as Kineto events.

    Parameters
    ----------
    space
        A decoded XSpace.
    base_ns
        Epoch nanoseconds that ``ts`` is relative to (a Kineto trace's
        ``baseTimeNanoseconds``; 0 gives epoch microseconds, as older Kineto writes).
    host
        Include the host plane (when there is no Kineto JSON holding the host side).
    """
    out = DeviceEvents()
    # Normalised files: shifting the base the other way puts them on the epoch clock.
    base_ns -= profile_start_ns(space)
    seen: dict[int, int] = {}
    for plane in space.planes:
        m = _DEVICE_PLANE.match(plane.name)
        if m is not None:
            device = int(m.group("index"))
            # Several planes of one device (TensorCore, SparseCores) keep
            # their lines apart.
            k = seen.get(device, 0)
            seen[device] = k + 1
            _device_plane_events(plane, device, base_ns, out, _LINE_TID_BASE + 1000 * k)
        elif host and plane.name == _HOST_PLANE:
            _host_plane_events(plane, base_ns, out, pid=1_000_000 + plane.id)
    return out


# --------------------------------------------------------------------------- #
# one trace: Kineto JSON + device events

_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
#: At most 20 digits (epoch ns need 19): int() of thousands of digits raises.
_BASE_TIME = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d{1,20})\b')


def kineto_base_ns(data: bytes) -> int:
    """``baseTimeNanoseconds`` of a Kineto JSON document (0 when absent: ``ts`` are epoch µs)."""
    # Kineto writes the top-level keys around the events; look at both ends.
    for part in (data[: 1 << 16], data[-(1 << 16) :]):
        m = _BASE_TIME.search(part)
        if m is not None:
            return int(m.group(1))
    return 0


def merge_into_kineto(data: bytes, events: list[dict[str, Any]]) -> bytes:
    """The Kineto JSON ``data`` with ``events`` added to its ``traceEvents``.

    The events are spliced in after the array's opening bracket, so the
    file is not decoded here; a document the pattern does not fit is
    decoded, extended and encoded again.
    """
    if not events:
        return data
    body = orjson.dumps(events)[1:-1]
    m = _EVENTS_KEY.search(data, 0, 1 << 20)
    if m is not None:
        rest = data[m.end() : m.end() + 64].lstrip()
        sep = b"" if rest.startswith(b"]") else b","
        return data[: m.end()] + body + sep + data[m.end() :]
    doc = orjson.loads(data)
    if isinstance(doc, list):
        return orjson.dumps(events + doc)
    doc.setdefault("traceEvents", [])
    doc["traceEvents"] = events + list(doc["traceEvents"])
    return orjson.dumps(doc)


def xspace_document(space: XSpace, name: str = "") -> bytes:
    """A Kineto-shaped JSON document of an XPlane file alone (host plane included)."""
    # Times relative to the session's start, as Kineto's baseTimeNanoseconds
    # does: epoch microseconds in a double are only 0.25 µs apart.
    start = profile_start_ns(space)
    stamps = [line.timestamp_ns for plane in space.planes for line in plane.lines if line.events]
    base = start + min(stamps, default=0)
    found = device_events(space, base, host=True)
    doc = {"traceEvents": found.events, "traceName": name, "baseTimeNanoseconds": base}
    return orjson.dumps(doc)
