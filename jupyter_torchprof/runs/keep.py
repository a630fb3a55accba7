"""Keeping a run after it is shown: a loaded trace copied into the store, the caches beside a trace.

`keep_loaded` makes a run of traces opened from elsewhere (or finds the run
that keeps them already); `keep_tables` writes a run's table cache (see
`cache`), and whatever else the caller keeps beside the trace, on a thread
that `store.wait_for_compression` waits for. A cache only saves time, so
`keep_cache` turns any failure into one `CacheWarning` line: a full disk, a
read-only run folder or a table that cannot be kept exactly never stops a
run from being shown.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..safe_files import write_atomically
from .paths import tables_path, timeline_path

if TYPE_CHECKING:  # pragma: no cover
    from ..results.profile import Profile
    from .store import RunStore


def write_table_cache(profile: Profile, trace: str | Path) -> Path:
    """Keep ``profile``'s tables beside ``trace``, the file it was made from (atomically).

    See `cache` for what the file holds. Computes any table not computed
    yet. Returns the file written.
    """
    from .cache import encode_tables

    data = encode_tables(profile, trace)
    target = tables_path(trace)
    write_atomically(target, lambda tmp: tmp.write_bytes(data))
    return target


def write_timeline_cache(payload: bytes, trace: str | Path, key: dict[str, Any]) -> Path:
    """Keep a timeline's JSON (``payload``, drawn from ``trace`` under ``key``) beside the trace."""
    from .cache import encode_timeline

    data = encode_timeline(payload, trace, key)
    target = timeline_path(trace)
    write_atomically(target, lambda tmp: tmp.write_bytes(data))
    return target


@dataclass(frozen=True)
class Kept:
    """Where `keep_loaded` keeps a loaded trace: its run folder, whether it was made now, the (first) trace there."""

    run_dir: Path
    new: bool
    trace: Path | None = None


def keep_loaded(
    store: RunStore,
    profiles: list[Profile],
    *,
    name: str,
    source: str,
    url: str | None = None,
    notebook: str | None = None,
    held: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> Kept | None:
    """Keep a copy of loaded traces (one per profile: the ranks of a folder) as a run of ``store``.

    None when there is nothing to copy: no profile has a trace file, or the
    traces are in the store already (a kept run opened again). The same
    files loaded again (`store.source_key`; for a ``url``, whose traces were
    fetched to temporary copies, `store.url_source_key`) give the run that
    keeps them already, not a second copy. Whatever stops the copy (a full
    disk, a bug, Ctrl-C) is raised once the half-made run is removed, under
    ``held()`` (the caller's way of holding Ctrl-C back, so that a second
    one cannot leave it half removed).
    """
    from .store import run_info, source_key, url_source_key
    from .unfinished import drop_unfinished

    sources = [Path(p.meta.path) for p in profiles if p.meta.path]
    root = store.root.resolve()
    if not sources or any(root in s.resolve().parents for s in sources):
        return None
    key = url_source_key(url, sources) if url else source_key(sources)
    kept_before = store.find_loaded(key)
    if kept_before is not None:
        return Kept(kept_before, new=False)
    run_dir = None
    try:
        run_dir = store.create()
        kept: list[Path] = []
        for i, src in enumerate(sources):
            taken = src.name in [k.name for k in kept]
            kept.append(store.add_trace(run_dir, src, name=f"{i}-{src.name}" if taken else src.name))
        info = run_info(profiles[0], notebook, kind="load")
        info.update(
            name=name,
            source=url or str(Path(source).expanduser().resolve()),
            traces=[k.name for k in kept],
            trace=kept[0].name,
            source_key=key,
        )
        info["ranks"] = len(profiles)
        store.write_info(run_dir, info)
    except BaseException:
        with held():
            drop_unfinished(run_dir)
        raise
    return Kept(run_dir, new=True, trace=kept[0])


def keep_tables(
    profile: Profile,
    trace: Path,
    packing: threading.Thread | None = None,
    also: Iterable[Callable[[Any, Path], Path]] = (),
) -> threading.Thread:
    """Write ``profile``'s table cache beside ``trace`` once ``packing`` (the thread packing it) has ended.

    Then each writer of ``also`` (``write(profile, trace)``: the sidebar's
    timeline), all on one thread `store.wait_for_compression` waits for:
    the caches are keyed on the packed trace's size and time. The tables are
    computed first, here on the caller's thread, so the writer only reads
    them. A trace whose packing failed (the raw one stays) is left uncached.
    """
    from .store import in_background

    profile.ops, profile.kernels, profile.steps, profile.findings  # noqa: B018
    profile.summary, profile.notes, profile.memory_events, profile.events  # noqa: B018
    writers = list(also)

    def write() -> None:
        if packing is not None:
            packing.join()
        if trace.is_file():
            keep_cache(write_table_cache, profile, trace)
            for writer in writers:
                keep_cache(writer, profile, trace)

    return in_background(write, "torchprof-tables")


def keep_cache(write: Callable[..., Path], *args: Any) -> Path | None:
    """``write(*args)`` (one of the cache writers above); a failure is a `CacheWarning`, never an error."""
    from .cache import CacheWarning

    try:
        return write(*args)
    except Exception as exc:  # noqa: BLE001 - one warning line; the caller carries on
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        warnings.warn(f"the run's tables were not cached: {text[:200]}", CacheWarning, stacklevel=2)
        return None
