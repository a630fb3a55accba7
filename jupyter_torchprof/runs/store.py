"""The run store: one folder per run, holding its trace and a small ``run.json``.

Layout::

    <root>/<run id>/trace.json.gz   the Kineto trace, as captured
    <root>/<run id>/run.json        name, cell, device, headline numbers, top ops

Every write is atomic (temporary file + ``os.replace``), so a kernel killed in
the middle of a run leaves either a complete ``run.json`` or the placeholder
written when the run started; a folder whose ``run.json`` is missing or
unreadable, or whose placeholder belongs to a process that is gone, is listed
as damaged (never hidden, never fatal to the listing).

Run ids follow `RUN_ID_RE`; the server extension refuses anything else, so an
id can never name a path outside the store.
"""

from __future__ import annotations

import errno
import gzip
import json
import math
import os
import re
import secrets
import shutil
import socket
import stat
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import columns
from ..errors import disk_error
from ..safe_files import UnfitFile, read_small_file
from .paths import RAW_TRACE_NAME, RUN_FILE, TRACE_NAME, store_folder

SCHEMA = 1

#: What a run id looks like: ``20261130-142501-3fa9c1``, optionally with a short
#: lowercase suffix (``-eager``). No dots, no separators: an id is always one
#: plain folder name inside the store.
RUN_ID_RE = re.compile(r"[0-9]{8}-[0-9]{6}-[0-9a-f]{6}(?:-[a-z0-9]{1,16})?")

#: A run.json is a few kilobytes (the cell's source is the biggest part);
#: anything far larger is not one of ours and is not read.
MAX_INFO_BYTES = 4 << 20
#: Fields the sidebar reads from run.json, and the JSON types each may have;
#: a run.json that breaks this is listed as damaged (the sidebar would fail on it).
_INFO_TYPES: dict[str, tuple[type, ...]] = {
    "created": (int, float),
    "name": (str,),
    "kind": (str,),
    "device": (str,),
    "status": (str,),
    "notebook": (str,),
    "cell": (str,),
    "source": (str,),
    "role": (str,),
    "pair": (str,),
    "error": (str,),
    "host": (str,),
    "pid": (int,),
    "steps": (int, float),
    "events": (int, float),
    "ranks": (int, float),
    "top_ops": (list,),
    "notes": (list,),
}
#: Largest process id any system hands out (Linux: 2**22); a bigger one is not a pid.
_MAX_PID = 2**31 - 1
#: The temporary file `write_json_atomic` writes a run.json through.
_INFO_TMP_RE = re.compile(r"\.run\.json\.[0-9a-f]{8}\.tmp")
#: A run folder holding nothing but such a file is a `RunStore.create` still
#: writing its placeholder, or one that died doing so (a kernel killed in the
#: fsync). Never listed; once untouched this long, it is removed: no create
#: takes minutes to write 200 bytes.
ABANDONED_CREATE_S = 300.0
#: The problem of a run folder without run.json.
MISSING_INFO = "run.json is missing"

#: How many times `RunStore.delete` removes a folder that a writer was adding to meanwhile.
DELETE_TRIES = 5

_pending_compressions: list[threading.Thread] = []


