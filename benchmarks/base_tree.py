"""What the benchmarks that compare this tree with an older commit share.

`checkout(commit)` puts the commit in a temporary git worktree for as long
as the ``with`` lasts, and git forgets it after; `run_child(code, source)`
runs a measuring script in a fresh Python whose ``jupyter_torchprof`` is
the one in ``source`` and returns the JSON it printed last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def checkout(commit: str) -> Iterator[Path]:
    """``commit`` checked out in a temporary worktree, removed (and unregistered) afterwards."""
    path = Path(tempfile.mkdtemp(prefix="torchprof-base-")) / "tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit],
        check=True,
        capture_output=True,
    )
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)


#: Where the children keep compiled bytecode. An installed package has its
#: ``.pyc`` files; a tree run with PYTHONDONTWRITEBYTECODE (set on this
#: machine) compiles every module it imports, lazily imported ones inside the
#: timings too (about 10 ms for load()'s). The prefix keeps the trees clean.
PYCACHE = Path(tempfile.gettempdir()) / "torchprof-bench-pycache"


def installed_like(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a child that reads and writes bytecode as an installed package's imports do."""
    env = dict(env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def compile_tree(source: Path) -> None:
    """Byte-compile ``source``'s package into `PYCACHE`, as ``pip install`` does, before any timing."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(source).resolve() / "jupyter_torchprof")],
        env=installed_like(dict(os.environ)),
        check=True,
        capture_output=True,
    )


def run_child(code: str, source: Path, *args: str, unset: tuple[str, ...] = ()) -> dict:
    """Run ``code`` with ``source`` first on the path (a fresh run folder; ``unset`` env vars removed)."""
    # Absolute: the child runs in another folder, where "." would be that folder
    # and the installed jupyter_torchprof would be measured instead.
    compile_tree(source)
    env = installed_like(
        dict(os.environ, PYTHONPATH=str(Path(source).resolve()), TORCHPROF_RUN_DIR=tempfile.mkdtemp())
    )
    for name in unset:
        env.pop(name, None)
    # cwd elsewhere: ``python -c`` puts the working folder first on sys.path.
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),
    )
    if out.returncode != 0:
        raise RuntimeError(f"{source}: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])
