"""Packaging facts a user relies on: light import, versions in sync, extension registration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_is_light():
    code = (
        "import sys, jupyter_torchprof;"
        "print([m for m in ('torch', 'bokeh', 'IPython', 'pandas', 'jupyter_server') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_python_and_npm_versions_agree():
    from jupyter_torchprof import __version__

    package = json.loads((ROOT / "package.json").read_text())
    assert package["version"] == __version__


def test_extension_entry_points():
    import jupyter_torchprof

    assert jupyter_torchprof._jupyter_labextension_paths() == [
        {"src": "labextension", "dest": "jupyter-torchprof"}
    ]
    points = jupyter_torchprof._jupyter_server_extension_points()
    assert points == [{"module": "jupyter_torchprof.server"}]
    import importlib

    server = importlib.import_module(points[0]["module"])
    assert callable(server._load_jupyter_server_extension)
    config = json.loads((ROOT / "jupyter-config" / "server-config" / "jupyter_torchprof.json").read_text())
    assert config["ServerApp"]["jpserver_extensions"]["jupyter_torchprof"] is True


def test_installed_extensions_are_enabled():
    """`jupyter labextension list` / `jupyter server extension list` see us enabled and OK."""
    bindir = Path(sys.executable).parent
    lab = subprocess.run(
        [str(bindir / "jupyter"), "labextension", "list"], capture_output=True, text=True, check=True
    )
    text = lab.stdout + lab.stderr
    line = next((ln for ln in text.splitlines() if "jupyter-torchprof" in ln), "")
    assert "enabled" in line and "OK" in line, text
    srv = subprocess.run(
        [str(bindir / "jupyter"), "server", "extension", "list"], capture_output=True, text=True, check=True
    )
    text = srv.stdout + srv.stderr
    assert any("jupyter_torchprof" in ln and "enabled" in ln for ln in text.splitlines()), text
    assert any("jupyter_torchprof" in ln and "OK" in ln for ln in text.splitlines()), text


def test_ruff_is_clean():
    """The code base stays lint-clean (ruff, configured in pyproject.toml)."""
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        import pytest

        pytest.skip("ruff is not installed in this environment")
    out = subprocess.run([str(ruff), "check", "."], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:]
