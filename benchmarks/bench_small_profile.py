"""A small cell's profile: from the end of its last step to the op table, vs ``key_averages().table()``.

Issue 25: on a small profile what is done once per profile (imports done
lazily on the first profile, the trace's export, the parse's set-up, the
native library's loading, building DataFrames, the run's record) must cost
milliseconds, so the op table comes about as fast as torch's own
``prof.key_averages().table()``, which on a small profile is quick.

Each measurement is a fresh process with an IPython shell, as a notebook's
kernel is: ``%load_ext jupyter_torchprof`` (timed apart: a session pays it
once, before any cell), a set-up cell that imports torch and builds the
model, then two ``%%torchprof --quiet`` cells: the session's first profile,
which pays whatever the magic imports lazily, and a second one, which shows
what every later profile costs. The cell notes the time at the end of each
of its runs; from the end of the last profiled step:

* ``to ops``: until the op table (``Profile.ops``) is computed, the first
  time, inside the magic: the profiler's stop, the trace's export, the parse
  and the tables the magic computes with the op table;
* ``to return``: until the magic returns (``--quiet``: no view; the run's
  record, the findings and the start of the table cache's writer);
* torch: ``prof.key_averages().table()`` on the very same profiler object
  (kept when the magic exports its trace), after the magic's background
  threads ended and with the garbage collector emptied before each side;
* the lazy imports (``-X importtime``, wall ms, torch's own modules left
  out): those before the last step (the magic's set-up, paid by the first
  profile even though outside ``to ops``) and those inside ``to ops``.

Wall time and the process's CPU time (every thread) of each; on a busy
machine the CPU figures are the ones to read. Cells: a small MLP training
step (about 2k events) and a small Transformer encoder's forward and
backward. Contenders (cell x source tree) run in rounds whose order rotates,
after one untimed process each (bytecode written, the native library
built: once per machine); figures are medians over rounds, ratios the
median of the per-process (ours / torch) or per-round (first tree / second
tree) ratios. ``--cprofile N`` prints instead where the time goes.

    python benchmarks/bench_small_profile.py --repeat 5 --source /tmp/h/base --source .
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from base_tree import installed_like

ROOT = Path(__file__).resolve().parents[1]

CELLS = {
    # 12 Linear+ReLU pairs, SGD: zero_grad, forward, backward, step (~2k events in 3 steps).
    "mlp": (
        "import torch\n"
        "torch.manual_seed(0)\n"
        "model = torch.nn.Sequential(*[l for _ in range(12) for l in (torch.nn.Linear(128, 128), torch.nn.ReLU())])\n"
        "x = torch.randn(32, 128)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n",
        "opt.zero_grad()\nmodel(x).sum().backward()\nopt.step()\n",
    ),
    # Two encoder layers, forward and backward.
    "transformer": (
        "import torch\n"
        "torch.manual_seed(0)\n"
        "layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)\n"
        "model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)\n"
        "x = torch.randn(8, 32, 64)\n",
        "model(x).sum().backward()\n",
    ),
}

_CHILD = r"""
import importlib.abc, importlib.util, json, os, sys, threading, time
from functools import cached_property
from IPython.core.interactiveshell import InteractiveShell

setup, body = json.loads(sys.argv[1])
shell = InteractiveShell.instance()
t0 = (time.perf_counter(), time.process_time())
assert shell.run_line_magic("load_ext", "jupyter_torchprof") is None
t1 = (time.perf_counter(), time.process_time())
load_ext = {"load_ext_wall": t1[0] - t0[0], "load_ext_cpu": t1[1] - t0[1]}
res = shell.run_cell(setup + "import time as _t\n_ends = []\n")
assert res.error_in_exec is None, res.error_in_exec

marks = {}
def mark(name):
    # Between the import lines -X importtime writes to fd 2 (`imports`).
    os.write(2, f"MARK {name}\n".encode())
