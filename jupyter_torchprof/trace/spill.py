"""The detail columns of a huge trace, kept on disk and read on demand.

A trace too big to hold (`parser.too_big_to_hold`) has millions of events,
and each column of the events frame costs 8 bytes an event (a gigabyte
trace: about 30 MB a column). Most columns are read by every table (names,
times, threads, ids); the detail columns below are read only when someone
asks for them: a kernel's launch configuration, an op's shapes and inputs,
its stack and module, the Python tracer's ids. Those are written to disk
and mapped back (``np.load(mmap_mode="r")``): pages come in when a view
reads them, and the kernel can drop them again under pressure instead of
swapping or killing the notebook's kernel.

The files are deleted as soon as they are mapped: the mapping keeps them
readable, the disk space comes back when the frame is freed, and a
kernel that dies (even by ``kill -9``) leaves nothing behind. They go to
``$TORCHPROF_SPILL_DIR``, else the user's cache folder
(``$XDG_CACHE_HOME/jupyter_torchprof/spill`` or ``~/.cache/...``): not
``/tmp``, which is often memory itself (tmpfs), and not the run folder,
which the store lists and exports. Where writing fails (a full disk, no
home), the columns stay in memory; results are the same either way.
``TORCHPROF_SPILL=0`` turns spilling off.

Spilling pays only where the columns are big: writing them costs CPU (on a
1M-event trace, 48 MB of detail columns took 40 ms to write, 5 % of the
load, to hold 33 MB less). Below `SPILL_FROM_BYTES` of detail columns they
stay in memory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..safe_files import user_cache_dir

#: Columns only details, launch configurations, shapes, stacks and modules read.
DETAIL_COLUMNS = (
    "registers",
    "shared_memory",
    "occupancy",
    "blocks_per_sm",
    "warps_per_sm",
    "grid",
    "block",
    "input_dims",
    "input_types",
    "concrete_inputs",
    "stack",
    "module",
    "kernel_file",
    "python_id",
    "python_parent_id",
    "sequence",
)


#: Detail columns (their bytes in memory) from which they are written to disk:
#: about 1.9 million events of the synthetic benchmark trace's shape (72 bytes an event).
SPILL_FROM_BYTES = 128 << 20


def spill_enabled() -> bool:
    """Whether huge traces spill their detail columns (``TORCHPROF_SPILL=0``: no)."""
    return os.environ.get("TORCHPROF_SPILL", "").strip().lower() not in ("0", "off", "false", "no")


def spill_dir() -> Path:
    """Where spilled columns are written (and at once unlinked)."""
    env = os.environ.get("TORCHPROF_SPILL_DIR")
    return Path(env) if env else user_cache_dir("spill")


def is_spilled(column: Any) -> bool:
    """Whether a column (Series, array or Categorical) reads from a mapped file."""
    values = column.array if isinstance(column, pd.Series) else column
    if isinstance(values, pd.Categorical):
        values = values.codes
    elif not isinstance(values, np.ndarray):
        values = np.asarray(values)
    base = values
    while base is not None:
        if isinstance(base, np.memmap):
            return True
        base = getattr(base, "base", None)
    return False


def spill_details(events: pd.DataFrame) -> pd.DataFrame:
    """``events`` with its `DETAIL_COLUMNS` mapped from disk (``events`` itself when that cannot be done)."""
    present = [c for c in DETAIL_COLUMNS if c in events.columns]
    if not present or not spill_enabled() or _bytes_of(events, present) < SPILL_FROM_BYTES:
        return events
    try:
        root = spill_dir()
        root.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root))
    except OSError:
        return events
    try:
        mapped = {c: _mapped(events[c].array, folder / f"{c}.npy") for c in present}
    except OSError:  # a full disk, a quota: keep them in memory
        return events
    finally:
        # Mapped pages stay readable once the files are unlinked.
        shutil.rmtree(folder, ignore_errors=True)
    cols = {c: mapped.get(c, events[c].array) for c in events.columns}
    return pd.DataFrame(cols, index=events.index, copy=False)


def _bytes_of(events: pd.DataFrame, columns: list[str]) -> int:
    """The bytes spilling ``columns`` of ``events`` would write (a categorical: its codes; its categories stay)."""
    total = 0
    for c in columns:
        values = events[c].array
        total += (values.codes if isinstance(values, pd.Categorical) else np.asarray(values)).nbytes
    return total


def _mapped(values: Any, path: Path) -> Any:
    """``values`` written to ``path`` and mapped back read-only."""
    if isinstance(values, pd.Categorical):
        return pd.Categorical.from_codes(_map(values.codes, path), dtype=values.dtype, validate=False)
    return _map(np.asarray(values), path)


def _map(array: np.ndarray, path: Path) -> np.ndarray:
    np.save(path, array, allow_pickle=False)
    # A plain ndarray over the mapping: np.memmap, a subclass, would pass
    # itself on to every result computed from the column.
    return np.load(path, mmap_mode="r").view(np.ndarray)
