"""Time from the end of a small cell's last step to its view: two source trees side by side.

Each round starts one fresh process per tree (``--base``, a commit checked
out into a temporary git worktree, against this tree), with an in-process
ipykernel (real comms, so the magic shows the interactive view), and runs
``%%torchprof`` on a small model. The cell notes the time at the end of
each of its calls; the last is the end of the last profiled step. Measured
from there:

* ``to view``: until the magic returns, the view built and displayed (the
  profiler's stop, the trace's export, parse, tables, the view);
* ``to page``: that, plus what the page asks for before it draws the first
  page (the node tree and the documents of the first page's figures);
* the main thread's CPU time over ``to page``;
* the whole first run (the magic's wall time), which in a fresh process
  also pays the profiler's start-up.

Then, in the same process, the captured trace is loaded again and its tables
computed (``load + tables``), and a `ProfileView` of it built (``view build``):
a view should cost no more than the load and the tables it shows.

Rounds alternate which tree runs first; each figure is the median over
rounds, and the comparison the median of the per-round ratios (new / base).

    python benchmarks/bench_first_view.py --base c466c7e --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from base_tree import ROOT, checkout, run_child

_CHILD = r"""
import json, sys, time
from ipykernel.inprocess.manager import InProcessKernelManager
km = InProcessKernelManager(); km.start_kernel()
shell = km.kernel.shell
assert shell.run_cell("%load_ext jupyter_torchprof").error_in_exec is None
shell.run_cell(
    "import time, torch\n"
    "torch.manual_seed(0)\n"
    "m = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))\n"
    "x = torch.randn(64, 256)\n"
    "_ends = []"
)
cell = "%%torchprof --name small\ny = m(x).sum()\ny.backward()\n_ends.append((time.perf_counter(), time.thread_time()))"
t0 = time.perf_counter()
res = shell.run_cell(cell)
t_view, c_view = time.perf_counter(), time.thread_time()
assert res.error_in_exec is None, res.error_in_exec
first_run = t_view - t0
end_wall, end_cpu = shell.user_ns["_ends"][-1]
profile = shell.user_ns["_torchprof"]

# What the page asks for before it draws the first page (an in-process comm
# drops custom messages: they are taken here, as the page would receive them).
from jupyter_torchprof.views import widget as view_module, ui
view = view_module._LIVE[-1]
surface = view.widget()
surface.send = lambda content, buffers=None: None
surface._on_page_message(surface, {"t": "hello"}, [])
for node in ui.walk(view.tabs.children[view.tabs.selected_index]):
    if isinstance(node, ui.Figure):
        surface._on_page_message(surface, {"t": "doc", "id": node.id}, [])
t_page, c_page = time.perf_counter(), time.thread_time()

# The same trace, loaded again: its load and tables, then a view of it.
import jupyter_torchprof as jt
try:
    from jupyter_torchprof.runs import wait_for_compression
except ImportError:  # a tree from before runs/ (the base of a comparison)
    from jupyter_torchprof.store import wait_for_compression
wait_for_compression()
trace = profile.trace_path
t1 = time.perf_counter()
again = jt.load(trace)
again.ops, again.kernels, again.steps, again.summary, again.findings
t2 = time.perf_counter()
built = view_module.ProfileView(again)
t3 = time.perf_counter()
phases = getattr(profile.capture, "phases", None)
print(json.dumps({
    "first_run_s": first_run, "to_view_s": t_view - end_wall, "to_page_s": t_page - end_wall,
    "cpu_s": c_page - end_cpu, "load_tables_s": t2 - t1, "view_build_s": t3 - t2,
    "phases": phases, "events": len(profile.events),
}))
"""


def measure(source: Path) -> dict:
    return run_child(_CHILD, source, unset=("TORCHPROF_WIDGETS",))


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def run(rounds: int, trees: dict[str, Path]) -> None:
    names = list(trees)
    got: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            got[name].append(measure(trees[name]))
        print(f"round {r + 1}/{rounds}: " + ", ".join(f"{n} {got[n][-1]['to_page_s']:.2f} s" for n in order))
    keys = ("to_view_s", "to_page_s", "cpu_s", "first_run_s", "view_build_s", "load_tables_s")
    print()
    print(f"{'':26}" + "".join(f"{n:>14}" for n in names) + f"{'new/base':>12}")
    base, new = names
    for key in keys:
        medians = [_median([g[key] for g in got[n]]) for n in names]
        ratio = _median([b[key] and n[key] / b[key] for b, n in zip(got[base], got[new], strict=True)])
        print(f"{key:26}" + "".join(f"{m:14.3f}" for m in medians) + f"{ratio:12.2f}")
    for name in names:
        view = [g["view_build_s"] / g["load_tables_s"] for g in got[name]]
        print(f"{name}: view build / (load + tables) = {_median(view):.2f} (median of {len(view)})")
    phases = [g["phases"] for g in got[new] if g["phases"]]
    if phases:
        print(f"\n{new}: phases of the first run (median s over {len(phases)} fresh processes)")
        for key in phases[0]:
            print(f"  {key:24}{_median([p[key] for p in phases]):8.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="c466c7e", help="commit of the view before (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with checkout(args.base) as base:
        run(args.rounds, {args.base: base, "this tree": ROOT})


if __name__ == "__main__":
    main()
