"""CPU time of each table of a loaded trace, as a ratio to gunzip of the same file; trees side by side.

For each trace, each round runs one fresh Python per source tree (rotated:
each round starts one tree further along). A child loads the trace once
and builds everything (the warm-up: lazy imports, first calls), then times
the inflate of the file (``gunzip``, the floor of any reader), loads it
again and times, one after the other in CPU time of the process:

* ``ops``: `Profile.ops` right after the load, with all it needs first
  (call tree, launch links, per-event costs, the steps and summary its
  notes read, the notes);
* then ``kernels``, ``launches``, ``steps`` (what is left of them once the
  op table is built) and ``findings``.

Each figure is the median over rounds of the per-round ratio to that
round's gunzip time, with its min-max; the last column is the median of
the per-round ratios of the first tree to each other tree (below 1: the
first is faster). ``--no-warmup`` skips the warm-up load (for the 14M-item
synthetic trace, where one load is what memory allows).

Usage::

    python benchmarks/bench_tables.py --trace FILE [--trace FILE ...] [--source DIR ...]
        [--repeat 3] [--tables ops,kernels,launches,steps,findings] [--no-warmup]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from base_tree import compile_tree, installed_like

TABLES = ("ops", "kernels", "launches", "steps", "findings")


def _child(path: str, tables: list[str], warmup: bool) -> dict:
    import jupyter_torchprof
    from jupyter_torchprof.trace.reader import read_trace_bytes

    if warmup:
        p = jupyter_torchprof.load(path)
        for name in tables:
            getattr(p, name, None)
        del p
    c0 = time.process_time()
    read_trace_bytes(path)
    out = {"gunzip": time.process_time() - c0}
    c0 = time.process_time()
    p = jupyter_torchprof.load(path)
    out["load"] = time.process_time() - c0
    for name in tables:
        c0 = time.process_time()
        if hasattr(type(p), name):
            getattr(p, name)
        out[name] = time.process_time() - c0
    return out


def run_child(path: Path, source: Path, tables: list[str], warmup: bool) -> dict:
    """One measuring child importing the package from ``source``; its JSON, or ``{"failed": ...}``."""
    env = installed_like(dict(os.environ, PYTHONPATH=str(source.resolve())))
    args = [sys.executable, str(Path(__file__).resolve()), "--child", str(path), "--tables", ",".join(tables)]
    proc = subprocess.run(
        args + ([] if warmup else ["--no-warmup"]),
        capture_output=True,
        text=True,
        cwd=str(source),
        env=env,
        check=False,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"failed": proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _median_range(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def bench(path: Path, sources: list[Path], tables: list[str], repeat: int, warmup: bool) -> None:
    runs: dict[int, list[dict]] = {i: [] for i in range(len(sources))}
    for r in range(repeat):
        order = list(range(len(sources)))
        order = order[r % len(order) :] + order[: r % len(order)]
        for i in order:
            runs[i].append(run_child(path, sources[i], tables, warmup))
    print(f"\n== {path.name}: {repeat} rounds, CPU time / gunzip CPU time (median, min-max)")
    for i, source in enumerate(sources):
        failed = [r["failed"] for r in runs[i] if "failed" in r]
        if failed:
            print(f"   {source}: {len(failed)} failed run(s): {failed[0]}")
    print(f"{'table':10s} " + " ".join(f"{str(s)[-28:]:>30s}" for s in sources) + "   first/other")
    for name in ["gunzip", "load", *tables]:
        cells, ratios = [], []
        for i in range(len(sources)):
            ok = [r for r in runs[i] if "failed" not in r]
            if name == "gunzip":
                cells.append(_median_range([r["gunzip"] for r in ok]) + " s")
            else:
                cells.append(_median_range([r[name] / r["gunzip"] for r in ok]))
        for i in range(1, len(sources)):
            pairs = [
                (a[name], b[name])
                for a, b in zip(runs[0], runs[i], strict=True)
                if "failed" not in a and "failed" not in b and b[name] > 0
            ]
            ratios.append(_median_range([a / b for a, b in pairs]))
        print(f"{name:10s} " + " ".join(f"{c:>30s}" for c in cells) + "   " + " ".join(ratios))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", action="append", default=[], help="a .json(.gz) trace (repeatable)")
    ap.add_argument(
        "--source", action="append", default=[], help="tree to import from (repeatable; default .)"
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tables", default=",".join(TABLES))
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    tables = [t for t in args.tables.split(",") if t]
    unknown = sorted(set(tables) - set(TABLES))
    if unknown:
        raise SystemExit(f"unknown tables {unknown}; choose from {', '.join(TABLES)}")
    if args.child:
        print(json.dumps(_child(args.child, tables, not args.no_warmup)))
        return
    if not args.trace:
        raise SystemExit("give at least one --trace FILE")
    sources = [Path(s) for s in (args.source or ["."])]
    for source in sources:
        compile_tree(source)
    for trace in args.trace:
        # absolute: each child runs in its source tree
        path = Path(trace).resolve()
        if not path.is_file():
            raise SystemExit(f"no such trace: {path}")
        bench(path, sources, tables, max(args.repeat, 1), not args.no_warmup)


if __name__ == "__main__":
    main()
