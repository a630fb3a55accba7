"""The real traces ship with the project: a fresh clone runs every test, none skips for want of them.

The oracle for "unchanged" is ``tests/data/kineto/SHA256SUMS`` (hashes taken
from the originals when they were copied) recomputed here with hashlib.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tracefiles
from tracefiles import DATA_DIR, REAL_TRACES, ROOT


def _sums() -> dict[str, str]:
    lines = (DATA_DIR / "SHA256SUMS").read_text(encoding="utf-8").splitlines()
    return {name: digest for digest, name in (line.split(None, 1) for line in lines if line.strip())}


def test_the_traces_are_read_from_the_project_by_default():
    # A fresh interpreter without $TORCHPROF_TRACE_DIR: what a fresh clone's run sees.
    env = {k: v for k, v in os.environ.items() if k != "TORCHPROF_TRACE_DIR"}
    code = "import tracefiles; print(tracefiles.TRACE_DIR.resolve())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(tracefiles.__file__).parent,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(out) == DATA_DIR.resolve() and Path(out).is_relative_to(ROOT.resolve())


def test_every_real_trace_is_there_unchanged_with_its_licence():
    sums = _sums()
    assert sorted(sums) == sorted(REAL_TRACES)
    for name in REAL_TRACES:
        digest = hashlib.sha256((DATA_DIR / name).read_bytes()).hexdigest()
        assert digest == sums[name], f"{name} differs from the copy it was made from"
    licence = (DATA_DIR / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License") and "Meta Platforms" in licence
    # Nothing is written beside them (a table cache there would dirty a clone).
    kept = sorted(f.relative_to(DATA_DIR).as_posix() for f in DATA_DIR.rglob("*") if f.is_file())
    assert kept == sorted([*REAL_TRACES, "LICENSE", "SHA256SUMS"])


def test_a_missing_trace_fails_the_test_instead_of_skipping_it(monkeypatch, tmp_path):
    monkeypatch.setattr(tracefiles, "TRACE_DIR", tmp_path)
    with pytest.raises(BaseException) as raised:  # a skip is a BaseException too: catch it to see which
        tracefiles.real_trace("cpu_only.pt.trace.json.gz")
    assert raised.type is pytest.fail.Exception
    assert "cpu_only.pt.trace.json.gz" in str(raised.value) and str(tmp_path) in str(raised.value)
