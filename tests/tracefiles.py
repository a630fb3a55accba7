"""Where the real traces are (``tests/data/kineto``), and an independent reader for them."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The project's copies of the real traces (byte-identical, MIT, see tests/data/README.md):
#: a fresh clone runs every test on them, with nothing beside the checkout.
DATA_DIR = ROOT / "tests" / "data" / "kineto"
#: Where the tests read them; ``$TORCHPROF_TRACE_DIR`` points at another copy.
TRACE_DIR = Path(os.environ.get("TORCHPROF_TRACE_DIR") or DATA_DIR)

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
    """Path of one of the real traces; fails the test (never skips it) when the file is missing.

    The traces ship with the project, so a missing one is a broken checkout
    or a wrong ``$TORCHPROF_TRACE_DIR``: a skip would hide hundreds of tests.
    """
    path = TRACE_DIR / name
    if not path.is_file():
        pytest.fail(
            f"real trace {name} is missing from {TRACE_DIR} (see tests/data/README.md)", pytrace=False
        )
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


def union_in(intervals, lo: float, hi: float) -> float:
    """Length of the union of ``(start, end)`` intervals clipped to ``[lo, hi]`` (plain Python, the oracle)."""
    total, end = 0.0, lo
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


def encloses(outer: dict, inner: dict) -> bool:
    """True when JSON event ``outer`` holds ``inner`` by time on the same thread (ties: the longer, earlier holds)."""
    return (
        outer is not inner
        and outer["tid"] == inner["tid"]
        and outer["ts"] <= inner["ts"]
        and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
        and (outer["dur"], -outer["ts"]) > (inner["dur"], -inner["ts"])
    )


def innermost_around(e: dict, ops: list[dict]) -> dict | None:
    """The innermost of ``ops`` around JSON event ``e`` (a quadratic walk, fine for small traces)."""
    around = [o for o in ops if encloses(o, e)]
    return min(around, key=lambda o: o["dur"]) if around else None


def write_rank_folder(folder: Path, sources: dict[int, str]) -> Path:
    """A job folder: real trace ``sources[r]`` copied as ``rank{r}.pt.trace.json.gz``, naming rank r of the job."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank, name in sources.items():
        with gzip.open(real_trace(name), "rt") as fh:
            doc = json.load(fh)
        doc["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": rank, "world_size": len(sources)}
        with gzip.open(folder / f"rank{rank}.pt.trace.json.gz", "wt") as fh:
            json.dump(doc, fh)
    return folder


def _is_host_category(cat: object) -> bool:
    name = str(cat or "").lower()
    return name in ("cpu_op", "operator", "user_annotation", "python_function") or name.endswith(
        ("_runtime", "_driver")
    )


def key_averages_rows(
    events: list[dict], categories: tuple[str, ...] = ("cpu_op",)
) -> dict[str, tuple[int, float]]:
    """(calls, total µs) per name as torch's ``key_averages()`` counts them, in plain Python (the oracle).

    The host call tree is the stack walk torch does (per thread, events by
    start then longest first; a child lies inside its parent, with 1 ns of
    slack for timestamps rounded from float µs); then an event whose parent
    has the same name and no other child is not counted
    (``EventList._remove_dup_nodes``). Rows are for events of ``categories``.
    """
    lanes: dict[tuple, list[dict]] = {}
    for e in events:
        if e.get("ph") == "X" and _is_host_category(e.get("cat")):
            lanes.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    rows: dict[str, tuple[int, float]] = {}
    for lane in lanes.values():
        lane.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0))))
        parent: list[int] = [-1] * len(lane)
        stack: list[int] = []
        for i, e in enumerate(lane):
            s, end = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))
            while stack:
                top = lane[stack[-1]]
                top_end = float(top["ts"]) + float(top.get("dur", 0))
                if s >= top_end or end > top_end + 0.001:
                    stack.pop()
                else:
                    break
            parent[i] = stack[-1] if stack else -1
            stack.append(i)
        children = [0] * len(lane)
        for p in parent:
            if p >= 0:
                children[p] += 1
        for i, e in enumerate(lane):
            p = parent[i]
            folded = p >= 0 and children[p] == 1 and lane[p].get("name") == e.get("name")
            if not folded and e.get("cat") in categories:
                calls, total = rows.get(e["name"], (0, 0.0))
                rows[e["name"]] = (calls + 1, total + float(e.get("dur", 0)))
    return rows


def key_averages_calls(events: list[dict], categories: tuple[str, ...] = ("cpu_op",)) -> dict[str, int]:
    """Calls per name as ``key_averages()`` counts them (see `key_averages_rows`)."""
    return {name: calls for name, (calls, _) in key_averages_rows(events, categories).items()}


def assert_same_findings(a, b) -> None:
    """Two findings frames hold the same rows, value by value (arrays, NaN and all)."""
    import numpy as np

    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    for col in a.columns:
        for x, y in zip(a[col], b[col], strict=True):
            if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
                np.testing.assert_array_equal(x, y)
            elif isinstance(x, float) and np.isnan(x):
                assert isinstance(y, float) and np.isnan(y)
            else:
                assert x == y, col
