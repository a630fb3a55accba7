"""Where a run's time goes: the phases a run reports, and the line that says them.

A first run in a fresh kernel took 41 s while its status line said "3
profiled step(s) 15.02 s" and each step ran 316 ms (issue 23, item 3): the
time went to the profiler's start-up, the warm-up, the trace and the view,
and nothing said so. Each run now keeps its phases
(`CaptureInfo.phases`, wall seconds in the order they ran) and its status
line lists them. The cell here times its own calls, so what the phases
claim is checked against the cell's clock, not the capture's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jupyter_torchprof.capture.runner import PHASES

#: The phases of a shown run, in order (`session`'s around the capture's).
SHOWN = ("set-up", *PHASES, "parse", "tables", "store", "bokeh import", "view", "table cache")

CELL = """
_t0 = time.perf_counter()
time.sleep(0.03)
y = m(x).sum()
_calls.append((_t0, time.perf_counter()))
"""


def _run(shell, line: str = ""):
    from jupyter_torchprof.views import progress as progress_mod

    lines: list[str] = []
    finish = progress_mod.Progress.finish

    def keep(self, summary=None):
        if summary and self.enabled:  # what is shown
            lines.append(summary)
        return finish(self, summary)

    shell.run_cell("import time, torch\nm = torch.nn.Linear(8, 4)\nx = torch.randn(2, 8)\n_calls = []")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(progress_mod.Progress, "finish", keep)
        t0 = time.perf_counter()
        res = shell.run_cell(f"%%torchprof --warmup 2 --steps 3 {line}\n{CELL}")
        wall = time.perf_counter() - t0
    assert res.error_in_exec is None, res.error_in_exec
    return shell.user_ns["_torchprof"], shell.user_ns["_calls"], wall, lines


def test_the_phases_are_reported_in_order_and_add_up(shell):
    profile, calls, wall, lines = _run(shell)
    phases = profile.capture.phases
    assert tuple(phases) == SHOWN
    assert all(v >= 0 for v in phases.values()), phases
    assert sum(phases.values()) <= wall
    # The cell's own clock: 2 warm-up runs, the profiler's warm-up step, 3 steps.
    took = [b - a for a, b in calls]
    assert len(took) == 6
    assert phases["warm-up"] >= sum(took[:2])
    assert phases["profiler warm-up step"] >= took[2]
    assert phases["profiled steps"] >= sum(took[3:])
    # No phase counts another's time twice: together they fit in the cell's
    # wall time (above); an upper bound on one phase alone would be a timing
    # test that a loaded machine fails.
    assert phases["parse"] == profile.capture.parse_s
    # The line says each phase of 10 ms or more, with the steps first and the whole.
    (line,) = lines
    assert line.startswith("torchprof: 3 profiled steps ")
    # Phases under 10 ms (set-up, on a quiet machine) are left out of the line.
    assert " each) · also: " in line
    assert "warm-up 2× " in line
    for name, seconds in phases.items():
        if seconds >= 0.01 and name not in ("profiled steps", "warm-up"):
            assert f"{name} " in line, (name, line)
    assert line.endswith(" in all")


def test_a_quiet_run_keeps_its_phases_too(shell):
    profile, calls, wall, lines = _run(shell, "-q")
    phases = profile.capture.phases
    assert lines == []  # nothing shown
    assert tuple(phases) == SHOWN
    assert all(v >= 0 for v in phases.values()) and sum(phases.values()) <= wall


_FRESH = textwrap.dedent(
    """
    import json, sys, time
    t0 = time.perf_counter()
    from IPython.core.interactiveshell import InteractiveShell
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "jupyter_torchprof")
    sh.run_cell("import torch\\nm = torch.nn.Linear(8, 4)\\nx = torch.randn(2, 8)")
    from jupyter_torchprof.views import progress
    lines = []
    finish = progress.Progress.finish
    progress.Progress.finish = lambda self, s=None: (lines.append(s) if s else None, finish(self, s))[1]
    before = "torch._inductor" in sys.modules
    t1 = time.perf_counter()
    res = sh.run_cell("%%torchprof\\ny = m(x)")
    wall = time.perf_counter() - t1
    assert res.error_in_exec is None, res.error_in_exec
    print(json.dumps({"phases": sh.user_ns["_torchprof"].capture.phases, "wall": wall,
                      "before": before, "after": "torch._inductor" in sys.modules, "lines": lines}))
    """
)


def test_a_fresh_kernel_names_the_profilers_first_use_cost(tmp_path):
    # This checkout's package (an installed copy may be older), in a process of its own.
    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, TORCHPROF_RUN_DIR=str(tmp_path / "runs"), PYTHONPATH=path)
    out = subprocess.run(
        [sys.executable, "-c", _FRESH], env=env, capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # torch's profiler imports its compiler on first use: the run says it was then.
    assert not got["before"] and got["after"]
    phases = got["phases"]
    assert all(v >= 0 for v in phases.values()) and sum(phases.values()) <= got["wall"]
    assert phases["profiler start-up"] > phases["profiled steps"]
    (line,) = got["lines"]
    assert "profiler start-up " in line and "imports torch._inductor on its first use" in line
