"""Files and folders → Profiles.

A folder may hold one trace per rank (``rank-0.pt.trace.json.gz`` ...), or
the layout ``tensorboard_trace_handler`` writes
(``<worker>.<timestamp>.pt.trace.json[.gz]``, possibly one level down in
``plugins/profile/<run>/``). Ranks are read from each trace's
``distributedInfo``, not from file names; a trace without one is labelled by
its worker name (the part of the file name before the first dot).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import TraceError

if TYPE_CHECKING:  # pragma: no cover
    from ..profile import Profile
    from ..ranks import RankSet

_SUFFIXES = (".json", ".json.gz")
#: ``tensorboard_trace_handler``: ``{worker}.{time_ns}.pt.trace.json[.gz]``.
_TENSORBOARD = re.compile(r"^(?P<worker>.+?)\.(?P<time>\d{6,})\.pt\.trace\.json(?:\.gz)?$")
#: Files in a run folder that are ours, not traces.
_NOT_TRACES = {"run.json"}


def is_trace_name(path: Path) -> bool:
    """Whether a file name looks like a JSON trace."""
    name = path.name.lower()
    return any(name.endswith(s) for s in _SUFFIXES) and not name.startswith(".") and name not in _NOT_TRACES


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


def find_traces(folder: Path, max_depth: int = 4) -> list[Path]:
    """Trace files under ``folder`` (the shallowest level that has any).

    Within a level, files named like PyTorch's (``*.pt.trace.json[.gz]``)
    are preferred when both kinds are present. Files are sorted by name.
    """
    level = [folder]
    for _ in range(max_depth + 1):
        found = sorted(p for d in level for p in _entries(d) if p.is_file() and is_trace_name(p))
        if found:
            pt = [p for p in found if ".pt.trace." in p.name]
            return pt or found
        level = sorted(p for d in level for p in _entries(d) if p.is_dir() and not p.name.startswith("."))
        if not level:
            break
    return []


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def load(path: str | Path, name: str | None = None) -> Profile | RankSet:
    """Load a trace file, or a folder of traces (see module docs).

    Raises
    ------
    TraceError
        The path does not exist, a file is not a readable trace, or a folder
        holds no (readable) trace. In a folder of several traces, unreadable
        ones are skipped with a warning naming each.
    """
    from ..profile import Profile

    p = Path(path).expanduser()
    if not p.exists():
        raise TraceError(p, "no such file or folder")
    if p.is_file():
        return Profile.from_file(p, name=name)
    if not p.is_dir():
        raise TraceError(p, "is neither a file nor a folder")
    files = find_traces(p)
    if not files:
        raise TraceError(p, "no trace files (*.json or *.json.gz) in this folder")
    if len(files) == 1:
        return Profile.from_file(files[0], name=name)
    from ..ranks import RankSet

    return RankSet.from_files(files, name=name or p.name)
