"""The example notebooks run from top to bottom in a real kernel."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("notebook", sorted(p.name for p in EXAMPLES.glob("*.ipynb")))
def test_example_notebook_executes(notebook, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(tmp_path / "runs"))
    nb = nbformat.read(EXAMPLES / notebook, as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute(env=dict(os.environ))
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"
    ]
    assert not errors, errors
    # Every profiled cell produced a view with a static HTML fallback.
    html = [
        o
        for c in nb.cells
        if c.cell_type == "code" and c.source.startswith("%%torchprof")
        for o in c.get("outputs", [])
        if "text/html" in o.get("data", {})
    ]
    assert html, "the %%torchprof cell showed no HTML output"
