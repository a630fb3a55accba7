"""REST API of the runs sidebar: list, read, download, delete and compare runs.

Routes, under ``<base_url>/jupyter-torchprof/``::

    GET    runs                    every run, newest first, and the store's size
    GET    runs/<id>               one run's record (`runs.store.RunStore.read_info`)
    DELETE runs/<id>               delete the run (its folder)
    GET    runs/<id>/tables        summary, op, kernel and step tables, computed from the trace
    GET    runs/<id>/trace         the trace file, as a download
    GET    runs/<id>/timeline      the timeline as a bokeh ``json_item`` (501 while unavailable)
    GET    compare?a=<id>&b=<id>   headline, op and kernel diff of two runs (a = baseline)

``?trace=K`` picks the K-th trace of a run that holds several (a loaded folder
of ranks). Every handler requires an authenticated user, and a run is only
ever reached through `RunStore.locate`: ids must match `runs.store.RUN_ID_RE`,
folders and traces must be plain files inside the store (no symlinks out).

Tables are computed at request time with the same parser and analysis as the
magic, so a run opens without the kernel that made it. pandas and the analysis
are imported inside the handlers: the server extension itself stays light.

No file is opened on the event loop (a FIFO in the store would stall every
endpoint of the server): store reads run on a small pool of their own, so a
listing is not queued behind timeline builds, which run on another pool
(`Pools`). A trace that cannot be read or analysed is a 422 naming the file;
a bad query parameter a 400 naming the parameter.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado import web

from .. import columns
from ..analysis.memory import memory_peaks
from ..runs import STORE_ENV, RunStore, is_run_id, json_safe, store_folder

#: Rows of a table sent by default (the biggest first); ``?limit=`` changes it.
DEFAULT_ROWS = 1000
MAX_ROWS = 20000
#: Glyphs the timeline may draw (its level of detail keeps big traces fluid).
TIMELINE_GLYPHS = 20000
CHUNK = 1 << 20
#: Query numbers: ASCII digits only (``str.isdigit`` also takes "²"), and few
#: enough that ``int()`` is cheap (Python refuses more than 4,300 digits).
_NUMBER = re.compile(r"[0-9]{1,9}")


class Pools:
    """The server's own worker threads: one pool for store reads, one for analysis.

    Listing runs reads a few small files; parsing a trace or building a
    timeline takes seconds. On one shared pool the listing waits behind the
    builds (``GET runs`` went from 94 ms to 1.8 s); apart, it does not.

    Parameters
    ----------
    store_threads, work_threads
        Sizes of the two pools.
    """

    def __init__(self, store_threads: int = 4, work_threads: int | None = None) -> None:
        work_threads = work_threads or min(4, os.cpu_count() or 1)
        self.store = ThreadPoolExecutor(store_threads, thread_name_prefix="torchprof-store")
        self.work = ThreadPoolExecutor(work_threads, thread_name_prefix="torchprof-work")

    def shutdown(self) -> None:
        """Stop both pools (pending work is dropped)."""
        for pool in (self.store, self.work):
            pool.shutdown(wait=False, cancel_futures=True)


def store_root(root_dir: str | os.PathLike[str] | None) -> Path:
    """The run store the sidebar shows: `runs.store_folder` with the server's root folder as the base.

    A relative ``$TORCHPROF_RUN_DIR`` is taken relative to the server's root
    folder, like the default.
    """
    return store_folder(base=root_dir)


class ProfileCache:
    """Recently opened Profiles and the JSON computed from them.

    Keys include the trace file's size and modification time, so a trace
    replaced on disk is read again. Parsing runs outside the lock, one parse
    per key at a time.

    Parameters
    ----------
    profiles
        How many Profiles to keep (each holds every event of its trace).
    payloads
        How many computed JSON payloads to keep (small).
    """

    def __init__(self, profiles: int = 3, payloads: int = 64) -> None:
        self._profiles: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._payloads: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._max_profiles = profiles
        self._max_payloads = payloads
        self._lock = threading.Lock()
        self._key_locks: dict[tuple[Any, ...], threading.Lock] = {}

    @staticmethod
    def file_key(path: Path) -> tuple[Any, ...]:
        """Identity of a trace file's current content."""
        st = path.stat()
        return (str(path), st.st_size, st.st_mtime_ns)

    def _get(self, table: OrderedDict, limit: int, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key in table:
                table.move_to_end(key)
                return table[key]
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in table:
                    return table[key]
            value = compute()
            with self._lock:
                table[key] = value
                while len(table) > limit:
                    table.popitem(last=False)
                self._key_locks.pop(key, None)
        return value

    def profile(self, path: Path) -> Any:
        """The Profile of a trace file of a run (with what the run's record keeps: `runs.load.with_record`)."""
        from ..results.profile import Profile
        from ..runs.load import with_record

        return self._get(
            self._profiles,
            self._max_profiles,
            self.file_key(path),
            lambda: with_record(Profile.from_file(path), path.parent),
        )

    def payload(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """A computed payload, cached under ``key``."""
        return self._get(self._payloads, self._max_payloads, key, compute)

    def forget(self, run_dir: Path) -> None:
        """Drop everything computed from a run's files (after it was deleted)."""
        prefix = str(run_dir) + os.sep
        with self._lock:
            for table in (self._profiles, self._payloads):
                for key in [k for k in table if any(str(p).startswith(prefix) for p in k)]:
                    del table[key]


def frame_json(frame: Any, limit: int | None = None) -> dict[str, Any]:
    """A DataFrame as ``{"columns", "rows", "total_rows"}`` (NaN and inf become null)."""
    total = len(frame)
    if limit is not None and limit >= 0:
        frame = frame.head(limit)
    columns = [str(c) for c in frame.columns]
    cols = [frame[c].tolist() for c in frame.columns]
    rows = [list(r) for r in zip(*cols, strict=True)] if cols else []
    return {"columns": columns, "rows": json_safe(rows), "total_rows": total}


def _sorted_ops(ops: Any, device: bool) -> Any:
    col = columns.default_sort(device, ops.columns)
    return ops.sort_values(col, ascending=False, kind="stable") if col in ops.columns else ops


#: The catalog's columns of each table ``GET runs/<id>/tables`` sends.
RUN_TABLE_COLUMNS = {
    "ops": columns.OPS,
    "kernels": columns.KERNELS,
    "steps": columns.STEPS,
    "memory": columns.MEMORY_PEAKS,
}
#: The same for ``GET compare`` (the sides are titled A and B, A the baseline).
COMPARE_TABLE_COLUMNS = {
    "headline": columns.HEADLINE,
    "ops": tuple(columns.diff_ops("A", "B")),
    "kernels": tuple(columns.diff_kernels("A", "B")),
}


def with_specs(payload: dict[str, Any], tables: dict[str, Any], device: bool) -> dict[str, Any]:
    """``payload`` with ``specs`` beside each table's rows: the catalog columns it shows.

    The sidebar renders exactly these (title, kind, unit, tooltip), so it
    keeps no catalog of its own. A column is sent when the rows have it, the
    device was traced or it is not a device column, and its ``when`` holds
    on the rows sent (`columns.shown_in_rows`). The cached payload is not
    changed.
    """
    out = dict(payload)
    for name, cols in tables.items():
        table = payload.get(name)
        if isinstance(table, dict) and "columns" in table:
            shown = columns.shown_in_rows(cols, table["columns"], table["rows"], device)
            out[name] = {**table, "specs": [c.to_json() for c in shown]}
    return out


#: What the run panel shows of each finding (the inline view's findings box).
FINDING_COLUMNS = ("severity", "title", "detail", "rule", "impact_us")


def _finding_rows(findings: Any) -> Any:
    """The findings as the run panel lists them: most severe first, as `Profile.findings` orders them."""
    return findings[[c for c in FINDING_COLUMNS if c in findings.columns]]


def _sorted_kernels(kernels: Any) -> Any:
    if "total_us" in kernels.columns:
        return kernels.sort_values("total_us", ascending=False, kind="stable")
    return kernels


def timeline_available() -> bool:
    """Whether ``jupyter_torchprof.views.timeline`` is installed (without importing it)."""
    try:
        return importlib.util.find_spec("jupyter_torchprof.views.timeline") is not None
    except (ImportError, ValueError):
        return False


class RunsBase(APIHandler):
    """Shared helpers: the store, the cache, safe lookups, running work off the event loop."""

    @property
    def store(self) -> RunStore:
        """The run store of this server."""
        return self.settings["torchprof_store"]

    @property
    def cache(self) -> ProfileCache:
        """Profiles and payloads computed by this server."""
        return self.settings["torchprof_cache"]

    def run_dir(self, run_id: str) -> Path:
        """Folder of an existing run, or 404 (bad ids, symlinks and paths outside included)."""
        try:
            return self.store.locate(run_id)
        except LookupError:
            raise web.HTTPError(404, "no such run") from None

    @property
    def pools(self) -> Pools:
        """The worker pools of this server (see `Pools`)."""
        return self.settings["torchprof_pools"]

    def number_argument(self, name: str, default: int) -> int:
        """A whole-number query parameter, or 400 naming it."""
        raw = self.get_argument(name, None)
        if raw is None:
            return default
        if not _NUMBER.fullmatch(raw):
            raise web.HTTPError(400, f"{name} must be a whole number (0 to 999999999)")
        return int(raw)

    async def trace_path(self, run_id: str) -> tuple[Path, list[Path]]:
        """The trace chosen by ``?trace=`` (default the first) and all of the run's traces."""
        index = self.number_argument("trace", 0)
        traces = await self.in_store(lambda: self.located_traces(run_id))
        if not traces:
            raise web.HTTPError(404, "this run has no trace (yet)")
        if index >= len(traces):
            raise web.HTTPError(400, f"trace must be an index below {len(traces)}")
        return traces[index], traces

    def located_traces(self, run_id: str) -> list[Path]:
        """`RunStore.locate_traces`, with 404 for a run that does not exist (call off the loop)."""
        self.run_dir(run_id)
        return self.store.locate_traces(run_id)

    def limit(self) -> int:
        """Rows per table asked for with ``?limit=`` (bounded)."""
        return min(self.number_argument("limit", DEFAULT_ROWS), MAX_ROWS)

    async def in_store(self, fn: Callable[[], Any]) -> Any:
        """Run a store read or write (small files) on the store pool, off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self.pools.store, fn)

    async def compute(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` (parse, analyse) on the work pool; a trace that cannot be read is a clear 422.

        Anything else going wrong inside is also a 422 naming the exception
        (with the traceback in the server log): the trace could not be
        analysed, and the server carries on.
        """
        from ..errors import TorchProfError

        try:
            return await asyncio.get_running_loop().run_in_executor(self.pools.work, fn)
        except web.HTTPError:
            raise
        except TorchProfError as exc:
            raise web.HTTPError(422, str(exc)) from None
        except FileNotFoundError:
            raise web.HTTPError(404, "the trace is gone") from None
        except Exception as exc:  # noqa: BLE001 - one clear line, never a 500 for a bad file
            self.log.exception("jupyter_torchprof: could not analyse a trace")
            raise web.HTTPError(
                422, f"could not analyse the trace ({type(exc).__name__}: {exc})"[:500]
            ) from None

    def write_json(self, data: Any) -> None:
        """Finish with ``data`` as strict JSON."""
        self.finish(json.dumps(json_safe(data), allow_nan=False))


class RunListHandler(RunsBase):
    """``GET runs``: every run, newest first."""

    @web.authenticated
    async def get(self) -> None:
        """List the runs (damaged ones included, flagged) and the store's size."""

        def work() -> dict[str, Any]:
            runs = self.store.list()
            return {
                "root": str(self.store.root),
                "runs": runs,
                "size_bytes": self.store.size_bytes(),
                "timeline": timeline_available(),
            }

        self.write_json(await self.in_store(work))


class RunHandler(RunsBase):
    """``GET runs/<id>`` (its record) and ``DELETE runs/<id>``."""

    @web.authenticated
    async def get(self, run_id: str) -> None:
        """One run's record (with ``damaged`` and ``problem`` when unreadable)."""

        def work() -> dict[str, Any]:
            traces = self.located_traces(run_id)
            info = self.store.read_info(run_id)
            info["traces"] = [p.name for p in traces]
            # TorchTPU's XPlane, Neuron Explorer's files: kept, exported and read with the trace.
            run_dir = self.store.run_dir(run_id)
            info["device_files"] = [
                p.relative_to(run_dir).as_posix() for p in self.store.device_files(run_id)
            ]
            return info

        self.write_json(await self.in_store(work))

    @web.authenticated
    async def delete(self, run_id: str) -> None:
        """Delete the run's folder; a run still being written is refused (409)."""

        def work() -> Path:
            run_dir = self.run_dir(run_id)
            if self.store.read_info(run_id).get("running"):
                raise web.HTTPError(409, "this run is still being written by its kernel")
            try:
                self.store.delete(run_id)
            except LookupError:
                raise web.HTTPError(404, "no such run") from None
            except OSError as exc:
                raise web.HTTPError(500, f"could not delete the run: {exc.strerror or exc}") from None
            return run_dir

        run_dir = await self.in_store(work)
        self.cache.forget(run_dir)
        self.set_status(204)
        self.finish()


class RunTablesHandler(RunsBase):
    """``GET runs/<id>/tables``: summary, ops, kernels and steps of one trace of a run."""

    @web.authenticated
    async def get(self, run_id: str) -> None:
        """Compute (or reuse) the tables of the chosen trace."""
        limit = self.limit()
        path, traces = await self.trace_path(run_id)
        info = await self.in_store(lambda: self.store.read_info(run_id))
        run_dir = self.store.run_dir(run_id)
        info["device_files"] = await self.in_store(
            lambda: [f.relative_to(run_dir).as_posix() for f in self.store.device_files(run_id)]
        )

        def work() -> dict[str, Any]:
            key = ("tables", *ProfileCache.file_key(path), limit)

            def tables() -> dict[str, Any]:
                from ..runs.cache import CachedProfile, cached_profile
                from ..runs.keep import keep_cache, write_table_cache

                # The tables kept beside the trace answer without parsing it (runs.cache);
                # a trace parsed here gets them, unless it is a raw trace still being packed.
                p = cached_profile(path)
                if p is None:
                    p = self.cache.profile(path)
                    if path.name.endswith(".gz"):
                        keep_cache(write_table_cache, p, path)
                summary = dict(p.summary)
                device = bool(summary.get("device_traced"))
                return {
                    "summary": summary,
                    "ops": frame_json(_sorted_ops(p.ops, device), limit),
                    "kernels": frame_json(_sorted_kernels(p.kernels), limit),
                    "steps": frame_json(p.steps),
                    "findings": frame_json(_finding_rows(p.findings)),
                    "memory": frame_json(
                        p.cached_memory_peaks
                        if isinstance(p, CachedProfile)
                        else memory_peaks(p.memory_events)
                    ),
                }

            return self.cache.payload(key, tables)

        payload = await self.compute(work)
        device = bool(payload["summary"].get("device_traced"))
        payload = with_specs(payload, RUN_TABLE_COLUMNS, device)
        self.write_json(
            {
                "id": run_id,
                "info": info,
                "trace": path.name,
                "traces": [t.name for t in traces],
                "timeline": timeline_available(),
                **payload,
            }
        )


class RunTraceHandler(RunsBase):
    """``GET runs/<id>/trace``: the trace file as a download."""

    @web.authenticated
    async def get(self, run_id: str) -> None:
        """Stream the trace (gzip as stored) with a file name naming the run."""
        # As jupyter_server's own file downloads: a cookie-authenticated GET
        # must carry the XSRF token (query ``_xsrf``) or come from this origin.
        self.check_xsrf_cookie()
        path, _ = await self.trace_path(run_id)
        name = f"{run_id}.pt.trace.json.gz" if path.name == "trace.json.gz" else f"{run_id}-{path.name}"
        if path.name == "trace.json":
            name = f"{run_id}.pt.trace.json"
        fh, size = await self.in_store(lambda: _open_regular(path))
        kind = "application/gzip" if path.name.endswith(".gz") else "application/json"
        try:
            # headers go out with the first chunk, so the type is set before it
            self.set_header("Content-Type", kind)
            self.set_header("Content-Length", str(size))
            self.set_header("Content-Disposition", f'attachment; filename="{name}"')
            self.set_header("Cache-Control", "no-store")
            while True:
                chunk = await self.in_store(lambda: fh.read(CHUNK))
                if not chunk:
                    break
                self.write(chunk)
                await self.flush()
        finally:
            fh.close()
        self.finish(set_content_type=kind)


def _open_regular(path: Path) -> tuple[Any, int]:
    """An open regular file and its size; 404 when gone, 422 for a FIFO, device or hard link swapped in.

    ``O_NONBLOCK``: opening a FIFO for reading would otherwise wait for a writer.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise web.HTTPError(404, "the trace is gone") from None
    except OSError as exc:
        raise web.HTTPError(422, f"{path.name}: cannot be read ({exc.strerror or exc})") from None
    fh = open(fd, "rb")  # noqa: SIM115 - the caller streams it and closes it
    st = os.fstat(fh.fileno())
    if not stat.S_ISREG(st.st_mode):
        fh.close()
        raise web.HTTPError(422, f"{path.name}: is not a regular file; not served")
    if st.st_nlink > 1:
        # Checked on the open file: a hard link swapped in after the store's check.
        fh.close()
        raise web.HTTPError(422, f"{path.name}: is a hard link (the file has other names); not served")
    return fh, st.st_size


def _is_json(data: bytes) -> bool:
    """Whether ``data`` is one JSON document (a kept timeline is sent as it is, so it must be)."""
    import orjson

    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


class RunTimelineHandler(RunsBase):
    """``GET runs/<id>/timeline``: the timeline as a bokeh ``json_item``."""

    @web.authenticated
    async def get(self, run_id: str) -> None:
        """Build the timeline with ``views.timeline.build_timeline`` (501 while it is missing)."""
        glyphs = self.number_argument("max_glyphs", TIMELINE_GLYPHS)
        path, _ = await self.trace_path(run_id)
        try:
            from ..views.timeline import build_timeline
        except ImportError:
            raise web.HTTPError(
                501, "the timeline view is not available in this version of jupyter_torchprof"
            ) from None

        def work() -> bytes:
            from bokeh.embed import json_item

            def build() -> bytes:
                from ..runs.cache import read_timeline, timeline_stamp
                from ..runs.keep import keep_cache, write_timeline_cache

                # The first level of detail kept beside the trace (runs.cache) skips
                # the parse and the build; it depends on the glyph budget and the versions.
                stamp = timeline_stamp(glyphs)
                kept = read_timeline(path, stamp)
                if kept is not None and _is_json(kept):
                    return bytes(kept)
                item = json_item(build_timeline(self.cache.profile(path), window=None, max_glyphs=glyphs))
                data = json.dumps(json_safe(item), allow_nan=False).encode()
                if path.name.endswith(".gz"):
                    keep_cache(write_timeline_cache, data, path, stamp)
                return data

            return self.cache.payload(("timeline", *ProfileCache.file_key(path), glyphs), build)

        # Encoded once, off the event loop (a timeline is 0.1-3 MB of JSON): the
        # loop only sends the bytes, so the run list stays quick while timelines go out.
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(await self.compute(work))


class CompareHandler(RunsBase):
    """``GET compare?a=<id>&b=<id>``: what changed from run a to run b."""

    @web.authenticated
    async def get(self) -> None:
        """The headline, op and kernel diff tables (``Profile.diff``), per step."""
        ids = [self.get_argument(k, "") for k in ("a", "b")]
        if not all(is_run_id(i) for i in ids):
            raise web.HTTPError(400, "compare needs two run ids: ?a=<id>&b=<id>")
        limit = self.limit()
        paths = []
        for run_id in ids:
            path, _ = await self.trace_path(run_id)
            paths.append(path)
        infos = await self.in_store(lambda: [self.store.read_info(i) for i in ids])
        labels = (str(infos[0].get("name") or ids[0]), str(infos[1].get("name") or ids[1]))

        def work() -> dict[str, Any]:
            key = ("diff", *ProfileCache.file_key(paths[0]), *ProfileCache.file_key(paths[1]), limit)

            def diff() -> dict[str, Any]:
                pa = self.cache.profile(paths[0])
                pb = self.cache.profile(paths[1])
                d = pa.diff(pb, labels=labels)
                return {
                    "headline": frame_json(d.headline),
                    "ops": frame_json(d.ops, limit),
                    "kernels": frame_json(d.kernels, limit),
                    "summary_a": dict(pa.summary),
                    "summary_b": dict(pb.summary),
                }

            return self.cache.payload(key, diff)

        payload = await self.compute(work)
        device = any(bool(payload[k].get("device_traced")) for k in ("summary_a", "summary_b"))
        payload = with_specs(payload, COMPARE_TABLE_COLUMNS, device)
        notes = []
        cells = [str(info.get("cell") or "").strip() for info in infos]
        # A compiled side ran the same source through torch.compile: not noise.
        compiled = any(info.get("compile") or info.get("role") == "compiled" for info in infos)
        if cells[0] and cells[0] == cells[1] and not compiled:
            notes.append(
                "both runs profiled the same cell source: any difference is run-to-run noise "
                "unless the inputs, the data or the machine changed"
            )
        self.write_json({"a": infos[0], "b": infos[1], "labels": list(labels), "notes": notes, **payload})


def runs_handlers(prefix: str) -> list[tuple[str, type]]:
    """The routes of the runs API under ``prefix`` (``<base_url>/jupyter-torchprof``)."""
    run = prefix + "/runs/([^/]+)"
    return [
        (prefix + "/runs", RunListHandler),
        (run, RunHandler),
        (run + "/tables", RunTablesHandler),
        (run + "/trace", RunTraceHandler),
        (run + "/timeline", RunTimelineHandler),
        (prefix + "/compare", CompareHandler),
    ]


def setup_runs(web_app: Any, root_dir: str | os.PathLike[str] | None) -> Path:
    """Put the store and the cache in the app's settings; return the store's folder.

    Kernels started by this server inherit ``$TORCHPROF_RUN_DIR`` (set here
    to the absolute folder unless the user set it), so runs from notebooks
    in any sub-folder land in the one store the sidebar shows.
    """
    root = store_root(root_dir)
    os.environ[STORE_ENV] = str(root)
    web_app.settings["torchprof_store"] = RunStore(root)
    web_app.settings["torchprof_cache"] = ProfileCache()
    web_app.settings["torchprof_pools"] = shared_pools()
    return root


_POOLS: list[Pools] = []
_POOLS_LOCK = threading.Lock()


def shared_pools() -> Pools:
    """The process's `Pools` (one server per process; tests start many, and share them)."""
    with _POOLS_LOCK:
        if not _POOLS:
            _POOLS.append(Pools())
        return _POOLS[0]
