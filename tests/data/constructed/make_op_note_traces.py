"""Write the constructed Kineto traces of the op-row notes (see README.md beside this file).

Run ``python tests/data/constructed/make_op_note_traces.py`` to rewrite them;
`tests/test_op_notes.py` checks that the committed files are what this script
writes. Every kernel and runtime name is quoted from a real profile (the
README says which); the timings, ids and nesting are made up, shaped as
torch.profiler writes them on CUDA.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
PID, TID, STREAM = 4242, 4242, 7
A100 = {
    "id": 0,
    "name": "NVIDIA A100-SXM4-80GB",
    "totalGlobalMem": 85031714816,
    "computeMajor": 8,
    "computeMinor": 0,
    "maxThreadsPerBlock": 1024,
    "maxThreadsPerMultiprocessor": 2048,
    "regsPerBlock": 65536,
    "warpSize": 32,
    "sharedMemPerBlock": 49152,
    "numSms": 108,
    "regsPerMultiprocessor": 65536,
    "sharedMemPerBlockOptin": 166912,
    "sharedMemPerMultiprocessor": 167936,
}

#: Kernel names quoted from real profiles (README.md gives each source).
FLASH_KERNEL = (
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t, "
    "Flash_kernel_traits<128, 128, 64, 4, cutlass::half_t> >, false, false, false, false, true, true, false, false>"
    "(pytorch_flash::Flash_fwd_params)"
)
EFFICIENT_KERNEL = (
    "fmha_cutlassF_f16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t, "
    "cutlass::arch::Sm80, true, 64, 128, 128, true, true>::Params)"
)
CUDNN_KERNEL = "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_3_64x64x128_4x1x1_kernel0_0"
GEMM_KERNEL = "ampere_sgemm_32x128_nt"


class Trace:
    """Events on one host thread and one stream, with ids and correlations handed out in order."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.ext = 0
        self.corr = 0

    def host(self, cat: str, name: str, ts: float, dur: float, **args) -> dict:
        self.ext += 1
        event = {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": TID, "ts": ts, "dur": dur}
        event["args"] = {"External id": self.ext, "Record function id": 0, **args}
        self.events.append(event)
        return event

    def launch(self, api: str, ts: float, kernel: str, start: float, dur: float, cat: str = "kernel") -> None:
        """A runtime call at ``ts`` and the device work it launched at ``start``."""
        self.corr += 1
        ext = self.ext  # the op that launched it was the last one opened
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": api,
                "pid": PID,
                "tid": TID,
                "ts": ts,
                "dur": 4.0,
                "args": {"External id": ext, "correlation": self.corr},
            }
        )
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": kernel,
                "pid": 0,
                "tid": STREAM,
                "ts": start,
                "dur": dur,
                "args": {"External id": ext, "correlation": self.corr, "device": 0, "stream": STREAM},
            }
        )
        for ph, pid, tid, at in (("s", PID, TID, ts), ("f", 0, STREAM, start)):
            flow = {
                "ph": ph,
                "id": self.corr,
                "pid": pid,
                "tid": tid,
                "ts": at,
                "cat": "ac2g",
                "name": "ac2g",
            }
            if ph == "f":
                flow["bp"] = "e"
            self.events.append(flow)

    def runtime(self, name: str, ts: float, dur: float) -> None:
        self.corr += 1
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "pid": PID,
                "tid": TID,
                "ts": ts,
                "dur": dur,
                "args": {"correlation": self.corr},
            }
        )

    def write(self, name: str) -> Path:
        body = {
            "schemaVersion": 1,
            "deviceProperties": [A100],
            "cuda_runtime_version": 12080,
            "record_shapes": 1,
            "traceName": f"{name} (constructed)",
            "constructed": "built by tests/data/constructed/make_op_note_traces.py; see README.md",
            "traceEvents": sorted(self.events, key=lambda e: (e["ts"], -e.get("dur", 0))),
            "displayTimeUnit": "ms",
            "baseTimeNanoseconds": 1_700_000_000_000_000_000,
        }
        path = HERE / f"{name}.constructed.pt.trace.json.gz"
        path.write_bytes(gzip.compress(json.dumps(body, indent=0).encode(), mtime=0))
        return path


QKV = [[2, 8, 1024, 64], [2, 8, 1024, 64], [2, 8, 1024, 64]]
HALF = ["c10::Half", "c10::Half", "c10::Half"]


def sdpa(name: str, dispatch: str | None, kernel: str) -> Path:
    """Two SDPA calls, each dispatching to ``dispatch`` (or to no op, when None) that launches ``kernel``."""
    t = Trace()
    t.host("user_annotation", "ProfilerStep#1", 0.0, 700.0)
    for start in (10.0, 200.0):
        t.host(
            "cpu_op",
            "aten::scaled_dot_product_attention",
            start,
            120.0,
            **{"Input Dims": QKV, "Input type": HALF},
        )
        if dispatch is not None:
            t.host("cpu_op", dispatch, start + 5, 100.0, **{"Input Dims": QKV, "Input type": HALF})
        t.launch("cudaLaunchKernel", start + 60, kernel, start + 70, 300.0 if start > 100 else 90.0)
    return t.write(name)


def profiler_rows() -> Path:
    """Two steps closed by a device sync, one sync mid-step, the profiler's final sync, an overhead record.

    Each step runs one ``aten::mm`` whose cuBLAS launch is sized by an
    occupancy query; one more query sits outside any op.
    """
    t = Trace()
    for step, base in ((1, 0.0), (2, 1000.0)):
        t.host("user_annotation", f"ProfilerStep#{step}", base, 900.0)
        t.host(
            "cpu_op",
            "aten::mm",
            base + 10,
            80.0,
            **{"Input Dims": [[64, 64], [64, 64]], "Input type": HALF[:2]},
        )
        t.runtime("cudaOccupancyMaxActiveBlocksPerMultiprocessor", base + 20, 3.0)
        t.launch("cudaLaunchKernel", base + 40, GEMM_KERNEL, base + 50, 200.0)
        if step == 1:
            t.runtime("cudaDeviceSynchronize", base + 100, 200.0)  # the code's own, mid-step
            t.runtime("cudaOccupancyMaxActiveBlocksPerMultiprocessor", base + 400, 2.0)  # under no op
        t.runtime("cudaDeviceSynchronize", base + 700, 190.0)  # closes the step
    t.runtime("cudaDeviceSynchronize", 2000.0, 15.0)  # the profiler's, when it stops
    t.events.append(
        {
            "ph": "X",
            "cat": "overhead",
            "name": "Activity Buffer Request",
            "pid": -1,
            "tid": 0,
            "ts": 1200.0,
            "dur": 30.0,
        }
    )
    return t.write("profiler_rows_cuda")


def main() -> list[Path]:
    return [
        sdpa("sdpa_flash_cuda", "aten::_scaled_dot_product_flash_attention", FLASH_KERNEL),
        sdpa("sdpa_efficient_cuda", "aten::_scaled_dot_product_efficient_attention", EFFICIENT_KERNEL),
        sdpa("sdpa_cudnn_cuda", "aten::_scaled_dot_product_cudnn_attention", CUDNN_KERNEL),
        sdpa("sdpa_kernels_only_cuda", None, FLASH_KERNEL),
        profiler_rows(),
    ]


if __name__ == "__main__":
    for written in main():
        print(written.relative_to(HERE.parents[2]))
