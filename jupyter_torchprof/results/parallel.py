"""Parse many rank traces at once: worker processes here, or a Dask cluster.

Each rank is parsed and analysed where it runs (`digest.digest_file`), and only
what the cross-rank views read comes back: the trace's metadata, its
summary and its row of the cross-rank table, a few kilobytes per rank
instead of its events (which a `RankSet` loads again from the file when
someone asks for them). A rank's findings and main tables are built only
when asked for (``parts``): a folder of many tiny ranks spent most of its
load building tables nobody looked at (and the cross-rank table needs none
of them).

On one machine the ranks go to worker processes (`rank_worker`): fresh
interpreters that import this package and never the user's program. A
notebook kernel has threads (IPython's history, ipykernel's heartbeat,
torch's pools) that ``fork`` would copy in a locked state, and
multiprocessing's ``spawn`` imports the parent's ``__main__`` in every
worker: a plain script that loads a folder at its top level, with no
``if __name__ == "__main__":`` guard, ran its load again there. A worker
needs a second or two to import pandas and this package, so the notebook's
process, whose imports are done, parses ranks too (`_share_with_pool`):
one worker per core but one, each given a rank only once it has started,
and no slower than parsing the ranks one by one here when the job is small.

The workers outlive the call (`_WarmPool`): the next ``load(folder)`` in
the session finds them started and its imports done, which is most of the
time a job of small ranks takes; they exit after `POOL_IDLE_S` seconds with
nothing to do, when a load fails or is interrupted, and with the process.

Past one machine the same function runs on a Dask
distributed ``Client`` (``load(folder, client=client)``): Dask schedules
plain Python functions over processes on many hosts with no code of ours
on the workers beyond this package, and a Jupyter user can start one with
``Client()`` or connect to a cluster they already have.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import TraceError
from ..trace.remote import is_url
from .digest import DIGEST_TABLES, PARTS, FailedRank, RankDigest, digest_file, digest_profile
from .rank_worker import Worker, WorkerDied
from .remote_rank import digest_source


def _digest_here(path: str, parts: tuple[str, ...], storage_options: dict[str, Any] | None) -> Any:
    """One rank digested in this process: a file as it always was, a URL fetched first (`remote_rank`)."""
    if is_url(path):
        return digest_source(path, parts, storage_options)
    return digest_file(path, parts)


def worker_count(n_files: int) -> int:
    """Processes to parse ``n_files`` traces with, this one included: one per usable core, at most one per file."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(n_files, cores))


