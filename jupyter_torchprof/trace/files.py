"""Trace files and folders: find them, and parse one with the device traces beside it.

A folder may hold one trace per rank (``rank-0.pt.trace.json.gz`` ...), or
the layout ``tensorboard_trace_handler`` writes
(``<worker>.<timestamp>.pt.trace.json[.gz]``, possibly one level down in
``plugins/profile/<run>/``). Ranks are read from each trace's
``distributedInfo``, not from file names; a trace without one is labelled by
its worker name (the part of the file name before the first dot).

Device traces that backends write beside the Kineto JSON are found and read
with it (`parse_with_device`): TorchTPU's XPlane files
(``plugins/profile/<ts>/<host>[_<rank>].xplane.pb``, in the trace's folder
or in a run folder's ``device/``) become device events of the same trace; TorchNeuron's
Neuron Explorer files are checked for a failed capture. A folder holding
only XPlane files (the legacy TorchTPU API, JAX) loads from them alone.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TraceError

if TYPE_CHECKING:  # pragma: no cover
    from .parser import TraceData

_SUFFIXES = (".json", ".json.gz")
#: ``tensorboard_trace_handler``: ``{worker}.{time_ns}.pt.trace.json[.gz]``.
_TENSORBOARD = re.compile(r"^(?P<worker>.+?)\.(?P<time>\d{6,})\.pt\.trace\.json(?:\.gz)?$")


def is_trace_name(path: Path, skip: Collection[str] = ()) -> bool:
    """Whether a file name looks like a JSON trace (``skip``: names that look like one and are not)."""
    name = path.name.lower()
    return any(name.endswith(s) for s in _SUFFIXES) and not name.startswith(".") and name not in skip


def worker_of(path: Path) -> str:
    """The worker name of a trace file (``host_1234`` in ``host_1234.1700000000.pt.trace.json``)."""
    m = _TENSORBOARD.match(path.name)
    if m:
        return m.group("worker")
    name = path.name
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name.removesuffix(".pt.trace")


def find_traces(folder: Path, max_depth: int = 4, skip: Collection[str] = ()) -> list[Path]:
    """Trace files under ``folder`` (the shallowest level that has any).

    Within a level, files named like PyTorch's (``*.pt.trace.json[.gz]``)
    are preferred when both kinds are present. Files are sorted by name.
    ``skip``: file names that are not traces (the run store's record,
    which the layer that owns the store names).
    """
    level = [folder]
    for _ in range(max_depth + 1):
        found = sorted(p for d in level for p in _entries(d) if p.is_file() and is_trace_name(p, skip))
        if found:
            pt = [p for p in found if ".pt.trace." in p.name]
            return pt or found
        level = sorted(p for d in level for p in _entries(d) if p.is_dir() and not p.name.startswith("."))
        if not level:
            break
    return []


#: Where XPlane files sit relative to the Kineto trace: beside it, in the
#: TensorBoard layout below it, or in a run folder's ``device/`` (where the
#: TorchTPU backend has the profiler write them). Not below any other
#: subfolder: a trace saved in a shared folder (``/tmp``, ``~/Downloads``)
#: would take in the device events of some unrelated JAX or TPU run there.
_XPLANE_GLOBS = ("*.xplane.pb", "plugins/profile/*/*.xplane.pb", "device/plugins/profile/*/*.xplane.pb")
XPLANE_SUFFIX = ".xplane.pb"


def xplane_files(folder: Path) -> list[Path]:
    """Every XPlane file where `_XPLANE_GLOBS` look, sorted by path."""
    found: set[Path] = set()
    for pattern in _XPLANE_GLOBS:
        try:
            found.update(p for p in folder.glob(pattern) if p.is_file())
        except OSError:
            continue
    return sorted(found)


def xplanes_for(trace: Path, rank: int | None = None) -> list[Path]:
    """The XPlane files that belong with the Kineto trace ``trace``.

    Those of the newest session folder (``plugins/profile/<timestamp>``
    names sort by time); of several hosts' files there, the one named for
    ``rank`` (``<host>_<rank>.xplane.pb``) when there is one.
    """
    files = [p for p in xplane_files(trace.parent) if not _is_xprof_sibling(p, trace)]
    if not files:
        return []
    newest = max(p.parent for p in files)
    files = [p for p in files if p.parent == newest]
    if len(files) > 1 and rank is not None:
        mine = [p for p in files if p.name.removesuffix(XPLANE_SUFFIX).endswith(f"_{rank}")]
        files = mine or files
    return files


def device_files(trace: Path, rank: int | None = None) -> list[Path]:
    """The device-trace files kept with a trace: its XPlane files and Neuron Explorer's files."""
    from .neuron import neuron_files

    return sorted(set(xplanes_for(trace, rank)) | set(neuron_files(trace.parent)))


