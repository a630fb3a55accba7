"""Files and folders → Profiles.

A folder may hold one trace per rank (``rank-0.pt.trace.json.gz`` ...), or
the layout ``tensorboard_trace_handler`` writes
(``<worker>.<timestamp>.pt.trace.json[.gz]``, possibly one level down in
``plugins/profile/<run>/``). Ranks are read from each trace's
``distributedInfo``, not from file names.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import TraceError

if TYPE_CHECKING:  # pragma: no cover
    from ..profile import Profile
    from ..ranks import RankSet

_SUFFIXES = (".json", ".json.gz")


def is_trace_name(path: Path) -> bool:
    """Whether a file name looks like a JSON trace."""
    name = path.name.lower()
    return any(name.endswith(s) for s in _SUFFIXES) and not name.startswith(".") and name != "run.json"


def find_traces(folder: Path, max_depth: int = 4) -> list[Path]:
    """Trace files under ``folder`` (the shallowest level that has any)."""
    level = [folder]
    for _ in range(max_depth + 1):
        found = sorted(p for d in level for p in d.iterdir() if p.is_file() and is_trace_name(p))
        if found:
            # Prefer PyTorch's own naming when both kinds are present.
            pt = [p for p in found if ".pt.trace." in p.name]
            return pt or found
        level = sorted(p for d in level for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))
        if not level:
            break
    return []


def load(path: str | Path, name: str | None = None) -> Profile | RankSet:
    """Load a trace file, or a folder of traces (see module docs)."""
    from ..profile import Profile

    p = Path(path).expanduser()
    if not p.exists():
        raise TraceError(p, "no such file or folder")
    if p.is_file():
        return Profile.from_file(p, name=name)
    files = find_traces(p)
    if not files:
        raise TraceError(p, "no trace files (*.json or *.json.gz) in this folder")
    if len(files) == 1:
        return Profile.from_file(files[0], name=name)
    from ..ranks import RankSet

    return RankSet.from_files(files, name=name or p.name)
