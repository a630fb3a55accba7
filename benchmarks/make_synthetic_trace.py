"""Write a realistic synthetic Kineto trace of about N events (default 1M).

The shape copies what torch.profiler + CUPTI write for a data-parallel
training loop, so that parsers do the work they would do on a real file:

* ``ProfilerStep#k`` ranges (``user_annotation``) on the main thread;
* forward ops nested four deep (``aten::linear`` > ``aten::t`` >
  ``aten::transpose`` > ``aten::as_strided``), with ``Input Dims`` and
  ``Input type`` as written with ``record_shapes=True``;
* backward ops on the autograd thread;
* one ``cudaLaunchKernel`` / ``cudaMemcpyAsync`` / ``cudaMemsetAsync``
  runtime event per device activity, sharing ``correlation`` with it and
  ``External id`` with the op that launched it;
* kernels on two compute streams and an NCCL stream, with launch arguments
  (grid, block, registers, shared memory, occupancy); memcpys with bytes;
* ``ac2g`` flow start/finish pairs for every launch;
* a ``gpu_user_annotation`` per step, ``[memory]`` instant events (an
  allocation and a free around each forward op's output, on the GPU, as
  ``profile_memory=True`` writes them), and the ``M`` metadata events;
* 1-10 ``ProfilerStep``s (default 5, as real captures have), the layers per
  step growing with the size asked for, and about 60 distinct kernel names
  (real traces have 49-170), drawn per layer;
* the profiler's own log lines after ``traceEvents`` (``"INFO"`` and
  ``"ERROR"`` arrays of strings holding ``]``), as Kineto writes them.

Timestamps are epoch-based float µs with ns decimals (as in recent traces),
and the layout (one key group per line, two-space indents) follows Kineto's
own writer, so byte counts are comparable to real files.

Usage::

    python benchmarks/make_synthetic_trace.py [--events 1000000] [--steps 5] [--out DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import tempfile
import time
from pathlib import Path

PID = 4242
MAIN_TID = 4242
BWD_TID = 4250
STREAMS = (7, 20)
NCCL_STREAM = 24

GEMM = "ampere_sgemm_128x64_nn"
GEMM_BWD = "ampere_sgemm_64x64_nt"
RELU = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar"
    "(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::"
    "operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >"
    "(int, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, "
    "c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::"
    "operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)"
)
RELU_BWD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, "
    "at::detail::Array<char*, 3> >(int, at::native::(anonymous namespace)::threshold_kernel_impl<float>"
    "(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, at::detail::Array<char*, 3>)"
)
SGD = (
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
    "TensorListMetadata<3>, at::native::(anonymous namespace)::FusedSgdMathFunctor<float, 3>, float*, "
    "float, float, float, float, bool, bool, bool, float const*, float const*>(...)"
)
#: Kernel names drawn per layer, so a trace has about as many distinct names
#: as a real model's (GEMM tile shapes, elementwise functors, reductions).
GEMMS = tuple(
    f"sm80_xmma_gemm_f32f32_f32f32_f32_{lay}_n_tilesize{a}x{b}x{c}_stage{st}_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"
    for lay, (a, b, c, st) in (
        (lay, t)
        for lay in ("nn", "nt", "tn")
        for t in (
            (128, 64, 8, 3),
            (64, 64, 8, 4),
            (128, 128, 8, 3),
            (256, 128, 8, 3),
            (64, 32, 8, 5),
            (32, 32, 8, 6),
        )
    )
) + (GEMM, GEMM_BWD, "ampere_sgemm_128x128_tn", "ampere_sgemm_32x128_nn")
ELEMENTWISE = tuple(
    f"void at::native::vectorized_elementwise_kernel<4, at::native::{fn}<{dt}>, at::detail::Array<char*, {n}> >(int, at::native::{fn}<{dt}>, at::detail::Array<char*, {n}>)"
    for fn, n in (
        ("CUDAFunctor_add", 3),
        ("MulFunctor", 3),
        ("GeluCUDAKernelImpl", 2),
        ("sigmoid_kernel_cuda", 2),
        ("FillFunctor", 1),
        ("AbsFunctor", 2),
    )
    for dt in ("float", "c10::Half", "c10::BFloat16")
) + (RELU, RELU_BWD)
REDUCTIONS = (
    tuple(
        f"void at::native::reduce_kernel<{w}, 4, at::native::ReduceOp<float, at::native::{op}<float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::{op}<float>, unsigned int, float, 4>)"
        for op in ("MeanOps", "NormTwoOps", "func_wrapper_t", "MaxOps", "WelfordOps")
        for w in (128, 512)
    )
    + tuple(f"triton_poi_fused_add_native_layer_norm_{i}" for i in range(8))
    + (
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, float const*, float const*, float*, float*, float*)",
    )
)
POINTWISE = ELEMENTWISE + REDUCTIONS
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
MEMCPY = "Memcpy HtoD (Pageable -> Device)"
MEMSET = "Memset (Device)"


class Writer:
    """Accumulates Kineto-formatted event text."""

    def __init__(self, base_ts: float) -> None:
        self.parts: list[str] = []
        self.count = 0
        self.ext = 1000
        self.corr = 50000
        self.base = base_ts
        self.rng = random.Random(0)
        self.allocated = 0
        self.addr = 140_000_000_000_000

    def memory(self, tid: int, t: float, nbytes: int) -> None:
        """A ``[memory]`` instant event: ``nbytes`` allocated (> 0) or freed (< 0) on GPU 0."""
        self.allocated += nbytes
        self.addr += 4096 if nbytes > 0 else 0
        self.parts.append(
            f'  {{\n    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",\n'
            f'    "pid": {PID}, "tid": {tid},\n    "ts": {self.ts(t)},\n'
            f'    "args": {{\n      "Total Reserved": {max(self.allocated, 0) + (64 << 20)}, '
            f'"Total Allocated": {self.allocated}, "Bytes": {nbytes}, "Addr": {self.addr}, '
            f'"Device Id": 0, "Device Type": 1\n    }}\n  }}'
        )
        self.count += 1

    def ts(self, t: float) -> str:
        return f"{self.base + t:.3f}"

    def x(self, cat: str, name: str, pid: int, tid: int, t: float, dur: float, args: str) -> None:
        self.parts.append(
            f'  {{\n    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": {pid}, "tid": {tid},\n'
            f'    "ts": {self.ts(t)}, "dur": {dur:.3f},\n    "args": {{\n      {args}\n    }}\n  }}'
        )
        self.count += 1

    def flow(self, ph: str, fid: int, pid: int, tid: int, t: float) -> None:
        bp = ', "bp": "e"' if ph == "f" else ""
        self.parts.append(
            f'  {{\n    "ph": "{ph}", "id": {fid}, "pid": {pid}, "tid": {tid}, "ts": {self.ts(t)},\n'
            f'    "cat": "ac2g", "name": "ac2g"{bp}\n  }}'
        )
        self.count += 1

    def op(self, name: str, tid: int, t: float, dur: float, dims: str = "[]", types: str = "[]") -> int:
        self.ext += 1
        self.x(
            "cpu_op",
            name,
            PID,
            tid,
            t,
            dur,
            f'"External id": {self.ext},"Record function id": 0, "Ev Idx": {self.ext - 1000}, '
            f'"Input Dims": {dims}, "Input type": {types}',
        )
        return self.ext

    def launch(
        self,
        ext: int,
        tid: int,
        t: float,
        device_name: str,
        cat: str,
        stream: int,
        dev_t: float,
        dev_dur: float,
    ) -> None:
        """A runtime call at ``t`` and the device activity it enqueued at ``dev_t``."""
        self.corr += 1
        c = self.corr
        api = {
            "kernel": "cudaLaunchKernel",
            "gpu_memcpy": "cudaMemcpyAsync",
            "gpu_memset": "cudaMemsetAsync",
        }[cat]
        self.x(
            "cuda_runtime",
            api,
            PID,
            tid,
            t,
            4.5,
            f'"External id": {ext},      "cbid": 211, "correlation": {c}',
        )
        self.flow("s", c, PID, tid, t)
        common = f'"External id": {ext},      "queued": 0, "device": 0, "context": 1,      "stream": {stream}, "correlation": {c}'
        if cat == "kernel":
            regs = self.rng.choice((16, 32, 40, 128))
            args = (
                f'{common},      "registers per thread": {regs},      "shared memory": {regs * 256},'
                f'      "blocks per SM": 4.740741,      "warps per SM": 75.851852,      "grid": [512, 1, 1],'
                f'      "block": [128, 1, 1],      "est. achieved occupancy %": {self.rng.randint(10, 90)}'
            )
        elif cat == "gpu_memcpy":
            args = f'{common},      "bytes": 4194304, "memory bandwidth (GB/s)": 11.2'
        else:
            args = f'{common},      "bytes": 65536, "memory bandwidth (GB/s)": 80.1'
        self.x(cat, device_name, 0, stream, dev_t, dev_dur, args)
        self.flow("f", c, 0, stream, dev_t)


#: Events one layer writes in a step (forward and backward, launches, flows, memory).
EVENTS_PER_LAYER = 30
#: Events a step writes besides its layers.
EVENTS_PER_STEP = 23
#: Kineto's log lines, written after ``traceEvents`` (each holds a ``]``).
LOG_LINES = tuple(
    f"INFO:2024-04-03 18:51:35 1102:1102 CuptiActivityProfiler.cpp:{line}] {text}"
    for line, text in (
        (907, "Enabling GPU tracing"),
        (837, "Evaluating whether to run child profiler = NcclProfiler"),
        (837, "Evaluating whether to run child profiler = CuptiRangeProfiler"),
        (1028, "Tracing starting in 0s"),
        (1033, "Tracing for 1 iterations"),
        (1141, "Traces Recorded:"),
        (1144, "PyTorch Profiler: 1 iterations"),
    )
)


def _layers_per_step(events: int, steps: int) -> int:
    return max(1, (events // steps - EVENTS_PER_STEP) // EVENTS_PER_LAYER)


def write_trace(path: Path, events: int, layers: int | None = None, steps: int = 5) -> int:
    """Write the trace; returns the number of events written.

    ``steps`` (1-10) ``ProfilerStep``s of ``layers`` layers each (by default
    as many as make about ``events`` events in all).
    """
    if not 1 <= steps <= 10:
        raise ValueError(f"steps must be 1-10 (real captures have 1-5), not {steps}")
    if layers is None:
        layers = _layers_per_step(events, steps)
    w = Writer(base_ts=1_712_195_504_000_000.0)
    t = 0.0
    dev_t = 0.0
    for step in range(steps):
        step_start = t
        t += 5.0
        dev_t = max(dev_t, t + 10.0)
        step_ext = w.op("aten::zeros", MAIN_TID, t, 20.0, "[[]]", '["Scalar"]')
        w.launch(step_ext, MAIN_TID, t + 5.0, MEMCPY, "gpu_memcpy", STREAMS[0], dev_t, 350.0)
        dev_t += 351.0
        t += 25.0
        gpu_ann_start = dev_t
        for layer in range(layers):
            stream = STREAMS[layer % 2]
            gemm = GEMMS[layer % len(GEMMS)]
            pointwise = POINTWISE[layer % len(POINTWISE)]
            # forward: linear > t > transpose > as_strided ; addmm > launch
            lin = t
            w.op("aten::t", MAIN_TID, t + 1.0, 6.0, "[[1024, 1024]]", '["float"]')
            w.op(
                "aten::transpose", MAIN_TID, t + 2.0, 4.0, "[[1024, 1024], [], []]", '["float", "Int", "Int"]'
            )
            w.op(
                "aten::as_strided",
                MAIN_TID,
                t + 3.0,
                2.0,
                "[[1024, 1024], [], [], []]",
                '["float", "", "", ""]',
            )
            ext = w.op(
                "aten::addmm",
                MAIN_TID,
                t + 8.0,
                14.0,
                "[[1024], [256, 1024], [1024, 1024]]",
                '["float", "float", "float"]',
            )
            dev_t = max(dev_t, t + 15.0)
            w.launch(ext, MAIN_TID, t + 10.0, gemm, "kernel", stream, dev_t, 48.0 + w.rng.random())
            w.memory(MAIN_TID, t + 9.0, 1 << 20)
            dev_t += 50.0
            w.op(
                "aten::linear",
                MAIN_TID,
                lin,
                24.0,
                "[[256, 1024], [1024, 1024], [1024]]",
                '["float", "float", "float"]',
            )
            t += 26.0
            w.op("aten::relu", MAIN_TID, t, 12.0, "[[256, 1024]]", '["float"]')
            ext = w.op("aten::clamp_min", MAIN_TID, t + 1.0, 10.0, "[[256, 1024], []]", '["float", "Scalar"]')
            w.launch(ext, MAIN_TID, t + 3.0, pointwise, "kernel", stream, max(dev_t, t + 5.0), 6.0)
            dev_t = max(dev_t, t + 5.0) + 7.0
            t += 14.0
        loss_ext = w.op("aten::zero_", MAIN_TID, t, 9.0, "[[256, 1024]]", '["float"]')
        w.launch(loss_ext, MAIN_TID, t + 2.0, MEMSET, "gpu_memset", STREAMS[0], max(dev_t, t + 4.0), 3.0)
        dev_t = max(dev_t, t + 4.0) + 4.0
        t += 10.0
        w.x(
            "gpu_user_annotation", "forward", 0, STREAMS[0], gpu_ann_start, dev_t - gpu_ann_start,
            f'"External id": {w.ext},      "device": 0, "stream": {STREAMS[0]}',
        )  # fmt: skip
        # backward on the autograd thread, in reverse layer order
        bt = t
        for layer in reversed(range(layers)):
            stream = STREAMS[layer % 2]
            gemm = GEMMS[(layer + 7) % len(GEMMS)]
            pointwise = POINTWISE[(layer + 11) % len(POINTWISE)]
            ev = bt
            w.op(
                "aten::threshold_backward",
                BWD_TID,
                bt + 2.0,
                9.0,
                "[[256, 1024], [256, 1024], []]",
                '["float", "float", "Scalar"]',
            )
            ext = w.ext
            w.launch(ext, BWD_TID, bt + 4.0, pointwise, "kernel", stream, max(dev_t, bt + 6.0), 7.0)
            dev_t = max(dev_t, bt + 6.0) + 8.0
            w.op("ReluBackward0", BWD_TID, bt + 1.0, 11.0)
            bt += 13.0
            ext = w.op(
                "aten::mm", BWD_TID, bt + 2.0, 12.0, "[[256, 1024], [1024, 1024]]", '["float", "float"]'
            )
            w.launch(ext, BWD_TID, bt + 4.0, gemm, "kernel", stream, max(dev_t, bt + 6.0), 45.0)
            w.memory(BWD_TID, bt + 15.0, -(1 << 20))  # the layer's forward output is freed
            dev_t = max(dev_t, bt + 6.0) + 46.0
            w.op("AddmmBackward0", BWD_TID, bt + 1.0, 14.0)
            w.op("autograd::engine::evaluate_function: AddmmBackward0", BWD_TID, ev, bt + 16.0 - ev)
            bt += 17.0
        # all-reduce of the gradients, then the optimizer
        ext = w.op("c10d::allreduce_", MAIN_TID, bt, 30.0, "[[], []]", '["GenericList", "Object"]')
        w.launch(ext, MAIN_TID, bt + 5.0, NCCL, "kernel", NCCL_STREAM, max(dev_t, bt + 8.0), 800.0)
        bt += 31.0
        ext = w.op(
            "aten::_fused_sgd_",
            MAIN_TID,
            bt,
            40.0,
            "[[], [], []]",
            '["TensorList", "TensorList", "TensorList"]',
        )
        w.launch(ext, MAIN_TID, bt + 10.0, SGD, "kernel", STREAMS[0], max(dev_t, bt + 12.0), 120.0)
        dev_t = max(dev_t, bt + 12.0) + 900.0
        w.x(
            "user_annotation", "Optimizer.step#SGD.step", PID, MAIN_TID, bt - 1.0, 42.0,
            f'"External id": {w.ext + 1}, "Record function id": 0, "Ev Idx": 0',
        )  # fmt: skip
        bt += 45.0
        t = max(bt, dev_t) + 5.0  # the step synchronises with the device
        w.x(
            "user_annotation", f"ProfilerStep#{step}", PID, MAIN_TID, step_start, t - step_start,
            f'"External id": {w.ext + 2}, "Record function id": 0, "Ev Idx": 0',
        )  # fmt: skip
        t += 2.0

    meta = []
    for pid, name in ((PID, "python3"), (0, "GPU 0")):
        meta.append(
            f'  {{\n    "name": "process_name", "ph": "M", "ts": {w.ts(0)}, "pid": {pid}, "tid": 0,\n'
            f'    "args": {{\n      "name": "{name}"\n    }}\n  }}'
        )
    for tid, name in ((MAIN_TID, "thread 4242 (python3)"), (BWD_TID, "thread 4250 (pt_autograd_0)")):
        meta.append(
            f'  {{\n    "name": "thread_name", "ph": "M", "ts": {w.ts(0)}, "pid": {PID}, "tid": {tid},\n'
            f'    "args": {{\n      "name": "{name}"\n    }}\n  }}'
        )
    head = (
        '{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {\n      "id": 0, "name": "NVIDIA A100-SXM4-80GB",'
        ' "totalGlobalMem": 85097971712,\n      "computeMajor": 8, "computeMinor": 0,\n'
        '      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,\n'
        '      "regsPerBlock": 65536, "warpSize": 32,\n      "sharedMemPerBlock": 49152, "numSms": 108\n    }\n  ],\n'
        '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},\n'
        '  "record_shapes": 1,\n  "traceEvents": [\n'
    )
    tail = (
        f',\n  {{\n    "ph": "X", "cat": "Trace", "ts": {w.ts(0)}, "dur": {t:.3f},\n'
        f'    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
        f'    "args": {{\n      "Op count": 0\n    }}\n  }}\n],\n'
        f'  "INFO": {json.dumps(list(LOG_LINES))},\n'
        f'  "ERROR": {json.dumps(["ERROR:2024-04-03 18:51:36 1102:1102 CuptiActivityProfiler.cpp:1161] 0 records dropped [ok]"])},\n'
        f'  "traceName": "{path.name}",\n'
        '  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": 1712195504000000000\n}\n'
    )
    body = ",\n".join(meta + w.parts)
    data = (head + body + tail).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wb", compresslevel=1) as fh:
            fh.write(data)
    else:
        path.write_bytes(data)
    return w.count + len(meta) + 1


def synthetic_name(events: int, steps: int = 5) -> str:
    """File name of the synthetic trace of about ``events`` events in ``steps`` steps."""
    return f"synthetic_{events // 1000}k_{steps}steps.pt.trace.json.gz"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=5, help="ProfilerSteps, 1-10")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "torchprof-bench")
    args = parser.parse_args()
    path = args.out / synthetic_name(args.events, args.steps)
    t0 = time.perf_counter()
    n = write_trace(path, args.events, steps=args.steps)
    print(
        f"wrote {n} events to {path} ({path.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s"
    )


if __name__ == "__main__":
    main()
