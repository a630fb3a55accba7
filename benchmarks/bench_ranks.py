"""Loading a folder of N rank traces: one process vs worker processes (vs HTA).

The folder holds N copies of a real trace (default the A100 NCCL rank, with
its INFO log array) whose ``distributedInfo.rank`` is rewritten in the raw
bytes, so each copy keeps the file's layout. Contenders, each in a fresh
process, in interleaved rounds:

* ``serial``: ``load(folder, workers=1)``: every rank parsed and analysed
  (summary, cross-rank row, findings, ops/kernels/steps/streams) in the
  notebook's process, one after another;
* ``pool``: ``load(folder)``: the same work in worker processes, one per core;
* ``HTA`` (``--hta``): ``TraceAnalysis(trace_dir=folder)``, which parses
  the ranks with multiprocessing, then ``get_gpu_kernel_breakdown()``.

Each contender also reads ``ranks.table`` and ``ranks.findings`` (ours).
Reported: medians over rounds of the time from the call to the tables (the
first load in a fresh process, and, for ours, the next load of the folder
in that process, when the imports are done and the pool's workers are
kept), the process's wall (imports and both loads included), the RSS the
notebook process keeps after the first load, and the median of the
per-round ratios serial / pool with min-max.

Usage::

    python benchmarks/bench_ranks.py [--ranks 8 32] [--repeat 3] [--trace FILE] [--hta]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRACE_DIR = Path(os.environ.get("TORCHPROF_TRACE_DIR") or ROOT / "tests" / "data" / "kineto")
_RANK = re.compile(rb'("distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*)\d+')


def make_folder(trace: Path, n: int, out: Path) -> Path:
    """``out/<n>ranks`` with ``n`` copies of ``trace``, rank ``i`` in the i-th (kept if it exists)."""
    folder = out / f"{trace.name.split('.')[0]}_{n}ranks"
    if folder.is_dir() and len(list(folder.iterdir())) == n:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    raw = gzip.decompress(trace.read_bytes())
    if not _RANK.search(raw):
        raise SystemExit(f"{trace} has no distributedInfo.rank to rewrite")
    for i in range(n):
        data = _RANK.sub(lambda m, i=i: m.group(1) + str(i).encode(), raw, count=1)
        (folder / f"rank{i}.pt.trace.json.gz").write_bytes(gzip.compress(data, compresslevel=1))
    return folder


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 1e3


def _child(kind: str, folder: str) -> dict:
    out: dict = {}
    if kind in ("serial", "pool"):
        import jupyter_torchprof
        from jupyter_torchprof.results.ranks import RankSet  # noqa: F401 - import cost outside the timing

        rss0 = _rss_mb()
        t0 = time.perf_counter()
        ranks = jupyter_torchprof.load(folder, workers=1 if kind == "serial" else None)
        tables = (ranks.table, ranks.findings)
        out["wall_s"] = time.perf_counter() - t0
        out["ranks"] = len(ranks)
        out["stragglers"] = len(ranks.stragglers)
        out["rows"] = [len(t) for t in tables]
        out["kept_mb"] = _rss_mb() - rss0
        # A later load in the same session (another folder, or this one
        # again): this process's imports are done and, for the pool, its
        # workers are kept started (parallel._WarmPool).
        del ranks, tables
        t0 = time.perf_counter()
        ranks = jupyter_torchprof.load(folder, workers=1 if kind == "serial" else None)
        _ = (ranks.table, ranks.findings)
        out["again_s"] = time.perf_counter() - t0
    elif kind == "hta":
        import logging

        logging.disable(logging.WARNING)
        from hta.trace_analysis import TraceAnalysis

        rss0 = _rss_mb()
        t0 = time.perf_counter()
        analysis = TraceAnalysis(trace_dir=folder)
        analysis.get_gpu_kernel_breakdown(visualize=False)
        out["wall_s"] = time.perf_counter() - t0
        out["ranks"] = len(analysis.t.traces)
        out["kept_mb"] = _rss_mb() - rss0
    else:
        raise SystemExit(f"unknown contender {kind}")
    return out


def run(kind: str, folder: Path, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", kind, str(folder)],
            capture_output=True,
            timeout=timeout,
            cwd=str(ROOT),
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"timed_out": True}
    if proc.returncode != 0:
        return {"failed": proc.stderr.decode()[-300:]}
    result = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - t0
    return result


def _med(runs: list[dict], key: str) -> str:
    values = [r[key] for r in runs if key in r]
    return f"{statistics.median(values):.2f}" if values else "-"


def _ratio(a: list[dict], b: list[dict], key: str) -> str:
    r = [x[key] / y[key] for x, y in zip(a, b, strict=True) if key in x and key in y and y[key]]
    return f"{statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f})" if r else "-"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trace", type=Path, default=TRACE_DIR / "a100_nccl_rank0.pt.trace.json.gz")
    parser.add_argument("--hta", action="store_true", help="also run HTA on the same folders")
    parser.add_argument("--timeout", type=float, default=1200)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "torchprof-bench-ranks")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child)))
        return
    kinds = ["serial", "pool"] + (["hta"] if args.hta else [])
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    for n in args.ranks:
        folder = make_folder(args.trace, n, args.out)
        runs: dict[str, list[dict]] = {k: [] for k in kinds}
        for _ in range(args.repeat):
            for k in kinds:
                runs[k].append(run(k, folder, args.timeout))
        print(f"\n== {n} ranks ({args.trace.name} copies), {args.repeat} rounds")
        print(
            f"{'contender':10s} {'load+tables s':>14s} {'next load s':>12s} {'process s':>10s} {'RSS kept MB':>12s}"
        )
        for k in kinds:
            print(
                f"{k:10s} {_med(runs[k], 'wall_s'):>14s} {_med(runs[k], 'again_s'):>12s}"
                f" {_med(runs[k], 'process_s'):>10s} {_med(runs[k], 'kept_mb'):>12s}"
            )
        print(f"serial / pool: first load {_ratio(runs['serial'], runs['pool'], 'wall_s')}, next load"
              f" {_ratio(runs['serial'], runs['pool'], 'again_s')}, process"
              f" {_ratio(runs['serial'], runs['pool'], 'process_s')}")  # fmt: skip
        if args.hta:
            print(f"HTA / pool: {_ratio(runs['hta'], runs['pool'], 'wall_s')}")
        bad = [r for rs in runs.values() for r in rs if "failed" in r or "timed_out" in r]
        if bad:
            print(f"   ({len(bad)} run(s) failed or timed out: {bad[0]})")


if __name__ == "__main__":
    main()
