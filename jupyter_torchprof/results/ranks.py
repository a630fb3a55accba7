"""Several ranks of one distributed job, side by side."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..analysis.findings.thresholds import THRESHOLDS
from ..analysis.ranks import finish_rank_table, rank_row
from ..trace.remote import is_url
from .profile import Profile

if TYPE_CHECKING:  # pragma: no cover
    from ..trace.parser import TraceMeta
    from .digest import RankDigest


class _Loaded:
    """A rank held as a full `Profile` (what a `RankDigest` is for a rank parsed elsewhere)."""

    def __init__(self, p: Profile) -> None:
        self.p = p
        self.meta = p.meta
        self.name = p.name
        self._row: dict[str, Any] | None = None

    @property
    def row(self) -> dict[str, Any]:
        if self._row is None:
            self._row = rank_row(self.p)
        return self._row

    @property
    def summary(self) -> dict[str, Any]:
        return self.p.summary

    @property
    def findings(self) -> pd.DataFrame:
        return self.p.findings

    def profile(self) -> Profile:
        return self.p


class RankSet:
    """The ranks of one distributed job, indexed by rank.

    A set loaded from a folder (`from_files`) keeps each rank's summary and
    cross-rank row, computed in worker processes (or on a Dask cluster), not
    its events: ``ranks[r]`` parses rank ``r``'s file again the first time
    it is asked for, and keeps that `Profile`. A rank's tables (`tables`)
    and findings (`findings`) are built on first access, the findings of all
    ranks at once and in parallel, from the files again: most looks at a
    job read only the cross-rank table, and building every rank's tables
    made a folder of many tiny ranks load several times slower than its
    files one by one.

    Parameters
    ----------
    profiles
        One Profile per rank, already loaded.
    name
        Label for the set (usually the folder name).
    notes
        Lines about the folder (files that could not be read).
    digests
        Ranks parsed elsewhere (`digest.RankDigest`), beside or instead of ``profiles``.
    """

    def __init__(
        self,
        profiles: Sequence[Profile] = (),
        name: str = "ranks",
        notes: Sequence[str] = (),
        *,
        digests: Sequence[RankDigest] = (),
    ) -> None:
        entries: list[_Loaded | RankDigest] = [_Loaded(p) for p in profiles]
        entries += list(digests)
        self._entries = sorted(
            entries, key=lambda e: (e.meta.rank is None, e.meta.rank or 0, str(e.meta.path or e.name))
        )
        self._loaded: dict[int, Profile] = {}
        #: Where the ranks' tables and findings are built when asked for (see `from_files`).
        self._client: Any = None
        self._workers: int | None = None
        #: The store's options when the ranks are URLs (`remote_load`), for fetching them again.
        self._storage_options: dict[str, Any] | None = None
        self.name = name
        #: Files of the folder that could not be read (one line each).
        self.notes = list(notes)

    @classmethod
    def from_files(
        cls,
        files: Sequence[Path | str],
        name: str = "ranks",
        client: Any = None,
        workers: int | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> RankSet:
        """Load one rank per trace file, in parallel (see `parallel.digest_files`).

        Files that are not readable traces are skipped with a warning that
        names each (and listed in `notes`); if none is readable, the first
        file's `TraceError` is raised.

        Parameters
        ----------
        files
            One trace file per rank: paths, or URLs (fetched where they are parsed).
        name
            Label for the set.
        client
            A ``dask.distributed.Client`` to parse the files on; None parses
            them in worker processes on this machine's cores.
        workers
            Worker processes on this machine (default: one per core, at most
            one per file; 1 parses in this process).
        storage_options
            Options of the store the URLs in ``files`` are in (see `remote_load`).
        """
        import warnings

        from .parallel import digest_files

        digests, errors = digest_files(files, client=client, workers=workers, storage_options=storage_options)
        if not digests:
            raise errors[0]
        for d in digests:
            for msg in d.meta.warnings:
                warnings.warn(msg, stacklevel=2)
        notes = [f"skipped {e}" for e in errors]
        for note in notes:
            warnings.warn(note, stacklevel=2)
        ranks = cls(name=name, notes=notes, digests=digests)
        ranks._client, ranks._workers = client, workers
        ranks._storage_options = storage_options
        return ranks

    @property
    def ranks(self) -> list[int | None]:
        """The rank of each profile (None when its trace does not say)."""
        return [e.meta.rank for e in self._entries]

    @property
    def metas(self) -> list[TraceMeta]:
        """Each rank's trace metadata, in rank order (no events are loaded)."""
        return [e.meta for e in self._entries]

    @property
    def summaries(self) -> list[dict[str, Any]]:
        """Each rank's `Profile.summary`, in rank order (no events are loaded)."""
        return [e.summary for e in self._entries]

    @property
    def parsed_by(self) -> list[int]:
        """The process id that parsed each rank, in rank order (worker processes, or this one)."""
        import os

        return [getattr(e, "pid", os.getpid()) for e in self._entries]

    def tables(self, position: int) -> dict[str, pd.DataFrame]:
        """The ops, kernels, steps and streams tables of the rank at ``position``, without its events.

        Built on first access (the rank's file is parsed again, unless its
        `Profile` is loaded), then kept.
        """
        e = self._entries[position]
        if isinstance(e, _Loaded):
            from .digest import DIGEST_TABLES

            return {t: getattr(e.p, t) for t in DIGEST_TABLES}
        if not e.tables:
            self._build([position], "tables")
        return e.tables

    def _rank_findings(self) -> list[pd.DataFrame]:
        """Each rank's own findings, in rank order; those not built yet are built together, in parallel."""
        missing = [i for i, e in enumerate(self._entries) if e.findings is None]
        if missing:
            self._build(missing, "findings")
        return [e.findings for e in self._entries]

    def _build(self, positions: list[int], part: str) -> None:
        """Fill ``part`` ("findings" or "tables") of the digests at ``positions``.

        A rank whose `Profile` is loaded gives it from there; the others are
        digested again from their files, where the load ran (`parallel.digest_files`).
        """
        from .digest import DIGEST_TABLES
        from .parallel import digest_files

        def fill(i: int, findings: pd.DataFrame | None, tables: dict[str, pd.DataFrame]) -> None:
            e = self._entries[i]
            if e.findings is None:
                e.findings = findings
            e.tables = e.tables or tables

        todo = []
        for i in positions:
            if i in self._loaded:
                p = self._loaded[i]
                fill(
                    i,
                    p.findings if part == "findings" else None,
                    {t: getattr(p, t) for t in DIGEST_TABLES} if part == "tables" else {},
                )
            else:
                todo.append(i)
        if not todo:
            return
        files = [self._entries[i].path for i in todo]  # str: a URL stays one (Path would mangle it)
        # A Dask client closed since the load: this machine's workers build them.
        client = self._client if getattr(self._client, "status", "running") == "running" else None
        digests, errors = digest_files(
            files, client=client, workers=self._workers, parts=(part,), storage_options=self._storage_options
        )
        if errors:  # the file changed or went away since the load
            raise errors[0]
        for i, d in zip(todo, digests, strict=True):
            fill(i, d.findings, d.tables)

    def profile_at(self, position: int) -> Profile:
        """The full `Profile` of the rank at ``position`` (parsed from its file on first use)."""
        if position not in self._loaded:
            e = self._entries[position]
            if isinstance(e, _Loaded) or not is_url(e.path):
                self._loaded[position] = e.profile()
            else:
                from .remote_rank import profile_of_url

                self._loaded[position] = profile_of_url(e.path, e.name, self._storage_options)
        return self._loaded[position]

    @property
    def profiles(self) -> list[Profile]:
        """Every rank's full `Profile` (parses each rank not loaded yet)."""
        return [self.profile_at(i) for i in range(len(self._entries))]

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Profile]:
        return (self.profile_at(i) for i in range(len(self._entries)))

    def __getitem__(self, rank: int) -> Profile:
        """The profile of ``rank`` (by recorded rank, else by position)."""
        for i, e in enumerate(self._entries):
            if e.meta.rank == rank:
                return self.profile_at(i)
        return self.profile_at(range(len(self._entries))[rank])

    @property
    def table(self) -> pd.DataFrame:
        """The cross-rank table (see `cross_rank_table`)."""
        if "_table" not in self.__dict__:
            rows = []
            for i, e in enumerate(self._entries):
                row = dict(e.row)
                if row["rank"] is None:
                    row["rank"] = i
                rows.append(row)
            self.__dict__["_table"] = finish_rank_table(rows)
        return self.__dict__["_table"]

    @property
    def stragglers(self) -> list[int]:
        """Ranks whose step time is well above the median rank's."""
        t = self.table
        return [] if t.empty else t.loc[t["straggler"], "rank"].tolist()

    @property
    def straggler_findings(self) -> pd.DataFrame:
        """The stragglers as findings (see `Profile.findings` for the columns)."""
        if "_stragglers" not in self.__dict__:
            from ..analysis.findings import find_stragglers, findings_frame

            self.__dict__["_stragglers"] = findings_frame(find_stragglers(self.table, THRESHOLDS))
        return self.__dict__["_stragglers"]

    @property
    def findings(self) -> pd.DataFrame:
        """Stragglers, then every rank's own findings, with a ``rank`` column.

        ``event_rows`` refer to the ``events`` of the rank in that column.
        """
        if "_findings" not in self.__dict__:
            from ..analysis.findings import merge_rank_findings

            self.__dict__["_findings"] = merge_rank_findings(
                self.straggler_findings,
                [
                    (e.meta.rank if e.meta.rank is not None else i, found)
                    for i, (e, found) in enumerate(zip(self._entries, self._rank_findings(), strict=True))
                ],
            )
        return self.__dict__["_findings"]

    def text(self) -> str:
        """The cross-rank table as text."""
        from .. import presentation  # a presentation hook (see `presentation`)

        return presentation.rankset_text(self)

    def __repr__(self) -> str:
        return f"<RankSet {self.name!r}: ranks {self.ranks}>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from .. import presentation  # a presentation hook (see `presentation`)

        return presentation.rankset_bundle(self, include, exclude)

    def _display_(self) -> Any:
        # marimo's hook (it has no ipykernel): every rank side by side as one anywidget.
        from .. import presentation  # a presentation hook (see `presentation`)

        return presentation.hosted_rankset(self)

    def view(self) -> Any:
        """The interactive view: a bar and a row per rank, the straggler verdict, a click into any rank.

        Display it in a notebook cell; ``%torchprof --load <folder>`` shows it by itself.
        """
        from .. import presentation  # a presentation hook (see `presentation`)

        return presentation.rankset_widget(self)
