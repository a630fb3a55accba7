"""Closing a run that did not finish, so that no run stays "running".

A run folder starts with a placeholder ``run.json`` (status ``running``)
that the store lists as in progress while this kernel lives: the sidebar
cannot delete it and the size cap skips it. When anything ends a capture
before its ``run.json`` is written (Ctrl-C while the trace is read, a bug in
building the profile), the run is closed here: with its trace kept and
listed as damaged (the reason and how to open the trace are its problem),
or removed when there is no trace to keep.

The caller holds Ctrl-C back while these run (the session does, with
`capture.guards.sigint_held`), so a second one cannot leave a run half
closed; this package knows files, not signals.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from .paths import RAW_TRACE_NAME, RUN_FILE, TRACE_NAME
from .store import compress_in_background


def describe(error: BaseException) -> str:
    """An exception in a few words (Ctrl-C named as such)."""
    if isinstance(error, KeyboardInterrupt):
        return "interrupted (Ctrl-C)"
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def still_placeholder(run_dir: Path) -> bool:
    """Whether the run's ``run.json`` is still the placeholder written at its start."""
    try:
        info = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True
    return not isinstance(info, dict) or info.get("status") == "running"


def close_unfinished(
    store: Any, run_dir: Path, error: BaseException, *, name: str, cell: str, started: float
) -> None:
    """End a capture's run whose ``run.json`` was never written.

    Kept as damaged when a trace was exported (the raw trace is gzipped as
    usual), removed otherwise. Nothing is changed when the run was finished
    after all.
    """
    if not run_dir.is_dir() or not still_placeholder(run_dir):
        return
    raw, packed = run_dir / RAW_TRACE_NAME, run_dir / TRACE_NAME
    if not raw.exists() and not packed.exists():
        shutil.rmtree(run_dir, ignore_errors=True)
        return
    if raw.exists() and not packed.exists():
        compress_in_background(raw, packed)
    problem = f"{describe(error)} before the profile was built; the trace is kept: %torchprof --load {packed}"
    info = {
        "name": name,
        "kind": "capture",
        "created": started,
        "cell": cell,
        "partial": True,
        "damaged": True,
        "problem": problem,
        "error": problem,
        "trace": TRACE_NAME,
    }
    try:
        store.write_info(run_dir, info)
    except OSError:
        # Cannot say why: leaving nothing is better than a run stuck "running".
        shutil.rmtree(run_dir, ignore_errors=True)


def drop_unfinished(run_dir: Path | None) -> None:
    """Remove a half-made copy of a loaded trace (the original stays where it was)."""
    if run_dir is not None and run_dir.is_dir() and still_placeholder(run_dir):
        shutil.rmtree(run_dir, ignore_errors=True)
