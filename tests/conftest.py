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
    from jupyter_torchprof.capture.compile import reset_dynamo
    from jupyter_torchprof.runs.store import wait_for_compression

    wait_for_compression()
    # While this shell's namespace still holds Dynamo's helper globals: once
    # it is gone, Dynamo's hooks fail ("Exception ignored") whenever its
    # compiled code is collected, as they do at exit (see reset_dynamo).
    reset_dynamo()
    InteractiveShell.clear_instance()


@pytest.fixture
def jp_server_config(run_root):
    """The Jupyter server of the REST tests: our extension on, authentication required.

    ``run_root`` (the store the server lists) is each server test module's own.
    """
    return {
        "ServerApp": {
            "jpserver_extensions": {"jupyter_torchprof": True},
            "allow_unauthenticated_access": False,
        }
    }


@pytest.fixture
def store(run_root):
    """The run store under ``run_root``."""
    from jupyter_torchprof.runs.store import RunStore

    return RunStore(run_root)


def _accelerator() -> str | None:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return None
    acc = getattr(torch, "accelerator", None)
    if acc is not None and acc.is_available():
        dev = acc.current_accelerator()
        return dev.type if dev is not None else None
    return None


def pytest_collection_modifyitems(config, items):
    """Browser tests last (slowest, and they own an event loop while they run);
    tests marked ``gpu`` only where an accelerator torch.profiler can trace is present."""
    items.sort(key=lambda item: "/browser/" in str(item.fspath).replace("\\", "/"))
    if any("gpu" in item.keywords for item in items):
        kind = _accelerator()
        if kind in (None, "mps"):
            skip = pytest.mark.skip(reason="needs a CUDA/ROCm/XPU device; none in this process")
            for item in items:
                if "gpu" in item.keywords:
                    item.add_marker(skip)


def pytest_unconfigure(config):
    """Make the interpreter's exit quick after a suite that made many IPython shells.

    At exit each InteractiveShell the tests created runs IPython's reset,
    whose ``gc.collect()`` walks the whole heap once per shell: minutes of
    CPU for the full suite, after every test has passed. Nothing is left to
    free by then, so the heap is frozen out of the collector's reach.
    """
    import gc

    gc.freeze()
