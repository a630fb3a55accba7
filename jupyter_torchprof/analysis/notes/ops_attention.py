"""Notes on attention: which SDPA backend ran, and how big the math path's score matrix is.

``aten::scaled_dot_product_attention`` dispatches to one backend per call,
visible as the op directly under it (torch's native function names):
``aten::_scaled_dot_product_flash_attention`` (flash),
``aten::_scaled_dot_product_efficient_attention`` (memory-efficient),
``aten::_scaled_dot_product_cudnn_attention`` (cuDNN),
``aten::_scaled_dot_product_attention_math`` (math: bmm, softmax, bmm),
``aten::_scaled_dot_product_flash_attention_for_cpu`` (the CPU flash kernel),
``aten::_scaled_dot_product_fused_attention_overrideable`` (a backend's own,
e.g. XPU). Where no child op says (a trace written without them), the
kernels launched under the call do, by the names real profiles show:
``pytorch_flash::flash_fwd_kernel<...>`` (torch's bundled FlashAttention-2),
``fmha_cutlassF_f16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<...>::Params)``
(memory-efficient), ``cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_3_64x64x128_4x1x1_kernel0_0``
(cuDNN).

The math path, and attention written by hand (``softmax(q @ k.T) @ v``),
build the whole ``[L, S]`` score matrix per head; its size is read from the
softmax's recorded input shape and dtype (needs ``record_shapes``).
"""

from __future__ import annotations

import numpy as np

from ...format import fmt_bytes
from ...trace import categories as K
from .base import OPS, Annotation, Hit, NoteContext
from .ops_common import (
    DTYPE_BYTES,
    children,
    device_under,
    first_type,
    of_calls,
    owning,
    rows_named,
    shapes,
    verdicts,
)

SDPA = "aten::scaled_dot_product_attention"
#: Backend by the op torch dispatched to.
BACKEND_OPS = {
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_efficient_attention": "memory-efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cuDNN",
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_attention_math_for_mps": "math",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "CPU flash",
    "aten::_scaled_dot_product_fused_attention_overrideable": "device's fused",
}
SOFTMAXES = ("aten::_safe_softmax", "aten::softmax", "aten::_softmax")
MATMULS = frozenset({"aten::matmul", "aten::bmm", "aten::mm", "aten::einsum", "aten::baddbmm"})


def kernel_backend(name: str) -> str | None:
    """The SDPA backend a kernel name belongs to, None where it names none."""
    low = name.lower()
    if "cudnn" in low and ("sdpa" in low or "fmha" in low):
        return "cuDNN"
    if "pytorch_flash::" in name or "flash_fwd" in low:
        return "flash"
    if "fmha_cutlassf" in low or "efficient_attention" in low or "pytorchmemeffattention" in low:
        return "memory-efficient"
    return None


SDPA_BACKEND = Annotation(
    "sdpa-backend",
    OPS,
    "SDPA backend: (the backend that ran)",
    "scaled_dot_product_attention picks one implementation per call: flash (FlashAttention-2, fused, never "
    "writes the score matrix), memory-efficient (xFormers' cutlass kernel), cuDNN, math (plain bmm, softmax, "
    "bmm: the whole [L, S] score matrix per head in memory), or on CPU the CPU flash kernel. Read from the op "
    "it dispatched to, or from the kernels launched under it. A backend can be forced with "
    "torch.nn.attention.sdpa_kernel.",
)
SCORES_SIZE = Annotation(
    "attention-scores",
    OPS,
    "[L, S] attention scores: (bytes per head, in all)",
    "The math path of SDPA, and attention written as softmax(q @ k.T) @ v, build the full score matrix: "
    "L x S numbers per head (query length by key length), written to memory by the first matmul, read and "
    "written again by the softmax, read by the second matmul. Its size is read from the softmax's input shape "
    "and dtype, and it grows with L * S: doubling the sequence length quadruples it. The fused backends "
    "(flash, memory-efficient, cuDNN) keep it in on-chip tiles instead.",
)


def _backends_by_call(ctx: NoteContext, rows: np.ndarray) -> dict[int, str]:
    """The backend of each SDPA call: from the op under it, else from its kernels."""
    found: dict[int, str] = {}
    kids, parents = children(ctx, rows)
    for kid, parent in zip(kids.tolist(), parents.tolist(), strict=True):
        backend = BACKEND_OPS.get(str(ctx.names[kid]))
        if backend is not None:
            found.setdefault(parent, backend)
    if len(found) < len(rows):
        device, owner = device_under(ctx, rows[~np.isin(rows, list(found))])
        for dev, call in zip(device.tolist(), owner.tolist(), strict=True):
            backend = kernel_backend(str(ctx.names[dev]))
            if backend is not None:
                found.setdefault(call, backend)
    return found


