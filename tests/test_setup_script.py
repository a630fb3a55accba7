"""scripts/setup.sh says what it will install and takes the CPU build of torch when asked.

The script runs from a copy in an empty folder with ``--dry-run``: it prints
its numbered steps and the commands it would run, and changes nothing (no
download, no .venv), so the argument handling is checked without a network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    """An empty checkout holding only scripts/setup.sh (so no .venv and no torch)."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    return tmp_path


def _setup(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("TORCH_CPU", "TORCHPROF_NO_BROWSER")}
    return subprocess.run(
        ["bash", str(root / "scripts" / "setup.sh"), *args],
        capture_output=True,
        text=True,
        env={**environ, **env},
        cwd=root,
    )


def _torch_command(text: str) -> str:
    return next(ln for ln in text.splitlines() if "pip install" in ln and "torch==" in ln)


def test_default_says_it_is_the_cuda_build_and_installs_plain_torch(fresh):
    done = _setup(fresh, "--dry-run", "--no-browser")
    assert done.returncode == 0, done.stderr
    assert "CUDA build" in done.stdout and "scripts/setup.sh --cpu" in done.stdout
    assert _torch_command(done.stdout).strip() == "$ python -m pip install torch==2.13.0"
    assert not (fresh / ".venv").exists()


@pytest.mark.parametrize("how", [("--cpu",), ("TORCH_CPU=1",)], ids=["--cpu", "TORCH_CPU=1"])
def test_cpu_build_from_pytorchs_cpu_index(fresh, how):
    args, env = [a for a in how if a.startswith("--")], dict(a.split("=") for a in how if "=" in a)
    done = _setup(fresh, "--dry-run", "--no-browser", *args, **env)
    assert done.returncode == 0, done.stderr
    assert "CPU-only build" in done.stdout and "CUDA" not in done.stdout
    assert _torch_command(done.stdout).endswith(CPU_INDEX)


def test_steps_are_numbered_and_say_what_each_does(fresh):
    done = _setup(fresh, "--dry-run", "--cpu")
    steps = [ln for ln in done.stdout.splitlines() if ln.startswith("==> [")]
    assert [s.split("]")[0] for s in steps] == [f"==> [{i}/5" for i in range(1, 6)]
    assert "npm" in steps[2] or "npm" in done.stdout.split(steps[2])[1].split("==>")[0]
    assert "Chromium" in steps[3]
    assert "tmux" in steps[4]
    assert "dry run: nothing was changed" in done.stdout


def test_chromium_install_is_announced_before_apt_runs(fresh, tmp_path_factory):
    # A PATH without chromium (but with bash and the tools the script calls).
    bare = tmp_path_factory.mktemp("bin")
    for tool in ("bash", "sed", "id", "dirname", "python3", "npm"):
        found = shutil.which(tool)
        if found:
            (bare / tool).symlink_to(found)
    done = _setup(fresh, "--dry-run", "--cpu", PATH=str(bare))
    assert done.returncode == 0, done.stderr
    text = done.stdout
    announced = text.index("Chromium for the browser tests, from Debian with apt")
    assert "about 130 packages" in text and "TORCHPROF_NO_BROWSER=1" in text
    assert announced < text.index("apt-get install -y -q chromium")
    skipped = _setup(fresh, "--dry-run", "--cpu", PATH=str(bare), TORCHPROF_NO_BROWSER="1")
    assert "apt-get" not in skipped.stdout and "[3/3]" in skipped.stdout


def test_unknown_option_is_one_clear_line(fresh):
    done = _setup(fresh, "--gpu")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "setup.sh: unknown option '--gpu' (options: --cpu, --no-browser, --dry-run, --help)"
    )
    assert not (fresh / ".venv").exists()
