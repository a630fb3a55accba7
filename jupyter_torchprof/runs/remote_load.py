"""URLs → result objects: a trace or a rank folder where it lives (see `trace.remote`).

On a Dask cluster (``load(url, client=client)``) each worker fetches and
parses its own ranks straight from the store (`remote_rank`): only the
URLs and the storage options travel to the workers, and only the ranks'
digests (a few kilobytes each) come back; the client process lists the
folder and never reads a trace byte. Worker processes on this machine do
the same.

Nothing is written to the store: a table cache (`cache`) is kept for
local run folders only.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from ..errors import TraceError
from ..trace.remote import folder_urls, kind_of, parse_url
from .paths import NOT_TRACES

if TYPE_CHECKING:  # pragma: no cover
    from ..results.profile import Profile
    from ..results.ranks import RankSet


def url_name(url: str) -> str:
    """The last part of a URL's path (``job`` for ``s3://bucket/runs/job/``)."""
    return PurePosixPath(url.split("://", 1)[-1].split("?", 1)[0].rstrip("/")).name or url


def load_url(
    url: str,
    name: str | None = None,
    client: Any = None,
    workers: int | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Profile | RankSet:
    """`load` of a URL: one trace, or a folder of traces (one per rank)."""
    from ..results.profile import Profile

    if kind_of(url, storage_options) == "file":
        return Profile(parse_url(url, storage_options), name=name)
    files = folder_urls(url, storage_options, skip=NOT_TRACES)
    if not files:
        raise TraceError(url, "no trace files (*.json or *.json.gz) in this folder")
    if len(files) == 1:
        return Profile(parse_url(files[0], storage_options), name=name)
    from ..results.ranks import RankSet

    return RankSet.from_files(
        files, name=name or url_name(url), client=client, workers=workers, storage_options=storage_options
    )
