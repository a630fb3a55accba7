"""Parsing a trace as it inflates (`parse_streaming`) vs holding its JSON whole (`parse_bytes`).

Each contender loads the ``.json.gz`` in a fresh process (``load(path)``,
then every table), with the streaming threshold set so that ``stream``
always streams and ``whole`` never does; ``held`` streams with the detail
columns kept in memory (``TORCHPROF_SPILL=0``) instead of spilled to disk
(`trace.spill`). "kept anon" is the anonymous memory the process holds at
the end (RssAnon): what it cannot give back, where the spilled columns'
pages belong to their mapped file. Rounds are interleaved; figures
are medians over rounds, each ratio the median of per-round ratios with
its min-max; peak RSS is the process's high-water mark (VmHWM).

Usage::

    python benchmarks/bench_stream.py [--events 1000000] [--repeat 3] [--trace FILE ...] [--no-tables]

``--trace`` adds traces (e.g. a 4 GB one written by ``make_synthetic_trace.py
--events 14000000``); put each in a folder of its own (a folder holding an
XPlane file is parsed whole, to splice the device trace in).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_load import TRACE_DIR, median_of, ratio_of, synthetic_trace  # noqa: E402 - the sibling script's helpers

TABLES = ("ops", "kernels", "steps", "summary", "findings")


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(key + ":")) / 1e3


def _child(mode: str, path: str, tables: bool) -> dict:
    import os

    if mode == "held":
        os.environ["TORCHPROF_SPILL"] = "0"
    import jupyter_torchprof
    from jupyter_torchprof.trace import parser

    parser.STREAM_JSON_BYTES = 1 << 62 if mode == "whole" else 0
    t0 = time.perf_counter()
    p = jupyter_torchprof.load(path, progress=False)
    out = {"parse_s": time.perf_counter() - t0, "events": len(p.events)}
    if tables:
        for name in TABLES:
            getattr(p, name)
    out["wall_s"] = time.perf_counter() - t0
    out["peak_rss_mb"] = _status_mb("VmHWM")
    # Memory only the process can hold: the spilled columns' pages are the
    # file's (RssFile), which the kernel may drop again.
    out["kept_anon_mb"] = _status_mb("RssAnon")
    return out


def run(mode: str, path: Path, tables: bool) -> dict:
    args = [sys.executable, str(Path(__file__).resolve()), "--child", mode, str(path)]
    proc = subprocess.run(
        args + ([] if tables else ["--no-tables"]),
        capture_output=True,
        cwd=str(ROOT),
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=3600,
    )
    if proc.returncode != 0:
        return {"failed": True}
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def bench(path: Path, repeat: int, tables: bool) -> None:
    runs: dict[str, list[dict]] = {"whole": [], "held": [], "stream": []}
    for _ in range(repeat):
        for mode in runs:
            runs[mode].append(run(mode, path, tables))
    print(f"\n== {path.name}: {path.stat().st_size / 1e6:.1f} MB on disk, {repeat} rounds")
    print(
        f"{'mode':8s} {'events':>9s} {'parse s':>8s} {'wall s':>8s} {'peak RSS MB':>12s} {'kept anon MB':>13s}"
    )
    for mode, r in runs.items():
        events = next((x["events"] for x in r if "events" in x), "-")
        print(
            f"{mode:8s} {events!s:>9s} {median_of(r, 'parse_s'):>8s} {median_of(r, 'wall_s'):>8s}"
            f" {median_of(r, 'peak_rss_mb'):>12s} {median_of(r, 'kept_anon_mb'):>13s}"
        )
    keys = ("parse_s", "wall_s", "peak_rss_mb", "kept_anon_mb")
    for a, b in (("stream", "whole"), ("stream", "held")):
        print(f"{a} / {b}: " + ", ".join(f"{k} {ratio_of(runs[a], runs[b], k)}" for k in keys))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--events", type=int, default=1_000_000, help="synthetic trace size (0: none)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trace", type=Path, action="append", default=[])
    ap.add_argument("--no-tables", action="store_true", help="time the load only")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.child[0], args.child[1], not args.no_tables)))
        return
    traces = list(args.trace)
    if args.events:
        # A folder of its own: a folder holding an XPlane file is parsed whole.
        out = Path(tempfile.mkdtemp(prefix="torchprof-stream-"))
        traces.append(synthetic_trace(out, args.events, 5))
    traces += [TRACE_DIR / "diff_pair" / "control.pt.trace.json.gz"]
    for path in traces:
        if path.exists():
            bench(path, args.repeat, not args.no_tables)


if __name__ == "__main__":
    main()
