"""The shape of a Kineto trace event, as msgspec structs.

Decoding straight into these structs (instead of into dicts) is the main reason
the loader is fast: msgspec skips every key we do not name without allocating
it, and an event costs one small object instead of two dicts.

There are two versions of each struct:

* the *typed* ones (`Complete`, `EventArgs` ...) say what Kineto actually
  writes (``ts`` a number, ``correlation`` an integer ...). Every trace
  written by torch.profiler decodes into them, and because every value then has
  one Python type, the parser turns each field into a numpy column with
  ``np.fromiter`` at C speed;
* the *loose* ones (`LooseTraceEvent`, `LooseEventArgs`) accept any JSON value
  in every field. When a piece of a file breaks the typed schema anywhere (a
  string timestamp, a float stream id), that piece is decoded again into
  these and the parser coerces and validates column by column, skipping (and
  counting) only the events that make no sense.

Both are ``gc=False``: events hold no reference cycles, and keeping a million
of them out of the collector's lists makes both decoding and freeing faster.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

#: Stand-in for an absent raw JSON value.
RAW_MISSING = msgspec.Raw(b"")
NAN = float("nan")


class EventArgs(msgspec.Struct, frozen=True, gc=False):
    """The ``args`` of an event: only the keys any analysis reads.

    Missing integers are -1, missing numbers NaN, missing text ``""``.
    Frozen, so that one shared default instance can stand for "no args".
    """

    external_id: int = msgspec.field(default=-1, name="External id")
    correlation: int = -1
    device: int = -1
    # ROCm writes host-side stream handles as strings ("0x0").
    stream: int | str = -1
    bytes: float = NAN
    # Structured values we only group by are kept as raw JSON text: decoding
    # them into nested lists just to re-serialise them would dominate parsing.
    grid: msgspec.Raw = RAW_MISSING
    block: msgspec.Raw = RAW_MISSING
    registers: float = msgspec.field(default=NAN, name="registers per thread")
    shared_memory: float = msgspec.field(default=NAN, name="shared memory")
    occupancy: float = msgspec.field(default=NAN, name="est. achieved occupancy %")
    blocks_per_sm: float = msgspec.field(default=NAN, name="blocks per SM")
    warps_per_sm: float = msgspec.field(default=NAN, name="warps per SM")
    input_dims: msgspec.Raw = msgspec.field(default=RAW_MISSING, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=RAW_MISSING, name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=RAW_MISSING, name="Concrete Inputs")
    call_stack: str = msgspec.field(default="", name="Call stack")
    module_hierarchy: str = msgspec.field(default="", name="Module Hierarchy")
    kernel_file: str = ""
    python_id: int = msgspec.field(default=-1, name="Python id")
    python_parent_id: int = msgspec.field(default=-1, name="Python parent id")
    # An autograd op's node number: a backward node carries its forward op's.
    sequence: int = msgspec.field(default=-1, name="Sequence number")


NO_ARGS = EventArgs()


class MetadataArgs(msgspec.Struct, frozen=True, gc=False):
    """The ``args`` of a metadata (``ph: M``) event."""

    name: Any = None
    labels: Any = None


class MemoryArgs(msgspec.Struct, frozen=True, gc=False):
    """The ``args`` of an instant event (``[memory]`` allocations and frees)."""

    mem_bytes: float = msgspec.field(default=NAN, name="Bytes")
    total_allocated: float = msgspec.field(default=NAN, name="Total Allocated")
    total_reserved: float = msgspec.field(default=NAN, name="Total Reserved")
    device_type: int = msgspec.field(default=-1, name="Device Type")
    device_id: int = msgspec.field(default=-1, name="Device Id")


NO_METADATA_ARGS = MetadataArgs()
NO_MEMORY_ARGS = MemoryArgs()

# The typed events form a union tagged by ``ph``: each phase decodes into a
# struct holding only what is read from it (a flow event has no args to
# allocate, a metadata event no timing), which makes decoding faster.


class Complete(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    """A complete event (``ph: X``): an op, a launch, a kernel ..."""

    name: str | None = None
    cat: str | None = None
    # "Spans" and "" appear as pid/tid of the profiler's own records.
    pid: int | str = -1
    tid: int | str = -1
    ts: float = NAN
    dur: float = 0.0
    args: EventArgs = NO_ARGS


class FlowStart(msgspec.Struct, tag_field="ph", tag="s", gc=False):
    """The start of a flow (``ph: s``), e.g. a launch's side of ``ac2g``."""

    cat: str | None = None
    id: int = -1
    pid: int | str = -1
    tid: int | str = -1
    ts: float = NAN


class FlowEnd(FlowStart, tag="f"):
    """The end of a flow (``ph: f``), e.g. a kernel's side of ``ac2g``."""


class Metadata(msgspec.Struct, tag_field="ph", tag="M", gc=False):
    """A metadata event (process and thread names)."""

    name: str | None = None
    pid: int | str = -1
    tid: int | str = -1
    args: MetadataArgs = NO_METADATA_ARGS


class Instant(msgspec.Struct, tag_field="ph", tag="i", gc=False):
    """An instant event (``ph: i``), e.g. ``[memory]``."""

    name: str | None = None
    pid: int | str = -1
    tid: int | str = -1
    ts: float = NAN
    args: MemoryArgs = NO_MEMORY_ARGS


class GlobalInstant(Instant, tag="I"):
    """An instant event written with the older ``ph: I``."""


class _Ignored(msgspec.Struct, tag_field="ph", gc=False):
    """Phases no analysis reads (begin/end pairs, counters, async ...)."""


