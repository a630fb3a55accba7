"""Rule 6: float32 matrix math on a device that has tensor (matrix) cores.

The kernel name says the math type: cuBLAS/cuDNN SIMT kernels are
``*_sgemm_*`` / ``*_scudnn_*`` (plain float32 on the CUDA cores), TF32 tensor
core kernels carry ``tf32`` or the ``s1688``/``s16816`` instruction shape,
and ROCm's Tensile kernels spell the data type after the layout
(``Cijk_Alik_Bljk_S…`` is float32, ``MI16x16x1`` says it used matrix
instructions). ``deviceProperties`` says whether the device has tensor
cores (NVIDIA compute capability 7.0 and later).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...format import fmt_time
from .model import HIGH, INFO, MEDIUM, NOT_CHECKED, Finding, Inputs, limit_rows
from .thresholds import Thresholds

#: float32 GEMM/convolution kernels on the CUDA cores (no tensor cores).
FP32_SIMT = re.compile(
    r"sgemm|scudnn|(?:dgrad|wgrad)\w*_engine<float|winograd\w*<float|implicit_convolve_s|"
    r"explicit_convolve_s|xmma\w*_f32f32_f32f32_f32",
    re.IGNORECASE,
)
#: float32 data on TF32 tensor cores.
TF32 = re.compile(r"tf32|tensorop_s\d{3,5}|_s1688|_s16816", re.IGNORECASE)
#: ROCm Tensile float32 GEMM (``Cijk_<layout>_S…_``), using matrix instructions.
ROCM_FP32 = re.compile(r"^Cijk_A\w*?_B\w*?_S[SB]?_.*_MI\d+x\d+", re.IGNORECASE)


#: Words (lower case) one of which each pattern's every match holds: an ASCII
#: name with none of them cannot match, and the search (about 17 µs per
#: kernel name of hundreds of characters for `FP32_SIMT`) is skipped.
#: Other names are always searched: IGNORECASE also folds non-ASCII letters.
_TF32_WORDS = ("tf32", "tensorop_s", "_s1688", "_s16816")
_FP32_SIMT_WORDS = (
    "sgemm", "scudnn", "dgrad", "wgrad", "winograd", "implicit_convolve_s", "explicit_convolve_s", "xmma",
)  # fmt: skip


def classify(name: str) -> str | None:
    """``"tf32"``, ``"fp32"`` (SIMT or ROCm float32 GEMM) or None."""
    low = name.lower() if name.isascii() else None
    if _may_match(low, _TF32_WORDS) and TF32.search(name):
        return "tf32"
    if (_may_match(low, _FP32_SIMT_WORDS) and FP32_SIMT.search(name)) or ROCM_FP32.search(name):
        return "fp32"
    return None


def _may_match(low: str | None, words: tuple[str, ...]) -> bool:
    """Whether a name (lower-cased ASCII, or None for any other) may match a pattern needing one of ``words``."""
    return low is None or any(w in low for w in words)


def _vendor(props: dict[str, Any], name: str) -> str:
    label = str(props.get("name", ""))
    if props.get("warpSize") == 64 or "AMD" in label or "Radeon" in label or name.startswith("Cijk_"):
        return "amd"
    return "nvidia" if props else ""


def _advice(vendor: str, major: int | None) -> str:
    if vendor == "amd":
        return (
            "Autocast to bf16 (torch.autocast('cuda', dtype=torch.bfloat16)) to run them on the "
            "matrix cores at several times the float32 rate."
        )
    if major is not None and major >= 8:
        return (
            "Allow TF32 (torch.set_float32_matmul_precision('high'), "
            "torch.backends.cudnn.allow_tf32 = True) or autocast to bf16 "
            "(torch.autocast('cuda', dtype=torch.bfloat16)) to use the tensor cores."
        )
    return (
        "This GPU's tensor cores take float16: autocast to fp16 "
        "(torch.autocast('cuda', dtype=torch.float16) with torch.amp.GradScaler for training)."
    )


@dataclass(frozen=True)
class _Selection:
    """The kernels of one math type, and what the trace says about their device."""

    share: float
    time_step: float
    names: list[str]
    rows: list[int]
    evidence: dict[str, Any]
    props: dict[str, Any]
    device: int
    vendor: str
    major: int | None


def find_precision(inp: Inputs, th: Thresholds) -> list[Finding]:
    """float32 GEMM/conv kernels that tensor cores could run faster."""
    if not inp.device_traced or inp.kernels.empty:
        return []
    # The columns read, as arrays: filtering the kernel table (thirty
    # columns, most of them strings) per math type was most of the rule's time.
    k = inp.kernels
    is_kernel = k["kind"].to_numpy(dtype=object) == "kernel"
    names = k["name"].to_numpy(dtype=object)[is_kernel]
    times = k["total_us"].to_numpy(np.float64)[is_kernel]
    devices = k["devices"].to_numpy(dtype=object)[is_kernel]
    total = float(inp.kernels["total_us"].sum())
    if not len(names) or total <= 0:
        return []
    kinds = np.array([classify(str(n)) for n in names], dtype=object)
    out: list[Finding] = []
    for kind in ("fp32", "tf32"):
        m = kinds == kind
        if not m.any():
            continue
        # A Series' sum, as the table's column summed.
        share = 100 * float(pd.Series(times[m]).sum()) / total
        if share < th.precision_min_share_pct:
            continue
        g = _select(inp, th, (names[m], times[m], devices[m]), share)
        if not g.props or (g.vendor == "nvidia" and g.major is None):
            out.append(_not_checked(g))
        elif kind == "tf32":
            out.append(_on_tf32(inp, g))
        elif (found := _without_tensor_cores(inp, th, g)) is not None:
            out.append(found)
    return out


def _select(
    inp: Inputs, th: Thresholds, sel: tuple[np.ndarray, np.ndarray, np.ndarray], share: float
) -> _Selection:
    """The evidence of the kernel-table rows ``sel`` (name, total_us, devices; ``share`` % of device time)."""
    sel_names, sel_times, sel_devices = sel
    device = int(str(sel_devices[0]).split(",")[0]) if str(sel_devices[0]) else 0
    props = inp.props_of(device)
    vendor = _vendor(props, str(sel_names[0]))
    major = props.get("computeMajor")
    major = int(major) if isinstance(major, (int, float)) else None
    names = sel_names.tolist()
    # Per step: the calls the counted steps launched (the kernel table
    # also holds work launched outside them).
    launched = inp.rows_named(names, inp.activity_rows)
    time_step = float(inp.dur[launched[inp.launched_in_steps(launched)]].sum()) / inp.n_steps
    evidence = {
        "share_pct": share,
        "time_per_step_us": time_step,
        "kernels": {str(n): float(t) for n, t in zip(sel_names[:10], sel_times[:10], strict=True)},
        "device": device,
        "device_name": props.get("name"),
        "compute_major": major,
    }
    return _Selection(
        share=share,
        time_step=time_step,
        names=names,
        rows=limit_rows(launched, th.max_event_rows),
        evidence=evidence,
        props=props,
        device=device,
        vendor=vendor,
        major=major,
    )


def _not_checked(g: _Selection) -> Finding:
    """float32 math on a device whose capabilities the trace does not record."""
    return Finding(
        rule="precision",
        severity=NOT_CHECKED,
        title=f"Precision not checked: float32 GEMM/conv is {g.share:.0f}% of device time, "
        "device capabilities unknown",
        detail="The trace has no deviceProperties, so it cannot say whether the device has "
        "tensor cores that would run these faster in bf16/fp16/TF32.",
        evidence=g.evidence,
        event_rows=g.rows,
        kernels=g.names,
    )


def _on_tf32(inp: Inputs, g: _Selection) -> Finding:
    """float32 math already on TF32 tensor cores: bf16 would still halve it."""
    return Finding(
        rule="precision",
        severity=INFO,
        title=f"float32 matmuls/convs on TF32 tensor cores: {g.share:.0f}% of device time "
        f"({fmt_time(g.time_step)}{inp.per})",
        detail=(
            "These already use the tensor cores through TF32. Autocasting to bf16 "
            "(torch.autocast('cuda', dtype=torch.bfloat16)) halves their memory traffic "
            "and roughly doubles tensor-core throughput."
        ),
        evidence=g.evidence,
        impact_us=g.time_step / 2,
        event_rows=g.rows,
        kernels=g.names,
    )


def _without_tensor_cores(inp: Inputs, th: Thresholds, g: _Selection) -> Finding | None:
    """float32 math on the ordinary cores of a device that has tensor cores (None if it has none)."""
    if g.vendor == "amd":
        # Tensile names a kernel that used matrix instructions (MI...).
        has_cores = any(ROCM_FP32.search(n) for n in g.names)
    else:
        has_cores = g.major is not None and g.major >= 7
    if not has_cores:
        return None
    label = g.props.get("name") or f"device {g.device}"
    return Finding(
        rule="precision",
        severity=HIGH if g.share >= th.precision_high_share_pct else MEDIUM,
        title=f"float32 GEMM/conv without tensor cores: {g.share:.0f}% of device time "
        f"({fmt_time(g.time_step)}{inp.per}) on {label}",
        detail=(
            "These kernels do float32 math on the ordinary cores although the device has "
            "tensor/matrix cores. " + _advice(g.vendor, g.major)
        ),
        evidence=g.evidence,
        impact_us=g.time_step / 2,
        event_rows=g.rows,
        kernels=g.names,
    )
