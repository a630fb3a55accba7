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

#: Every backend's categories that we know by name (the suffix rules of
#: `kind_of_category` catch the rest). Host launches (``*_runtime``,
#: ``*_driver``) and the device work they launch share ``args.correlation``
#: on every backend, which is what links them.
_EXACT = {
    "cpu_op": CPU_OP,
    "operator": CPU_OP,
    "user_annotation": USER_ANNOTATION,
    "python_function": PYTHON_FUNCTION,
    # NVIDIA (CUPTI) and AMD (roctracer) write the same names.
    "cuda_runtime": RUNTIME,
    "cuda_driver": RUNTIME,
    "kernel": KERNEL,
    "gpu_kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "gpu_user_annotation": GPU_ANNOTATION,
    "cuda_sync": SYNC,
    # Intel XPU (XPUPTI): urEnqueueKernelLaunch ... on the host, kernels in
    # ``kernel`` with ``sycl queue`` / ``l0 queue`` args.
    "xpu_runtime": RUNTIME,
    "xpu_driver": RUNTIME,
    "xpu_sync": SYNC,
    # Intel Gaudi: device events carry an ``HW event name`` argument.
    "hpu_op": KERNEL,
    # Meta MTIA.
    "mtia_runtime": RUNTIME,
    "mtia_ccp_events": KERNEL,
    # Any PrivateUse1 backend (TorchTPU, TorchNeuron, Ascend ...).
    "privateuse1_runtime": RUNTIME,
    "privateuse1_driver": RUNTIME,
    # TorchNeuron's device executions in its Kineto trace.json.
    "nc_exec_running": KERNEL,
    # Device events read from an XPlane (see trace/xplane.py): one op of a
    # compiled XLA program, and the step/module/framework-op lines above it.
    "xla_op": KERNEL,
    "xla_annotation": GPU_ANNOTATION,
    "cuda_profiler_range": OTHER,
    "overhead": OTHER,
    "trace": OTHER,
}

#: The backend that writes each category (for device-specific rules).
_BACKEND_OF = {
    "cuda_runtime": "cuda",
    "cuda_driver": "cuda",
    "cuda_sync": "cuda",
    "xpu_runtime": "xpu",
    "xpu_driver": "xpu",
    "xpu_sync": "xpu",
    "hpu_op": "hpu",
    "mtia_runtime": "mtia",
    "mtia_ccp_events": "mtia",
    "privateuse1_runtime": "privateuse1",
    "privateuse1_driver": "privateuse1",
    "nc_exec_running": "neuron",
    "xla_op": "xla",
    "xla_annotation": "xla",
}

#: Event names that are device work whatever category a writer gives them
#: (TorchNeuron's device executions).
DEVICE_WORK_NAMES = frozenset({"nc_exec_running"})


def backend_of_category(cat: object) -> str | None:
    """The backend whose profiler writes ``cat`` (``cuda``, ``xpu``, ``xla`` ...), or None."""
    return _BACKEND_OF.get(cat.lower()) if isinstance(cat, str) else None


def backends_in(events: Any) -> set[str]:
    """Backends whose categories occur in an events frame (see `backend_of_category`)."""
    col = events["cat"]
    cats = col.cat.categories if isinstance(col.dtype, pd.CategoricalDtype) else pd.unique(col)
    return {b for b in map(backend_of_category, cats) if b is not None}


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
    # Asked ~40 times per profile: the dtype's categories and the array's
    # codes directly, not through the accessor (a new Series each time).
    if isinstance(col.dtype, pd.CategoricalDtype) and tuple(col.dtype.categories.tolist()) == KINDS:
        codes = col.array.codes
        # One comparison per wanted kind (about 1 µs per 50k rows each): np.isin
        # sorts its inputs and cost ~175 µs a call, asked ~28 times per op table.
        mask = codes == KIND_INDEX[wanted[0]]
        for k in wanted[1:]:
            mask |= codes == KIND_INDEX[k]
        return mask
    return np.isin(col.to_numpy(dtype=object), list(wanted))
