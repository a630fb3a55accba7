"""Loading the same trace twice keeps one copy in the run store, not two."""

from __future__ import annotations

import os
import shutil

from tracefiles import real_trace

from jupyter_torchprof.runs.store import RunStore


def test_the_same_trace_loaded_twice_is_kept_once(shell, tmp_path):
    src = tmp_path / "gp100.pt.trace.json.gz"
    shutil.copyfile(real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz"), src)
    store = RunStore(os.environ["TORCHPROF_RUN_DIR"])
    shell.run_line_magic("torchprof", f"--load {src} -q -o first")
    shell.run_line_magic("torchprof", f"--load {src} -q -o second")
    loads = [r for r in store.list() if r.get("kind") == "load"]
    assert len(loads) == 1
    assert shell.user_ns["first"].run_dir == shell.user_ns["second"].run_dir == store.run_dir(loads[0]["id"])
    # A file changed since is another trace: kept again.
    os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 10**9))
    shell.run_line_magic("torchprof", f"--load {src} -q -o third")
    assert len([r for r in store.list() if r.get("kind") == "load"]) == 2
    # A kept run deleted from the sidebar is not pointed at any more.
    for r in store.list():
        store.delete(r["id"])
    shell.run_line_magic("torchprof", f"--load {src} -q -o fourth")
    assert len(store.list()) == 1
