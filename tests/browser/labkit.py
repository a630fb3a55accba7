"""A real JupyterLab server and Debian's Chromium, driven by Playwright (helpers).

Every browser test fails when the page logs a console error or tries to reach
any host other than this machine: our users are often offline, and so is CI.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
    "--disable-dev-shm-usage",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}

#: Page-side helpers the tests' scripts share: every element below a node,
#: through shadow roots (bokeh draws inside them), and bokeh's data tables.
_DEEP_HELPERS = """
  const deepAll = (node, out = []) => {
    for (const el of node.querySelectorAll('*')) {
      out.push(el);
      if (el.shadowRoot) deepAll(el.shadowRoot, out);
    }
    return out;
  };
  const bokehTables = (node) => deepAll(node).filter((el) => el.classList && el.classList.contains('bk-data-table'));
"""


def with_page_helpers(script: str) -> str:
    """``script`` (a JS function for ``page.evaluate``) with ``deepAll`` and ``bokehTables`` in scope."""
    return "(arg) => {" + _DEEP_HELPERS + "  return (" + script.strip() + ")(arg);\n}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """A JupyterLab (or Notebook 7) server started for the tests.

    ``app`` is ``"jupyterlab"`` or ``"notebook"``; ``disabled`` names
    labextensions the page must not load (as ``jupyter labextension
    disable`` would, in a config folder of this server's own).
    """

    def __init__(
        self, root: Path, run_dir: Path, app: str = "jupyterlab", disabled: tuple[str, ...] = ()
    ) -> None:
        self.app = app
        self.root = root
        self.run_dir = run_dir
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = root.parent / "jupyterlab.log"
        # Settings and workspaces of our own: nothing from the user's ~/.jupyter,
        # no restored tabs from an earlier test, and no news prompt.
        settings = root.parent / "lab-settings"
        notify = settings / "@jupyterlab" / "apputils-extension"
        notify.mkdir(parents=True, exist_ok=True)
        (notify / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
        env = dict(
            os.environ,
            TORCHPROF_RUN_DIR=str(run_dir),
            PYTHONUNBUFFERED="1",
            JUPYTERLAB_SETTINGS_DIR=str(settings),
            JUPYTERLAB_WORKSPACES_DIR=str(root.parent / "lab-workspaces"),
        )
        env.pop("JUPYTER_TOKEN", None)
        if disabled:
            config = root.parent / f"jupyter-config-{app}"
            (config / "labconfig").mkdir(parents=True, exist_ok=True)
            page_config = {"disabledExtensions": {name: True for name in disabled}}
            (config / "labconfig" / "page_config.json").write_text(json.dumps(page_config))
            env["JUPYTER_CONFIG_DIR"] = str(config)
        # The server and its kernels import this checkout, not a copy that
        # `pip install .` left in site-packages earlier (the tests are about
        # the code in the tree).
        repo = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH", "")) if p)
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                app,
                "--no-browser",
                f"--port={self.port}",
                "--ip=127.0.0.1",
                f"--ServerApp.token={self.token}",
                f"--ServerApp.root_dir={root}",
                "--ServerApp.open_browser=False",
                *(
                    [
                        "--LabApp.expose_app_in_browser=True",
                        "--LabApp.news_url=None",
                        "--LabServerApp.extension_manager=readonly",
                        "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                    ]
                    if app == "jupyterlab"
                    else ["--JupyterNotebookApp.expose_app_in_browser=True"]
                ),
                "--allow-root",
            ],
            cwd=root,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 90) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited early:\n{self.log_path.read_text()[-3000:]}")
            try:
                self.api("GET", "/api/status")
                return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"JupyterLab did not start:\n{self.log_path.read_text()[-3000:]}")

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"

    def api(self, method: str, path: str, body: dict | None = None, raw: bool = False):
        req = urllib.request.Request(
            self.base + path,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            data = resp.read()
        return data if raw else (json.loads(data) if data else None)

    def stop(self) -> None:
        # Shut kernels down first so nothing outlives the test session.
        try:
            for k in self.api("GET", "/api/kernels") or []:
                self.api("DELETE", f"/api/kernels/{k['id']}")
        except OSError:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()


class PageWatch:
    """Console errors and outside requests seen by a page."""

    def __init__(self) -> None:
        self.console_errors: list[str] = []
        self.outside_requests: list[str] = []

    def check(self) -> None:
        assert not self.outside_requests, f"requests left this machine: {self.outside_requests}"
        assert not self.console_errors, f"console errors: {self.console_errors}"


# Messages JupyterLab itself logs in a sandbox without a notebook server
# language pack or kernels it does not know about; none comes from our code.
IGNORED_CONSOLE = ("Failed to load resource: the server responded with a status of 404 (Not Found)",)


def write_notebook(root: Path, name: str, cells: list[str]) -> Path:
    """Write a notebook of code cells into the server's root folder."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    path = root / name
    nbformat.write(nb, path)
    return path


def open_notebook(page, lab: LabServer, name: str) -> None:
    """Open a notebook and wait for its kernel to be idle."""
    page.goto(lab.url(f"/lab/tree/{name}?reset"))
    page.wait_for_selector(".jp-Notebook", timeout=60_000)
    page.wait_for_function(
        "() => { const a = window.jupyterapp; const w = a && a.shell.currentWidget;"
        " return w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel"
        " && w.sessionContext.session.kernel.status === 'idle'; }",
        timeout=90_000,
    )


def run_all(page, timeout_ms: int = 240_000) -> None:
    """Run every cell and wait until the kernel is idle with all cells executed."""
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(
        "() => { const w = window.jupyterapp.shell.currentWidget;"
        " const cells = w.content.widgets.filter(c => c.model.type === 'code');"
        " return w.sessionContext.session.kernel.status === 'idle'"
        " && cells.every(c => c.model.executionCount !== null); }",
        timeout=timeout_ms,
    )
