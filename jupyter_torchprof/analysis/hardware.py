"""Peak FLOP/s per precision and memory bandwidth of common accelerators, and which one a trace ran on.

Every figure is the vendor's dense peak (no 2:4 sparsity) for one device as
the profiler sees it, with its source beside it. Where a datasheet states
the sparse figure only (marked ``*`` "with sparsity"), the dense one is half
of it, as the same datasheet's footnote says. Per precision the figure is
the highest the device reaches in that precision: fp64 on tensor/matrix
cores where it has them (a DGEMM runs there), fp32 without TF32 (plain
FP32 math; a TF32 GEMM is ``tf32``).

An AMD MI250 or MI250X is two dies (GCDs); ROCm shows each as its own
device (64 GiB, 104 or 110 compute units), so their rows are one GCD: the
package figure halved.

Units: FLOP/s (or op/s for int8) and bytes/s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

T = 1e12
#: Precisions a peak is given for, in the order the tips list them.
PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")


@dataclass(frozen=True)
class DevicePeaks:
    """One device's peaks: ``flops[precision]`` in FLOP/s and memory bandwidth in bytes/s."""

    name: str
    flops: dict[str, float] = field(default_factory=dict)
    memory_bytes_per_s: float = 0.0

    def peak(self, precision: str) -> float | None:
        """The peak FLOP/s of ``precision`` (`PRECISIONS`), None where the device has none listed."""
        return self.flops.get(precision)


def _peaks(name: str, bandwidth: float, **flops: float) -> DevicePeaks:
    return DevicePeaks(name, {k: v * T for k, v in flops.items()}, bandwidth)


# NVIDIA V100 datasheet (images.nvidia.com/content/technologies/volta/pdf/
# volta-v100-datasheet-update-us-1165301-r5.pdf): SXM2 "Double-Precision 7.8
# TFLOPS, Single-Precision 15.7 TFLOPS, Tensor Performance 125 TFLOPS"; PCIe
# 7 / 14 / 112; "Memory Bandwidth 900 GB/sec" both. No TF32, BF16, FP8.
V100_SXM2 = _peaks("Tesla V100 SXM2", 900e9, fp64=7.8, fp32=15.7, fp16=125)
V100_PCIE = _peaks("Tesla V100 PCIe", 900e9, fp64=7.0, fp32=14.0, fp16=112)

# NVIDIA A100 datasheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/
# pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), same for SXM and
# PCIe: "FP64 Tensor Core 19.5 TFLOPS, FP32 19.5 TFLOPS, TF32 156 | 312*,
# BFLOAT16 / FP16 Tensor Core 312 | 624*, INT8 624 | 1,248* TOPS"; "GPU Memory
# Bandwidth 40GB PCIe 1,555GB/s, 80GB PCIe 1,935GB/s, 40GB SXM 1,555GB/s,
# 80GB SXM 2,039GB/s". No FP8.
_A100 = {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "int8": 624}
A100_40GB_SXM = _peaks("A100 40GB SXM", 1555e9, **_A100)
A100_80GB_SXM = _peaks("A100 80GB SXM", 2039e9, **_A100)
A100_40GB_PCIE = _peaks("A100 40GB PCIe", 1555e9, **_A100)
A100_80GB_PCIE = _peaks("A100 80GB PCIe", 1935e9, **_A100)

# NVIDIA H100 datasheet (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-
# core-gpu-datasheet), sparse figures marked "* With sparsity", halved here.
# SXM: "FP64 Tensor Core 67 teraFLOPS, FP32 67, TF32 Tensor Core 989*,
# BFLOAT16 / FP16 Tensor Core 1,979*, FP8 Tensor Core 3,958*, INT8 3,958*
# TOPS, GPU memory bandwidth 3.35TB/s"; PCIe: "51, 51, 756*, 1,513*, 3,026*,
# 3,026*, 2TB/s".
H100_SXM = _peaks(
    "H100 SXM", 3.35e12, fp64=67, fp32=67, tf32=494.5, fp16=989.5, bf16=989.5, fp8=1979, int8=1979
)
H100_PCIE = _peaks(
    "H100 PCIe", 2.0e12, fp64=51, fp32=51, tf32=378, fp16=756.5, bf16=756.5, fp8=1513, int8=1513
)

