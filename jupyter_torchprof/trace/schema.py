"""The shape of a Kineto trace event, as msgspec structs.

Decoding straight into these structs (instead of into dicts) is the main reason
the loader is fast: msgspec skips every key we do not name without allocating
it, and an event costs one small object instead of two dicts. Every field is
typed loosely (``Any``) so that odd but harmless values never reject a file;
the parser coerces and validates column by column afterwards.
"""

from __future__ import annotations

from typing import Any

import msgspec

#: Stand-in for an absent raw JSON value.
RAW_MISSING = msgspec.Raw(b"")


class EventArgs(msgspec.Struct, omit_defaults=True):
    """The ``args`` of an event: only the keys any analysis reads."""

    external_id: Any = msgspec.field(default=None, name="External id")
    correlation: Any = None
    device: Any = None
    stream: Any = None
    bytes: Any = None
    # Structured values we only group by are kept as raw JSON text: decoding
    # them into nested lists just to re-serialise them would dominate parsing.
    grid: msgspec.Raw = RAW_MISSING
    block: msgspec.Raw = RAW_MISSING
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    occupancy: Any = msgspec.field(default=None, name="est. achieved occupancy %")
    input_dims: msgspec.Raw = msgspec.field(default=RAW_MISSING, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=RAW_MISSING, name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=RAW_MISSING, name="Concrete Inputs")
    call_stack: Any = msgspec.field(default=None, name="Call stack")
    module_hierarchy: Any = msgspec.field(default=None, name="Module Hierarchy")
    kernel_file: Any = None
    python_id: Any = msgspec.field(default=None, name="Python id")
    python_parent_id: Any = msgspec.field(default=None, name="Python parent id")
    # metadata (ph "M") events
    name: Any = None
    labels: Any = None
    # [memory] instant events
    mem_bytes: Any = msgspec.field(default=None, name="Bytes")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")


NO_ARGS = EventArgs()


class TraceEvent(msgspec.Struct):
    """One entry of ``traceEvents``."""

    ph: Any = None
    name: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: EventArgs | None = None


#: Strict, fast decoder for a well-formed ``traceEvents`` array.
EVENTS_DECODER = msgspec.json.Decoder(list[TraceEvent])
#: Top level of the file, each value kept as raw bytes until asked for.
TOP_LEVEL_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])
