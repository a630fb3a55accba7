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
from typing import Any

import numpy as np

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


def classify(name: str) -> str | None:
    """``"tf32"``, ``"fp32"`` (SIMT or ROCm float32 GEMM) or None."""
    if TF32.search(name):
        return "tf32"
    if FP32_SIMT.search(name) or ROCM_FP32.search(name):
        return "fp32"
    return None


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


def find_precision(inp: Inputs, th: Thresholds) -> list[Finding]:
    """float32 GEMM/conv kernels that tensor cores could run faster."""
    if not inp.device_traced or inp.kernels.empty:
        return []
    k = inp.kernels
    k = k[k["kind"] == "kernel"]
    total = float(inp.kernels["total_us"].sum())
    if k.empty or total <= 0:
        return []
    kinds = np.array([classify(str(n)) for n in k["name"]], dtype=object)
    per = inp.n_steps
    out: list[Finding] = []
    for kind in ("fp32", "tf32"):
        sel = k[kinds == kind]
        if sel.empty:
            continue
        share = 100 * float(sel["total_us"].sum()) / total
        if share < th.precision_min_share_pct:
            continue
        device = int(str(sel["devices"].iloc[0]).split(",")[0]) if str(sel["devices"].iloc[0]) else 0
        props = inp.props_of(device)
        vendor = _vendor(props, str(sel["name"].iloc[0]))
        major = props.get("computeMajor")
        major = int(major) if isinstance(major, (int, float)) else None
        names = sel["name"].astype(str).tolist()
        # Per step: the calls the counted steps launched (the kernel table
        # also holds work launched outside them).
        launched = inp.rows_named(names, inp.activity_rows)
        time_step = float(inp.dur[launched[inp.launched_in_steps(launched)]].sum()) / per
        evidence = {
            "share_pct": share,
            "time_per_step_us": time_step,
            "kernels": {str(r.name): float(r.total_us) for r in sel.head(10).itertuples(index=False)},
            "device": device,
            "device_name": props.get("name"),
            "compute_major": major,
        }
        rows = _rows_of(inp, names, th.max_event_rows)
        if not props or (vendor == "nvidia" and major is None):
            out.append(
                Finding(
                    rule="precision",
                    severity=NOT_CHECKED,
                    title=f"Precision not checked: float32 GEMM/conv is {share:.0f}% of device time, "
                    "device capabilities unknown",
                    detail="The trace has no deviceProperties, so it cannot say whether the device has "
                    "tensor cores that would run these faster in bf16/fp16/TF32.",
                    evidence=evidence,
                    event_rows=rows,
                    kernels=names,
                )
            )
            continue
        if kind == "tf32":
            out.append(
                Finding(
                    rule="precision",
                    severity=INFO,
                    title=f"float32 matmuls/convs on TF32 tensor cores: {share:.0f}% of device time "
                    f"({fmt_time(time_step)}{inp.per})",
                    detail=(
                        "These already use the tensor cores through TF32. Autocasting to bf16 "
                        "(torch.autocast('cuda', dtype=torch.bfloat16)) halves their memory traffic "
                        "and roughly doubles tensor-core throughput."
                    ),
                    evidence=evidence,
                    impact_us=time_step / 2,
                    event_rows=rows,
                    kernels=names,
                )
            )
            continue
        if vendor == "amd":
            # Tensile names a kernel that used matrix instructions (MI...).
            has_cores = any(ROCM_FP32.search(n) for n in names)
        else:
            has_cores = major is not None and major >= 7
        if not has_cores:
            continue
        sev = HIGH if share >= th.precision_high_share_pct else MEDIUM
        label = props.get("name") or f"device {device}"
        out.append(
            Finding(
                rule="precision",
                severity=sev,
                title=f"float32 GEMM/conv without tensor cores: {share:.0f}% of device time "
                f"({fmt_time(time_step)}{inp.per}) on {label}",
                detail=(
                    "These kernels do float32 math on the ordinary cores although the device has "
                    "tensor/matrix cores. " + _advice(vendor, major)
                ),
                evidence=evidence,
                impact_us=time_step / 2,
                event_rows=rows,
                kernels=names,
            )
        )
    return out


def _rows_of(inp: Inputs, names: list[str], limit: int) -> list[int]:
    return limit_rows(inp.rows_named(names, inp.activity_rows).tolist(), limit)
