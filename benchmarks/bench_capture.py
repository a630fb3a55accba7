"""From profiler stop to op table: ours vs ``prof.key_averages()``; and 50 runs of the magic.

Part 1 (issue 2): a ~200k-event CPU profile (``--layers`` small Linear layers,
``--steps`` steps, ``record_shapes=True``). After the profiler stops, on the
very same profile object:

* ours: ``export_chrome_trace`` + our parse + the op table (``Profile.ops``),
  which is the road ``%%torchprof`` takes;
* torch: ``prof.key_averages()`` (which first turns the profiler's records
  into FunctionEvents) and its ``table()``.

Printed side by side, with the ratio (target: ours at least 5x faster).

Part 2 (in a fresh process): ``--runs`` consecutive ``%%torchprof`` cells in
one IPython shell (the real magic, run store in a temporary folder): RSS
after each run, its growth
from the first run to the last (target under 100 MB), and a check that every
run's profile has its events (one ``aten::linear`` per layer per step).

Usage::

    python benchmarks/bench_capture.py [--layers 20] [--steps 1000] [--runs 50]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def part1(layers: int, steps: int) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    import jupyter_torchprof.results.profile  # noqa: F401 - imports happen before the timing, as in a session
    from jupyter_torchprof import load

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(layers)])
    x = torch.randn(4, 16)
    with torch.no_grad():
        model(x)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for k in range(steps):
                with record_function(f"ProfilerStep#{k}"):
                    model(x)
    # --- ours: export the Kineto trace, parse it, build the op table
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        t0 = time.perf_counter()
        prof.export_chrome_trace(str(path))
        t_export = time.perf_counter() - t0
        p = load(str(path))
        ops = p.ops
        t_ours = time.perf_counter() - t0
        size = path.stat().st_size
    events = len(p.events)
    # --- torch: key_averages on the same profile
    t0 = time.perf_counter()
    averages = prof.key_averages()
    t_avg = time.perf_counter() - t0
    averages.table(sort_by="self_cpu_time_total", row_limit=20)
    t_torch = time.perf_counter() - t0

    theirs = {e.key: e.count for e in averages}
    mine = dict(zip(ops["name"], ops["calls"], strict=True))
    agree = sum(1 for k, c in theirs.items() if mine.get(k) == c)
    print(f"profile: {events} events ({size / 1e6:.0f} MB of JSON), {layers} Linear layers x {steps} steps")
    print(f"  ours  export_chrome_trace + parse + op table   {t_ours:7.2f} s  (export {t_export:.2f} s)")
    print(f"  torch key_averages() + table()                 {t_torch:7.2f} s  (key_averages {t_avg:.2f} s)")
    print(f"  ratio torch / ours: {t_torch / t_ours:.1f}x (target >= 5x)")
    print(f"  op rows whose call count equals key_averages(): {agree}/{len(theirs)}")


def part2(runs: int, layers: int) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    run_root = tempfile.mkdtemp(prefix="torchprof-runs-")
    os.environ["TORCHPROF_RUN_DIR"] = run_root
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "jupyter_torchprof")
    sh.run_cell(
        "import torch\n"
        f"model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range({layers})])\n"
        "x = torch.randn(8, 64)\n"
    )
    cell = "%%torchprof --quiet --steps 3 --record-shapes\ny = model(x)\n"
    rss = []
    missing = []
    t0 = time.perf_counter()
    for i in range(runs):
        result = sh.run_cell(cell)
        if not result.success:
            missing.append((i, repr(result.error_in_exec or result.error_before_exec)))
            continue
        p = sh.user_ns["_torchprof"]
        ops = p.ops.set_index("name")
        linear = int(ops.loc["aten::linear", "calls"]) if "aten::linear" in ops.index else 0
        if len(p.events) == 0 or linear != 3 * layers:
            missing.append((i, f"{len(p.events)} events, {linear} aten::linear"))
        del p, ops
        gc.collect()
        rss.append(rss_mb())
    wall = time.perf_counter() - t0
    print(f"{runs} consecutive %%torchprof runs in one IPython shell ({wall:.0f} s)")
    if rss:
        print(
            f"  RSS after run 1: {rss[0]:.0f} MB, after run {len(rss)}: {rss[-1]:.0f} MB, max {max(rss):.0f} MB"
        )
        print(f"  growth run 1 -> run {len(rss)}: {rss[-1] - rss[0]:+.1f} MB (target < 100 MB)")
        marks = [0, 9, 19, 29, 39, len(rss) - 1]
        print("  RSS by run: " + ", ".join(f"#{i + 1} {rss[i]:.0f}" for i in marks if i < len(rss)))
    print(f"  runs with all their events: {runs - len(missing)}/{runs}")
    for i, why in missing[:5]:
        print(f"    run {i + 1}: {why}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--layers", type=int, default=20)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--skip-capture", action="store_true", help="only the repeated-runs part")
    parser.add_argument("--skip-runs", action="store_true", help="only the capture part")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    if not args.skip_capture:
        part1(args.layers, args.steps)
        if not args.skip_runs:
            # A fresh process: memory the big profile above left to the
            # allocator would otherwise hide (or fake) growth across runs.
            import subprocess

            cmd = [
                sys.executable,
                __file__,
                "--skip-capture",
                "--runs",
                str(args.runs),
                "--layers",
                str(args.layers),
            ]
            out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
            print("\n".join(out.splitlines()[1:]))
        return
    if not args.skip_runs:
        part2(args.runs, args.layers)


if __name__ == "__main__":
    main()
