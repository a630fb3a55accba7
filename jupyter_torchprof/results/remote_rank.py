"""One rank at a URL, digested where it is parsed, or loaded whole again on demand (see `runs.remote_load`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import TraceError
from ..trace.remote import fetched, is_url, parse_url
from .digest import FailedRank, RankDigest, digest_file

if TYPE_CHECKING:  # pragma: no cover
    from .profile import Profile


def digest_source(
    path: str, parts: tuple[str, ...] = (), storage_options: dict[str, Any] | None = None
) -> Any:
    """`digest.digest_file` of a local path as is, or of a URL from a local copy made here.

    Run where the rank is parsed (a Dask worker, a worker process): the
    trace's bytes go from the store to this process only. The digest names
    the URL, so that the rank's events can be fetched again later.
    """
    if not is_url(path):
        return digest_file(path, parts)
    try:
        with fetched(path, storage_options) as local:
            digest = digest_file(str(local), parts)
    except TraceError as exc:
        return FailedRank(path, exc.problem)
    if isinstance(digest, FailedRank):
        return FailedRank(path, digest.problem)
    assert isinstance(digest, RankDigest)
    digest.path = path
    digest.meta.path = path
    return digest


def profile_of_url(url: str, name: str, storage_options: dict[str, Any] | None = None) -> Profile:
    """The full `Profile` of one rank at ``url`` (fetched again, here)."""
    from .profile import Profile

    return Profile(parse_url(url, storage_options), name=name)
