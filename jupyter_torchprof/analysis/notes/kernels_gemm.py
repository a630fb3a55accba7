"""Notes on GEMM and convolution kernel rows: what the library's kernel name says, in words.

cuBLAS, CUTLASS, cuDNN and ROCm's Tensile spell the way they run a matrix
product into the kernel name: operand layout (``_nt``), the instruction and
data type (``s1688``: TF32 on 16x8x8 tensor-core MMAs; ``sgemm``: fp32 on the
CUDA cores) and the thread-block tile (``256x64``). `names.describe_kernel`
splits them out; these rules say what each means, once per kernel name.
"""

from __future__ import annotations

import re

from ..names import describe_kernel
from ..tensor_cores import NO, YES, tensor_cores
from .base import KERNELS, Annotation, Hit, NoteContext
from .kernel_rows import first_call

GEMM_LAYOUT = Annotation(
    "gemm-layout",
    KERNELS,
    "transposes absorbed into the GEMM",
    "The last letters of a BLAS kernel's name (`_nt`, `_tn`, `_tt`) say how it reads its two operands: "
    "`n` as stored, `t` transposed, in the library's column-major terms (so a row-major PyTorch tensor "
    "can read as transposed). The transpose is done by the kernel's loads, not by a separate copy: an "
    "`aten::t` or `.T` in front of a matmul costs no device time. `_nn` (no transposes) gets no note.",
)
TENSOR_CORES = Annotation(
    "tensor-cores",
    KERNELS,
    "runs on tensor cores",
    "The kernel's name carries a tensor-core instruction or format: an MMA shape (`h884`, `s1688`, "
    "`h16816`, `i8816`), `tensorop`, `hmma`/`wmma`/`wgmma`, cuDNN's `xmma` with a tensor shape, TF32 "
    "(a tensor-core-only format), or on ROCm Tensile's `_MI<m>x<n>x<k>` (MFMA matrix instructions). "
    "The note names the data type the name gives: TF32 (fp32 tensors, 10-bit mantissa products) runs "
    "at a fraction of bf16/fp16's tensor-core rate, so autocast can still pay off there.",
)
NO_TENSOR_CORES = Annotation(
    "no-tensor-cores",
    KERNELS,
    "runs on CUDA cores, not tensor cores",
    "The kernel's name says plain BLAS math on the ordinary cores: `sgemm`/`dgemm` without an MMA shape, "
    "`gemv` (matrix-vector), CUTLASS `simt`, cuDNN `scudnn`, or a Tensile kernel without MFMA. On a GPU "
    "with tensor cores (Volta and later, MI100 and later) an fp32 GEMM runs there only with TF32 allowed "
    "(`torch.backends.cuda.matmul.allow_tf32 = True`, or `torch.set_float32_matmul_precision('high')`) or "
    "in bf16/fp16 (`torch.autocast`); matrix-vector products and tiny GEMMs stay on the CUDA cores anyway.",
)
GEMM_TILE = Annotation(
    "gemm-tile",
    KERNELS,
    "thread-block tile of the output",
    "The `MxN` in the name is the tile of the output matrix one thread block computes (`128x256`: 128 rows "
    "by 256 columns; a third number is the K step). The library picks it from the problem's size: a big "
    "tile feeds the tensor cores best, but a problem of only a few tiles launches few blocks and leaves "
    "SMs idle, and a dimension that is not a multiple of the tile wastes the padded part. The note gives "
    "the blocks the launch actually had (its grid), to compare with the device's SM count.",
)

_LETTER = {"n": "as stored", "t": "transposed"}
#: MMA instruction shapes as the names spell them, in M x N x K.
_MMA = re.compile(r"(?:^|[^0-9a-z])[hsdib]?(884|1688|16816|8816|16832)(?=gemm|fprop|dgrad|wgrad|_|$)")
_MMA_SHAPE = {"884": "8x8x4", "1688": "16x8x8", "16816": "16x8x16", "8816": "8x8x16", "16832": "16x8x32"}
_XMMA_SHAPE = re.compile(r"tensor(\d+x\d+x\d+)")
_MFMA = re.compile(r"_MI(\d+x\d+x\d+)")


def _instruction(name: str) -> str:
    """The tensor-core instruction a name gives, in words ("16x8x8 MMA"), or ""."""
    lower = name.lower()
    if m := _MMA.search(lower):
        return f"{_MMA_SHAPE[m.group(1)]} MMA"
    if m := _XMMA_SHAPE.search(lower):
        return f"{m.group(1)} MMA"
    if m := _MFMA.search(name):
        return f"MFMA {m.group(1)}"
    if "wgmma" in lower or "gmma" in lower:
        return "warpgroup MMA (Hopper)"
    return ""


def gemm_layout(ctx: NoteContext) -> list[Hit]:
    """GEMMs whose layout letters say an operand is read transposed."""
    hits = []
    for name, row in first_call(ctx).items():
        layout = describe_kernel(name).layout
        if len(layout) == 2 and "t" in layout:
            a, b = (_LETTER[c] for c in layout)
            text = f"layout {layout}: A {a}, B {b} (transposes absorbed into the GEMM)"
            hits.append(Hit(KERNELS, name, GEMM_LAYOUT.id, text, row))
    return hits


def gemm_cores(ctx: NoteContext) -> list[Hit]:
    """Matrix kernels whose names say tensor cores, or say the ordinary cores."""
    hits = []
    for name, row in first_call(ctx).items():
        described = describe_kernel(name)
        said = tensor_cores(name, described.family)
        precision = described.precision or ""
        if said == YES:
            parts = [p for p in (precision, _instruction(name)) if p]
            text = "tensor cores" + (f": {', '.join(parts)}" if parts else "")
            hits.append(Hit(KERNELS, name, TENSOR_CORES.id, text, row))
        elif said == NO:
            what = f"{precision} " if precision else ""
            hits.append(Hit(KERNELS, name, NO_TENSOR_CORES.id, f"{what}on CUDA cores, no tensor cores", row))
    return hits


def _blocks(grid: object) -> int | None:
    """Thread blocks in a launch grid as the parser keeps it (``"[8,2,32]"``), None when unknown."""
    dims = re.findall(r"\d+", str(grid)) if isinstance(grid, str) else []
    if len(dims) != 3:
        return None
    x, y, z = (int(d) for d in dims)
    return x * y * z


def gemm_tile(ctx: NoteContext) -> list[Hit]:
    """GEMM/convolution kernels whose names give their output tile, with the blocks the launch had."""
    hits = []
    # Read at the first call of each kernel only (not a conversion of the column).
    grids = ctx.events["grid"] if "grid" in ctx.events else None
    for name, row in first_call(ctx).items():
        described = describe_kernel(name)
        if not described.tile or described.family.lower() not in ("gemm", "convolution"):
            continue
        m, n = described.tile.split("x")[:2]
        text = f"tile {m}x{n}: each block computes {m}x{n} of the output"
        blocks = _blocks(grids.iloc[row]) if grids is not None else None
        if blocks is not None:
            text += f"; {blocks} block{'s' if blocks != 1 else ''}"
        hits.append(Hit(KERNELS, name, GEMM_TILE.id, text, row))
    return hits


ANNOTATIONS = (GEMM_LAYOUT, TENSOR_CORES, NO_TENSOR_CORES, GEMM_TILE)
RULES = (gemm_layout, gemm_cores, gemm_tile)
