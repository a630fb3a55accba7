"""The native (C) column builder vs the pure-Python parser, and both vs inflating the file.

Three contenders per trace, each in a fresh Python process importing the
package from this checkout, in interleaved rounds (see ``bench_load.py``,
whose children this reuses):

* ``python``: ``jupyter_torchprof.load(path)`` + every table, ``TORCHPROF_NATIVE=0``;
* ``native``: the same with ``TORCHPROF_NATIVE=1`` (the C scanner);
* ``gunzip``: read + inflate only, the floor of any reader of the file.

``parse s`` is ``load`` alone, ``wall s`` load + every table, both measured
inside the process after its imports; peak RSS is the process's high-water
mark. Ratios are medians of the per-round ratios, with min-max. Goal 1 of
issue 18: load + tables within 4x of inflating the file, 1M events in
<= 2.5 s, peak RSS <= 1.5x the JSON size.

Each line also gives, by CPU time, ``load`` (``jupyter_torchprof.load``
alone), ``load+tables`` and ``full`` (load + every table + launches +
findings) over the inflate, per round (issue 25: full <= 4x on real traces,
<= 3x on the 1M-event one).

Inputs: the 1M-event synthetic trace (5 steps, written by
``make_synthetic_trace.py`` if absent) and the three largest real traces;
``--shapes`` adds the HTA traces in ``benchmarks/traces`` (MTIA,
df_index_resolver).

Usage::

    python benchmarks/bench_native.py [--events 1000000] [--real 3] [--repeat 3] [--trace FILE ...]
        [--shapes] [--warm]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_load import (  # noqa: E402
    ROOT,
    _ok,
    median_of,
    ratio_of,
    real_traces,
    rotated,
    run_contender,
    shape_traces,
    synthetic_trace,
)

MODES = {"python": ("ours", "0"), "native": ("ours", "1"), "gunzip": ("gunzip", "0")}


def rounds(path: Path, repeat: int) -> dict[str, list[dict]]:
    """``repeat`` rounds, each running every contender once, in turn (fresh processes).

    Each round starts one contender further along (see ``bench_load.rotated``).
    """
    runs: dict[str, list[dict]] = {label: [] for label in MODES}
    saved = os.environ.get("TORCHPROF_NATIVE")
    try:
        for i in range(repeat):
            for label, (kind, flag) in rotated(list(MODES.items()), i):
                os.environ["TORCHPROF_NATIVE"] = flag
                runs[label].append(run_contender(kind, path, 3600, ROOT))
    finally:
        if saved is None:
            os.environ.pop("TORCHPROF_NATIVE", None)
        else:
            os.environ["TORCHPROF_NATIVE"] = saved
    return runs


def report(path: Path, runs: dict[str, list[dict]], repeat: int) -> None:
    json_mb = median_of(runs["gunzip"], "json_mb")
    print(
        f"\n== {path.name}: {path.stat().st_size / 1e6:.1f} MB on disk, {json_mb} MB of JSON, {repeat} rounds"
    )
    print(
        f"{'contender':10s} {'events':>9s} {'parse s':>8s} {'wall s':>8s} {'process s':>10s} {'peak RSS MB':>12s}"
    )
    for label, r in runs.items():
        events = next((x.get("events") for x in r if _ok(x) and "events" in x), "-")
        print(
            f"{label:10s} {events!s:>9s} {median_of(r, 'parse_s'):>8s} {median_of(r, 'wall_s'):>8s}"
            f" {median_of(r, 'process_s'):>10s} {median_of(r, 'peak_rss_mb'):>12s}"
        )
    py, nat, gz = runs["python"], runs["native"], runs["gunzip"]
    print(f"python / native: parse {ratio_of(py, nat, 'parse_s')}, load+tables {ratio_of(py, nat, 'wall_s')}")
    print(
        f"load+tables / inflate: native {ratio_of(nat, gz, 'wall_s')}, python {ratio_of(py, gz, 'wall_s')} (goal: <= 4x)"
    )
    print(
        f"python / native (cpu): load {ratio_of(py, nat, 'parse_cpu_s')}, full {ratio_of(py, nat, 'full_cpu_s')}"
    )
    for label, mine in (("native", nat), ("python", py)):
        print(
            f"{label} / inflate (cpu): load {ratio_of(mine, gz, 'parse_cpu_s', 'cpu_s')},"
            f" load+tables {ratio_of(mine, gz, 'cpu_s')}, full {ratio_of(mine, gz, 'full_cpu_s', 'cpu_s')}"
        )
    rss = (
        [x["peak_rss_mb"] / float(json_mb) for x in nat if _ok(x)]
        if json_mb not in ("-", "timed out")
        else []
    )
    if rss:
        print(f"native peak RSS / JSON size: {statistics.median(rss):.2f}x (goal at 1M events: <= 1.5x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000, help="size of the synthetic trace (0: none)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--real", type=int, default=3, help="how many of the largest real traces")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds")
    ap.add_argument("--trace", type=Path, action="append", help="trace(s) to use instead of the defaults")
    ap.add_argument("--shapes", action="store_true", help="add the HTA traces in benchmarks/traces")
    ap.add_argument("--warm", action="store_true", help="load once in each child before timing")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "torchprof-bench")
    args = ap.parse_args()
    traces = list(args.trace or [])
    if not traces:
        traces = real_traces(args.real)
        if args.events:
            traces.insert(0, synthetic_trace(args.out, args.events, args.steps))
    if args.shapes:
        traces += shape_traces()
    if args.warm:
        os.environ["TORCHPROF_BENCH_WARM"] = "1"
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    for path in traces:
        report(path, rounds(path.resolve(), args.repeat), args.repeat)


if __name__ == "__main__":
    main()