marks_hook = []
def clock():
    return (time.perf_counter(), time.process_time())

# The op table's first computation, marked without importing the module
# that holds it before the magic does (its import is part of what is timed).
def mark_ops(module):
    cls = module.Profile
    attr = cls.__dict__["ops"]
    inner = attr.fget if isinstance(attr, property) else attr.func
    def ops(self):
        value = inner(self)
        if "ops" not in marks:
            marks["ops"] = clock()
            mark("ops")
            for hook in marks_hook:
                hook()
        return value
    if isinstance(attr, property):
        cls.ops = property(ops, doc=attr.__doc__)
    else:
        new = cached_property(ops)
        new.__set_name__(cls, "ops")
        cls.ops = new

class Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "jupyter_torchprof.results.profile":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            mark_ops(module)
        spec.loader.exec_module = exec_module
        return spec

if "jupyter_torchprof.results.profile" in sys.modules:
    mark_ops(sys.modules["jupyter_torchprof.results.profile"])
else:
    sys.meta_path.insert(0, Hook())

# The profiler object the magic exports: torch's table is timed on it.
import torch.profiler
kept = []
export = torch.profiler.profile.export_chrome_trace
def keep(self, *args, **kwargs):
    kept.append(self)
    return export(self, *args, **kwargs)
torch.profiler.profile.export_chrome_trace = keep

# The collector starts each side (ours, torch's) empty: a full collection
# that one side's allocations happened to trigger (on a heap with torch and
# pandas loaded, 100 ms or more) would decide the comparison. The magic runs
# the cell 5 times (1 warm-up, the profiler's warm-up step, 3 steps).
cell = (
    "%%torchprof --quiet --warmup 1 --steps 3\n" + body
    + "if len(_ends) == 4:\n    _gc.collect()\n    _mark('last step')\n"
    + "_ends.append((_t.perf_counter(), _t.process_time()))\n"
)
shell.user_ns["_gc"] = __import__("gc")
shell.user_ns["_mark"] = mark
stats = sys.argv[2]
if stats:
    # --cprofile: from the end of each run of the cell (the last one's is kept) to the op table.
    import cProfile
    pr = [cProfile.Profile()]
    def restart():
        pr[0].disable()
        pr[0] = cProfile.Profile()
        pr[0].enable()
    shell.user_ns["_restart"] = restart
    cell += "_restart()\n"
    def stop_at_ops():
        pr[0].disable()
        pr[0].dump_stats(stats + "." + which)
    marks_hook.append(stop_at_ops)

out = {}
# The first profile of the session (what it imports lazily included), then a second one.
for which in ("first", "second"):
    before_threads = set(threading.enumerate())
    shell.user_ns["_ends"] = []
    marks.clear()
    mark("magic")
    res = shell.run_cell(cell)
    ret = clock()
    assert res.error_in_exec is None, res.error_in_exec
    assert len(shell.user_ns["_ends"]) == 5, len(shell.user_ns["_ends"])
    end = shell.user_ns["_ends"][-1]
    profile = shell.user_ns["_torchprof"]
    for t in set(threading.enumerate()) - before_threads:
        t.join(timeout=60)  # the trace's packing and the table cache: off the machine before torch's turn
    prof = kept[-1]
    __import__("gc").collect()
    if stats:
        torch_pr = cProfile.Profile()
        torch_pr.enable()
    t0 = clock()
    prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20)
    t1 = clock()
    if stats:
        torch_pr.disable()
        torch_pr.dump_stats(stats + "." + which + ".torch")
    ours = marks["ops"]
    out[which] = {
        "events": len(profile.events),
        "ops_wall": ours[0] - end[0], "ops_cpu": ours[1] - end[1],
        "ret_wall": ret[0] - end[0], "ret_cpu": ret[1] - end[1],
        "torch_wall": t1[0] - t0[0], "torch_cpu": t1[1] - t0[1],
        "phases": dict(getattr(profile.capture, "phases", None) or {}),
        **load_ext,
    }
    del prof, profile
    kept.clear()