# NVIDIA H200 (nvidia.com/en-us/data-center/h200/, H200 SXM column): the
# H100 SXM's compute ("FP64 Tensor Core 67 TFLOPS, FP32 67, TF32 989*,
# BFLOAT16/FP16 1,979*, FP8 3,958*, INT8 3,958*", sparse, halved here) with
# "GPU Memory Bandwidth 4.8TB/s".
H200_SXM = _peaks(
    "H200 SXM", 4.8e12, fp64=67, fp32=67, tf32=494.5, fp16=989.5, bf16=989.5, fp8=1979, int8=1979
)

# NVIDIA HGX B200 (nvidia.com/en-us/data-center/hgx/, "Individual Blackwell
# GPU Specifications", HGX B200 column): "FP8/FP6 Tensor Core 9 PFLOPS, INT8
# 9 POPS, FP16/BF16 4.5 PFLOPS, TF32 2.2 PFLOPS" (with sparsity, halved
# here), "FP32 75 TFLOPS, FP64/FP64 Tensor Core 37 TFLOPS", "180GB HBM3E |
# 7.7TB/s".
B200 = _peaks("B200 (HGX)", 7.7e12, fp64=37, fp32=75, tf32=1100, fp16=2250, bf16=2250, fp8=4500, int8=4500)

# AMD Instinct MI250X (amd.com/en/products/accelerators/instinct/mi200/mi250x.html):
# "Peak FP64 Matrix 95.7 TFLOPs, Peak FP32 Matrix 95.7, Peak FP16 / BF16 383,
# Peak INT8 383 TOPs, Peak Memory Bandwidth 3.2 TB/s" (3276.8 GB/s) for the
# two-GCD package; one GCD (what the trace shows) is half.
MI250X_GCD = _peaks(
    "MI250X (one GCD)", 3.2768e12 / 2, fp64=47.85, fp32=47.85, fp16=191.5, bf16=191.5, int8=191.5
)
# AMD Instinct MI250 (amd.com/en/products/accelerators/instinct/mi200/mi250.html):
# "Peak FP64 Matrix 90.5 TFLOPs, Peak FP32 Matrix 90.5, Peak FP16 / BF16
# 362.1, Peak INT8 362.1 TOPs, Peak Memory Bandwidth 3.2 TB/s", halved per GCD.
MI250_GCD = _peaks(
    "MI250 (one GCD)", 3.2768e12 / 2, fp64=45.25, fp32=45.25, fp16=181.05, bf16=181.05, int8=181.05
)

# AMD Instinct MI300X (amd.com/en/products/accelerators/instinct/mi300/mi300x.html):
# "Peak FP64 Matrix 163.4 TFLOPs, Peak FP32 Matrix 163.4, Peak TF32 653.7,
# Peak FP16 1307.4, Peak BF16 1307.4, Peak FP8 2614.9, Peak INT8 2614.9 TOPs"
# (dense; the sparse ones are twice), "Peak Memory Bandwidth 5.3 TB/s".
MI300X = _peaks(
    "MI300X", 5.3e12, fp64=163.4, fp32=163.4, tf32=653.7, fp16=1307.4, bf16=1307.4, fp8=2614.9, int8=2614.9
)

# Google Cloud TPU v5e (cloud.google.com/tpu/docs/v5e, "Key chip
# specifications"): "Peak compute per chip (bf16) 197 TFLOPs, (Int8) 393
# TOPs", "HBM2 capacity and bandwidth 16 GB, 819 GBps".
TPU_V5E = _peaks("TPU v5e", 819e9, bf16=197, int8=393)
# Google Cloud TPU v6e (cloud.google.com/tpu/docs/v6e): "Peak compute per chip
# (bf16) 918 TFLOPs, (Int8) 1836 TOPs, HBM bandwidth per chip 1638 GBps".
TPU_V6E = _peaks("TPU v6e", 1638e9, bf16=918, int8=1836)

# AWS Trainium2 (awsdocs-neuron.readthedocs-hosted.com, about-neuron/arch/
# neuron-hardware/trainium2: "1,299 FP8 TFLOPS, 667 BF16/FP16/TF32 TFLOPS,
# 181 FP32 TFLOPS"; nki/arch/trainium2_arch.html: "96GiB and bandwidth of
# 2.9TB/s").
TRAINIUM2 = _peaks("Trainium2", 2.9e12, fp32=181, tf32=667, fp16=667, bf16=667, fp8=1299)

