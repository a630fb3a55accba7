"""What the Steps page's tables cost beside the steps table they split.

`Profile.kernel_families` (busy time per family, overlapping work sharing
each moment) and `Profile.idle_breakdown` (idle per HTA cause) against
`analysis.steps.step_table`, on one trace, in fresh processes: each round
loads the trace once (links and step owners computed, as a view has them),
then times each contender's CPU time (``time.process_time``), the order
rotating from round to round. Reports medians and the median of the per-round
ratios (min-max) against the steps table.

Usage::

    flock /tmp/torchprof-heavy.lock python benchmarks/bench_breakdown.py [--trace T] [--repeat 5]

Without ``--trace``: the synthetic 1M-event trace of `make_synthetic_trace`
(written first when missing).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from make_synthetic_trace import synthetic_name

HERE = Path(__file__).resolve().parent
CONTENDERS = ("steps", "kernel_families", "idle_breakdown")


def child(trace: str, first: int) -> None:
    from jupyter_torchprof.analysis import breakdown as B
    from jupyter_torchprof.analysis import steps as S
    from jupyter_torchprof.results.profile import Profile

    p = Profile.from_file(trace)
    ev, links, owner = p.parsed_events, p._links, p._device_steps
    steps = p.steps
    run = {
        "steps": lambda: S.step_table(ev, links, None, owner),
        "kernel_families": lambda: B.kernel_families(ev, steps, owner),
        "idle_breakdown": lambda: B.idle_breakdown(ev, links, steps, owner),
    }
    order = CONTENDERS[first:] + CONTENDERS[:first]
    out = {"events": len(ev), "n_steps": len(steps)}
    for name in order:
        t0 = time.process_time()
        run[name]()
        out[name] = time.process_time() - t0
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--trace", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    trace = args.trace
    if trace is None:
        folder = Path(tempfile.gettempdir()) / "torchprof-bench"
        trace = folder / synthetic_name(1_000_000, 5)  # make_synthetic_trace's defaults
        if not trace.exists():
            subprocess.run(
                [sys.executable, str(HERE / "make_synthetic_trace.py"), "--out", str(folder)], check=True
            )
    # The children import this checkout's package, not an installed copy.
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")])),
    }
    rounds = []
    for r in range(args.repeat):
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(trace), str(r % len(CONTENDERS))],
            check=True, capture_output=True, text=True, env=env,
        ).stdout  # fmt: skip
        rounds.append(json.loads(out.strip().splitlines()[-1]))
    print(
        f"{trace.name}: {rounds[0]['events']:,} events, {rounds[0]['n_steps']} steps, {len(rounds)} rounds (CPU s)"
    )
    for name in CONTENDERS:
        med = statistics.median(r[name] for r in rounds)
        line = f"  {name:16s} {med:8.3f} s"
        if name != "steps":
            ratios = [r[name] / r["steps"] for r in rounds]
            line += f"   x steps table {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
        print(line)


if __name__ == "__main__":
    main()
