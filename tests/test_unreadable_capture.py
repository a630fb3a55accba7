"""A captured trace that cannot be read (cut short on a full disk, say) is one line, and a damaged run."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from jupyter_torchprof.runs.store import RunStore


def test_a_trace_cut_short_after_capture_is_one_line_and_a_damaged_run(shell, tmp_path, monkeypatch, capsys):
    mark = tmp_path / "parse.mark"
    monkeypatch.setenv("TORCHPROF_TEST_PAUSE", "parse:1.5")
    monkeypatch.setenv("TORCHPROF_TEST_PAUSE_MARK", str(mark))
    root = Path(os.environ["TORCHPROF_RUN_DIR"])

    def cut_short() -> None:
        # While the run waits to read its trace, the file loses its second
        # half, as it would when the disk filled up during the export.
        deadline = time.time() + 60
        while not mark.exists() and time.time() < deadline:
            time.sleep(0.02)
        (raw,) = root.glob("*/trace.json")
        data = raw.read_bytes()
        raw.write_bytes(data[: len(data) // 2])

    cutter = threading.Thread(target=cut_short)
    cutter.start()
    shell.run_cell("import torch\nx = torch.randn(32, 32)")
    res = shell.run_cell("%%torchprof --steps 2 -q\ny = x @ x\n")
    cutter.join()
    err = capsys.readouterr().err
    assert res.error_in_exec is not None and type(res.error_in_exec).__name__ == "UsageError"
    message = str(res.error_in_exec)
    assert message.startswith("the captured trace cannot be read:") and "\n" not in message
    assert "Traceback" not in err
    (run,) = RunStore(root).list()
    assert run["damaged"] and run.get("problem")
    # and the next run works
    monkeypatch.delenv("TORCHPROF_TEST_PAUSE")
    assert shell.run_cell("%%torchprof --steps 1 -q\ny = x @ x\n").error_in_exec is None


def test_a_quote_in_a_range_name_no_longer_loses_the_run(shell, capsys):
    # torch writes record_function('say "hi"') unescaped: the run used to be
    # "the captured trace cannot be read"; it is repaired, with a note.
    shell.run_cell("import torch\nx = torch.randn(32, 32)")
    cell = "%%torchprof --steps 2 -q\nwith torch.profiler.record_function('say \"hi\"'):\n    y = x @ x\n"
    res = shell.run_cell(cell)
    assert res.error_in_exec is None, res.error_in_exec
    p = shell.user_ns["_torchprof"]
    ranges = p.events[p.events["name"].astype(str) == 'say "hi"']
    assert len(ranges) == p.summary["steps"] == 2
    assert any("unescaped" in n for n in p.notes), p.notes
