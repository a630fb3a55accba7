"""A small XSpace encoder for tests that need an XPlane file made on the spot.

It writes the xplane.proto wire format directly (varints and length-delimited
fields), so the tests need no protobuf package; where protobuf is installed,
tests/test_xplane.py checks that protobuf reads these bytes as we meant them.
Strings are stats' ``str_value``, integers ``int64_value``, floats
``double_value``.
"""

from __future__ import annotations

import struct
from typing import Any


def _varint(v: int) -> bytes:
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num: int, value: int | bytes | str | float) -> bytes:
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, bytes):
        return _varint(num << 3 | 2) + _varint(len(value)) + value
    if isinstance(value, float):
        return _varint(num << 3 | 1) + struct.pack("<d", value)
    return _varint(num << 3) + _varint(value)


def encode_xspace(planes: list[dict[str, Any]], hostnames: tuple[str, ...] = ()) -> bytes:
    """XSpace bytes of ``planes``.

    Each plane is ``{"id", "name", "lines": [{"id", "name", "timestamp_ns",
    "events": [(name, offset_ps, duration_ps, {stat name: value})]}]}``;
    event and stat metadata ids are handed out per plane.
    """
    out = b""
    for plane in planes:
        ev_ids: dict[str, int] = {}
        st_ids: dict[str, int] = {}
        lines = b""
        for line in plane["lines"]:
            body = _field(1, line["id"]) + _field(2, line["name"]) + _field(3, line["timestamp_ns"])
            for name, offset_ps, duration_ps, stats in line["events"]:
                mid = ev_ids.setdefault(name, len(ev_ids) + 1)
                ev = _field(1, mid) + _field(2, offset_ps) + _field(3, duration_ps)
                for key, value in stats.items():
                    sid = st_ids.setdefault(key, len(st_ids) + 1)
                    kind = 5 if isinstance(value, str) else 2 if isinstance(value, float) else 4
                    ev += _field(4, _field(1, sid) + _field(kind, value))
                body += _field(4, ev)
            lines += _field(3, body)
        meta = b"".join(
            _field(4, _field(1, i) + _field(2, _field(1, i) + _field(2, name))) for name, i in ev_ids.items()
        )
        meta += b"".join(
            _field(5, _field(1, i) + _field(2, _field(1, i) + _field(2, name))) for name, i in st_ids.items()
        )
        out += _field(1, _field(1, plane.get("id", 0)) + _field(2, plane["name"]) + lines + meta)
    return out + b"".join(_field(4, h) for h in hostnames)
