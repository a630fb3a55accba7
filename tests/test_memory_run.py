"""``--memory``: no red stderr box, the numbers say what they are relative to, the cost is said."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A tensor made before the profiler starts and freed inside a step is what
# makes torch print its CPUAllocator warning on descriptor 2.
SCRIPT = r"""
import os, sys
from IPython.core.interactiveshell import InteractiveShell
sh = InteractiveShell.instance()
sh.run_line_magic("load_ext", "jupyter_torchprof")
sh.run_cell("import torch\nkeep = [torch.randn(256, 256) for _ in range(8)]")
sh.run_cell_magic("torchprof", "--memory --steps 2 -q -o r", "keep.pop()\ny = torch.randn(64, 64) @ torch.randn(64, 64)\n")
r = sh.user_ns["r"]
for n in r.notes:
    print("NOTE:", n)
print("MEMORY EVENTS:", len(r.memory_events))
"""


def test_memory_run_turns_torchs_warning_into_a_note(tmp_path):
    env = {"PYTHONPATH": str(ROOT), "TORCHPROF_RUN_DIR": str(tmp_path / "runs"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "MEMORY EVENTS:" in proc.stdout and "MEMORY EVENTS: 0" not in proc.stdout
    # Not on stderr (a red box in a notebook) ...
    assert "Memory block of unknown size" not in proc.stderr, proc.stderr[-2000:]
    notes = [line for line in proc.stdout.splitlines() if line.startswith("NOTE:")]
    # ... but said where the numbers are read, once.
    assert sum("allocated before profiling started" in n for n in notes) == 1, notes
    assert any("--memory records every allocation" in n for n in notes), notes


def test_cpu_memory_curve_is_labelled_relative():
    from jupyter_torchprof.views.memory import legend_label

    assert legend_label("CPU", 2048) == "CPU since profiling started (peak 2 KiB)"
    assert legend_label("device 0", 2048) == "device 0 (peak 2 KiB)"