#: Every row, for the docs and the tests.
TABLE: tuple[DevicePeaks, ...] = (
    V100_SXM2,
    V100_PCIE,
    A100_40GB_SXM,
    A100_80GB_SXM,
    A100_40GB_PCIE,
    A100_80GB_PCIE,
    H100_SXM,
    H100_PCIE,
    H200_SXM,
    B200,
    MI250X_GCD,
    MI250_GCD,
    MI300X,
    TPU_V5E,
    TPU_V6E,
    TRAINIUM2,
)

_GIB = 2**30
#: AMD parts ROCm names generically ("AMD Radeon Graphics"): compute units per device.
_AMD_BY_UNITS = {104: MI250_GCD, 110: MI250X_GCD, 304: MI300X}


def _nvidia(name: str, memory_gib: float) -> DevicePeaks | None:
    upper = name.upper()
    pcie = "PCIE" in upper
    if "NVL" in upper or "V100S" in upper:
        return None  # other clocks and memory than the rows here
    if "V100" in upper:
        return V100_PCIE if pcie else V100_SXM2
    if "A100" in upper:
        # 40 GB parts report about 39.4 GiB, 80 GB ones about 79 GiB.
        big = memory_gib > 48 or "80GB" in upper
        if pcie:
            return A100_80GB_PCIE if big else A100_40GB_PCIE
        return A100_80GB_SXM if big else A100_40GB_SXM
    if "H100" in upper:
        return H100_PCIE if pcie else H100_SXM
    if "H200" in upper:
        return H200_SXM
    if "B200" in upper:
        return B200
    return None


def match_device(props: dict[str, Any] | None) -> DevicePeaks | None:
    """The row of `TABLE` for one ``deviceProperties`` entry of a trace, None when unknown.

    NVIDIA parts are told by name (and memory for the A100s); AMD's by name
    when ROCm gives one (``AMD Instinct MI300X``) else by compute units;
    TPUs and Trainium by name.
    """
    if not props:
        return None
    name = str(props.get("name") or "")
    memory_gib = float(props.get("totalGlobalMem") or 0) / _GIB
    upper = name.upper()
    if "MI300X" in upper:
        return MI300X
    if "MI250X" in upper:
        return MI250X_GCD
    if "MI250" in upper:
        return MI250_GCD
    if re.search(r"V5E|V5 ?LITE", upper):
        return TPU_V5E
    if re.search(r"V6E|V6 ?LITE|TRILLIUM", upper):
        return TPU_V6E
    if re.search(r"TRAINIUM ?2|TRN2", upper):
        return TRAINIUM2
    if upper.startswith("AMD") or props.get("warpSize") == 64:
        return _AMD_BY_UNITS.get(int(props.get("numSms") or 0))
    return _nvidia(name, memory_gib)


def device_peaks(
    device_properties: list[dict[str, Any]] | None, device: int | None = None
) -> DevicePeaks | None:
    """The peaks of the trace's device ``device`` (its ``id``), else of its first; None when unknown."""
    props = list(device_properties or [])
    if not props:
        return None
    chosen = next((p for p in props if device is not None and p.get("id") == device), props[0])
    return match_device(chosen)


#: Precision words the kernel names use (`names`), as `PRECISIONS`.
_PRECISION_WORDS = {
    "f64": "fp64",
    "dgemm": "fp64",
    "f32": "fp32",
    "sgemm": "fp32",
    "f16": "fp16",
    "h": "fp16",
    "hgemm": "fp16",
    "h1688": "fp16",
    "h16816": "fp16",
    "s1688": "tf32",
    "s16816": "tf32",
    "i8816": "int8",
    "i16832": "int8",
    "e4m3": "fp8",
    "e5m2": "fp8",
}
#: A tensor's ``Input type`` in the trace, as `PRECISIONS`.
_DTYPE_PRECISION = {
    "double": "fp64",
    "float": "fp32",
    "c10::Half": "fp16",
    "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
    "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8",
    "signed char": "int8",
}


def precision_of_kernel(word: Any) -> str:
    """`PRECISIONS` entry for the ``precision`` a kernel name told (`names`), "" when none."""
    if not isinstance(word, str) or not word:
        return ""
    w = word.strip().lower()
    return w if w in PRECISIONS else _PRECISION_WORDS.get(w, "")


def precision_of_dtype(dtype: Any) -> str:
    """`PRECISIONS` entry for a tensor's ``Input type`` (``float``, ``c10::Half``), "" when none applies."""
    return _DTYPE_PRECISION.get(str(dtype), "") if dtype else ""
