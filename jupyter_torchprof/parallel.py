"""Parse many rank traces at once: worker processes here, or a Dask cluster.

Each rank is parsed and analysed where it runs (`digest_file`), and only
what the cross-rank views read comes back: the trace's metadata, its
summary, its row of the cross-rank table, its findings and its main
tables, a few kilobytes to a few megabytes per rank instead of its events
(which a `RankSet` loads again from the file when someone asks for them).

On one machine the map runs in a `concurrent.futures.ProcessPoolExecutor`
with the ``spawn`` start method: a notebook kernel has threads (IPython's
history, ipykernel's heartbeat, torch's pools) that ``fork`` would copy in
a locked state. Past one machine the same function runs on a Dask
distributed ``Client`` (``load(folder, client=client)``): Dask schedules
plain Python functions over processes on many hosts with no code of ours
on the workers beyond this package, and a Jupyter user can start one with
``Client()`` or connect to a cluster they already have.
"""

from __future__ import annotations

import multiprocessing
import os
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import TraceError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .profile import Profile
    from .trace.parser import TraceMeta

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
    """

    path: str
    name: str
    meta: TraceMeta
    summary: dict[str, Any]
    row: dict[str, Any]
    findings: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

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
    from .ranks import rank_row

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
    """Worker processes for ``n_files`` traces: one per usable core, at most one per file."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(n_files, cores))


def digest_files(
    files: Sequence[Path], client: Any = None, workers: int | None = None
) -> tuple[list[RankDigest], list[TraceError]]:
    """Digest every file: on ``client`` (a Dask ``Client``), in worker processes, or here.

    Parameters
    ----------
    files
        Trace files, one per rank.
    client
        A ``dask.distributed.Client``; None runs on this machine.
    workers
        Processes to use on this machine (default `worker_count`); 1 parses
        in this process.

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
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=n, mp_context=context) as pool:
                results = list(pool.map(digest_file, paths))
    digests = [r for r in results if isinstance(r, RankDigest)]
    errors = [TraceError(r.path, r.problem) for r in results if isinstance(r, _Failed)]
    return digests, errors
