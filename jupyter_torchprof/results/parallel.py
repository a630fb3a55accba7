"""Parse many rank traces at once: worker processes here, or a Dask cluster.

Each rank is parsed and analysed where it runs (`digest_file`), and only
what the cross-rank views read comes back: the trace's metadata, its
summary, its row of the cross-rank table, its findings and its main
tables, a few kilobytes to a few megabytes per rank instead of its events
(which a `RankSet` loads again from the file when someone asks for them).

On one machine the map runs in a `concurrent.futures.ProcessPoolExecutor`
with the ``spawn`` start method: a notebook kernel has threads (IPython's
history, ipykernel's heartbeat, torch's pools) that ``fork`` would copy in
a locked state. A spawned worker needs a second or two to import pandas
and this package, so the notebook's process, whose imports are done,
parses ranks too (`_share_with_pool`): one worker per core but one, each
given a rank only once it has started, and no slower than parsing the
ranks one by one here when the job is small. As with any use of
``spawn``, a script (not a notebook) that loads a folder at its top level
needs the ``if __name__ == "__main__":`` guard: each worker imports the
script again, and a load it reaches there raises (`_not_while_starting`),
so the worker fails to start, with that message, instead of parsing the
whole job a second time; this process then parses every rank itself.

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
import threading
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TraceError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..trace.parser import TraceMeta
    from .profile import Profile

#: Tables a digest carries besides its summary and findings.
DIGEST_TABLES = ("ops", "kernels", "steps", "streams")


@dataclass
class RankDigest:
    """What the cross-rank views need of one rank, without its events.

    Attributes
    ----------
    path
        The trace file.
    name
        The profile's label.
    meta
        The trace's `TraceMeta` (rank, world size, devices, warnings).
    summary
        `Profile.summary`.
    row
        The rank's row of the cross-rank table (`ranks.rank_row`), with
        ``rank`` None when the trace does not say.
    findings
        `Profile.findings`.
    tables
        `DIGEST_TABLES` by name.
    pid
        The process that parsed the rank.
    """

    path: str
    name: str
    meta: TraceMeta
    summary: dict[str, Any]
    row: dict[str, Any]
    findings: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    pid: int = field(default_factory=os.getpid)

    def profile(self) -> Profile:
        """The rank's full `Profile`, parsed again from its file."""
        from .profile import Profile

        return Profile.from_file(self.path, name=self.name)


@dataclass
class _Failed:
    """A rank whose file is not a readable trace (TraceError does not pickle)."""

    path: str | None
    problem: str


def digest_profile(p: Profile) -> RankDigest:
    """The digest of a loaded profile (computes its tables and findings)."""
    from ..analysis.ranks import rank_row

    return RankDigest(
        path=str(p.meta.path),
        name=p.name,
        meta=p.meta,
        summary=p.summary,
        row=rank_row(p),
        findings=p.findings,
        tables={t: getattr(p, t) for t in DIGEST_TABLES},
    )


def digest_file(path: str) -> RankDigest | _Failed:
    """Parse and analyse one trace file (run in a worker process)."""
    from .profile import Profile

    try:
        with warnings.catch_warnings():
            # The parent shows the trace's warnings (``meta.warnings``) once.
            warnings.simplefilter("ignore")
            return digest_profile(Profile.from_file(path))
    except TraceError as exc:
        return _Failed(exc.path, exc.problem)


def worker_count(n_files: int) -> int:
    """Processes to parse ``n_files`` traces with, this one included: one per usable core, at most one per file."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(n_files, cores))


def _warm() -> None:
    """Run first in each worker: returns once the worker has started and imported the parser."""
    from . import profile  # noqa: F401


class _Tasks:
    """The files still to parse, taken one at a time by this process and by the pool's feeders."""

    def __init__(self, paths: list[str], feeders: int) -> None:
        self.paths = paths
        self.results: list[Any] = [None] * len(paths)
        self.next = 0
        self.done = 0
        self.feeders = feeders
        self.cond = threading.Condition()

    def take(self) -> int | None:
        with self.cond:
            if self.next >= len(self.paths):
                return None
            self.next += 1
            return self.next - 1

    def stop(self) -> None:
        """Hand out no more files."""
        with self.cond:
            self.next = len(self.paths)

    def finish(self, i: int, result: Any) -> None:
        with self.cond:
            self.results[i] = result
            self.done += 1
            self.cond.notify_all()

    def feeder_gone(self) -> None:
        with self.cond:
            self.feeders -= 1
            self.cond.notify_all()

    def wait(self) -> bool:
        """Wait until every file is parsed (True) or no feeder is left to parse the rest (False)."""
        with self.cond:
            self.cond.wait_for(lambda: self.done == len(self.paths) or not self.feeders)
            return self.done == len(self.paths)


def _feed(pool: ProcessPoolExecutor, tasks: _Tasks) -> None:
    """Keep one rank in flight in the pool, from the moment a worker has started."""
    try:
        try:
            pool.submit(_warm).result()
        except (
            Exception
        ):  # cancelled (every rank was parsed first) or a broken pool: this process parses them
            return
        while (i := tasks.take()) is not None:
            try:
                result: Any = pool.submit(digest_file, tasks.paths[i]).result()
            except BaseException as exc:  # a bug, or a worker killed: re-raised by the caller
                result = exc
            tasks.finish(i, result)
    finally:
        tasks.feeder_gone()


