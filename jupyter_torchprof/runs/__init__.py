"""The run folder, owned here alone: the store, the caches beside a trace, opening a path, closing a run.

- `paths`: every name a run folder holds, and where the store is (`store_folder`).
- `store`: `RunStore`, one folder per run with its trace and its record.
- `cache`: the tables and the timeline kept beside a trace (encode, read, fingerprint).
- `keep`: writing those caches for a kept run.
- `load` (+ `remote_load`): a path or a URL opened as a `Profile` or a `RankSet`.
- `unfinished`: closing a run whose capture did not finish.

Only the layers above import this package: the session, the server,
export, the magics and `api`, and the package's ``__init__``. Below it,
nothing names a run folder's files: the trace finder is handed
`paths.NOT_TRACES`. This module imports the light parts only (no pandas):
`cache`, `keep` and `load` are imported by name where they are used.
"""

from __future__ import annotations

from .paths import (
    DEFAULT_STORE,
    NOT_TRACES,
    RAW_TRACE_NAME,
    RUN_FILE,
    STORE_ENV,
    TRACE_NAME,
    is_run_folder,
    store_folder,
    tables_path,
    timeline_path,
)
from .store import RunStore, is_run_id, json_safe, new_run_id, trace_file, wait_for_compression

__all__ = [
    "DEFAULT_STORE",
    "NOT_TRACES",
    "RAW_TRACE_NAME",
    "RUN_FILE",
    "STORE_ENV",
    "TRACE_NAME",
    "RunStore",
    "is_run_folder",
    "is_run_id",
    "json_safe",
    "new_run_id",
    "store_folder",
    "tables_path",
    "timeline_path",
    "trace_file",
    "wait_for_compression",
]
