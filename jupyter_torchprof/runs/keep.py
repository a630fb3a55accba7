"""Writing what a kept run holds beside its trace: the table and timeline caches (see `cache`).

A cache only saves time, so `keep_cache` turns any failure into one
`CacheWarning` line: a full disk, a read-only run folder or a table that
cannot be kept exactly never stops a run from being shown.
"""

from __future__ import annotations

import os
import secrets
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .paths import tables_path, timeline_path

if TYPE_CHECKING:  # pragma: no cover
    from ..results.profile import Profile


def write_atomic(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` through a temporary file beside it, so no reader sees half a file."""
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.part")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except BaseException:
        # A full disk or a Ctrl-C: the half-written file must not stay beside the trace.
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise


def write_table_cache(profile: Profile, trace: str | Path) -> Path:
    """Keep ``profile``'s tables beside ``trace``, the file it was made from (atomically).

    See `cache` for what the file holds. Computes any table not computed
    yet. Returns the file written.
    """
    from .cache import encode_tables

    data = encode_tables(profile, trace)
    target = tables_path(trace)
    write_atomic(target, data)
    return target


def write_timeline_cache(payload: bytes, trace: str | Path, key: dict[str, Any]) -> Path:
    """Keep a timeline's JSON (``payload``, drawn from ``trace`` under ``key``) beside the trace."""
    from .cache import encode_timeline

    data = encode_timeline(payload, trace, key)
    target = timeline_path(trace)
    write_atomic(target, data)
    return target


def keep_cache(write: Callable[..., Path], *args: Any) -> Path | None:
    """``write(*args)`` (one of the cache writers above); a failure is a `CacheWarning`, never an error."""
    from .cache import CacheWarning

    try:
        return write(*args)
    except Exception as exc:  # noqa: BLE001 - one warning line; the caller carries on
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        warnings.warn(f"the run's tables were not cached: {text[:200]}", CacheWarning, stacklevel=2)
        return None