_IGNORED = tuple(
    msgspec.defstruct(f"Ignored_{ph}", [], bases=(_Ignored,), tag=ph, gc=False)
    for ph in ("B", "E", "C", "b", "e", "n", "t", "P", "O", "N", "D", "R", "V", "v", "c")
)
_TYPED = (Complete, FlowStart, FlowEnd, Metadata, Instant, GlobalInstant, *_IGNORED)


def _placeholder(ph: str) -> type:
    """A struct that stands for an event of phase ``ph`` and reads nothing of it."""
    return msgspec.defstruct(f"Unread_{ph}", [], bases=(_Ignored,), tag=ph, gc=False)


# Flow events are a quarter of a GPU trace, and correlation ids in the
# events' args give the same launch links; so by default the parser only
# counts them (decoding an empty struct costs a fraction of a `FlowStart`)
# and reads them in a second, flows-only pass when something needs them.
UnreadFlowStart, UnreadFlowEnd = _placeholder("s"), _placeholder("f")
_TYPED_WITHOUT_FLOWS = (Complete, UnreadFlowStart, UnreadFlowEnd, Metadata, Instant, GlobalInstant, *_IGNORED)
_UNREAD_OTHERS = tuple(_placeholder(ph) for ph in ("X", "M", "i", "I"))
_FLOWS_ONLY = (FlowStart, FlowEnd, *_UNREAD_OTHERS, *_IGNORED)

#: The phase each typed event struct stands for ("" for ignored phases).
PHASE_OF_TYPE: dict[type, str] = {t: "" for t in (*_IGNORED, *_UNREAD_OTHERS)}
PHASE_OF_TYPE.update(
    {
        Complete: "X",
        FlowStart: "s",
        FlowEnd: "f",
        UnreadFlowStart: "s",
        UnreadFlowEnd: "f",
        Metadata: "M",
        Instant: "i",
        GlobalInstant: "i",
    }
)


class LooseEventArgs(msgspec.Struct, frozen=True, gc=False):
    """The args of any event, accepting any JSON value in every field (None when absent)."""

    external_id: Any = msgspec.field(default=None, name="External id")
    correlation: Any = None
    device: Any = None
    stream: Any = None
    bytes: Any = None
    grid: msgspec.Raw = RAW_MISSING
    block: msgspec.Raw = RAW_MISSING
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    occupancy: Any = msgspec.field(default=None, name="est. achieved occupancy %")
    blocks_per_sm: Any = msgspec.field(default=None, name="blocks per SM")
    warps_per_sm: Any = msgspec.field(default=None, name="warps per SM")
    input_dims: msgspec.Raw = msgspec.field(default=RAW_MISSING, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=RAW_MISSING, name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=RAW_MISSING, name="Concrete Inputs")
    call_stack: Any = msgspec.field(default=None, name="Call stack")
    module_hierarchy: Any = msgspec.field(default=None, name="Module Hierarchy")
    kernel_file: Any = None
    python_id: Any = msgspec.field(default=None, name="Python id")
    python_parent_id: Any = msgspec.field(default=None, name="Python parent id")
    sequence: Any = msgspec.field(default=None, name="Sequence number")
    name: Any = None
    labels: Any = None
    mem_bytes: Any = msgspec.field(default=None, name="Bytes")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")


NO_LOOSE_ARGS = LooseEventArgs()


class LooseTraceEvent(msgspec.Struct, gc=False):
    """Any event, accepting any JSON value in every field."""

    ph: Any = None
    name: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: LooseEventArgs | None = NO_LOOSE_ARGS


class TraceDocument(msgspec.Struct, gc=False):
    """The top level of a trace file.

    ``traceEvents`` is kept as raw JSON (a view into the file's bytes) so
    that the parser can decode and digest it in chunks; the other keys are
    the ones anything reads.
    """

    traceEvents: msgspec.Raw = RAW_MISSING
    deviceProperties: Any = None
    distributedInfo: Any = None
    schemaVersion: Any = None
    traceName: Any = None
    displayTimeUnit: Any = None
    baseTimeNanoseconds: Any = None
    record_shapes: Any = None
    profile_memory: Any = None
    with_stack: Any = None
    with_flops: Any = None
    with_modules: Any = None
    cupti_version: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    hip_runtime_version: Any = None
    host_name: Any = None


#: Decoder for the top level of a trace file.
DOCUMENT_DECODER = msgspec.json.Decoder(TraceDocument)
#: Decoder for a whole document kept raw (a bare event array).
RAW_DECODER = msgspec.json.Decoder(msgspec.Raw)
#: Decoder for an event array split into raw items.
RAW_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
#: Fast decoder for a well-formed ``traceEvents`` array.
EVENTS_DECODER = msgspec.json.Decoder(list[Union[_TYPED]])  # noqa: UP007 - a tuple of types
#: The same, with flow events counted but not read.
EVENTS_DECODER_WITHOUT_FLOWS = msgspec.json.Decoder(list[Union[_TYPED_WITHOUT_FLOWS]])  # noqa: UP007
#: Decoder that reads flow events only.
FLOWS_DECODER = msgspec.json.Decoder(list[Union[_FLOWS_ONLY]])  # noqa: UP007
#: Decoder for an array whose events break the typed schema somewhere.
LOOSE_EVENTS_DECODER = msgspec.json.Decoder(list[LooseTraceEvent])
#: Decoder for one event of any shape.
LOOSE_EVENT_DECODER = msgspec.json.Decoder(LooseTraceEvent)