def new_run_id(now: float | None = None) -> str:
    """Sortable, unique, filesystem-safe id: ``20261130-142501-3fa9c1``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now or time.time()))
    return f"{stamp}-{secrets.token_hex(3)}"


def is_run_id(text: object) -> bool:
    """Whether ``text`` is a well-formed run id (see `RUN_ID_RE`)."""
    return isinstance(text, str) and RUN_ID_RE.fullmatch(text) is not None


def _process_alive(pid: object, host: object) -> bool:
    """Whether the process that started a run may still be writing it.

    On another host (a shared file system) we cannot tell, so we assume yes.
    """
    if host != socket.gethostname():
        return True
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid <= _MAX_PID:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:  # exists, owned by someone else
        return True
    except (OSError, OverflowError, ValueError):  # no such process, or not a pid here
        return False
    return True


def _discard(tmp: Path) -> None:
    # A half-written temporary file would keep eating the space that ran out.
    try:
        tmp.unlink()
    except OSError:
        pass


def _unfinished_create(run_dir: Path) -> float | None:
    """Seconds since a folder holding only run.json temporary files was last written; None otherwise."""
    try:
        entries = list(os.scandir(run_dir))
        if not entries or not all(
            _INFO_TMP_RE.fullmatch(e.name) and e.is_file(follow_symlinks=False) for e in entries
        ):
            return None
        newest = max(e.stat(follow_symlinks=False).st_mtime for e in entries)
    except OSError:  # gone meanwhile (its create finished or failed): let the listing say
        return None
    return time.time() - newest


def _remove_abandoned_create(run_dir: Path) -> None:
    """Remove a dead create's folder: its temporary files, then the folder if nothing else came."""
    try:
        for entry in os.scandir(run_dir):
            if _INFO_TMP_RE.fullmatch(entry.name):
                os.unlink(entry.path)
        os.rmdir(run_dir)  # refuses a folder a late writer has just put a file into
    except OSError:
        pass


def _first_line(exc: BaseException, limit: int = 100) -> str:
    text = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _info_problem(data: dict[str, Any]) -> str | None:
    """What makes a decoded run.json unusable, or None."""
    for key, types in _INFO_TYPES.items():
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, types):
            return f"run.json: {key!r} is not a {' or '.join(t.__name__ for t in types)}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"run.json: {key!r} is not a finite number"
    for op in data.get("top_ops") or []:
        if not isinstance(op, dict) or not isinstance(op.get("name"), str):
            return "run.json: 'top_ops' holds something that is not an op"
    return None


def _folder_bytes(folder: Path) -> int:
    """Bytes of the plain files under ``folder`` (symlinks are not followed)."""
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            total += st.st_size
    return total


