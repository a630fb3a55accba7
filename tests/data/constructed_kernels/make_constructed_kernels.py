"""Write ``attention_gemm_a100.constructed.pt.trace.json``: a Kineto trace built by hand (see README.md).

Run from the repository root: ``python tests/data/constructed_kernels/make_constructed_kernels.py``.
The kernel names are quoted from real PyTorch profiles (README.md says where);
everything else (times, launch arguments, occupancy) is made up to show one
pattern per kernel, in the shapes Kineto writes.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "attention_gemm_a100.constructed.pt.trace.json"

CUDNN_SDPA = "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_3_64x64x128_4x1x1_kernel0_0"
FLASH = (
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t, "
    "Flash_kernel_traits<128, 128, 64, 4, cutlass::half_t> >, false, false, false, false, true, true, false, false>"
    "(pytorch_flash::Flash_fwd_params)"
)
MEM_EFFICIENT = (
    "fmha_cutlassF_f16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t, "
    "cutlass::arch::Sm80, true, 64, 128, 128, true, true>::Params)"
)
HGEMM = "ampere_fp16_s16816gemm_fp16_64x64_ldg8_f2f_stages_64x6_tn"
ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::Half>, at::detail::Array<char*, 3>)"
)

PID, TID, STREAM = 100, 100, 7
#: The A100 entry of the real a100_nccl_rank0 trace's deviceProperties.
DEVICE = {
    "id": 0, "name": "NVIDIA A100-PG509-200", "totalGlobalMem": 42297524224, "computeMajor": 8, "computeMinor": 0,
    "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
    "sharedMemPerBlock": 49152, "numSms": 108, "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 166912,
    "sharedMemPerMultiprocessor": 167936,
}  # fmt: skip

# (op chain, launch API and its category, occupancy query first?, kernel, grid, block, shared memory, occupancy %)
CALLS = [
    (["aten::scaled_dot_product_attention", "aten::_scaled_dot_product_cudnn_attention"],
     ("cuLaunchKernelEx", "cuda_driver"), False, CUDNN_SDPA, [32, 32, 1], [128, 1, 1], 98304, 0),
    (["aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
      "aten::_flash_attention_forward"],
     ("cudaLaunchKernel", "cuda_runtime"), False, FLASH, [32, 32, 1], [128, 1, 1], 49152, 12),
    (["aten::scaled_dot_product_attention", "aten::_scaled_dot_product_efficient_attention",
      "aten::_efficient_attention_forward"],
     ("cudaLaunchKernel", "cuda_runtime"), False, MEM_EFFICIENT, [64, 32, 1], [128, 1, 1], 40960, 19),
    (["aten::linear", "aten::mm"],
     ("cudaLaunchKernel", "cuda_runtime"), True, HGEMM, [16, 16, 1], [128, 1, 1], 36864, 25),
    (["aten::add"], ("cudaLaunchKernel", "cuda_runtime"), False, ELEMENTWISE, [4096, 1, 1], [128, 1, 1], 0, 100),
]  # fmt: skip


def _x(name: str, cat: str, ts: float, dur: float, pid: int, tid: int, args: dict) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def events() -> list[dict]:
    out: list[dict] = []
    ts, ext, corr = 1000.0, 1, 100
    step_start = ts
    for ops, (api, api_cat), query, kernel, grid, block, shared, occupancy in CALLS:
        depth = len(ops)
        # Nested ops: each 2 us inside its parent, the launch inside the innermost.
        for i, op in enumerate(ops):
            out.append(_x(op, "cpu_op", ts + i, 40 - 2 * i, PID, TID, {"External id": ext}))
            ext += 1
        inner_ext = ext - 1
        t = ts + depth + 1
        if query:
            out.append(_x("cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cuda_runtime", t, 1.5, PID, TID,
                          {"External id": inner_ext, "correlation": corr}))  # fmt: skip
            corr += 1
            t += 2
        out.append(_x(api, api_cat, t, 6, PID, TID, {"External id": inner_ext, "correlation": corr}))
        blocks = grid[0] * grid[1] * grid[2]
        out.append(
            _x(kernel, "kernel", t + 10, 20, 0, STREAM, {
                "queued": 0, "device": 0, "context": 1, "stream": STREAM, "correlation": corr,
                "registers per thread": 128, "shared memory": shared, "blocks per SM": blocks / 108,
                "warps per SM": blocks * block[0] / 32 / 108, "grid": grid, "block": block,
                "est. achieved occupancy %": occupancy,
            })
        )  # fmt: skip
        corr += 1
        ts += 60
    out.insert(0, _x("ProfilerStep#1", "user_annotation", step_start - 1, ts - step_start + 30, PID, TID, {}))
    out.append(_x("cudaDeviceSynchronize", "cuda_runtime", ts, 20, PID, TID, {"correlation": corr}))
    return out


def main() -> None:
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [DEVICE],
        "traceName": "constructed: see tests/data/constructed_kernels/README.md",
        "traceEvents": events(),
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