def sdpa_backend(ctx: NoteContext) -> list[Hit]:
    """``aten::scaled_dot_product_attention``: the backend(s) its calls ran, counted where they differ."""
    rows = rows_named(ctx, (SDPA,))
    if not len(rows):
        return []
    found = _backends_by_call(ctx, rows)
    if not found:
        return []
    counts: dict[str, int] = {}
    for row in rows.tolist():
        if row in found:
            counts[found[row]] = counts.get(found[row], 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    if len(ranked) == 1 and ranked[0][1] == len(rows):
        text = f"SDPA backend: {ranked[0][0]}"
    else:
        text = "SDPA backends: " + ", ".join(f"{b} in {n} of {len(rows)} calls" for b, n in ranked)
    return [Hit(OPS, SDPA, SDPA_BACKEND.id, text, min(found))]


def _scores_text(ctx: NoteContext, row: int) -> str | None:
    dims = shapes(ctx.events["input_dims"].iat[row])
    dtype = first_type(ctx.events["input_types"].iat[row])
    if not dims or len(dims[0]) < 2 or dtype not in DTYPE_BYTES:
        return None
    *batch, length, keys = dims[0]
    per_head = length * keys * DTYPE_BYTES[dtype]
    total = int(np.prod(batch, dtype=np.int64)) * per_head
    return f"[{length}, {keys}] attention scores: {fmt_bytes(per_head)} per head, {fmt_bytes(total)} in all"


def _sibling_order(ctx: NoteContext) -> tuple[np.ndarray, np.ndarray]:
    """Op rows ordered by (thread, parent, start), and each row's position in that order."""
    ops = ctx.rows_of_kind(K.CPU_OP)
    ev = ctx.events
    order = ops[np.lexsort((ev["ts"].to_numpy()[ops], ctx.parent[ops], ev["tid"].to_numpy()[ops]))]
    pos = np.full(len(ctx.parent), -1, dtype=np.int64)
    pos[order] = np.arange(len(order))
    return order, pos


def _handwritten(ctx: NoteContext, soft: np.ndarray) -> np.ndarray:
    """Per softmax call: True where a matmul making [L, S] comes before it and one taking [L, S] after.

    Siblings of one parent on one thread, at most three ops apart (a scale,
    a mask, a dropout may sit between).
    """
    order, pos = _sibling_order(ctx)
    tid, parent = ctx.events["tid"].to_numpy(), ctx.parent
    dims_col = ctx.events["input_dims"]
    ok = np.zeros(len(soft), dtype=bool)
    for i, row in enumerate(soft.tolist()):
        mine = shapes(dims_col.iat[row])
        if not mine or len(mine[0]) < 2:
            continue
        length, keys = mine[0][-2:]
        before = after = False
        for step in (1, 2, 3, 4):
            for j, want in ((pos[row] - step, "before"), (pos[row] + step, "after")):
                if not 0 <= j < len(order):
                    continue
                other = order[j]
                if tid[other] != tid[row] or parent[other] != parent[row] or ctx.names[other] not in MATMULS:
                    continue
                dims = shapes(dims_col.iat[other])
                if not dims or len(dims) < 2 or len(dims[0]) < 2 or len(dims[1]) < 2:
                    continue
                a, b = dims[0], dims[1]
                if want == "before" and (a[-2], b[-1]) == (length, keys):
                    before = True
                if want == "after" and (a[-2], a[-1], b[-2]) == (length, keys, keys):
                    after = True
        ok[i] = before and after
    return ok


def attention_scores(ctx: NoteContext) -> list[Hit]:
    """Score-matrix size on math-path SDPA rows and on hand-written attention's softmax rows."""
    if "input_dims" not in ctx.events.columns:
        return []
    hits = []
    sdpa = rows_named(ctx, (SDPA,))
    found = _backends_by_call(ctx, sdpa) if len(sdpa) else {}
    math_calls = np.array([r for r in sdpa.tolist() if found.get(r) == "math"], dtype=np.int64)
    if len(math_calls):
        kids, _ = children(ctx, math_calls)
        # the softmax sits one level down, under the math op
        grand, _ = children(ctx, kids)
        soft = grand[np.isin(ctx.names[grand], SOFTMAXES)]
        texts = [t for t in (_scores_text(ctx, r) for r in soft.tolist()) if t]
        if texts:
            biggest = max(texts, key=len)
            n = len(math_calls)
            hits.append(
                Hit(OPS, SDPA, SCORES_SIZE.id, f"math path: {biggest}{of_calls(n, len(sdpa))}", int(soft[0]))
            )
    soft = rows_named(ctx, SOFTMAXES)
    if len(soft):
        # a softmax inside an SDPA call is the math path's own, noted on the SDPA row above
        ok = _handwritten(ctx, soft) & (owning(ctx, soft, sdpa) < 0)
        for name, first, n_ok, n in verdicts(ctx, soft, ok):
            text = _scores_text(ctx, first)
            if text:
                hits.append(Hit(OPS, name, SCORES_SIZE.id, text + of_calls(n_ok, n), first))
    return hits


ATTENTION_ANNOTATIONS = (SDPA_BACKEND, SCORES_SIZE)
ATTENTION_RULES = (sdpa_backend, attention_scores)