def _is_xprof_sibling(xplane: Path, trace: Path) -> bool:
    """Whether ``trace`` is the Chrome-trace copy xprof wrote of ``xplane`` (``<host>.trace.json.gz``)."""
    return trace.parent == xplane.parent and trace.name.startswith(
        xplane.name.removesuffix(XPLANE_SUFFIX) + "."
    )


def parse_with_device(path: str | Path) -> TraceData:
    """Parse a Kineto trace together with the device traces written beside it.

    XPlane device planes become events of the trace (on its clock); a
    device trace that is missing, empty or unreadable, and host launches
    of a backend with no device events at all, each add one line to
    ``meta.warnings`` (shown with the profile) instead of silent zeros.
    """
    from . import neuron
    from .parser import parse_streaming, too_big_to_hold

    p = Path(path)
    if too_big_to_hold(p) and not xplane_files(p.parent):
        # No device file to splice in, and too big to hold: parsed as it inflates.
        td, extra, found, notes = parse_streaming(p), [], [], []
    else:
        td, extra, found, notes = _parse_with_xplanes(p)
    marked = neuron.mark_device_work(td.events)
    nfiles = neuron.neuron_files(p.parent)
    found.extend(f.name for f in nfiles)
    problem = neuron.check_folder(p.parent, nfiles)
    if problem:
        notes.append(problem)
    if not marked and not extra:
        notes.extend(_launches_without_device_work(td))
    if found:
        td.meta.top_level["device_files"] = ", ".join(sorted(set(found)))
    td.meta.warnings.extend(notes)
    return td


def _parse_with_xplanes(p: Path) -> tuple[TraceData, list[Any], list[str], list[str]]:
    """The trace read whole, with the XPlane device events written beside it spliced in.

    Returns the parsed trace, the XPlane events kept, the device files found
    and the notes to show.
    """
    from .parser import parse_bytes
    from .reader import read_trace_bytes

    data = read_trace_bytes(p)
    notes: list[str] = []
    found: list[str] = []
    extra, props = _xplane_events(p, data, found, notes)
    # Flows are re-read from the file on demand: that still works, as the
    # device events spliced in here carry none.
    td = parse_bytes(_merged(data, extra) if extra else data, p)
    if extra and _device_work_twice(td):
        # A backend whose Kineto JSON already holds its device work (a later
        # TorchTPU may fill it in): counting the XPlane's copy too would
        # double every device number.
        td = parse_bytes(data, p)
        notes.append(
            "the Kineto trace already holds this run's device work: the XPlane's copy of it "
            f"({', '.join(found)}) was not added"
        )
        extra = []
    if extra and not _overlaps_host(td):
        # A TensorBoard log folder gathers the sessions of many runs: the
        # newest one need not be this trace's, and its kernels would count
        # in this trace's steps.
        td = parse_bytes(data, p)
        notes.append(
            f"{', '.join(found)}: its device events do not overlap this trace in time (another run's?):"
            " not added"
        )
        extra = []
    if extra:
        dropped = _drop_before_host(td)
        if dropped:
            notes.append(
                f"{dropped} XPlane device event(s) ended before the Kineto trace's first event (the "
                "profiler's warm-up step, whose host side Kineto discards): left out"
            )
    if extra and props and not td.meta.device_properties:
        td.meta.device_properties = [props.get(i, {"id": i}) for i in range(max(props) + 1)]
    return td, extra, found, notes


def _xplane_events(p: Path, data: bytes, found: list[str], notes: list[str]) -> tuple[list[Any], dict]:
    """The device events (and device properties) of the XPlane files beside trace ``p``.

    The files read are added to ``found``, those unread to ``notes``. The
    XPlane reader is imported only when there is a file to read: most traces
    have none, and its import would be a first-load cost of every trace.
    """
    extra: list[Any] = []
    props: dict[int, dict] = {}
    planes = xplanes_for(p, _rank_hint(data))
    if not planes:
        return extra, props
    from . import xplane

    for xp in planes:
        found.append(xp.name)
        try:
            space = xplane.read_xspace(xp)
        except TraceError as exc:
            notes.append(f"TPU/XLA device trace not read: {exc}")
            continue
        dev = xplane.device_events(space, xplane.kineto_base_ns(data))
        if not dev.devices:
            notes.append(f"{xp.name}: XPlane file has no device planes (/device:TPU:N ...): host side only")
        extra.extend(dev.events)
        for k, v in dev.properties.items():
            props.setdefault(k, v)
    return extra, props


def _merged(data: bytes, extra: list[Any]) -> bytes:
    """The Kineto JSON ``data`` with the XPlane device events ``extra`` spliced in."""
    from . import xplane

    return xplane.merge_into_kineto(data, extra)


