"""What kind of work an event is, for colouring a timeline and for time per family.

Device kernels fall into families by their names (a rule table of name
patterns, first match wins); everything else is known by its Kineto kind:
copies, memsets, host ops, user ranges, runtime calls. The same answer
serves the timeline's colours and legend and any "time per family" table,
so the two never disagree.

Pure: names and kinds in, category indices out.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pandas as pd

from ..trace import categories as K

GEMM = "GEMM"
ATTENTION = "attention"
CONV = "convolution"
NORM = "normalization"
REDUCTION = "reduction"
ELEMENTWISE = "elementwise"
TRITON = "Triton fused"
OTHER_KERNEL = "other kernel"
MEMCPY = "memcpy"
MEMSET = "memset"
COMMUNICATION = "communication"
HOST_OP = "host op"
USER_RANGE = "user range"
PYTHON = "Python frame"
RUNTIME = "profiler/runtime"

#: Every category, in legend order (device work first).
CATEGORIES: tuple[str, ...] = (
    GEMM,
    ATTENTION,
    CONV,
    NORM,
    REDUCTION,
    ELEMENTWISE,
    TRITON,
    OTHER_KERNEL,
    COMMUNICATION,
    MEMCPY,
    MEMSET,
    HOST_OP,
    USER_RANGE,
    PYTHON,
    RUNTIME,
)
CATEGORY_INDEX = {c: i for i, c in enumerate(CATEGORIES)}

#: Kernel families by name, first match wins; matched against the lower-cased
#: name. The order carries meaning: collectives first (an NCCL kernel names
#: its reduction op), then generated and library kernels whose names hold
#: words of later rules (``implicit_gemm`` is a convolution, ``splitKreduce``
#: a GEMM's epilogue), then the generic ATen kernel templates.
KERNEL_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (family, re.compile(pattern))
    for family, pattern in (
        (COMMUNICATION, r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv"),
        # Inductor's generated kernels: triton_poi_fused_..., triton_red_... .
        (TRITON, r"^triton_|^void triton_"),
        (ATTENTION, r"flash|fmha|attention|sdpa|mha_|_attn_"),
        # fbgemm_gpu is a library of embedding/sparse ops: its name is not a GEMM.
        (OTHER_KERNEL, r"fbgemm_gpu|split_embedding|embedding_"),
        # Batch/layer norms, cuDNN's among them (bn_fw/bn_bw live in cudnn::).
        (NORM, r"batch_?norm|layer_?norm|group_?norm|rms_?norm|instance_?norm|bn_fw|bn_bw|welford|gammabeta"),
        # cuDNN convolutions and their CUTLASS/cask helpers (dgrad/wgrad,
        # offsets, the split-K reduction of a wgrad).
        (
            CONV,
            r"conv|fprop|dgrad|wgrad|winograd|scudnn|implicit_?gemm|cutlass_cudnn|cask_cudnn",
        ),
        # cuBLAS/cuBLASLt (its epilogue and split-K reduce kernels), CUTLASS,
        # MAGMA, ROCm's Tensile (Cijk_...), hipBLASLt.
        (GEMM, r"gemm|gemv|cublas|wgmma|matmul|^cijk_|splitkreduce|hipblaslt"),
        # Reductions, softmax (a row-wise reduction), pooling (a reduction
        # over a window), CUB's scans and sorts (reductions over a sequence).
        (
            REDUCTION,
            r"reduce|reduction|softmax|pool|cub::device(radixsort|scan|reduce|segmented|select|compact)"
            r"|argmax|argmin|topk|cumsum|scan_",
        ),
        # ATen's pointwise templates and what moves data element by element:
        # copies, fills, layout transforms, concatenation, indexing, and the
        # optimizers' foreach kernels (multi_tensor_apply).
        (
            ELEMENTWISE,
            r"elementwise|pointwise|vectorized|unrolled|copy|fill|nchwtonhwc|nhwctonchw|transpose|catarray"
            r"|index|gather|scatter|multi_tensor_apply|bounds_check|linearize|where_kernel",
        ),
    )
)


@lru_cache(maxsize=65536)
def kernel_family(name: str) -> str:
    """The family of a device kernel from its name (``other kernel`` when no rule matches)."""
    lower = name.lower()
    for family, pattern in KERNEL_RULES:
        if pattern.search(lower):
            return family
    return OTHER_KERNEL


#: Kineto's names of copies and memsets (``Memcpy HtoD (Pageable -> Device)``, ``Memset (Device)``).
_COPY_NAME = re.compile(r"^memcpy|^memset")


def name_family(name: str) -> str:
    """The family of a device activity from its name alone (the kernel table's ``family``).

    Copies and memsets go by Kineto's names for them, kernels by `kernel_family`.
    """
    m = _COPY_NAME.match(name.lower())
    if m:
        return MEMCPY if m.group(0) == "memcpy" else MEMSET
    return kernel_family(name)


#: Category of each Kineto kind that is not a kernel (kernels go by name).
KIND_CATEGORY = {
    K.CPU_OP: HOST_OP,
    K.OTHER: HOST_OP,
    K.USER_ANNOTATION: USER_RANGE,
    K.GPU_ANNOTATION: USER_RANGE,
    K.PYTHON_FUNCTION: PYTHON,
    K.RUNTIME: RUNTIME,
    K.SYNC: RUNTIME,
    K.MEMCPY: MEMCPY,
    K.MEMSET: MEMSET,
}


def event_categories(ev: pd.DataFrame) -> np.ndarray:
    """Index into `CATEGORIES` of every event (``int8``), from its kind and, for kernels, its name.

    Names are classified once per distinct name (the column is categorical),
    so the cost follows the number of distinct kernel names, not events.
    """
    out = np.full(len(ev), CATEGORY_INDEX[HOST_OP], dtype=np.int8)
    for kind, category in KIND_CATEGORY.items():
        out[K.kind_mask(ev, (kind,))] = CATEGORY_INDEX[category]
    is_kernel = K.kind_mask(ev, (K.KERNEL,))
    if is_kernel.any():
        names = ev["name"]
        codes = names.cat.codes.to_numpy()[is_kernel]
        used = np.unique(codes[codes >= 0])
        per_code = np.full(len(names.cat.categories) + 1, CATEGORY_INDEX[OTHER_KERNEL], dtype=np.int8)
        cats = names.cat.categories
        for c in used.tolist():
            per_code[c] = CATEGORY_INDEX[kernel_family(str(cats[c]))]
        out[is_kernel] = per_code[codes]  # code -1 (no name) reads the last slot: other kernel
    return out
