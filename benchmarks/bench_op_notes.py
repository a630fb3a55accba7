"""What the op-row notes (issue 24) cost: notes over a 1M-event trace, two source trees side by side.

Each round runs one fresh process per tree (the order rotating per round):
it loads the trace and, timed in CPU seconds, computes ``Profile.annotations``
(every note rule, op and kernel rows). The load is reported beside it, so the
notes' cost reads as a share of what opening the trace costs. The figure of
interest is the median of the per-round ratios, this tree over the base.

    flock /tmp/torchprof-heavy.lock python benchmarks/bench_op_notes.py --base d84bd20~1 --new d84bd20 --repeat 3

``--base`` and ``--new`` are commits (each checked out in a temporary
worktree; without ``--new``, this working tree is measured); ``--trace``
a trace file (default: a 1M-event synthetic trace written with
``make_synthetic_trace.py`` into a temporary folder).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

from base_tree import ROOT, checkout, run_child

CHILD = r"""
import json, sys, time
from jupyter_torchprof import load
cpu0 = time.process_time()
p = load(sys.argv[1])
p.summary
cpu1 = time.process_time()
hits = p.annotations
cpu2 = time.process_time()
print(json.dumps({"load_s": cpu1 - cpu0, "notes_s": cpu2 - cpu1, "hits": len(hits), "events": len(p.events)}))
"""


def _trace(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    folder = Path(tempfile.mkdtemp(prefix="bench-op-notes-"))
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "make_synthetic_trace.py"),
            "--events",
            "1000000",
            "--out",
            str(folder),
        ],
        check=True,
        capture_output=True,
    )
    return next(folder.glob("*.json*"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="d84bd20~1", help="commit to compare with (before the op-row notes)")
    ap.add_argument("--new", default=None, help="commit to measure (default: this working tree)")
    ap.add_argument("--trace", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    trace = _trace(args.trace)
    with checkout(args.base) as base, checkout(args.new) if args.new else nullcontext(ROOT) as new:
        trees = {"base": base, "this tree": new}
        got: dict[str, list[dict]] = {name: [] for name in trees}
        names = list(trees)
        for r in range(args.repeat):
            for name in names[r % 2 :] + names[: r % 2]:
                got[name].append(run_child(CHILD, trees[name], str(trace)))
    print(
        f"trace: {trace} ({got['this tree'][0]['events']:,} events), {args.repeat} rounds, CPU seconds (median)"
    )
    for name, runs in got.items():
        load_s = statistics.median(x["load_s"] for x in runs)
        notes_s = statistics.median(x["notes_s"] for x in runs)
        print(f"  {name:10s} load {load_s:6.2f} s   notes {notes_s:6.3f} s   ({runs[0]['hits']} notes)")
    ratios = [b["notes_s"] / a["notes_s"] for a, b in zip(got["base"], got["this tree"], strict=True)]
    extra = [
        (b["notes_s"] - a["notes_s"]) / b["load_s"]
        for a, b in zip(got["base"], got["this tree"], strict=True)
    ]
    print(
        f"  notes, this tree / base: {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}); "
        f"added note time / load: {100 * statistics.median(extra):.1f} % ({100 * min(extra):.1f}-{100 * max(extra):.1f})"
    )


if __name__ == "__main__":
    main()