def json_safe(value: Any) -> Any:
    """``value`` with numpy scalars made plain and NaN/inf made None, so strict JSON accepts it."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return json_safe(value.item())
    return value


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` so readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    payload = json.dumps(json_safe(data), indent=1, ensure_ascii=False, allow_nan=False)
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise disk_error(exc, path) from None
    except BaseException:
        # A Ctrl-C while writing or syncing: the temporary file must not stay
        # (in a new run folder it would be the only thing left).
        _discard(tmp)
        raise


def compress_trace(
    src: Path,
    dest: Path,
    level: int = 1,
    remove_source: bool = True,
    on_written: Callable[[], None] | None = None,
) -> None:
    """Gzip ``src`` into ``dest`` atomically.

    Level 1: traces are large and compress about tenfold even at the fastest level.
    The gzip header names ``dest`` without ``.gz`` (``trace.json``), not the
    temporary file it is written to. ``on_written`` runs once ``dest`` is in
    place and before ``src`` is removed, so whoever points at the trace can
    move from one file to the other with a file there at every moment.
    """
    tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.tmp")
    try:
        with (
            open(src, "rb") as fin,
            open(tmp, "wb") as raw,
            gzip.GzipFile(filename=dest.name, mode="wb", compresslevel=level, fileobj=raw, mtime=0) as fout,
        ):
            shutil.copyfileobj(fin, fout, 16 * 1024 * 1024)
        os.replace(tmp, dest)
    except OSError as exc:
        _discard(tmp)
        raise disk_error(exc, dest) from None
    if on_written is not None:
        on_written()
    if remove_source:
        try:
            src.unlink()
        except FileNotFoundError:
            pass


def compress_in_background(
    src: Path, dest: Path, remove_source: bool = True, on_written: Callable[[], None] | None = None
) -> threading.Thread:
    """Start `compress_trace` on a thread (results are shown before it ends)."""

    def work() -> None:
        try:
            compress_trace(src, dest, remove_source=remove_source, on_written=on_written)
        except (OSError, zlib.error):
            pass  # the uncompressed trace stays; trace_file() finds it

    thread = threading.Thread(target=work, name="torchprof-gzip", daemon=False)
    thread.start()
    _pending_compressions.append(thread)
    return thread


def in_background(work: Any, name: str) -> threading.Thread:
    """Run ``work()`` on a thread that `wait_for_compression` waits for too.

    For what must follow a compression (the run's table cache is keyed on
    the packed trace's size and time), so that whoever waits for the store's
    files to be written waits for it as well.
    """
    thread = threading.Thread(target=work, name=name, daemon=False)
    thread.start()
    _pending_compressions.append(thread)
    return thread


def wait_for_compression(timeout: float | None = None) -> None:
    """Block until background compressions (and the work queued after them) have finished."""
    while _pending_compressions:
        _pending_compressions.pop().join(timeout)


def trace_file(run_dir: Path) -> Path | None:
    """The run's trace: the gzip once written, else the raw JSON still being packed.

    Only regular files count (``is_file``): a FIFO or a device named like a
    trace would block whoever opens it.
    """
    for name in (TRACE_NAME, RAW_TRACE_NAME):
        p = run_dir / name
        if p.is_file():
            return p
    loaded = trace_files(run_dir)
    return loaded[0] if loaded else None


def trace_files(run_dir: Path) -> list[Path]:
    """Every trace file of a run (a loaded folder of ranks keeps one per rank)."""
    names = [TRACE_NAME] if (run_dir / TRACE_NAME).is_file() else []
    if not names and (run_dir / RAW_TRACE_NAME).is_file():
        names = [RAW_TRACE_NAME]
    found = [run_dir / n for n in names]
    for pattern in ("*.json.gz", "*.json"):
        for p in sorted(run_dir.glob(pattern)):
            if p.name in (RUN_FILE, TRACE_NAME, RAW_TRACE_NAME) or p.name.startswith("."):
                continue
            # a raw .json still being packed next to its .json.gz is the same trace
            if p.suffix == ".json" and p.with_name(p.name + ".gz").is_file():
                continue
            if p.is_file():
                found.append(p)
    return found


def _is_regular(path: Path) -> bool:
    """Whether ``path`` itself (not what a symlink names) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_own_file(path: Path) -> bool:
    """Whether ``path`` is a regular file with no other name (no hard link).

    A hard link made into a run folder is a file that lives anywhere else
    too (the real path is the folder's, the inode is not the store's own):
    a listing or a download must not serve it as the run's.
    """
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1


def safe_trace_name(name: str) -> str:
    """A loaded trace's file name reduced to plain characters (kept recognisable)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", Path(name).name).lstrip(".") or RAW_TRACE_NAME
    return cleaned[-120:]


class RunStore:
    """Runs kept under one root folder.

    Parameters
    ----------
    root
        The folder (created on first write); `paths.store_folder` when not given.
    """

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else store_folder()

    def create(self, run_id: str | None = None) -> Path:
        """Make a new run folder holding a placeholder ``run.json`` and return it.

        The placeholder names the process that writes the run, so a listing
        can tell a run in progress from one whose kernel died before saving.
        """
        run_id = run_id or new_run_id()
        if not is_run_id(run_id):
            raise ValueError(f"not a run id: {run_id!r}")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise disk_error(exc, self.root) from None
        run_dir = self.root / run_id
        placeholder = {
            "schema": SCHEMA,
            "id": run_id,
            "status": "running",
            "created": time.time(),
            "pid": os.getpid(),
            "host": socket.gethostname(),
        }
        try:
            run_dir.mkdir()
            write_json_atomic(run_dir / RUN_FILE, placeholder)
        except FileExistsError:
            raise  # the id is taken: that folder is someone else's
        except BaseException:
            # A full disk, or a Ctrl-C at any point (the fsync included): no
            # folder without its record is left to be listed as damaged.
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        return run_dir

    def write_info(self, run_dir: Path, info: dict[str, Any]) -> None:
        """Write ``run.json`` for a run (atomically; replaces the placeholder)."""
        data = {"schema": SCHEMA, "id": run_dir.name, **info}
        write_json_atomic(run_dir / RUN_FILE, data)

    def update_info(self, run_dir: Path, extra: dict[str, Any]) -> None:
        """Add ``extra`` to a run's record (a damaged one is left as it is)."""
        info = self.read_info(run_dir.name)
        if info.get("damaged"):
            return
        info.update(extra)
        for derived in ("id", "damaged", "schema"):  # what read_info and write_info add
            info.pop(derived, None)
        self.write_info(run_dir, info)

    def read_info(self, run_id: str) -> dict[str, Any]:
        """``run.json`` of one run.

        ``damaged`` is set (with a ``problem`` in words) when it is missing or
        cannot be read, or when the run was never finished by a process that
        is gone; ``running`` is set while its process is still at work.
        Never raises for what is in the folder: a run.json that is a symlink,
        a FIFO or a device, too large, nested too deeply, not JSON, or with
        fields of the wrong type is reported as damaged, with the reason.
        """
        run_dir = self.root / run_id
        try:
            data = json.loads(read_small_file(run_dir / RUN_FILE, MAX_INFO_BYTES, "a run's record"))
        except FileNotFoundError:
            return self._damaged(run_id, MISSING_INFO)
        except UnfitFile as exc:
            return self._damaged(run_id, f"run.json {exc}")
        except ValueError as exc:  # not JSON, not UTF-8, a number of 5,000 digits ...
            return self._damaged(run_id, f"run.json unreadable: not valid JSON ({_first_line(exc)})")
        except RecursionError:
            return self._damaged(run_id, "run.json unreadable (nested too deeply)")
        except OSError as exc:
            return self._damaged(run_id, f"run.json unreadable ({exc.strerror or exc.__class__.__name__})")
        if not isinstance(data, dict):
            return self._damaged(run_id, "run.json unreadable (not an object)")
        problem = _info_problem(data)
        if problem is not None:
            return self._damaged(run_id, problem)
        data["id"] = run_id
        if data.get("status") == "running":
            if _process_alive(data.get("pid"), data.get("host")):
                data["running"] = True
                data["damaged"] = False
            else:
                data["damaged"] = True
                data["problem"] = "interrupted: the kernel stopped before the run was saved"
        data.setdefault("damaged", False)
        return data

    def _damaged(self, run_id: str, problem: str) -> dict[str, Any]:
        try:
            # the folder's age stands in for the creation time, to keep the order
            created: float | None = (self.root / run_id).stat().st_mtime
        except OSError:
            created = None
        return {"id": run_id, "name": run_id, "damaged": True, "problem": problem, "created": created}

    def ids(self) -> list[str]:
        """Ids of the run folders (plain folders named like a run id; symlinks are ignored)."""
        if not self.root.is_dir():
            return []
        return [
            p.name for p in self.root.iterdir() if is_run_id(p.name) and p.is_dir() and not p.is_symlink()
        ]

    def list(self) -> list[dict[str, Any]]:
        """Every run, newest first; damaged runs are included and flagged.

        A folder holding only the temporary file of a placeholder being
        written is not a run (yet): it is left out, and removed once it is
        `ABANDONED_CREATE_S` old (its create died).
        """
        runs = []
        for run_id in self.ids():
            info = self.read_info(run_id)
            if info.get("problem") == MISSING_INFO and self._creating(run_id):
                continue
            runs.append(info)
        return sorted(runs, key=lambda r: (r.get("created") or 0, r["id"]), reverse=True)

    def _creating(self, run_id: str) -> bool:
        """Whether a folder without run.json is a create in progress or a dead one (removed)."""
        run_dir = self.root / run_id
        age = _unfinished_create(run_dir)
        if age is None:
            return False
        if age > ABANDONED_CREATE_S:
            _remove_abandoned_create(run_dir)
        return True

    def find_loaded(self, key: str) -> Path | None:
        """The folder of a kept loaded trace whose sources had this `source_key`, if any."""
        for info in self.list():
            if info.get("kind") == "load" and info.get("source_key") == key and not info.get("damaged"):
                run_id = str(info.get("id") or "")
                if is_run_id(run_id):
                    return self.run_dir(run_id)
        return None

    def run_dir(self, run_id: str) -> Path:
        """Folder of a run (no check that it exists)."""
        return self.root / run_id

    def locate(self, run_id: str) -> Path:
        """Folder of an existing run, checked to be a plain folder inside the store.

        Raises
        ------
        LookupError
            When ``run_id`` is not a run id, no such run exists, or its folder
            is a symlink or resolves outside the store.
        """
        if not is_run_id(run_id):
            raise LookupError("not a run id")
        run_dir = self.root / run_id
        if run_dir.is_symlink() or not run_dir.is_dir():
            raise LookupError(f"no run {run_id}")
        if run_dir.resolve().parent != self.root.resolve():
            raise LookupError(f"no run {run_id}")
        return run_dir

    def locate_traces(self, run_id: str) -> list[Path]:
        """The run's trace files that are regular files inside its folder.

        Symlinks, FIFOs, devices and hard links are never offered: opening a
        FIFO would block its reader until something writes to it, and a hard
        link is a file from elsewhere.
        """
        run_dir = self.locate(run_id)
        real = run_dir.resolve()
        return [p for p in trace_files(run_dir) if _is_own_file(p) and p.resolve().parent == real]

    def add_trace(self, run_dir: Path, source: Path, name: str | None = None) -> Path:
        """Keep a copy of a loaded trace in a run folder.

        A ``.json.gz`` is copied (atomically); a raw ``.json`` is gzipped on a
        background thread, as captured traces are. ``name`` defaults to the
        source's file name. Returns the trace's path in the run folder (which
        exists once `wait_for_compression` returns). The device traces the
        loader reads with it (TorchTPU's XPlane, Neuron Explorer's files) are
        copied too, in the same layout, so the kept run reads the same.
        """
        name = safe_trace_name(name or source.name)
        self._add_device_files(run_dir, source)
        if name.endswith(".json"):
            dest = run_dir / (name + ".gz")
            compress_in_background(source, dest, remove_source=False)
            return dest
        dest = run_dir / name
        tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.tmp")
        try:
            shutil.copyfile(source, tmp)
            os.replace(tmp, dest)
        except OSError as exc:
            _discard(tmp)
            raise disk_error(exc, dest) from None
        return dest

    def device_files(self, run_id: str) -> list[Path]:
        """The device traces kept with a run (XPlane, Neuron Explorer files), its own regular files only."""
        from ..trace.files import device_files

        found: set[Path] = set()
        for trace in self.locate_traces(run_id):
            found.update(p for p in device_files(trace) if _is_own_file(p))
        return sorted(found)

    def _add_device_files(self, run_dir: Path, source: Path) -> None:
        from ..trace.files import device_files

        for src in device_files(source):
            dest = run_dir / src.relative_to(source.parent)
            if dest.exists() or not _is_regular(src):
                continue  # several ranks' traces share one device folder
            tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.tmp")
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, tmp)
                os.replace(tmp, dest)
            except OSError as exc:
                _discard(tmp)
                raise disk_error(exc, dest) from None

    def delete(self, run_id: str) -> None:
        """Remove a run folder and everything in it (refuses anything `locate` refuses).

        A run just shown may still get its caches written beside its trace
        (`keep.keep_tables`): a file that appears, or a temporary file renamed
        away, while the folder is removed is not a reason to fail; the removal
        is tried again (the writer's next file fails once the folder is gone,
        which costs it one warning).
        """
        run_dir = self.locate(run_id)
        for attempt in range(DELETE_TRIES):
            try:
                shutil.rmtree(run_dir)
                return
            except OSError as exc:
                raced = exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT) and run_dir.is_dir()
                if not raced or attempt == DELETE_TRIES - 1:
                    raise

    def run_bytes(self, run_id: str) -> int:
        """Disk space used by one run."""
        return _folder_bytes(self.root / run_id)

    def size_bytes(self) -> int:
        """Disk space used by all runs."""
        return sum(self.run_bytes(run_id) for run_id in self.ids())

    def enforce_cap(self, max_bytes: int, keep: set[str] | None = None) -> list[str]:
        """Delete the oldest runs until the store fits in ``max_bytes``.

        Runs in ``keep`` (e.g. the one just written) and runs still being
        written by a live process are never removed; ``max_bytes <= 0`` means
        no cap. Returns the ids that were deleted, oldest first.
        """
        if max_bytes <= 0:
            return []
        keep = keep or set()
        runs = sorted(self.list(), key=lambda r: (r.get("created") or 0, r["id"]))
        sizes = {r["id"]: self.run_bytes(r["id"]) for r in runs}
        total = sum(sizes.values())
        removed = []
        for r in runs:
            if total <= max_bytes:
                break
            if r["id"] in keep or r.get("running"):
                continue
            try:
                self.delete(r["id"])
            except (OSError, LookupError):
                continue  # e.g. removed meanwhile by the sidebar; not our business
            total -= sizes[r["id"]]
            removed.append(r["id"])
        return removed


