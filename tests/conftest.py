"""Shared fixtures: an IPython shell with the extension loaded, runs kept in a temp folder."""

from __future__ import annotations

import pytest


@pytest.fixture
def shell(tmp_path, monkeypatch):
    """A fresh IPython shell with the extension loaded and runs kept in tmp_path."""
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(tmp_path / "runs"))
    InteractiveShell.clear_instance()
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "jupyter_torchprof")
    yield sh
    from jupyter_torchprof.store import wait_for_compression

    wait_for_compression()
    InteractiveShell.clear_instance()
