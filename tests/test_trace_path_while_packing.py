"""A run's `Profile.trace_path` names a file that is there at every moment, while its trace is gzipped and after.

The run's trace is written raw and packed into ``trace.json.gz`` in the
background, after the result is shown. The profile used to point at the gzip
from the start, so a reader right after the cell (a test's oracle, the
lazily read flows) could find no file. Here the packing is held until the
reader has looked, so the moment is not left to the scheduler.
"""

from __future__ import annotations

import gzip
import json
import threading

from jupyter_torchprof.runs import store


def test_trace_path_exists_before_and_after_the_gzip(shell, monkeypatch):
    release = threading.Event()
    pack = store.compress_trace

    def held(*args, **kwargs):
        release.wait(60)
        pack(*args, **kwargs)

    monkeypatch.setattr(store, "compress_trace", held)
    shell.run_cell("import torch\nx = torch.randn(32, 32)")
    res = shell.run_cell("%%torchprof --steps 1 -q -o r\ny = x @ x\n")
    assert res.error_in_exec is None, res.error_in_exec
    p = shell.user_ns["r"]
    # Still packing: the profile reads the raw trace, which is there.
    before = p.trace_path
    assert before.is_file() and before.name == "trace.json", before
    events = json.loads(before.read_bytes())["traceEvents"]
    assert any(e.get("name") == "aten::mm" for e in events)
    release.set()
    store.wait_for_compression()
    # Packed: the profile moved to the gzip, and the raw file is gone.
    after = p.trace_path
    assert after.is_file() and after.name == "trace.json.gz", after
    assert not before.exists()
    assert json.loads(gzip.open(after).read())["traceEvents"] == events
