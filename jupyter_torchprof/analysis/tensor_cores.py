"""Whether a matrix kernel's name says it runs on tensor (matrix) cores.

The removed TensorBoard plugin had a "Tensor Cores Used" column, read from
the kernel name; this is the same idea with a third answer: ``"yes"`` where
the name carries a tensor-core instruction or format, ``"no"`` where it names
a GEMM/convolution on the ordinary cores (CUDA cores, AMD's vector ALUs), and
``""`` where the name does not tell. The readings:

* MMA instruction shapes in cuBLAS/CUTLASS/cuDNN names: ``h884`` / ``s884``
  (Volta HMMA 8x8x4), ``s1688`` / ``h1688`` (16x8x8), ``s16816`` /
  ``h16816`` (16x8x16), ``i8816`` / ``i16832`` (integer IMMA); the
  instruction families ``hmma``, ``imma``, ``wmma``, Hopper's ``wgmma`` /
  ``gmma``; CUTLASS's ``tensorop`` (its operator class for tensor cores);
  cuDNN's ``xmma`` kernels that name a tensor shape or a tensor-core type;
  ``tf32`` / ``tfloat32`` anywhere (TF32 exists only as a tensor-core input
  format); cuBLAS's ``nvjet`` kernels (Hopper/Blackwell, tensor cores only);
* ROCm: Tensile names a kernel built on matrix (MFMA) instructions with an
  ``_MI<m>x<n>x<k>`` token, or ``MFMA``;
* on the ordinary cores: BLAS-lettered GEMMs without an MMA shape
  (``ampere_sgemm_128x64_nn``, ``volta_hgemm``, ``dgemm``), ``gemv`` and
  ``gemmk1`` (matrix-vector, rank-1), CUTLASS ``simt``, cuBLAS/xmma ``ffma``
  (fused multiply-add on the CUDA cores), cuDNN's ``scudnn``
  (single-precision convolutions), MAGMA's ``sgemm``, Tensile without an MI
  token.

Pure and cheap: called once per distinct kernel name by `names.describe_kernel`.
"""

from __future__ import annotations

import re

YES = "yes"
NO = "no"
UNKNOWN = ""

#: An MMA instruction shape after its type letter, before what it computes: ``s1688gemm``, ``h884_``.
_MMA_SHAPE = re.compile(
    r"(?:^|[^0-9a-z])(?:[a-z]+_)?[hsdib]?(?:884|1688|16816|8816|16832|1684|16864)(?=gemm|fprop|dgrad|wgrad|_|$)"
)
_TC_WORDS = re.compile(r"hmma|imma|wmma|wgmma|gmma|tensorop|tfloat32|tf32|nvjet")
_XMMA_TC = re.compile(r"xmma.*(?:tensor\d+x\d+x\d+|bf16|f16|fp16|e4m3|e5m2|int8|_i8)")
_TENSILE_MFMA = re.compile(r"_MI\d+x\d+x\d+|MFMA")
_CUDA_CORE = re.compile(r"(?:^|[_:< ])(?:[a-z]+_)?[sdhcz]gemm|gemv|gemmk1|simt|ffma|scudnn|magma_[sdhcz]gemm")


def tensor_cores(name: str, family: str) -> str:
    """``"yes"``, ``"no"`` or ``""`` (see the module's docstring) for a kernel of ``family``."""
    lower = name.lower()
    if name.startswith("Cijk_"):
        return YES if _TENSILE_MFMA.search(name) else NO
    if _MMA_SHAPE.search(lower) or _TC_WORDS.search(lower) or _XMMA_TC.search(lower):
        return YES
    if family.lower() in ("gemm", "convolution") and _CUDA_CORE.search(lower):
        return NO
    return UNKNOWN