def _xplane_spans(td: TraceData) -> tuple[Any, Any, Any] | None:
    """(which events came from the XPlane, their starts, their ends), or None unless both kinds are there."""
    import numpy as np

    events = td.events
    from_xplane = np.isin(events["cat"].astype(str).to_numpy(), XPLANE_CATEGORIES)
    if not from_xplane.any() or from_xplane.all():
        return None
    ts = events["ts"].to_numpy()
    return from_xplane, ts, ts + events["dur"].to_numpy()


def _overlaps_host(td: TraceData) -> bool:
    """Whether any XPlane device event of ``td`` overlaps the span of its Kineto (host) events."""
    spans = _xplane_spans(td)
    if spans is None:
        return True
    from_xplane, ts, end = spans
    host_start, host_end = float(ts[~from_xplane].min()), float(end[~from_xplane].max())
    return bool((from_xplane & (ts <= host_end) & (end >= host_start)).any())


def _drop_before_host(td: TraceData) -> int:
    """Drop XPlane events that ended before the first Kineto event; returns how many.

    torch.profiler's schedule runs one warm-up step whose events Kineto
    discards; a device tracer writing its own file may keep that step's
    device work, which would then count in every table as an extra step.
    Times are re-based so the first kept event is at 0 again.
    """
    spans = _xplane_spans(td)
    if spans is None:
        return 0
    from_xplane, ts, end = spans
    first_host = float(ts[~from_xplane].min())
    drop = from_xplane & (end < first_host)
    if not drop.any():
        return 0
    kept = td.events.loc[~drop].reset_index(drop=True)
    shift = float(kept["ts"].min())
    kept["ts"] = kept["ts"] - shift
    td.events = kept
    td.memory = td.memory.assign(ts=td.memory["ts"] - shift)
    td.flows = td.flows.assign(ts=td.flows["ts"] - shift)
    td.meta.t0_us += shift
    td.meta.span_us = float((kept["ts"] + kept["dur"]).max())
    return int(drop.sum())


#: Categories of the events `xplane.device_events` makes.
XPLANE_CATEGORIES = ("xla_op", "xla_annotation")


def _device_work_twice(td: TraceData) -> bool:
    """Whether device activity came both from the XPlane (``xla_op``) and from Kineto itself."""
    from . import categories as K

    events = td.events
    cats = events.loc[K.kind_mask(events, K.DEVICE_ACTIVITY), "cat"].astype(str)
    return bool((cats == "xla_op").any() and (cats != "xla_op").any())


def _rank_hint(data: bytes) -> int | None:
    # At most 9 digits: int() of thousands of them raises (a hostile file, not a rank).
    m = re.search(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d{1,9})\b', data[: 1 << 16])
    if m is None:
        m = re.search(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d{1,9})\b', data[-(1 << 16) :])
    return int(m.group(1)) if m else None


def _launches_without_device_work(td: TraceData) -> list[str]:
    """One line per backend whose host launches are in the trace but whose device work is not."""
    from . import categories as K

    events = td.events
    if not len(events) or K.kind_mask(events, K.DEVICE_ACTIVITY).any():
        return []
    runtime = events.loc[K.kind_mask(events, K.RUNTIME), "cat"].astype(str)
    out = []
    for cat, n in runtime.value_counts().items():
        backend = K.backend_of_category(cat)
        if backend in (None, "cuda"):
            continue  # CUDA traces without kernels are explained by the findings already
        out.append(
            f"{backend}: {n} host call(s) ({cat}) but no device events in this trace: the device "
            "trace is missing (TorchTPU writes it to an .xplane.pb beside the trace, TorchNeuron "
            "as nc_exec_running events); device columns are not measured"
        )
    return out


def parse_xplane(path: str | Path) -> TraceData:
    """An XPlane file alone (host and device planes) as a trace."""
    from . import xplane
    from .parser import parse_bytes

    p = Path(path)
    space = xplane.read_xspace(p)
    td = parse_bytes(xplane.xspace_document(space, p.name), None, defer_flows=False)
    td.meta.path = str(p)
    if not any(xplane._DEVICE_PLANE.match(pl.name) for pl in space.planes):
        td.meta.warnings.append(
            f"{p.name}: XPlane file has no device planes (/device:TPU:N ...): host side only"
        )
    return td


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def folder_traces(folder: Path, skip: Collection[str] = ()) -> tuple[list[Path], list[Path]]:
    """The Kineto traces in ``folder`` (see `find_traces`, with ``skip``) and its XPlane files.

    Beside each XPlane file xprof may have written its own Chrome-trace
    copy; that is not a Kineto trace of the run, the XPlane is, so it is
    left out of the traces.
    """
    files = find_traces(folder, skip=skip)
    planes = xplane_files(folder)
    return [f for f in files if not any(_is_xprof_sibling(x, f) for x in planes)], planes


def parse_trace(path: str | Path) -> TraceData:
    """Read, decode and parse one trace file, with the device traces written beside it.

    The same as `parse_with_device`; the name callers reach for.
    """
    return parse_with_device(path)