class _Tasks:
    """The files still to parse, taken one at a time by this process and by the workers' feeders.

    It also knows the load's workers, so that a Ctrl-C can let them go, and
    whether they may be kept for the next load (``closed``: interrupted or failed).
    """

    def __init__(
        self,
        paths: list[str],
        feeders: int,
        parts: tuple[str, ...] = (),
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.paths = paths
        self.parts = parts
        self.storage_options = storage_options
        self.results: list[Any] = [None] * len(paths)
        self.next = 0
        self.done = 0
        self.feeders = feeders
        self.holding = 0
        self.workers: list[Worker] = []
        self.closed = False
        self.cond = threading.Condition()

    def take(self) -> int | None:
        with self.cond:
            if self.next >= len(self.paths):
                return None
            self.next += 1
            return self.next - 1

    def close(self) -> list[Worker]:
        """Hand out no more files, keep no worker; returns the workers to let go."""
        with self.cond:
            self.next = len(self.paths)
            self.closed = True
            return list(self.workers)

    def adopt(self, worker: Worker) -> bool:
        """Count ``worker`` as the load's (False: the load is over, let it go)."""
        with self.cond:
            if not self.closed:
                self.workers.append(worker)
            return not self.closed

    def finish(self, i: int, result: Any) -> None:
        with self.cond:
            self.results[i] = result
            self.done += 1
            if isinstance(result, BaseException):
                self.closed = True  # the load fails: its workers are not kept
            self.cond.notify_all()

    def hold(self, change: int) -> None:
        """A feeder starts (+1) or stops (-1) handing files to a started worker."""
        with self.cond:
            self.holding += change
            self.cond.notify_all()

    def feeder_gone(self) -> None:
        with self.cond:
            self.feeders -= 1
            self.cond.notify_all()

    def wait(self) -> bool:
        """Wait until every file is parsed (True) or no feeder is left to parse the rest (False).

        A worker that parsed files is back in the pool when this returns, so
        the next load finds it; one still starting is not waited for.
        """
        with self.cond:
            self.cond.wait_for(
                lambda: (self.done == len(self.paths) and not self.holding) or not self.feeders
            )
            return self.done == len(self.paths)

    def give_back(self, worker: Worker) -> None:
        """Keep ``worker`` for the next load, unless this one was interrupted or failed."""
        with self.cond:
            if not self.closed:
                _WARM.put(worker)
                return
        worker.close(kill=True)


def _ready_worker(worker: Worker | None, tasks: _Tasks) -> Worker | None:
    """A started worker for this load: ``worker`` if it still answers, else a new one (None: none could start)."""
    if worker is not None and not worker.ping():  # killed since the last load
        worker.close(kill=True)
        worker = None
    try:
        worker = worker or Worker()
    except (OSError, WorkerDied):  # no executable to start (an embedded Python): this process parses
        return None
    if not tasks.adopt(worker):
        worker.close(kill=True)
        return None
    try:
        worker.wait_started()
    except WorkerDied:
        worker.close(kill=True)
        return None
    return worker


def _feed(tasks: _Tasks, kept: Worker | None) -> None:
    """Hand files to one worker, from the moment it has started, until none is left."""
    try:
        worker = _ready_worker(kept, tasks)
        if worker is None:
            return
        tasks.hold(1)
        try:
            while (i := tasks.take()) is not None:
                try:
                    result: Any = worker.call(tasks.paths[i], tasks.parts, tasks.storage_options)
                except BaseException as exc:  # a bug, or the worker killed: re-raised by the caller
                    result = exc
                tasks.finish(i, result)
                if isinstance(result, WorkerDied):
                    break
            tasks.give_back(worker)
        finally:
            tasks.hold(-1)
    finally:
        tasks.feeder_gone()


def _not_while_starting() -> None:
    """Refuse to load from a spawned process that is still importing the main script.

    Our own workers never import the user's script (`rank_worker`), but a
    script's own ``multiprocessing`` children do: a load at the top level of
    an unguarded script would run again in each of them.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError(
            "jupyter_torchprof.load(folder) ran while a worker process was importing the main script:"
            ' put the script\'s top level under  if __name__ == "__main__":'
        )


#: Seconds the worker processes wait for the next load before they exit.
POOL_IDLE_S = 120.0


class _WarmPool:
    """The session's worker processes, kept between loads and let go when idle.

    A worker spends about as long starting and importing pandas as it takes
    to parse a rank of a few tens of megabytes, so a job of small ranks that
    starts its own workers mostly waits for them. Workers that stay make the
    next load pay nothing of that. They hold memory while they wait (about
    100 MB each, once they have parsed), so they exit after `POOL_IDLE_S`
    seconds without work. A load takes the idle workers it needs (another
    load at the same time gets others); the pool does not care how many.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[Worker] = []
        self.timer: threading.Timer | None = None

    def take(self, workers: int) -> list[Worker | None]:
        """``workers`` slots: the kept workers first, None where a new one is to start."""
        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            alive = [w for w in self.idle if w.alive()]
            for w in self.idle:
                if w not in alive:
                    w.close()
            given, self.idle = alive[:workers], alive[workers:]
            if self.idle:
                self._arm()
        return [*given, *[None] * (workers - len(given))]

    def put(self, worker: Worker) -> None:
        """Keep ``worker`` (done with a load) for the next one."""
        with self.lock:
            self.idle.append(worker)
            self._arm()

    def _arm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = threading.Timer(POOL_IDLE_S, self.close_idle)
        self.timer.daemon = True
        self.timer.start()

    def close_idle(self) -> None:
        """Let every idle worker go (they exit once they read the end of their input)."""
        with self.lock:
            idle, self.idle = self.idle, []
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
        for w in idle:
            w.close()
        for w in idle:  # reaped here, so no zombie stays behind in a long session
            try:
                w.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                w.close(kill=True)

    def pids(self) -> list[int]:
        with self.lock:
            return [w.pid for w in self.idle if w.alive()]


_WARM = _WarmPool()


def close_workers() -> None:
    """Let the kept worker processes go now instead of after `POOL_IDLE_S` seconds."""
    _WARM.close_idle()


def kept_workers() -> list[int]:
    """Process ids of the worker processes kept for the next load."""
    return _WARM.pids()


def _share_with_pool(
    paths: list[str],
    workers: int,
    here: bool = True,
    parts: tuple[str, ...] = (),
    storage_options: dict[str, Any] | None = None,
) -> list[Any]:
    """Digest ``paths`` in ``workers`` worker processes and (``here``) in this one, whichever is free first."""
    _not_while_starting()
    tasks = _Tasks(paths, feeders=workers, parts=parts, storage_options=storage_options)
    finished = False
    try:
        for kept in _WARM.take(workers):
            threading.Thread(target=_feed, args=(tasks, kept), name="torchprof-ranks", daemon=True).start()
        while here and (i := tasks.take()) is not None:
            tasks.finish(i, _digest_here(paths[i], parts, storage_options))
        while not tasks.wait():  # no worker could start, or one died: this process parses the rest
            while (i := tasks.take()) is not None:
                tasks.finish(i, _digest_here(paths[i], parts, storage_options))
        finished = True
    finally:
        if not finished:  # interrupted: no feeder starts another rank, no worker is kept
            for w in tasks.close():
                w.kill()  # its feeder, reading from it, then closes it
            _WARM.close_idle()
    for r in tasks.results:
        if isinstance(r, BaseException):
            _WARM.close_idle()
            raise r
    return tasks.results


def digest_files(
    files: Sequence[Path],
    client: Any = None,
    workers: int | None = None,
    here: bool = True,
    parts: Sequence[str] = (),
    storage_options: dict[str, Any] | None = None,
) -> tuple[list[RankDigest], list[TraceError]]:
    """Digest every file: on ``client`` (a Dask ``Client``), in worker processes, or here.

    Parameters
    ----------
    files
        Trace files, one per rank.
    client
        A ``dask.distributed.Client``; None runs on this machine.
    workers
        Processes to parse with on this machine, this one included (default
        `worker_count`); 1 parses in this process only.
    here
        Whether this process parses ranks too while its workers start
        (False: only the ``workers`` worker processes do).
    parts
        What each digest carries besides its summary and row (`PARTS`).
    storage_options
        Options of the store when ``files`` are URLs: they travel with the
        URLs, and each rank is fetched where it is parsed (`runs.remote_load`).

    Returns
    -------
    The digests of the readable files, in the order given, and one
    `TraceError` per file that is not a readable trace.
    """
    paths = [str(f) for f in files]  # a URL given as str stays one
    parts = tuple(parts)
    if client is not None:
        if any(is_url(p) for p in paths):
            # Only the URLs and the store's options travel to the workers, never a trace's bytes.
            futures = client.map(
                digest_source, paths, [parts] * len(paths), [storage_options] * len(paths), pure=False
            )
        else:
            futures = client.map(digest_file, paths, [parts] * len(paths), pure=False)
        results = client.gather(futures)
    else:
        n = worker_count(len(paths)) if workers is None else max(1, min(workers, len(paths)))
        if n == 1:
            results = [_digest_here(p, parts, storage_options) for p in paths]
        else:
            results = _share_with_pool(paths, n - 1 if here else n, here, parts, storage_options)
    digests = [r for r in results if isinstance(r, RankDigest)]
    errors = [TraceError(r.path, r.problem) for r in results if isinstance(r, FailedRank)]
    return digests, errors


__all__ = [
    "DIGEST_TABLES",
    "PARTS",
    "FailedRank",
    "RankDigest",
    "close_workers",
    "digest_file",
    "digest_files",
    "digest_profile",
    "kept_workers",
    "worker_count",
]
