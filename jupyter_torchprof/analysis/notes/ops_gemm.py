"""Notes on the op rows around a GEMM: the bias ``addmm`` folds in, and the library sizing its launch.

``nn.Linear`` with a bias runs ``aten::addmm(bias, x, W.T)``: the bias is
the GEMM's ``C`` operand (``beta * C + alpha * A @ B``), so no separate add
runs. torch seeds the output with the bias first, by an ``aten::copy_``
directly under the ``addmm`` (on CUDA, a ``Memcpy DtoD`` or copy kernel
where cuBLASLt's bias epilogue is not used); that copy is how the op works,
not a copy to remove.

cuBLAS and cuDNN pick a kernel and its grid per call; before launching
they ask the runtime how many blocks of it fit on a multiprocessor
(``cudaOccupancyMaxActiveBlocksPerMultiprocessor[WithFlags]``, HIP:
``hipOccupancyMaxActiveBlocksPerMultiprocessor``). The real A100 and GP100
traces in tests/data/kineto hold it under ``aten::mm``,
``aten::cudnn_convolution`` and ``aten::convolution_backward`` only.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ...trace import categories as K
from ..findings.cpu import BIAS_SEED_OPS
from .base import OPS, Annotation, Hit, NoteContext
from .ops_common import children, name_rows, of_calls, rows_named, verdicts

#: Ops whose GEMM takes the bias as its ``C`` operand (``aten::addr`` is an outer product, not a GEMM).
BIAS_GEMMS = frozenset(BIAS_SEED_OPS - {"aten::addr"})
#: A separate add under the op would mean the bias was not folded in.
_ADDS = frozenset({"aten::add", "aten::add_"})

BIAS_IN_GEMM = Annotation(
    "bias-in-gemm",
    OPS,
    "bias folded into the GEMM (no separate add kernel)",
    "addmm (and baddbmm, addbmm, addmv) computes beta * bias + alpha * (A @ B) in one GEMM: the bias is "
    "the GEMM's C operand, read once, so nn.Linear's bias costs no add kernel of its own. A Linear built "
    "with bias=False runs aten::mm instead. None of the op's calls ran an add under it.",
)
BIAS_SEED_COPY = Annotation(
    "bias-seed-copy",
    OPS,
    "seeds the GEMM's output with the bias",
    "This aten::copy_ sits directly under aten::addmm (or baddbmm, addbmm, addmv): torch copies the bias, "
    "broadcast to the output's shape, into the output before the GEMM adds A @ B onto it. On a GPU the copy "
    "shows as a Memcpy DtoD or a copy kernel launched by the addmm. It is part of how the GEMM uses its bias, "
    "so it is not reported as a copy finding; calls of aten::copy_ elsewhere are counted apart.",
)
ADAPTIVE_LAUNCH = Annotation(
    "occupancy-query",
    OPS,
    "library sizing a GEMM/conv launch",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor (hipOccupancy... on ROCm) asks how many blocks of a kernel "
    "fit on one multiprocessor. cuBLAS and cuDNN call it to choose a kernel's grid (split-K, tiles per wave) "
    "for the shapes at hand: an adaptively configured GEMM or convolution, not a plain elementwise launch. "
    "Its time is host-side launch cost, paid on every call of the op above it.",
)


def bias_in_gemm(ctx: NoteContext) -> list[Hit]:
    """``aten::addmm`` & co.: every call with no add under it."""
    rows = rows_named(ctx, BIAS_GEMMS)
    if not len(rows):
        return []
    kids, parents = children(ctx, rows)
    added = np.zeros(len(ctx.parent), dtype=bool)
    added[parents[np.isin(ctx.names[kids], tuple(_ADDS))]] = True
    ok = ~added[rows]
    return [
        Hit(OPS, name, BIAS_IN_GEMM.id, event=first)
        for name, first, n_ok, n in verdicts(ctx, rows, ok)
        if n_ok == n
    ]


def bias_seed_copy(ctx: NoteContext) -> list[Hit]:
    """``aten::copy_`` calls directly under a bias GEMM (the text counts them where other copies exist)."""
    rows = rows_named(ctx, ("aten::copy_",))
    if not len(rows):
        return []
    parent = ctx.parent[rows]
    gemm = np.zeros(len(ctx.parent), dtype=bool)
    gemm[rows_named(ctx, BIAS_GEMMS)] = True
    ok = (parent >= 0) & gemm[np.maximum(parent, 0)]
    return [
        Hit(OPS, name, BIAS_SEED_COPY.id, BIAS_SEED_COPY.text + of_calls(n_ok, n), first)
        for name, first, n_ok, n in verdicts(ctx, rows, ok)
    ]


def _is_occupancy_query(name: str) -> bool:
    return name.startswith(
        ("cudaOccupancyMaxActiveBlocksPerMultiprocessor", "hipOccupancyMaxActiveBlocksPerMultiprocessor")
    )


def adaptive_launch(ctx: NoteContext) -> list[Hit]:
    """Occupancy queries: every call inside an op that launched device work; names the ops."""
    rows = name_rows(ctx, _is_occupancy_query, (K.RUNTIME,))
    if not len(rows):
        return []
    parent = ctx.parent[rows]
    under_op = parent >= 0
    under_op[under_op] = (ctx.kinds[parent[under_op]] == K.CPU_OP) & ctx.launches_work[parent[under_op]]
    hits = []
    for name, first, n_ok, n in verdicts(ctx, rows, under_op):
        mine = rows[(ctx.names[rows] == name) & under_op]
        ops = Counter(str(ctx.names[p]) for p in ctx.parent[mine])
        top = ", ".join(op for op, _ in ops.most_common(2))
        text = f"{ADAPTIVE_LAUNCH.text} (under {top}){of_calls(n_ok, n)}"
        hits.append(Hit(OPS, name, ADAPTIVE_LAUNCH.id, text, first))
    return hits


GEMM_ANNOTATIONS = (BIAS_IN_GEMM, BIAS_SEED_COPY, ADAPTIVE_LAUNCH)
GEMM_RULES = (bias_in_gemm, bias_seed_copy, adaptive_launch)
