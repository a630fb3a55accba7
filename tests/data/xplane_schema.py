"""xplane.proto's messages as protobuf classes, from a descriptor written here by hand.

Used only by the fixture generator (``make_xplane_fixtures.py``), by the
benchmark that compares our wire decoder with protobuf's, and by an oracle
test that runs where the ``protobuf`` package is installed. The fields and
numbers are those of tsl/profiler/protobuf/xplane.proto (package
``tensorflow.profiler``); nothing else of the schema is needed.
"""

from __future__ import annotations

from typing import Any

_T = {
    "int64": 3,
    "uint64": 4,
    "double": 1,
    "string": 9,
    "bytes": 12,
    "message": 11,
}
_OPTIONAL, _REPEATED = 1, 3

#: message → [(name, number, type, label, message type or None, oneof index or None)]
_MESSAGES: dict[str, list[tuple[Any, ...]]] = {
    "XSpace": [
        ("planes", 1, "message", _REPEATED, "XPlane", None),
        ("errors", 2, "string", _REPEATED, None, None),
        ("warnings", 3, "string", _REPEATED, None, None),
        ("hostnames", 4, "string", _REPEATED, None, None),
    ],
    "XPlane": [
        ("id", 1, "int64", _OPTIONAL, None, None),
        ("name", 2, "string", _OPTIONAL, None, None),
        ("lines", 3, "message", _REPEATED, "XLine", None),
        ("event_metadata", 4, "message", _REPEATED, "XPlane.EventMetadataEntry", None),
        ("stat_metadata", 5, "message", _REPEATED, "XPlane.StatMetadataEntry", None),
        ("stats", 6, "message", _REPEATED, "XStat", None),
    ],
    "XLine": [
        ("id", 1, "int64", _OPTIONAL, None, None),
        ("display_id", 10, "int64", _OPTIONAL, None, None),
        ("name", 2, "string", _OPTIONAL, None, None),
        ("display_name", 11, "string", _OPTIONAL, None, None),
        ("timestamp_ns", 3, "int64", _OPTIONAL, None, None),
        ("duration_ps", 9, "int64", _OPTIONAL, None, None),
        ("events", 4, "message", _REPEATED, "XEvent", None),
    ],
    "XEvent": [
        ("metadata_id", 1, "int64", _OPTIONAL, None, None),
        ("offset_ps", 2, "int64", _OPTIONAL, None, 0),
        ("num_occurrences", 5, "int64", _OPTIONAL, None, 0),
        ("duration_ps", 3, "int64", _OPTIONAL, None, None),
        ("stats", 4, "message", _REPEATED, "XStat", None),
    ],
    "XStat": [
        ("metadata_id", 1, "int64", _OPTIONAL, None, None),
        ("double_value", 2, "double", _OPTIONAL, None, 0),
        ("uint64_value", 3, "uint64", _OPTIONAL, None, 0),
        ("int64_value", 4, "int64", _OPTIONAL, None, 0),
        ("str_value", 5, "string", _OPTIONAL, None, 0),
        ("bytes_value", 6, "bytes", _OPTIONAL, None, 0),
        ("ref_value", 7, "uint64", _OPTIONAL, None, 0),
    ],
    "XEventMetadata": [
        ("id", 1, "int64", _OPTIONAL, None, None),
        ("name", 2, "string", _OPTIONAL, None, None),
        ("display_name", 4, "string", _OPTIONAL, None, None),
        ("metadata", 3, "bytes", _OPTIONAL, None, None),
        ("stats", 5, "message", _REPEATED, "XStat", None),
        ("child_id", 6, "int64", _REPEATED, None, None),
    ],
    "XStatMetadata": [
        ("id", 1, "int64", _OPTIONAL, None, None),
        ("name", 2, "string", _OPTIONAL, None, None),
        ("description", 3, "string", _OPTIONAL, None, None),
    ],
}
_ONEOFS = {"XEvent": ["data"], "XStat": ["value"]}
_MAPS = {"EventMetadataEntry": "XEventMetadata", "StatMetadataEntry": "XStatMetadata"}


def _add_fields(msg: Any, fields: list[tuple[Any, ...]]) -> None:
    for name, number, typ, label, type_name, oneof in fields:
        f = msg.field.add(name=name, number=number, type=_T[typ], label=label)
        if type_name:
            f.type_name = ".tensorflow.profiler." + type_name
        if oneof is not None:
            f.oneof_index = oneof


def message_classes() -> dict[str, type]:
    """``{"XSpace": class, ...}`` built with the installed protobuf package."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fd = descriptor_pb2.FileDescriptorProto(
        name="jtp_xplane.proto", package="tensorflow.profiler", syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        msg = fd.message_type.add(name=name)
        for oneof in _ONEOFS.get(name, []):
            msg.oneof_decl.add(name=oneof)
        _add_fields(msg, fields)
        if name == "XPlane":
            for entry, value in _MAPS.items():
                sub = msg.nested_type.add(name=entry)
                sub.options.map_entry = True
                _add_fields(
                    sub,
                    [
                        ("key", 1, "int64", _OPTIONAL, None, None),
                        ("value", 2, "message", _OPTIONAL, value, None),
                    ],
                )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.profiler." + name))
        for name in _MESSAGES
    }
