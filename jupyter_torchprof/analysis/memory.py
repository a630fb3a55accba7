"""Memory over the run: the peak each device reached, from the ``[memory]`` events.

Kineto writes, with every allocation and free, the allocator's running total
(``total_allocated``). The CPU total counts only what was allocated while
profiling (torch cannot size blocks allocated before it started); a device
allocator reports its own running total.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Kineto's ``Device Type`` of host memory.
CPU_DEVICE_TYPE = 0

_COLUMNS = ["device", "peak_bytes", "allocations", "frees", "allocated_bytes", "relative"]


def memory_peaks(memory: pd.DataFrame) -> pd.DataFrame:
    """One row per memory device, with its peak.

    Columns: ``device`` (``CPU`` / ``device N``), ``peak_bytes``,
    ``allocations`` and ``frees`` (event counts), ``allocated_bytes`` (sum of
    the allocations) and ``relative`` (True for the CPU: counted from the
    start of profiling).
    """
    if memory is None or not len(memory):
        return pd.DataFrame({c: pd.Series(dtype=object if c == "device" else float) for c in _COLUMNS})
    rows = []
    dtype = memory["device_type"].to_numpy()
    did = memory["device_id"].to_numpy()
    nbytes = memory["bytes"].to_numpy(np.float64)
    total = memory["total_allocated"].to_numpy(np.float64)
    for t, d in sorted({(int(a), int(b)) for a, b in zip(dtype, did, strict=True)}):
        sel = (dtype == t) & (did == d)
        cpu = t == CPU_DEVICE_TYPE
        rows.append(
            {
                "device": "CPU" if cpu else f"device {d}",
                "peak_bytes": float(np.nanmax(total[sel])) if np.isfinite(total[sel]).any() else np.nan,
                "allocations": int((nbytes[sel] > 0).sum()),
                "frees": int((nbytes[sel] < 0).sum()),
                "allocated_bytes": float(nbytes[sel][nbytes[sel] > 0].sum()),
                "relative": bool(cpu),
            }
        )
    return pd.DataFrame(rows, columns=_COLUMNS)
