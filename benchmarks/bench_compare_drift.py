"""Comparisons on a machine whose load shifts: how often identical code is called faster or slower.

A CPU-burning process (``python -c "while True: pass"``) is started and
stopped between the runs in a fixed pattern, so the load differs between the
two sides of every comparison:

* **separate runs** (``Profile.diff`` of two ``%%torchprof`` runs, as the
  sidebar's Compare): pair ``i`` profiles side A, then side B; the burner runs
  during B in even pairs and during A in odd ones;
* **interleaved** (what ``--compare`` does, `capture.runner.interleave`):
  both sides alternate, and the burner starts half-way through the rounds.

Each scenario runs ``--pairs`` comparisons of identical code (A and B both
run ``--matmuls`` matmuls) and as many where B does twice the work. Printed:
the counts of each verdict, and beside them what the step-level rank test
alone said about wall time (the verdict before this change; for separate
runs, the wall row's ``step_verdict``).

Torch runs one intra-op thread unless ``--threads`` says otherwise: with
two threads on two cores, a competing process makes OpenMP threads spin
while they wait for each other, which inflates the process's CPU time too.

Usage::

    python benchmarks/bench_compare_drift.py [--pairs 10] [--steps 8] [--size 256] [--matmuls 8]
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

BURN = "while True: pass"


@contextmanager
def burner(on: bool) -> Iterator[None]:
    """A process spinning on one core while the block runs (nothing when ``on`` is False)."""
    proc = subprocess.Popen([sys.executable, "-c", BURN]) if on else None
    try:
        if proc is not None:
            time.sleep(0.3)  # let it get scheduled before the run starts
        yield
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()


def _shell(run_dir: str, size: int, threads: int) -> Any:
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_line_magic("load_ext", "jupyter_torchprof")
    ip.run_line_magic("config", f"TorchProf.run_dir = {run_dir!r}")
    ip.run_line_magic("config", "TorchProf.max_store_mb = 0")
    ip.run_cell(f"import torch\ntorch.set_num_threads({threads})\na = torch.randn({size}, {size})")
    return ip


def _cell(matmuls: int) -> str:
    return f"for _ in range({matmuls}):\n    y = a @ a\n"


def separate_runs(ip: Any, pairs: int, steps: int, matmuls: int, factor: int) -> list[tuple[str, str]]:
    """``pairs`` comparisons of two separate runs; (overall verdict, wall step verdict) each."""
    out = []
    for i in range(pairs):
        profiles = []
        for side, work in (("A", matmuls), ("B", matmuls * factor)):
            busy = (side == "B") == (i % 2 == 0)
            with burner(busy):
                ip.run_cell_magic("torchprof", f"--steps {steps} --warmup 2 -q -o p{side}", _cell(work))
            profiles.append(ip.user_ns[f"p{side}"])
        d = profiles[0].diff(profiles[1])
        wall = d.headline.set_index("metric").loc["wall per step"]
        out.append((d.verdict[0], str(wall.get("step_verdict", wall["verdict"]))))
    return out


def _burn_half_way(run: Any, after: int) -> tuple[Any, list[subprocess.Popen[bytes]]]:
    """``run`` wrapped so that a burner starts before its ``after``-th call; (wrapper, burners started)."""
    started: list[subprocess.Popen[bytes]] = []
    calls = [0]

    def wrapped() -> None:
        calls[0] += 1
        if calls[0] == after:
            started.append(subprocess.Popen([sys.executable, "-c", BURN]))
        run()

    return wrapped, started


def interleaved_runs(ip: Any, pairs: int, rounds: int, matmuls: int, factor: int) -> list[tuple[str, str]]:
    """``pairs`` interleaved comparisons, the burner started half-way; (verdict, rank-test verdict) each."""
    import numpy as np

    from jupyter_torchprof.analysis.diff import PROCESS_CPU, compare_samples, headline, overall
    from jupyter_torchprof.capture.device import resolve_device
    from jupyter_torchprof.capture.runner import interleave

    target = resolve_device("cpu")
    ns = ip.user_ns

    def side(work: int) -> Any:
        code = compile(_cell(work), "<bench>", "exec")
        return lambda: exec(code, ns)

    out = []
    for _ in range(pairs):
        run_a, burners = _burn_half_way(side(matmuls), rounds // 2 + 1)
        try:
            res = interleave(run_a, side(matmuls * factor), target, rounds)
        finally:
            for p in burners:
                p.kill()
                p.wait()
        a, b = np.asarray(res.wall_us[0]), np.asarray(res.wall_us[1])
        paired = {
            "wall per step": (a, b),
            PROCESS_CPU: (np.asarray(res.cpu_us[0]), np.asarray(res.cpu_us[1])),
        }
        # What --compare shows (no profiled steps here: the headline's other rows stay empty).
        verdict = overall(headline({}, {}, paired=paired))[0]
        out.append((verdict, compare_samples(a, b)["verdict"]))
    return out


def _report(title: str, results: list[tuple[str, str]]) -> None:
    now = collections.Counter(v for v, _ in results)
    before = collections.Counter(v for _, v in results)
    print(f"{title}")
    print(f"    verdict now:              {dict(now)}")
    print(f"    wall, step rank test only: {dict(before)}")


def main() -> None:
    """Run the four scenarios and print the counts of verdicts."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--matmuls", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as run_dir:
        ip = _shell(run_dir, args.size, args.threads)
        threading.excepthook = lambda a: None  # a background writer racing the folder's removal
        t0 = time.perf_counter()
        for factor, what in ((1, "identical code"), (2, "B does 2× the work")):
            res = separate_runs(ip, args.pairs, args.steps, args.matmuls, factor)
            _report(f"separate runs, {what} ({args.pairs} pairs, {args.steps} steps each):", res)
            res = interleaved_runs(ip, args.pairs, max(args.steps, 8), args.matmuls, factor)
            _report(f"interleaved, {what} ({args.pairs} comparisons, {max(args.steps, 8)} pairs each):", res)
        print(f"({time.perf_counter() - t0:.0f} s; torch threads: {args.threads})")


if __name__ == "__main__":
    main()