print(json.dumps(out))
"""


def measure(source: Path, cell: str, cprofile: str = "") -> dict:
    """One fresh process: ``cell`` profiled with ``source``'s jupyter_torchprof (``cprofile``: pstats file)."""
    # Bytecode read and written (under a prefix), as an installed package's.
    env = installed_like(
        dict(os.environ, PYTHONPATH=str(source.resolve()), TORCHPROF_RUN_DIR=tempfile.mkdtemp())
    )
    env.pop("TORCHPROF_WIDGETS", None)
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _CHILD, json.dumps(CELLS[cell]), cprofile],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),  # not "." first on sys.path
    )
    if out.returncode != 0:
        raise RuntimeError(f"{source} / {cell}: {out.stderr[-3000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    for which, seen in zip(("first", "second"), imports(out.stderr), strict=True):
        got[which].update(seen)
    return got


def imports(stderr: str) -> list[dict]:
    """Per profile of the child: what the magic imported, from ``-X importtime``'s lines.

    ``imports_before``: seconds of the modules imported from the magic's start to
    the end of the last step (the set-up's lazy imports), ``imports_after``
    from there to the op table (included in ``ops_*``); ``imported``: the
    top-level modules, (seconds, when, name). torch's own modules (its profiler
    imports its compiler on first use, any profiler's user pays that) are
    left out. Seconds of wall time, as ``-X importtime`` measures.
    """
    out: list[dict] = []
    when = None
    for line in stderr.splitlines():
        if line.startswith("MARK "):
            name = line[5:]
            if name == "magic":
                out.append({"imports_before": 0.0, "imports_after": 0.0, "imported": []})
            when = {"magic": "before", "last step": "after"}.get(name)
            continue
        if when is None or not line.startswith("import time:"):
            continue
        _, cumulative, name = line.split("|", 2)
        if name[:2] == "  " or not cumulative.strip().isdigit():
            continue  # a nested import (in its parent's cumulative time), or the header
        module = name.strip()
        if module.split(".")[0] == "torch":
            continue
        seconds = int(cumulative) / 1e6
        out[-1][f"imports_{when}"] += seconds
        out[-1]["imported"].append((seconds, when, module))
    return out


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _spread(values: list[float]) -> str:
    return f"{_median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def run(rounds: int, sources: dict[str, Path], cells: list[str]) -> None:
    contenders = [(s, c) for c in cells for s in sources]
    got: dict[tuple[str, str], list[dict]] = {k: [] for k in contenders}
    # Untimed: what a machine does once (bytecode written, the native library
    # compiled into its cache), not once per session or profile.
    for source, cell in contenders:
        measure(sources[source], cell)
    for r in range(rounds):
        order = contenders[r % len(contenders) :] + contenders[: r % len(contenders)]
        for source, cell in order:
            got[source, cell].append(measure(sources[source], cell))
        line = ", ".join(f"{s}/{c} {got[s, c][-1]['first']['ops_cpu'] * 1e3:.0f} ms" for s, c in order)
        print(f"round {r + 1}/{rounds} (CPU to ops): {line}", flush=True)
    for cell in cells:
        for which in ("first", "second"):
            report(cell, which, {s: [g[which] for g in got[s, cell]] for s in sources})


_ROWS = (
    ("load_ext_cpu", "%load_ext (once a session), CPU ms"),
    ("imports_before", "lazy imports before the last step, ms"),
    ("imports_after", "lazy imports after it (in ops), ms"),
    ("ops_cpu", "end of last step -> ops, CPU ms"),
    ("torch_cpu", "key_averages().table(), CPU ms"),
    ("ops_wall", "end of last step -> ops, wall ms"),
    ("torch_wall", "key_averages().table(), wall ms"),
    ("ret_cpu", "... -> magic returns, CPU ms"),
    ("ret_wall", "... -> magic returns, wall ms"),
)


def report(cell: str, which: str, got: dict[str, list[dict]]) -> None:
    """The figures of one cell's first (or second) profile in a process, one column per tree."""
    names = list(got)
    events = _median([g["events"] for s in names for g in got[s]])
    print(
        f"\n{cell} cell, {which} profile of the process ({events:.0f} events), medians of {len(got[names[0]])}"
    )
    print(f"  {'':36}" + "".join(f"{s[-20:]:>22}" for s in names))
    for key, label in _ROWS:
        row = [_median([g[key] * 1e3 for g in got[s]]) for s in names]
        print(f"  {label:36}" + "".join(f"{v:22.1f}" for v in row))
    for kind in ("cpu", "wall"):
        row = [_spread([g[f"ops_{kind}"] / g[f"torch_{kind}"] for g in got[s]]) for s in names]
        print(f"  {'ours / torch, ' + kind:36}" + "".join(f"{v:>22}" for v in row))
    if len(names) == 2:
        a, b = names
        for kind in ("cpu", "wall"):
            pairs = zip(got[a], got[b], strict=True)
            ratio = _spread([x[f"ops_{kind}"] / y[f"ops_{kind}"] for x, y in pairs])
            print(f"  to ops, {kind}: {a} / {b} = {ratio}")
    phases = [g["phases"] for g in got[names[-1]]]
    keys = [k for k in phases[0] if k in ("profiler stop", "trace export", "parse", "tables", "store")]
    line = ", ".join(f"{k} {_median([p.get(k, 0.0) * 1e3 for p in phases]):.1f}" for k in keys)
    print(f"  phases of {names[-1]} (median wall ms): {line}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="rounds (default %(default)s)")
    ap.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="TREE",
        help="a source tree to measure (repeatable; default: this tree)",
    )
    ap.add_argument("--cell", action="append", choices=sorted(CELLS), help="cells (default: all)")
    ap.add_argument(
        "--cprofile",
        type=int,
        default=0,
        metavar="N",
        help="instead: one process per cell and tree under cProfile, its top N functions (cumulative)",
    )
    args = ap.parse_args()
    trees = [Path(s) for s in args.source] or [ROOT]
    sources = {str(t): t for t in trees}
    if len(sources) != len(trees):
        ap.error("each --source once")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    if args.cprofile:
        profiled(sources, args.cell or list(CELLS), args.cprofile)
        return
    run(args.repeat, sources, args.cell or list(CELLS))


def profiled(sources: dict[str, Path], cells: list[str], top: int) -> None:
    """Where the time goes, under cProfile (which slows Python code): ours to the op table, then torch's."""
    import pstats

    with tempfile.TemporaryDirectory() as folder:
        for cell in cells:
            for name, tree in sources.items():
                plain = measure(tree, cell)  # as in `run`, the first is not read for times
                stats = str(Path(folder) / "stats")
                got = measure(tree, cell, stats)
                for which, what, key in (
                    ("first", "to ops", "ops_wall"),
                    ("first.torch", "key_averages().table()", "torch_wall"),
                    ("second", "to ops", "ops_wall"),
                ):
                    took = got[which.split(".")[0]][key] * 1e3
                    print(
                        f"\n===== {name} / {cell}, {which} profile: {what} ({took:.0f} ms wall under cProfile)"
                    )
                    pstats.Stats(f"{stats}.{which}").sort_stats("cumulative").print_stats(top)
                print(
                    f"\n===== {name} / {cell}: the first profile's lazy imports (-X importtime, a run without cProfile)"
                )
                for seconds, when, module in sorted(plain["first"]["imported"], reverse=True)[:top]:
                    print(f"  {seconds * 1e3:8.1f} ms  {when} the last step's end  {module}")


if __name__ == "__main__":
    main()
