"""Fill a run store with real runs: an IPython shell with the extension, running cells in turn."""

from __future__ import annotations

import time
from pathlib import Path

import pytest


def shell_runs(root: Path, cells: list[str], setup: str = "") -> None:
    """Run ``setup`` then each of ``cells`` (``%%torchprof`` or ``%torchprof --load``) with runs kept in ``root``.

    A second between runs gives them distinct ids (run ids are per second);
    every trace is packed before this returns.
    """
    from IPython.core.interactiveshell import InteractiveShell

    from jupyter_torchprof.runs.store import wait_for_compression

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHPROF_RUN_DIR", str(root))
        InteractiveShell.clear_instance()
        sh = InteractiveShell.instance()
        sh.run_line_magic("load_ext", "jupyter_torchprof")
        if setup:
            sh.run_cell(setup)
        for cell in cells:
            res = sh.run_cell(cell)
            assert res.error_in_exec is None, res.error_in_exec
            time.sleep(1.1)
        wait_for_compression()
        InteractiveShell.clear_instance()
