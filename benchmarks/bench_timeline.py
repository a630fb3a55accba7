"""The timeline's first view: the time to build it, for one tree or two side by side.

Each run is a fresh process that loads the trace, computes every table (not
timed), then builds the timeline (`views.timeline.Timeline`: lanes, level of
detail, the first view's glyphs) three times: the first build (what a user
waits for after ``p.view()``) and the median of the next two. With two
``--source`` trees (an older commit checked out with ``git worktree add``,
say) rounds are interleaved, each starting with the next tree, and each
ratio is the median of per-round ratios with its min-max.

Usage::

    python benchmarks/bench_timeline.py [--events 1000000] [--trace FILE] [--repeat 5]
        [--source NEW --source OLD]
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_load import median_of, ratio_of, rotated, synthetic_trace  # noqa: E402 - the sibling script's helpers


def _child(path: str) -> dict:
    import warnings

    warnings.simplefilter("ignore")
    import bokeh.plotting  # noqa: F401 - import cost outside the timing

    import jupyter_torchprof
    from jupyter_torchprof.views.timeline import Timeline

    p = jupyter_torchprof.load(path, progress=False)
    for name in ("ops", "kernels", "steps", "streams", "summary", "events", "findings"):
        getattr(p, name)
    builds = []
    for _ in range(3):
        t0 = time.perf_counter()
        tl = Timeline(p)
        builds.append(time.perf_counter() - t0)
    with open("/proc/self/status") as fh:
        hwm = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    return {
        "first_s": builds[0],
        "again_s": statistics.median(builds[1:]),
        "glyphs": tl.glyph_count,
        "events": len(p.events),
        "peak_rss_mb": hwm / 1e3,
        "wall_s": builds[0],
    }


def run(path: Path, source: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(source))
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", str(path)],
        capture_output=True,
        cwd=str(source),
        env=env,
        timeout=3600,
    )
    if proc.returncode != 0:
        return {"failed": True}
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--events", type=int, default=1_000_000, help="synthetic trace size")
    ap.add_argument("--trace", type=Path, help="a trace to use instead of the synthetic one")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--source", type=Path, action="append", help="tree(s) to import the package from")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "torchprof-bench")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.child)))
        return
    path = args.trace or synthetic_trace(args.out, args.events, 5)
    sources = [s.resolve() for s in (args.source or [ROOT])]
    labels = ["ours"] + [f"ours@{i + 2}" for i in range(len(sources) - 1)]
    runs: dict[str, list[dict]] = {label: [] for label in labels}
    pairs = list(zip(labels, sources, strict=True))
    for i in range(args.repeat):
        for label, source in rotated(pairs, i):
            runs[label].append(run(path, source))
    print(f"== {path.name}, {args.repeat} rounds; trees: {', '.join(map(str, sources))}")
    print(f"{'tree':8s} {'events':>9s} {'glyphs':>8s} {'first s':>8s} {'again s':>8s} {'peak RSS MB':>12s}")
    for label, r in runs.items():
        ok = [x for x in r if "events" in x]
        events = ok[0]["events"] if ok else "-"
        glyphs = ok[0]["glyphs"] if ok else "-"
        print(
            f"{label:8s} {events!s:>9s} {glyphs!s:>8s} {median_of(r, 'first_s'):>8s} {median_of(r, 'again_s'):>8s}"
            f" {median_of(r, 'peak_rss_mb'):>12s}"
        )
    for label in labels[1:]:
        print(
            f"{label} / ours: "
            + ", ".join(
                f"{k} {ratio_of(runs[label], runs['ours'], k)}" for k in ("first_s", "again_s", "peak_rss_mb")
            )
        )


if __name__ == "__main__":
    main()
