"""The tables of one big trace, stage by stage, in fresh processes, side by side with older trees.

Each round runs, for each tree (rotated order), two fresh processes that
load the trace and then time, in CPU seconds:

* ``tables``: the op table, the steps, the kernel table and the findings,
  in that order (each one's own cost, the ones before it built);
* ``direct``: the op table, then the findings at once (which build the
  steps and kernel table on the way: what a user who asks for the findings
  after the op table waits for).

Each line also gives the process's peak RSS. Issue 25's goals on the 4 GB
trace: op table <= 3 s, findings <= 1 s.

Usage::

    python benchmarks/bench_big_tables.py --trace <4 GB trace> [--repeat 2]
        [--source DIR [--source OLD_DIR]]

(the trace: ``python benchmarks/make_synthetic_trace.py --events 14000000``).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from base_tree import ROOT, run_child

CHILD = r"""
import json, sys, time
import jupyter_torchprof
path, mode = sys.argv[1], sys.argv[2]
c = time.process_time()
p = jupyter_torchprof.load(path)
out = {"load": time.process_time() - c}
for stage in (("ops", "steps", "kernels", "findings") if mode == "tables" else ("ops", "findings")):
    c = time.process_time()
    getattr(p, stage)
    out[stage] = time.process_time() - c
with open("/proc/self/status") as fh:
    out["peak_rss_gb"] = next(int(x.split()[1]) for x in fh if x.startswith("VmHWM")) / 1e6
print(json.dumps(out))
"""

MODES = {"tables": ("ops", "steps", "kernels", "findings"), "direct": ("ops", "findings")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=2, help="rounds (each tree, each mode, once a round)")
    ap.add_argument(
        "--source", type=Path, action="append", help="tree(s) to compare (default: this checkout)"
    )
    args = ap.parse_args()
    sources = args.source or [ROOT]
    runs: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.repeat):
        order = sources[r % len(sources) :] + sources[: r % len(sources)]
        for source in order:
            for mode in MODES:
                result = run_child(CHILD, source, str(args.trace.resolve()), mode)
                runs.setdefault((str(source), mode), []).append(result)
                figures = " ".join(f"{k} {v:.2f}" for k, v in result.items())
                print(f"round {r + 1}: {source} {mode}: {figures}", flush=True)
    print(f"\n{args.trace.name}: CPU s, median of {args.repeat} fresh processes (min-max)")
    for (source, mode), results in runs.items():
        cells = []
        for key in (*MODES[mode], "peak_rss_gb"):
            values = [x[key] for x in results]
            cells.append(f"{key} {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
        print(f"  {source} [{mode}]: " + ", ".join(cells))


if __name__ == "__main__":
    main()