def source_key(sources: list[Path]) -> str:
    """What identifies a loaded trace's files: each one's resolved path, size and change time.

    Loading the same unchanged files again finds the run that already keeps
    them (`RunStore.find_loaded`); a file rewritten since is a new run.
    """
    parts = []
    for src in sources:
        try:
            st = src.stat()
            parts.append(f"{src.resolve()}|{st.st_size}|{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{src}|?")
    return "\n".join(sorted(parts))


def url_source_key(url: str, copies: list[Path]) -> str:
    """`source_key` of traces loaded from ``url``: the URL and each fetched copy's name and size.

    The copies live in temporary folders, so their paths and times change
    with every load; the same URL with files of the same sizes is the same run.
    """
    parts = []
    for src in copies:
        try:
            size: int | str = src.stat().st_size
        except OSError:
            size = "?"
        parts.append(f"{url}|{src.name}|{size}")
    return "\n".join(sorted(parts))


def run_info(profile: Any, notebook: str | None = None, kind: str = "capture") -> dict[str, Any]:
    """The ``run.json`` of a profile: what the sidebar lists without reading the trace.

    Name, kind (``capture`` or ``load``), when, the cell and its notebook, the
    device, steps, the headline numbers per step, partial / error / notes and
    the top five ops by self time.
    """
    s = profile.summary
    cap = profile.capture
    ops = profile.ops
    sort_col = columns.default_sort(bool(s["device_traced"]))
    # The step ranges themselves are not an op anyone can speed up.
    candidates = ops[~ops["name"].isin(["ProfilerStep*"])]
    top = candidates.sort_values(sort_col, ascending=False).head(5)
    return {
        "name": profile.name,
        "kind": kind,
        "created": cap.started if cap else time.time(),
        "cell": cap.cell if cap else "",
        "notebook": str(notebook) if notebook else None,
        "device": s["device"],
        "device_spec": cap.device if cap else None,
        "device_kind": cap.device_kind if cap else None,
        "device_traced": s["device_traced"],
        "steps": s["steps"],
        "warmup": cap.warmup if cap else 0,
        "options": cap.options if cap else {},
        "wall_per_step_us": s["wall_per_step_us"],
        "cpu_busy_per_step_us": s["cpu_busy_per_step_us"],
        "device_busy_per_step_us": s["device_busy_per_step_us"],
        "device_busy_pct": s["device_busy_pct"],
        "events": s["events"],
        "partial": profile.partial,
        "error": profile.error,
        "notes": profile.notes,
        "top_ops": [
            {"name": str(r.name), "self_us": float(getattr(r, sort_col)), "calls": int(r.calls)}
            for r in top.itertuples(index=False)
        ],
        "trace": TRACE_NAME,
    }


def recorded_step_cpu(run_dir: Path) -> tuple[float, ...]:
    """The process's CPU time per step (``step_cpu_us``) a run's record kept; empty when absent or unreadable."""
    try:
        data = json.loads(read_small_file(Path(run_dir) / RUN_FILE, MAX_INFO_BYTES, "a run's record"))
        values = data.get("step_cpu_us")
    except (OSError, ValueError, AttributeError, RecursionError):  # UnfitFile is a ValueError
        return ()
    if not isinstance(values, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
    ):
        return ()
    return tuple(float(v) for v in values)


def notebook_of(shell: Any) -> str | None:
    """The notebook a shell runs for (JupyterLab's ``__session__``, VS Code's file), if known."""
    ns = getattr(shell, "user_ns", {}) or {}
    notebook = ns.get("__session__") or ns.get("__vsc_ipynb_file__")
    return str(notebook) if notebook else None
