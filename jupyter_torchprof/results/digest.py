"""What one rank of a job gives the cross-rank views, computed where the rank is parsed.

`digest_file` runs in a worker process (`rank_worker`), on a Dask worker,
or in the notebook's process; what it returns pickles small: the rank's
metadata, summary and cross-rank row, and only when asked for (``parts``)
its findings and main tables, never its events.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import TraceError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..trace.parser import TraceMeta
    from .profile import Profile

#: Tables a digest carries (with ``parts`` holding "tables") besides its summary.
DIGEST_TABLES = ("ops", "kernels", "steps", "streams")

#: What a digest can carry besides its summary and row, built only when asked for.
PARTS = ("findings", "tables")


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
        `Profile.findings`, None until asked for (``parts``).
    tables
        `DIGEST_TABLES` by name, empty until asked for (``parts``).
    pid
        The process that parsed the rank.
    """

    path: str
    name: str
    meta: TraceMeta
    summary: dict[str, Any]
    row: dict[str, Any]
    findings: pd.DataFrame | None = None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    pid: int = field(default_factory=os.getpid)

    def profile(self) -> Profile:
        """The rank's full `Profile`, parsed again from its file."""
        from .profile import Profile

        return Profile.from_file(self.path, name=self.name)


@dataclass
class FailedRank:
    """A rank whose file is not a readable trace (TraceError does not pickle)."""

    path: str | None
    problem: str


def digest_profile(p: Profile, parts: Sequence[str] = ()) -> RankDigest:
    """The digest of a loaded profile: its summary and row, and the `PARTS` named in ``parts``."""
    from ..analysis.ranks import rank_row

    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown digest parts {sorted(unknown)}; known: {', '.join(PARTS)}")
    return RankDigest(
        path=str(p.meta.path),
        name=p.name,
        meta=p.meta,
        summary=p.summary,
        row=rank_row(p),
        findings=p.findings if "findings" in parts else None,
        tables={t: getattr(p, t) for t in DIGEST_TABLES} if "tables" in parts else {},
    )


def digest_file(path: str, parts: Sequence[str] = ()) -> RankDigest | FailedRank:
    """Parse and analyse one trace file (run in a worker process); see `digest_profile`."""
    from .profile import Profile

    try:
        with warnings.catch_warnings():
            # The parent shows the trace's warnings (``meta.warnings``) once.
            warnings.simplefilter("ignore")
            return digest_profile(Profile.from_file(path), parts)
    except TraceError as exc:
        return FailedRank(exc.path, exc.problem)
