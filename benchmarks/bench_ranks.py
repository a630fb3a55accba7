"""Loading a folder of N rank traces: one process vs worker processes (vs HTA).

The folder holds N copies of a real trace (default the A100 NCCL rank, with
its INFO log array) whose ``distributedInfo.rank`` is rewritten in the raw
bytes, so each copy keeps the file's layout. Contenders, each in a fresh
process, in interleaved rounds:

* ``serial``: ``load(folder, workers=1)``: every rank parsed and analysed
  (summary, cross-rank row; the findings when asked for) in the notebook's
  process, one after another;
* ``pool``: ``load(folder)``: the same work in worker processes, one per core
  (``pool``, ``pool1``: once per ``--source`` tree);
* ``HTA`` (``--hta``): ``TraceAnalysis(trace_dir=folder)``, which parses
  the ranks with multiprocessing, then ``get_gpu_kernel_breakdown()``.

Each contender also reads ``ranks.table`` and ``ranks.findings`` (ours).
Reported: medians over rounds of the time from the call to the cross-rank
table, and to the table and the findings (the first load in a fresh
process, and, for ours, the next load of the folder in that process, when
the imports are done and the pool's workers are kept), the process's wall (imports and both loads included), the RSS the
notebook process keeps after the first load, and the median of the
per-round ratios serial / pool with min-max.

With ``--tiny N`` it times instead a folder of N copies of a tiny trace
(default the 25 kB CPU-only one) against the same files loaded one by one,
each in a fresh process, in rotated rounds (each round starts with the next
contender):

* ``folder``: ``load(folder)`` and ``ranks.table`` (what the set shows);
* ``each``: ``[load(f) for f in files]`` (parsed, nothing computed);
* ``each+summary``: the same and each profile's ``summary`` (what the
  cross-rank table is made of).

It prints the median of the per-round ratios folder / each (min-max), for
every ``--source`` tree given (an older commit unpacked with ``git archive``,
say), so two versions compare in one run.

Usage::

    python benchmarks/bench_ranks.py [--ranks 8 32] [--repeat 3] [--trace FILE] [--hta] [--source TREE ...]
    python benchmarks/bench_ranks.py --tiny 64 [--repeat 5] [--source TREE ...]
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
sys.path.insert(0, str(HERE))

from bench_load import rotated  # noqa: E402 - the sibling script's helper

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
        _ = ranks.table
        out["table_s"] = time.perf_counter() - t0
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
    elif kind in ("folder", "each", "each+summary"):
        out = _child_tiny(kind, folder)
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


def _child_tiny(kind: str, folder: str) -> dict:
    """One contender of ``--tiny``: the folder at once, or its files one by one."""
    import jupyter_torchprof
    from jupyter_torchprof.results import profile, ranks  # noqa: F401 - import cost outside the timing

    files = sorted(p for p in Path(folder).iterdir() if p.name.endswith(".json.gz"))
    t0 = time.perf_counter()
    if kind == "folder":
        rs = jupyter_torchprof.load(folder)
        _ = rs.table
        n = len(rs)
        by_workers = sum(p != os.getpid() for p in getattr(rs, "parsed_by", []))
    else:
        profiles = [jupyter_torchprof.load(str(f)) for f in files]
        if kind == "each+summary":
            _ = [p.summary for p in profiles]
        n, by_workers = len(profiles), 0
    return {"wall_s": time.perf_counter() - t0, "ranks": n, "by_workers": by_workers}


def run(kind: str, folder: Path, timeout: float, source: Path = ROOT) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(source), os.environ.get("PYTHONPATH", "")]))
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


def tiny(args: argparse.Namespace) -> None:
    """``--tiny N``: a folder of N tiny ranks vs its files one by one, per source tree."""
    trace = args.trace if args.trace != DEFAULT_TRACE else TRACE_DIR / "cpu_only.pt.trace.json.gz"
    folder = make_folder(trace, args.tiny, args.out)
    sources = args.source or [ROOT]
    pairs = [(str(src), k) for src in sources for k in ("folder", "each", "each+summary")]
    runs: dict[tuple[str, str], list[dict]] = {p: [] for p in pairs}
    for i in range(args.repeat):
        for src, k in rotated(pairs, i):
            runs[(src, k)].append(run(k, folder, args.timeout, Path(src)))
    print(f"\n== {args.tiny} ranks ({trace.name} copies), {args.repeat} rounds")
    print(f"{'tree':40s} {'contender':13s} {'median s':>9s} {'ranks by workers':>17s}")
    for src, k in pairs:
        print(
            f"{src[-40:]:40s} {k:13s} {_med(runs[(src, k)], 'wall_s'):>9s} {_med(runs[(src, k)], 'by_workers'):>17s}"
        )
    for src in sources:
        r = runs[(str(src), "folder")]
        print(f"{str(src)[-40:]}: folder / each {_ratio(r, runs[(str(src), 'each')], 'wall_s')},"
              f" folder / each+summary {_ratio(r, runs[(str(src), 'each+summary')], 'wall_s')}")  # fmt: skip
    if len(sources) > 1:
        a, b = (runs[(str(s), "folder")] for s in sources[:2])
        print(f"folder, {sources[0]} / {sources[1]}: {_ratio(a, b, 'wall_s')}")
    bad = [r for rs in runs.values() for r in rs if "failed" in r or "timed_out" in r]
    if bad:
        print(f"   ({len(bad)} run(s) failed or timed out: {bad[0]})")


DEFAULT_TRACE = TRACE_DIR / "a100_nccl_rank0.pt.trace.json.gz"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--hta", action="store_true", help="also run HTA on the same folders")
    parser.add_argument("--timeout", type=float, default=1200)
    parser.add_argument(
        "--tiny", type=int, help="N copies of a tiny trace: the folder vs its files one by one"
    )
    parser.add_argument(
        "--source",
        type=Path,
        action="append",
        help="tree(s) to import the package from (the pool, or --tiny's contenders, once per tree)",
    )
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "torchprof-bench-ranks")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child)))
        return
    if args.tiny:
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
        )
        tiny(args)
        return
    # (label, contender, tree): the pool once per --source tree, to compare versions side by side
    sources = args.source or [ROOT]
    kinds = [("serial", "serial", Path(sources[-1]))] + [
        (f"pool{i or ''}", "pool", Path(src)) for i, src in enumerate(sources)
    ]
    kinds += [("hta", "hta", ROOT)] if args.hta else []
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    for label, _, src in kinds[1 : 1 + len(sources)]:
        print(f"{label}: {src}")
    for n in args.ranks:
        folder = make_folder(args.trace, n, args.out)
        runs: dict[str, list[dict]] = {k[0]: [] for k in kinds}
        for r in range(args.repeat):
            for label, k, src in rotated(kinds, r):
                runs[label].append(run(k, folder, args.timeout, src))
        print(f"\n== {n} ranks ({args.trace.name} copies), {args.repeat} rounds")
        print(
            f"{'contender':10s} {'load+table s':>13s} {'+findings s':>12s} {'next load s':>12s}"
            f" {'process s':>10s} {'RSS kept MB':>12s}"
        )
        for label, *_ in kinds:
            print(
                f"{label:10s} {_med(runs[label], 'table_s'):>13s} {_med(runs[label], 'wall_s'):>12s}"
                f" {_med(runs[label], 'again_s'):>12s} {_med(runs[label], 'process_s'):>10s}"
                f" {_med(runs[label], 'kept_mb'):>12s}"
            )
        print(f"serial / pool: load+table {_ratio(runs['serial'], runs['pool'], 'table_s')}, +findings"
              f" {_ratio(runs['serial'], runs['pool'], 'wall_s')}, next load"
              f" {_ratio(runs['serial'], runs['pool'], 'again_s')}, process"
              f" {_ratio(runs['serial'], runs['pool'], 'process_s')}")  # fmt: skip
        if len(sources) > 1:
            print(f"pool / pool1: load+table {_ratio(runs['pool'], runs['pool1'], 'table_s')}, +findings"
                  f" {_ratio(runs['pool'], runs['pool1'], 'wall_s')}, next load"
                  f" {_ratio(runs['pool'], runs['pool1'], 'again_s')}")  # fmt: skip
        if args.hta:
            print(f"HTA / pool: {_ratio(runs['hta'], runs['pool'], 'wall_s')}")
        bad = [r for rs in runs.values() for r in rs if "failed" in r or "timed_out" in r]
        if bad:
            print(f"   ({len(bad)} run(s) failed or timed out: {bad[0]})")


if __name__ == "__main__":
    main()
