"""Which of Kineto's occupancy figures are not estimates at all.

Kineto writes ``est. achieved occupancy %`` for every CUDA kernel, computed
with the CUDA occupancy calculator from the launch's block size, registers and
shared memory. It asks that calculator with the *default* shared-memory limit
per block (``maxDynamicSharedSizeBytes = 0``, ``FUNC_SHMEM_LIMIT_DEFAULT``;
libkineto's ``kernelOccupancy``), which is 48 KiB on every NVIDIA GPU since
Fermi. A kernel that opted into more (``cudaFuncSetAttribute``: most CUTLASS,
cuDNN v8/v9 and flash-attention kernels) then fits zero blocks per SM in the
calculator's eyes, and the trace says 0 %. That 0 is "not estimated", not a
kernel that ran on no warps: the real traces bear it out (on the A100 and V100
traces every kernel over 48 KiB reads 0, none at or under it reads 0 unless
its grid is too small to reach 1 %).
"""

from __future__ import annotations

import numpy as np

#: Shared memory a block gets without opting in (``sharedMemPerBlock`` in every
#: CUDA trace's ``deviceProperties``: 49152).
DEFAULT_SHARED_PER_BLOCK = 48 * 1024


def not_estimated(occupancy: np.ndarray, shared_memory: np.ndarray) -> np.ndarray:
    """Per kernel call: True where the recorded 0 % only means the estimate could not be made."""
    occupancy = np.asarray(occupancy, dtype=np.float64)
    shared = np.asarray(shared_memory, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return (occupancy == 0) & (shared > DEFAULT_SHARED_PER_BLOCK)
