"""Terminal IPython, as a person sees it: a real ``ipython`` on a pseudo-terminal.

The progress line must be rewritten in place and gone when the run ends, not
pile up one line per update (it did while capture pointed descriptor 2 at a
file to sift Kineto's log lines out: the line came back later as lines of
its own).
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _screen_lines(raw: str) -> list[str]:
    """What a terminal shows of ``raw``: each line with carriage returns applied."""
    out = []
    for line in raw.replace("\r\n", "\n").split("\n"):
        buf: list[str] = []
        pos = 0
        for ch in line:
            if ch == "\r":
                pos = 0
            elif ch == "\x1b":
                continue
            else:
                if pos < len(buf):
                    buf[pos] = ch
                else:
                    buf.append(ch)
                pos += 1
        out.append("".join(buf).rstrip())
    return out


def _run_in_pty(code: str, tmp_path: Path, timeout: float = 120) -> str:
    master, slave = pty.openpty()
    # A terminal has a size: 100 columns, as a person's window might.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TORCHPROF_RUN_DIR=str(tmp_path / "runs"), TERM="xterm")
    proc = subprocess.Popen(
        [sys.executable, "-m", "IPython", "--no-banner", "--colors=NoColor", "-c", code],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=tmp_path,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    chunks = []
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the child closed its side
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        else:
            pytest.fail("ipython did not finish")
    finally:
        proc.kill() if proc.poll() is None else None
        proc.wait()
        os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def test_progress_line_is_rewritten_in_place_and_cleared(tmp_path):
    code = (
        "import time\n"
        "ip = get_ipython()\n"
        "assert type(ip).__name__ == 'TerminalInteractiveShell', type(ip)\n"
        "ip.run_line_magic('load_ext', 'jupyter_torchprof')\n"
        "ip.run_line_magic('torchprof', '--warmup 2 --steps 2 -d cpu time.sleep(0.8)')\n"
        "print('DONE')\n"
    )
    raw = _run_in_pty(code, tmp_path)
    assert "DONE" in raw, raw[-2000:]
    # The line was shown (several updates: warm-up 1/2, 2/2, steps ...).
    assert raw.count("torchprof: warming up") >= 2, raw[-2000:]
    screen = _screen_lines(raw)
    left = [line for line in screen if "torchprof: " in line and "…" in line]
    assert not left, left
    # And the table came out after it.
    assert any("time.sleep(0.8)" in line and "2 steps" in line for line in screen), screen[-20:]


# --------------------------------------------------------------------------- #
# an 80-column terminal in tmux: what a person reads in the pane

PANE_COLUMNS = 80


def _tmux(socket: str, *args: str) -> str:
    return subprocess.run(
        ["tmux", "-L", socket, *args], check=True, capture_output=True, text=True, timeout=30
    ).stdout


def _pane_until(socket: str, marker: str, timeout: float = 180) -> list[str]:
    """The pane's whole history, wrapped lines joined (``-J``), once a line starts with ``marker``."""
    deadline = time.time() + timeout
    lines: list[str] = []
    while time.time() < deadline:
        lines = [line.rstrip() for line in _tmux(socket, "capture-pane", "-p", "-J", "-S", "-").splitlines()]
        if any(line.startswith(marker) for line in lines):
            return lines
        time.sleep(0.5)
    pytest.fail(f"{marker} never showed; the pane ends with:\n" + "\n".join(lines[-30:]))


def test_op_table_fits_an_80_column_terminal(tmp_path):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install -y tmux)")
    sys.path.insert(0, str(ROOT / "tests"))
    from tracefiles import real_trace

    from jupyter_torchprof import load

    trace = real_trace("a100_nccl_rank0.pt.trace.json.gz")  # long op and kernel names, device columns
    socket = f"torchprof-{os.getpid()}"
    env = f"PYTHONPATH={ROOT} TORCHPROF_RUN_DIR={tmp_path / 'runs'} TERM=xterm"
    command = f"cd {tmp_path} && env {env} {sys.executable} -m IPython --no-banner --colors=NoColor"
    _tmux(socket, "new-session", "-d", "-s", "tp", "-x", str(PANE_COLUMNS), "-y", "50", command)
    try:
        _tmux(socket, "set-option", "-t", "tp", "history-limit", "5000")
        cells = (
            "%load_ext jupyter_torchprof",
            f"%torchprof --load {trace}",
            "import torch; x = torch.randn(256, 256)",
            "%torchprof --steps 2 -d cpu y = torch.nn.functional.softmax(x @ x, dim=-1).sum()",
            "print('END' + 'OFRUN')",
        )
        for n, line in enumerate(cells, start=1):
            # Each line once its prompt is up: typed ahead, the terminal would echo it raw.
            _pane_until(socket, f"In [{n}]:")
            _tmux(socket, "send-keys", "-t", "tp", "-l", line)
            _tmux(socket, "send-keys", "-t", "tp", "Enter")
        lines = _pane_until(socket, "ENDOFRUN")
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=30)
    too_long = [line for line in lines if len(line) > PANE_COLUMNS]
    assert not too_long, too_long
    # The op table: its header, and a row per op as the profile sorts them (names shortened to fit).
    header = next(i for i, line in enumerate(lines) if line.startswith("Name "))
    assert "Self CPU" in lines[header] and "Self device" in lines[header]
    end = next(i for i in range(header + 2, len(lines)) if lines[i].startswith("---"))
    rows = [line.split("  ")[0] for line in lines[header + 2 : end]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        names = [str(n) for n in load(str(trace)).sorted_ops()["name"]]
    assert len(rows) >= 10
    for row, name in zip(rows, names, strict=False):
        assert row == name or (row.endswith("…") and name.startswith(row[:-1])), (row, name)
    # The profiled run's op table too, after the loaded one.
    run_header = next(i for i in range(end, len(lines)) if lines[i].startswith("Name "))
    assert "Self CPU" in lines[run_header]
    run_end = next(i for i in range(run_header + 2, len(lines)) if lines[i].startswith("---"))
    run_rows = [line.split("  ")[0] for line in lines[run_header + 2 : run_end]]
    assert {"aten::mm", "aten::_softmax", "aten::sum"} <= set(run_rows), run_rows
