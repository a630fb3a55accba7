"""The run store: one folder per run, holding its trace and a small ``run.json``.

Layout::

    <root>/<run id>/trace.json.gz   the Kineto trace, as captured
    <root>/<run id>/run.json        name, cell, device, headline numbers, top ops

Every write is atomic (temporary file + ``os.replace``), so a kernel killed in
the middle of a run leaves either a complete ``run.json`` or none; a folder
whose ``run.json`` is missing or unreadable is listed as damaged.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import secrets
import shutil
import threading
import time
import zlib
from pathlib import Path
from typing import Any

RUN_FILE = "run.json"
TRACE_NAME = "trace.json.gz"
SCHEMA = 1

_pending_compressions: list[threading.Thread] = []


def default_root() -> Path:
    """``$TORCHPROF_RUN_DIR`` or ``./.torchprof/runs``."""
    return Path(os.environ.get("TORCHPROF_RUN_DIR", ".torchprof/runs"))


def new_run_id(now: float | None = None) -> str:
    """Sortable, unique, filesystem-safe id: ``20261130-142501-3fa9c1``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now or time.time()))
    return f"{stamp}-{secrets.token_hex(3)}"


def _json_safe(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _json_safe(value.item())
    return value


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` so readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    payload = json.dumps(_json_safe(data), indent=1, ensure_ascii=False, allow_nan=False)
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def compress_trace(src: Path, dest: Path, level: int = 1, remove_source: bool = True) -> None:
    """Gzip ``src`` into ``dest`` atomically.

    Level 1: traces are large and compress about tenfold even at the fastest level.
    """
    tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.tmp")
    with open(src, "rb") as fin, gzip.GzipFile(tmp, "wb", compresslevel=level, mtime=0) as fout:
        shutil.copyfileobj(fin, fout, 16 * 1024 * 1024)
    os.replace(tmp, dest)
    if remove_source:
        try:
            src.unlink()
        except FileNotFoundError:
            pass


def compress_in_background(src: Path, dest: Path) -> threading.Thread:
    """Start `compress_trace` on a thread (results are shown before it ends)."""

    def work() -> None:
        try:
            compress_trace(src, dest)
        except (OSError, zlib.error):
            pass  # the uncompressed trace stays; trace_file() finds it

    thread = threading.Thread(target=work, name="torchprof-gzip", daemon=False)
    thread.start()
    _pending_compressions.append(thread)
    return thread


def wait_for_compression(timeout: float | None = None) -> None:
    """Block until background compressions have finished."""
    while _pending_compressions:
        _pending_compressions.pop().join(timeout)


def trace_file(run_dir: Path) -> Path | None:
    """The run's trace: the gzip once written, else the raw JSON still being packed."""
    for name in (TRACE_NAME, "trace.json"):
        p = run_dir / name
        if p.exists():
            return p
    loaded = sorted(run_dir.glob("*.json.gz")) + sorted(run_dir.glob("*.json"))
    loaded = [p for p in loaded if p.name != RUN_FILE]
    return loaded[0] if loaded else None


class RunStore:
    """Runs kept under one root folder.

    Parameters
    ----------
    root
        The folder (created on first write).
    """

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()

    def create(self, run_id: str | None = None) -> Path:
        """Make a new empty run folder and return it."""
        self.root.mkdir(parents=True, exist_ok=True)
        run_dir = self.root / (run_id or new_run_id())
        run_dir.mkdir()
        return run_dir

    def write_info(self, run_dir: Path, info: dict[str, Any]) -> None:
        """Write ``run.json`` for a run (atomically)."""
        data = {"schema": SCHEMA, "id": run_dir.name, **info}
        write_json_atomic(run_dir / RUN_FILE, data)

    def read_info(self, run_id: str) -> dict[str, Any]:
        """``run.json`` of one run, with ``damaged`` set when it cannot be read."""
        run_dir = self.root / run_id
        try:
            with open(run_dir / RUN_FILE, encoding="utf-8") as fh:
                data = json.load(fh)
            if not isinstance(data, dict):
                raise ValueError("run.json is not an object")
        except (OSError, ValueError) as exc:
            return {
                "id": run_id,
                "damaged": True,
                "problem": f"run.json unreadable ({exc.__class__.__name__})",
            }
        data["id"] = run_id
        data.setdefault("damaged", False)
        return data

    def list(self) -> list[dict[str, Any]]:
        """Every run, newest first; damaged runs are included and flagged."""
        if not self.root.is_dir():
            return []
        runs = [
            self.read_info(p.name) for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")
        ]
        return sorted(runs, key=lambda r: (r.get("created") or 0, r["id"]), reverse=True)

    def run_dir(self, run_id: str) -> Path:
        """Folder of a run (no check that it exists)."""
        return self.root / run_id

    def delete(self, run_id: str) -> None:
        """Remove a run folder and everything in it."""
        shutil.rmtree(self.root / run_id)

    def size_bytes(self) -> int:
        """Disk space used by all runs."""
        if not self.root.is_dir():
            return 0
        return sum(f.stat().st_size for f in self.root.rglob("*") if f.is_file())

    def enforce_cap(self, max_bytes: int, keep: set[str] | None = None) -> list[str]:
        """Delete the oldest runs until the store fits in ``max_bytes``.

        Runs in ``keep`` (e.g. the one just written) are never removed.
        Returns the ids that were deleted.
        """
        if max_bytes <= 0:
            return []
        keep = keep or set()
        runs = sorted(self.list(), key=lambda r: (r.get("created") or 0, r["id"]))
        sizes = {
            r["id"]: sum(f.stat().st_size for f in (self.root / r["id"]).rglob("*") if f.is_file())
            for r in runs
        }
        total = sum(sizes.values())
        removed = []
        for r in runs:
            if total <= max_bytes:
                break
            if r["id"] in keep:
                continue
            self.delete(r["id"])
            total -= sizes[r["id"]]
            removed.append(r["id"])
        return removed