def _not_while_starting() -> None:
    """Refuse to start workers from a worker that is still importing the main script."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError(
            "jupyter_torchprof.load(folder) ran while a worker process was importing the main script:"
            ' put the script\'s top level under  if __name__ == "__main__":'
        )


#: Seconds the worker processes wait for the next load before they exit.
POOL_IDLE_S = 120.0


class _WarmPool:
    """The session's worker processes, kept between loads and let go when idle.

    A spawned worker spends about as long starting and importing pandas as
    it takes to parse a rank of a few tens of megabytes, so a job of small
    ranks that starts its own workers mostly waits for them. Workers that
    stay make the next load pay nothing of that. They hold memory while
    they wait (about 100 MB each, once they have parsed), so they exit
    after `POOL_IDLE_S` seconds without work.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pool: ProcessPoolExecutor | None = None
        self.size = 0
        self.users = 0
        self.timer: threading.Timer | None = None

    def take(self, workers: int) -> ProcessPoolExecutor:
        """A pool of ``workers`` processes: the kept one when it has that many, else a new one."""
        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            if self.pool is not None and (self.size != workers or _broken(self.pool)) and not self.users:
                self._close()
            if self.pool is None or self.size != workers:
                # Another load still uses a pool of another size: this one gets its own, not kept.
                if self.users:
                    return _new_pool(workers)
                self.pool, self.size = _new_pool(workers), workers
            self.users += 1
            return self.pool

    def give_back(self, pool: ProcessPoolExecutor, keep: bool) -> None:
        """Done with ``pool``: keep it for the next load (``keep``), or let its workers go."""
        with self.lock:
            if pool is not self.pool:
                pool.shutdown(wait=False, cancel_futures=True)
                return
            self.users -= 1
            if not keep or _broken(pool):
                if not self.users:
                    self._close()
                return
            if not self.users:
                self.timer = threading.Timer(POOL_IDLE_S, self.close_if_idle)
                self.timer.daemon = True
                self.timer.start()

    def close_if_idle(self) -> None:
        with self.lock:
            if not self.users:
                self._close()

    def _close(self) -> None:
        if self.pool is not None:
            # Workers still starting or parsing are not waited for: they exit once done.
            self.pool.shutdown(wait=False, cancel_futures=True)
        self.pool, self.size = None, 0


def _new_pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_exit_with_parent,
        initargs=(os.getpid(),),
    )


def _exit_with_parent(parent: int) -> None:
    """Run first in each worker: it exits within a second of this process's death.

    A worker never sees its queue close when the notebook's kernel is killed
    (``kill -9``, the OOM killer): it holds a write end of that queue
    itself, and the idle timer that lets it go lived in the dead process.
    It would wait for work forever, holding its memory.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="torchprof-exit-with-parent", daemon=True).start()


def _broken(pool: ProcessPoolExecutor) -> bool:
    """Whether a worker of ``pool`` died (the executor then refuses every new task)."""
    return bool(getattr(pool, "_broken", False))


_WARM = _WarmPool()


def close_workers() -> None:
    """Let the kept worker processes go now instead of after `POOL_IDLE_S` seconds."""
    _WARM.close_if_idle()


def _share_with_pool(paths: list[str], workers: int, here: bool = True) -> list[Any]:
    """Digest ``paths`` in ``workers`` spawned processes and (``here``) in this one, whichever is free first."""
    _not_while_starting()
    tasks = _Tasks(paths, feeders=workers)
    pool = _WARM.take(workers)
    finished = False
    try:
        for _ in range(workers):
            threading.Thread(target=_feed, args=(pool, tasks), daemon=True).start()
        while here and (i := tasks.take()) is not None:
            tasks.finish(i, digest_file(paths[i]))
        while not tasks.wait():  # the workers could not start (e.g. a script without the main guard)
            while (i := tasks.take()) is not None:
                tasks.finish(i, digest_file(paths[i]))
        finished = True
    finally:
        if not finished:  # interrupted: no feeder starts another rank
            tasks.stop()
        _WARM.give_back(pool, keep=finished)
    for r in tasks.results:
        if isinstance(r, BaseException):
            raise r
    return tasks.results


def digest_files(
    files: Sequence[Path], client: Any = None, workers: int | None = None, here: bool = True
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
        (False: only the ``workers`` spawned processes do).

    Returns
    -------
    The digests of the readable files, in the order given, and one
    `TraceError` per file that is not a readable trace.
    """
    paths = [str(f) for f in files]
    if client is not None:
        futures = client.map(digest_file, paths, pure=False)
        results = client.gather(futures)
    else:
        n = worker_count(len(paths)) if workers is None else max(1, min(workers, len(paths)))
        if n == 1:
            results = [digest_file(p) for p in paths]
        else:
            results = _share_with_pool(paths, n - 1 if here else n, here)
    digests = [r for r in results if isinstance(r, RankDigest)]
    errors = [TraceError(r.path, r.problem) for r in results if isinstance(r, _Failed)]
    return digests, errors
