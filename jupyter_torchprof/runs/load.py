"""Files and folders → result objects: a `Profile`, or a `RankSet` for a folder of ranks.

Finding the traces of a folder and parsing one file are `trace.files`'
job; this module decides what a path opens as, and opens a run folder of
the store from the tables kept beside its trace (`cache`, written by `keep`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TraceError
from ..trace.files import XPLANE_SUFFIX, folder_traces, parse_with_device, parse_xplane
from .paths import NOT_TRACES, is_run_folder

if TYPE_CHECKING:  # pragma: no cover
    from ..results.profile import Profile
    from ..results.ranks import RankSet


def load(
    path: str | Path,
    name: str | None = None,
    client: Any = None,
    workers: int | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Profile | RankSet:
    """Load a trace file, or a folder of traces (see `trace.files`), from a path or a URL.

    A URL (``s3://``, ``gs://``, ``http(s)://``, any fsspec protocol) is
    read through fsspec, with ``storage_options`` (endpoint_url,
    anon, key ...) given to its file system (see `remote_load`): a folder's
    ranks are then fetched where they are parsed (each Dask worker reads its
    own), and no table cache is ever written to the store. A ``file://``
    URL is loaded as the local path it names.

    A run folder of the store (`paths.store_folder`, one folder per run) opens from the
    tables kept beside its trace (`cache`) when they are current:
    its summary and tables without parsing the trace, which is parsed only
    when something else (events, the timeline) is asked for.

    A folder of several traces is parsed in parallel: on ``client`` (a
    ``dask.distributed.Client``) when given, else in ``workers`` processes
    on this machine (default: one per core; see `parallel.digest_files`).

    Raises
    ------
    TraceError
        The path does not exist, a file is not a readable trace, or a folder
        holds no (readable) trace. In a folder of several traces, unreadable
        ones are skipped with a warning naming each.
    """
    from ..results.profile import Profile

    if isinstance(path, str) and "://" in path:
        from ..trace.remote import is_url, local_path

        if is_url(path):
            local = local_path(path)
            if local is None:
                from .remote_load import load_url

                return load_url(path, name, client, workers, storage_options)
            path = local  # file://: a local path, with every rule of one
    p = Path(path).expanduser()
    if not p.exists():
        raise TraceError(p, "no such file or folder")
    if p.is_file():
        if p.name.endswith(XPLANE_SUFFIX):
            return Profile(parse_xplane(p), name=name)
        return with_record(Profile(parse_with_device(p), name=name), p.parent)
    if not p.is_dir():
        raise TraceError(p, "is neither a file nor a folder")
    files, planes = folder_traces(p, skip=NOT_TRACES)
    if not files and planes:
        newest = max(x.parent for x in planes)
        return Profile(parse_xplane([x for x in planes if x.parent == newest][0]), name=name)
    if not files:
        raise TraceError(p, "no trace files (*.json, *.json.gz or *.xplane.pb) in this folder")
    if len(files) == 1:
        return _one_trace(p, files[0], name)
    from ..results.ranks import RankSet

    return RankSet.from_files(files, name=name or p.name, client=client, workers=workers)


def _one_trace(folder: Path, trace: Path, name: str | None) -> Profile:
    """The Profile of a folder's only trace; a run folder's from its table cache when current.

    A run folder (one the store wrote) whose cache is absent, older or
    unreadable gets one, written once its tables are computed; any other
    folder is only read, never written to.
    """
    from ..results.profile import Profile

    if not is_run_folder(folder):
        return Profile(parse_with_device(trace), name=name)
    from .cache import cached_profile
    from .keep import keep_cache, write_table_cache

    cached = cached_profile(trace, name=name)
    if cached is not None:
        return with_record(cached, folder)
    profile = Profile(parse_with_device(trace), name=name)
    keep_cache(write_table_cache, profile, trace)
    return with_record(profile, folder)


def with_record(profile: Profile, folder: Path) -> Profile:
    """``profile`` given what the record of its run folder keeps and its trace lacks (the CPU time per step).

    Nothing for a folder the store did not write.
    """
    from .store import recorded_step_cpu

    if is_run_folder(folder):
        profile.recorded_step_cpu_us = recorded_step_cpu(folder)
    return profile
