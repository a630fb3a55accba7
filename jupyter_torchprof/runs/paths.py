"""What a run folder holds and where the store lives: every file name the package writes into it.

Layout::

    <store>/<run id>/run.json                the run's record (`store.RunStore`)
    <store>/<run id>/trace.json.gz           the Kineto trace (``trace.json`` while it is packed)
    <store>/<run id>/<trace>.tables.npz      its tables (`cache`)
    <store>/<run id>/<trace>.timeline.npz    the sidebar timeline's first level of detail (`cache`)

The store is ``$TORCHPROF_RUN_DIR``, else ``.torchprof/runs`` (`store_folder`).
Only this package names these files; the layers below are handed what
they need (`NOT_TRACES` for the trace finder).
"""

from __future__ import annotations

import os
from pathlib import Path

RUN_FILE = "run.json"
TRACE_NAME = "trace.json.gz"
#: The trace as the profiler wrote it, before it is packed into `TRACE_NAME`.
RAW_TRACE_NAME = "trace.json"
TABLES_SUFFIX = ".tables.npz"
TIMELINE_SUFFIX = ".timeline.npz"
#: Names in a run folder that look like traces (``*.json``) and are not.
NOT_TRACES = frozenset({RUN_FILE})
#: The environment variable naming the store, and the store's folder without it.
STORE_ENV = "TORCHPROF_RUN_DIR"
DEFAULT_STORE = Path(".torchprof") / "runs"


def store_folder(*chosen: str | os.PathLike[str] | None, base: str | os.PathLike[str] | None = None) -> Path:
    """The run store's folder, absolute: the first of ``chosen`` given, else ``$TORCHPROF_RUN_DIR``, else ``.torchprof/runs``.

    ``chosen`` are the folders a user named, most specific first
    (``--run-dir``, then the configured ``TorchProf.run_dir``); empty ones
    are skipped. A relative folder is taken relative to ``base`` (the
    server's root folder; the working directory when not given), and ``~``
    is expanded, so the kernel and the server find the same store.
    """
    named = next((c for c in chosen if c), None) or os.environ.get(STORE_ENV) or DEFAULT_STORE
    path = Path(named).expanduser()
    root = Path(base).expanduser() if base else Path.cwd()
    return Path(os.path.abspath(path if path.is_absolute() else root / path))


def tables_path(trace: str | Path) -> Path:
    """Where the tables of ``trace`` are kept (beside it)."""
    t = Path(trace)
    return t.with_name(t.name + TABLES_SUFFIX)


def timeline_path(trace: str | Path) -> Path:
    """Where the timeline payload of ``trace`` is kept (beside it)."""
    t = Path(trace)
    return t.with_name(t.name + TIMELINE_SUFFIX)


def is_run_folder(folder: str | Path) -> bool:
    """Whether ``folder`` is a run folder of the store (it holds `RUN_FILE`)."""
    return (Path(folder) / RUN_FILE).is_file()
