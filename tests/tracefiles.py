"""Where the shared real traces are, and an independent reader for them."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Real GPU traces live beside the checkout (../shared/traces), never in it.
TRACE_DIR = Path(os.environ.get("TORCHPROF_TRACE_DIR", ROOT.parent / "shared" / "traces" / "kineto"))

REAL_TRACES = [
    "a100_nccl_rank0.pt.trace.json.gz",
    "cpu_only.pt.trace.json.gz",
    "cuda_event_sync_multi_stream.pt.trace.json.gz",
    "gp100_sgd_step_user_annotation.pt.trace.json.gz",
    "mi250_rocm_train.pt.trace.json.gz",
    "triton_kernel.pt.trace.json.gz",
    "v100_ddp_ns_timestamps.pt.trace.json.gz",
    "diff_pair/control.pt.trace.json.gz",
    "diff_pair/test.pt.trace.json.gz",
]
GPU_TRACES = [t for t in REAL_TRACES if t != "cpu_only.pt.trace.json.gz"]


def real_trace(name: str) -> Path:
    """Path of a shared real trace; skips the test when the folder is absent."""
    path = TRACE_DIR / name
    if not path.exists():
        pytest.skip(f"real traces not available ({TRACE_DIR} is missing; CI has it beside the clone)")
    return path


def raw_events(path: Path) -> list[dict]:
    """The trace's events read with the standard library only (the oracle)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)["traceEvents"]


def union_length(intervals: list[tuple[float, float]]) -> float:
    """Length covered by ``(start, end)`` intervals, overlaps counted once (plain Python, the oracle)."""
    total, end = 0.0, -float("inf")
    for s, e in sorted(intervals):
        if s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total
