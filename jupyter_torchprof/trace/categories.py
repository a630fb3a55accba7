"""What a Kineto category means, independent of the device that wrote it.

Kineto names categories after the backend (``cuda_runtime``, ``xpu_runtime``,
``mtia_runtime``, ``privateuse1_driver`` ...). Everything after the parser works
on the small closed set of *kinds* below, so that a kernel is a kernel whatever
device ran it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

#: Host-side operator (aten op, autograd node) recorded by the profiler.
CPU_OP = "cpu_op"
#: ``record_function`` / ``ProfilerStep#k`` ranges on a host thread.
USER_ANNOTATION = "user_annotation"
#: Python frames recorded with ``with_stack=True``.
PYTHON_FUNCTION = "python_function"
#: Host-side runtime or driver API calls (kernel launches, memcpy calls, syncs).
RUNTIME = "runtime"
#: Work that ran on a device.
KERNEL = "kernel"
MEMCPY = "memcpy"
MEMSET = "memset"
#: ``record_function`` ranges mirrored on a device stream.
GPU_ANNOTATION = "gpu_annotation"
#: Device-side synchronisation records (``cuda_sync``: event and stream waits).
SYNC = "sync"
OTHER = "other"

KINDS = (
    CPU_OP,
    USER_ANNOTATION,
    PYTHON_FUNCTION,
    RUNTIME,
    KERNEL,
    MEMCPY,
    MEMSET,
    GPU_ANNOTATION,
    SYNC,
    OTHER,
)

#: Kinds that occupy a device (count towards busy time and the kernel table).
DEVICE_ACTIVITY = (KERNEL, MEMCPY, MEMSET)
#: Kinds that live on a device timeline (lanes per device and stream).
DEVICE_KINDS = (KERNEL, MEMCPY, MEMSET, GPU_ANNOTATION, SYNC)
#: Device work that a host runtime/driver call launched (what launch links
#: are for; annotations mirrored on a stream have no launch).
LAUNCHED_KINDS = (KERNEL, MEMCPY, MEMSET, SYNC)
#: Kinds that live on host threads and nest by time.
HOST_KINDS = (CPU_OP, USER_ANNOTATION, PYTHON_FUNCTION, RUNTIME)
#: Host kinds that are rows of the op table.
OP_KINDS = (CPU_OP, USER_ANNOTATION, RUNTIME)

_EXACT = {
    "cpu_op": CPU_OP,
    "operator": CPU_OP,
    "hpu_op": KERNEL,
    "user_annotation": USER_ANNOTATION,
    "python_function": PYTHON_FUNCTION,
    "kernel": KERNEL,
    "gpu_kernel": KERNEL,
    "mtia_ccp_events": KERNEL,
    "gpu_memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "gpu_user_annotation": GPU_ANNOTATION,
    "cuda_sync": SYNC,
    "cuda_profiler_range": OTHER,
    "overhead": OTHER,
    "trace": OTHER,
}


def kind_of_category(cat: object) -> str:
    """Map a raw Kineto category to one of `KINDS`.

    Unknown categories are classified by the words Kineto uses in them
    (``*_runtime``, ``*_driver``, ``*memcpy*``, ...) so that traces from
    backends we have never seen still land in the right tables.
    """
    if not isinstance(cat, str):
        return OTHER
    c = cat.lower()
    if c in _EXACT:
        return _EXACT[c]
    if c.endswith("_runtime") or c.endswith("_driver") or c == "runtime":
        return RUNTIME
    if "memcpy" in c:
        return MEMCPY
    if "memset" in c:
        return MEMSET
    if "user_annotation" in c:
        return GPU_ANNOTATION if ("gpu" in c or "device" in c) else USER_ANNOTATION
    if "kernel" in c:
        return KERNEL
    if c.endswith("_sync"):
        return SYNC
    if c.endswith("_op") and "cpu" in c:
        return CPU_OP
    return OTHER


#: Flow categories that link a host launch to its device work.
LAUNCH_FLOW_CATEGORIES = frozenset({"ac2g", "async_cpu_to_gpu", "async_gpu"})


#: Position of each kind among the categories of the ``kind`` column (the
#: parser always builds it with exactly `KINDS`, in this order).
KIND_INDEX = {k: i for i, k in enumerate(KINDS)}


def kind_mask(events: Any, kinds: str | tuple[str, ...]) -> np.ndarray:
    """Boolean mask of the rows of an events frame whose ``kind`` is in ``kinds``.

    Works on the categorical codes: comparing a million small integers is
    about a hundred times cheaper than comparing the strings.
    """
    col = events["kind"]
    wanted = (kinds,) if isinstance(kinds, str) else kinds
    if isinstance(col.dtype, pd.CategoricalDtype) and list(col.cat.categories) == list(KINDS):
        codes = col.cat.codes.to_numpy()
        idx = [KIND_INDEX[k] for k in wanted]
        return codes == idx[0] if len(idx) == 1 else np.isin(codes, idx)
    return np.isin(col.to_numpy(dtype=object), list(wanted))
