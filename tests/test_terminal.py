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
import struct
import subprocess
import sys
import termios
import time
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
