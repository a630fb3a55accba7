"""Notes on kernel rows read from the launch: occupancy caveats and run-time configured launches.

* Kineto's occupancy is 0 % for kernels that opted into more than 48 KiB of
  shared memory per block: not estimated (`analysis.occupancy`); the kernel
  table shows no figure there and the row says why, with the launch API
  (``cudaLaunchKernelExC`` / ``cuLaunchKernelEx``: cuDNN v9, CUTLASS, NCCL)
  where it was one of those.
* Flash and memory-efficient attention kernels run one big tile per block: low occupancy is their
  design, not a fault.
* A launch preceded, on the same thread and inside the same op, by an
  occupancy query (``cudaOccupancyMaxActiveBlocksPerMultiprocessor``) was
  configured at run time: cuBLAS/cuDNN sizing a GEMM or convolution for the
  device, as against a plain elementwise launch.
"""

from __future__ import annotations

import re

import numpy as np

from ...trace import categories as K
from ..occupancy import DEFAULT_SHARED_PER_BLOCK, not_estimated
from .base import KERNELS, Annotation, Hit, NoteContext
from .kernel_rows import calls_per_name, first_call, matching

OCCUPANCY_NOT_ESTIMATED = Annotation(
    "occupancy-not-estimated",
    KERNELS,
    "occupancy not estimated (opt-in shared memory)",
    "Kineto estimates occupancy with the CUDA occupancy calculator at the default limit of 48 KiB shared "
    "memory per block. This kernel used more (it opted in, as CUTLASS, cuDNN, NCCL and flash-attention "
    "kernels do), so the calculator fits no block and the trace says 0 %. That is not a measurement: the "
    "kernel table shows no figure (–) for these calls. Kernels launched with `cudaLaunchKernelExC` / "
    "`cuLaunchKernelEx` (cuDNN v9, CUTLASS 3, NCCL) are usually of this kind; the note names the launch API "
    "where it was one of those. Nsight Compute measures the real occupancy.",
)
FLASH_OCCUPANCY = Annotation(
    "flash-low-occupancy",
    KERNELS,
    "low occupancy is by design (fused attention)",
    "Flash-attention kernels (and the memory-efficient `fmha` ones) give each thread block one large tile "
    "of queries and keep it, with its "
    "running softmax, in registers and shared memory for the whole pass over the keys. So few blocks fit "
    "on an SM and the occupancy figure is low (or not estimated at all, above 48 KiB of shared memory); "
    "the kernel hides memory latency with its tile pipeline instead of with many resident warps. Judge it "
    "by time and achieved FLOP/s, not by occupancy.",
)
ADAPTIVE_LAUNCH = Annotation(
    "adaptive-launch",
    KERNELS,
    "launch configured at run time (occupancy query)",
    "Just before this kernel's launch, on the same thread and inside the same op, the library asked the "
    "driver how many of its blocks fit on an SM (`cudaOccupancyMaxActiveBlocksPerMultiprocessor`). "
    "cuBLAS, cuDNN and some PyTorch kernels do that to size a GEMM, convolution or reduction for the "
    "device and the problem. Such a launch costs more host time than a plain elementwise launch; the "
    "query is part of the op's CPU time, not of the kernel's.",
)

#: Launch APIs that CUTLASS 3, cuDNN v9 and NCCL use (launch attributes: clusters, programmatic launch).
_EXTENDED_LAUNCH = re.compile(r"^(?:cudaLaunchKernelEx|cuLaunchKernelEx)")
_FLASH = re.compile(r"flash|fmha", re.IGNORECASE)
_OCCUPANCY_QUERY = re.compile(r"^(?:cuda|hip|cu)OccupancyMaxActiveBlocksPerMultiprocessor")
_LAUNCH = re.compile(r"LaunchKernel|LaunchCooperativeKernel")


def _column(ctx: NoteContext, name: str) -> np.ndarray:
    if name not in ctx.events:
        return np.full(len(ctx.events), np.nan)
    return ctx.events[name].to_numpy(dtype=np.float64, na_value=np.nan)


def occupancy_not_estimated(ctx: NoteContext) -> list[Hit]:
    """Kernels whose recorded 0 % occupancy is Kineto's calculator giving up at the 48 KiB default."""
    rows = ctx.rows_of_kind(K.KERNEL)
    shared = _column(ctx, "shared_memory")[rows]
    blank = not_estimated(_column(ctx, "occupancy")[rows], shared)
    hits: dict[str, Hit] = {}
    for row, kb in zip(rows[blank].tolist(), (shared[blank] / 1024).tolist(), strict=True):
        name = str(ctx.names[row])
        if name in hits:
            continue
        launch = int(ctx.launch[row])
        api = str(ctx.names[launch]) if launch >= 0 else ""
        text = f"occupancy not estimated: {kb:.0f} KiB shared memory per block (> {DEFAULT_SHARED_PER_BLOCK // 1024})"
        if _EXTENDED_LAUNCH.match(api):
            text += f", launched with {api}"
        hits[name] = Hit(KERNELS, name, OCCUPANCY_NOT_ESTIMATED.id, text, row)
    return list(hits.values())


def flash_low_occupancy(ctx: NoteContext) -> list[Hit]:
    """Flash / memory-efficient attention kernels that carry an occupancy figure (estimated or not)."""
    rows = ctx.rows_of_kind(K.KERNEL)
    rows = rows[~np.isnan(_column(ctx, "occupancy")[rows])]
    return [
        Hit(KERNELS, name, FLASH_OCCUPANCY.id, event=row)
        for name, row in first_call(ctx, rows).items()
        if _FLASH.search(name)
    ]


def adaptive_launch(ctx: NoteContext) -> list[Hit]:
    """Kernels whose launch came right after an occupancy query in the same op on the same thread."""
    runtime = ctx.rows_of_kind(K.RUNTIME)
    query = matching(ctx, runtime, _OCCUPANCY_QUERY)
    if not query.any():
        return []
    either = query | matching(ctx, runtime, _LAUNCH)
    keep, is_query = runtime[either], query[either]
    parent = ctx.parent[keep]
    tid = ctx.events["tid"].to_numpy()[keep]
    order = np.lexsort((ctx.events["ts"].to_numpy()[keep], tid, parent))
    keep, is_query, parent, tid = keep[order], is_query[order], parent[order], tid[order]
    # A launch is adaptive when the call before it, in the same op and thread, was a query.
    same = np.r_[False, (parent[1:] == parent[:-1]) & (tid[1:] == tid[:-1])]
    adaptive = ~is_query & np.r_[False, is_query[:-1]] & same
    kernels = ctx.rows_of_kind(K.KERNEL)
    configured = np.isin(ctx.launch[kernels], keep[adaptive])
    first = first_call(ctx, kernels[configured])
    return [
        Hit(
            KERNELS,
            name,
            ADAPTIVE_LAUNCH.id,
            f"launch configured at run time: {n} of {total} launches",
            first[name],
        )
        for name, (n, total) in calls_per_name(ctx, kernels, configured).items()
        if n
    ]


ANNOTATIONS = (OCCUPANCY_NOT_ESTIMATED, FLASH_OCCUPANCY, ADAPTIVE_LAUNCH)
RULES = (occupancy_not_estimated, flash_low_occupancy, adaptive_launch)
