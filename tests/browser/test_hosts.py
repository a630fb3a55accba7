"""One cell, any notebook: the inline view in four hosts, offline, asserted as a person sees it.

The view is one anywidget whose front end and BokehJS reach the page through
the widget's own messages. Each host runs a real ``%%torchprof`` cell, a
``--load`` of a real GPU trace and a ``--compare``, and a person's checks are
made on what is drawn: the op table has rows and re-sorts on a header click,
the timeline draws and a zoom brings finer detail from the kernel, the
compare toggle switches pages. Any console error and any request leaving
this machine fails the test.

1. JupyterLab 4 (our labextension on the page: it must not be needed);
2. Notebook 7;
3. JupyterLab with our labextension and jupyter_bokeh's disabled: the page
   offers nothing but a widget manager, which is what VS Code and Colab give;
4. marimo (``marimo run``, headless): no ipykernel at all; a cell that loads
   a trace and one that profiles a function with `jupyter_torchprof.profile`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest
from labkit import CHROMIUM, IGNORED_CONSOLE, LOCAL_HOSTS, LabServer, PageWatch, run_all, write_notebook
from test_views_in_lab import _COLOURED_PIXELS_JS, _TABLE_ROWS_JS, _TIMELINE_JS, _number
from tracefiles import real_trace

REPO = Path(__file__).resolve().parents[2]

JUPYTER_HOSTS = {
    "jupyterlab": {"app": "jupyterlab", "disabled": ()},
    "notebook7": {"app": "notebook", "disabled": ()},
    "widget-manager-only": {"app": "jupyterlab", "disabled": ("jupyter-torchprof", "@bokeh/jupyter_bokeh")},
}

SETUP = (
    "%load_ext jupyter_torchprof\nimport torch\n"
    "m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))\n"
    "x = torch.randn(32, 64)"
)


def _watch(context) -> PageWatch:
    """Record console errors, outside requests (aborted), and requests for BokehJS files."""
    watch = PageWatch()
    watch.bokeh_files = []

    def on_route(route):
        url = urlparse(route.request.url)
        if url.scheme in ("http", "https", "ws", "wss") and (url.hostname or "") not in LOCAL_HOSTS:
            watch.outside_requests.append(route.request.url)
            return route.abort()
        if "/static/bokeh/" in url.path or url.path.endswith("bokeh.min.js"):
            watch.bokeh_files.append(url.path)
        return route.continue_()

    context.route("**/*", on_route)
    return watch


# Notebook 7.6's own page raises this while it loads its settings, on a page
# with a plain ``1+1`` notebook and every third-party labextension disabled
# (ours, anywidget, jupyter_bokeh, the widget manager, plotly, pygments):
# it is the host's, not the view's. Only this exact message is let through,
# and only in Notebook 7.
NOTEBOOK7_OWN_ERRORS = ("Cannot read properties of undefined (reading 'schema')",)


def _listen(page, watch: PageWatch, host_errors: tuple[str, ...] = ()) -> None:
    def on_console(msg):
        if msg.type == "error" and not any(s in msg.text for s in IGNORED_CONSOLE + host_errors):
            watch.console_errors.append(msg.text)

    def on_page_error(exc):
        if str(exc) not in host_errors:
            watch.console_errors.append(f"page error: {exc}")

    page.on("console", on_console)
    page.on("pageerror", on_page_error)


def _rows(page, container) -> list[list[str]] | None:
    return page.evaluate(_TABLE_ROWS_JS, container.element_handle())


def _wait_rows(page, container, predicate, timeout=60_000) -> list[list[str]]:
    deadline = time.monotonic() + timeout / 1000
    rows = None
    while time.monotonic() < deadline:
        rows = _rows(page, container)
        if rows and predicate(rows):
            return rows
        page.wait_for_timeout(250)
    raise AssertionError(f"the table never reached the expected state; last rows: {rows and rows[:5]}")


def _tab(view, title: str):
    return view.locator(".jp-TorchProf-tab", has_text=title).first


def _timeline(page, view, what: str):
    return page.evaluate(
        "([root, what]) => (" + _TIMELINE_JS + ")(root, what)", [view.element_handle(), what]
    )


def check_sorts(page, view) -> None:
    """The op table has rows, and a click on Calls orders them by calls, largest first."""
    table = view.locator(".jp-TorchProf-optable").first
    rows = _wait_rows(page, table, lambda r: len(r) >= 3)
    before = [c[0] for c in rows]
    header = table.locator(".slick-header-column", has_text="Calls").first
    header.click()
    rows = _wait_rows(page, table, lambda r: [c[0] for c in r] != before)
    columns = page.evaluate(
        "(root) => { const out = []; const walk = (n) => { for (const el of n.querySelectorAll('*')) {"
        " if (el.classList && el.classList.contains('slick-header-column')) out.push(el.textContent.trim());"
        " if (el.shadowRoot) walk(el.shadowRoot); } }; walk(root); return out; }",
        table.element_handle(),
    )
    i = [c for c in columns if c].index("Calls")
    calls = [_number(r[i]) for r in rows]
    assert calls == sorted(calls, reverse=True), calls


def check_zoom(page, view) -> None:
    """The timeline draws merged glyphs; zooming in brings the kernel's finer detail."""
    view.scroll_into_view_if_needed()
    _tab(view, "Timeline").click()
    page.wait_for_function(
        "([root, js]) => (eval(js))(root) > 100",
        arg=[view.element_handle(), _COLOURED_PIXELS_JS],
        timeout=60_000,
    )
    before = _timeline(page, view, "stats")
    assert before["host"] + before["device"] <= 400 and before["merged"] > 0, before
    zoom_in = view.locator(".bk-tool-icon-zoom-in").first
    for _ in range(8):
        zoom_in.click()
        page.wait_for_timeout(300)
    page.wait_for_function(
        "([root, js, n]) => { const s = (eval(js))(root, 'stats'); return s && s.merged < n; }",
        arg=[view.element_handle(), _TIMELINE_JS, before["merged"]],
        timeout=90_000,
    )
    after = _timeline(page, view, "stats")
    assert after["end"] - after["start"] < (before["end"] - before["start"]) / 10, (before, after)


def check_compare(page, view) -> None:
    """The diff page is drawn first; eager and compiled each switch to that side's full view."""
    diff = view.locator(".jp-TorchProf-difftable").first
    diff.wait_for(timeout=120_000)
    _wait_rows(page, diff, lambda r: len(r) >= 2)
    for side in ("eager", "compiled"):
        view.locator(".jp-TorchProf-sides .jp-TorchProf-togglebutton", has_text=side).first.click()
        view.locator(".jp-TorchProf-title", has_text=f"[{side}]").filter(visible=True).first.wait_for(
            timeout=60_000
        )
        title = page.locator(".jp-TorchProf-title", has_text=f"[{side}]")
        inner = view.locator(".jp-TorchProf-view", has=title).first.locator(".jp-TorchProf-optable").first
        _wait_rows(page, inner, lambda r: len(r) >= 2)
    view.locator(".jp-TorchProf-sides .jp-TorchProf-togglebutton", has_text="diff").first.click()
    view.locator(".jp-TorchProf-difftable").first.wait_for(state="visible", timeout=60_000)


def _evidence(page, stem: Path) -> None:
    """A screenshot and the page's HTML, kept beside the server's files (what a failure looked like)."""
    try:
        page.screenshot(path=f"{stem}.png", full_page=True)
        Path(f"{stem}.html").write_text(page.content())
    except Exception:  # noqa: BLE001 - evidence only
        pass


# --------------------------------------------------------------------------- #
# the three Jupyter hosts


@pytest.fixture(scope="module", params=list(JUPYTER_HOSTS))
def host(request, tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (scripts/setup.sh installs it)")
    root = tmp_path_factory.mktemp(request.param)
    server = LabServer(root, root / ".torchprof" / "runs", **JUPYTER_HOSTS[request.param])
    server.name = request.param
    yield server
    server.stop()


def _open(page, host, name: str) -> None:
    path = f"/notebooks/{name}" if host.app == "notebook" else f"/lab/tree/{name}?reset"
    page.goto(host.url(path))
    page.wait_for_selector(".jp-Notebook", timeout=90_000)
    page.wait_for_function(
        "() => { const a = window.jupyterapp; const w = a && a.shell.currentWidget;"
        " return w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel"
        " && w.sessionContext.session.kernel.status === 'idle'; }",
        timeout=120_000,
    )


def _cell_view(page, index: int, css: str = ".jp-TorchProf-view"):
    cell = page.locator(".jp-Notebook .jp-CodeCell").nth(index)
    return cell.locator(f".jp-OutputArea-output {css}").first


def test_the_view_works_in_a_jupyter_host(browser, host):
    trace = real_trace("a100_nccl_rank0.pt.trace.json.gz")
    write_notebook(
        host.root,
        "hosts.ipynb",
        [
            SETUP,
            "%%torchprof --steps 3\ny = m(x).sum()",
            f"%torchprof --load {trace} -q -o gpu\ngpu.view(max_glyphs=400)",
            "%%torchprof --compare --backend aot_eager --steps 2\ny = m(x).sum()",
        ],
    )
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    watch = _watch(context)
    page = context.new_page()
    _listen(page, watch, NOTEBOOK7_OWN_ERRORS if host.app == "notebook" else ())
    try:
        _open(page, host, "hosts.ipynb")
        if host.name == "widget-manager-only":
            # The page really has neither extension: only the widget manager draws the view.
            assert page.evaluate("window.jupyterapp.hasPlugin('jupyter-torchprof:runs')") is False
        run_all(page, timeout_ms=600_000)
        cpu = _cell_view(page, 1)
        cpu.wait_for(timeout=120_000)
        check_sorts(page, cpu)
        check_zoom(page, _cell_view(page, 2))
        compare = _cell_view(page, 3, ".jp-TorchProf-compare")
        compare.scroll_into_view_if_needed()
        check_compare(page, compare)
        assert page.locator("text=Error displaying widget").count() == 0
    finally:
        _evidence(page, host.root.parent / host.name)
        context.close()
    watch.check()
    # BokehJS came through the widget's messages, not from any server route.
    assert watch.bokeh_files == [], watch.bokeh_files


# --------------------------------------------------------------------------- #
# marimo

MARIMO_APP = """
import marimo

app = marimo.App(width="full")


@app.cell
def _():
    import jupyter_torchprof
    import torch

    gpu = jupyter_torchprof.load({trace!r}, name="a100")
    gpu.view(max_glyphs=400)
    return jupyter_torchprof, torch


@app.cell
def _(jupyter_torchprof, torch):
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    x = torch.randn(32, 64)

    def step(inp):
        return m(inp).sum()

    cpu = jupyter_torchprof.profile(step, x, steps=3, name="marimo-cell")
    cpu
    return


if __name__ == "__main__":
    app.run()
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def marimo_server(tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (scripts/setup.sh installs it)")
    pytest.importorskip("marimo")
    root = tmp_path_factory.mktemp("marimo")
    app = root / "profile_app.py"
    app.write_text(MARIMO_APP.format(trace=str(real_trace("a100_nccl_rank0.pt.trace.json.gz"))))
    port = _free_port()
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        TORCHPROF_RUN_DIR=str(root / "runs"),
        MARIMO_SKIP_UPDATE_CHECK="1",
    )
    log = open(root / "marimo.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "marimo",
            "run",
            str(app),
            "--headless",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-token",
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError((root / "marimo.log").read_text()[-3000:])
        try:
            urllib.request.urlopen(base + "/health", timeout=5).read()
            break
        except OSError:
            time.sleep(0.5)
    else:
        raise RuntimeError("marimo did not start:\n" + (root / "marimo.log").read_text()[-3000:])
    yield base, root
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def test_the_view_works_in_marimo(browser, marimo_server):
    base, root = marimo_server
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    watch = _watch(context)
    page = context.new_page()
    _listen(page, watch)
    try:
        page.goto(base + "/")
        views = page.locator(".jp-TorchProf-view")
        views.nth(1).wait_for(timeout=300_000)
        cpu = page.locator(
            ".jp-TorchProf-view", has=page.locator(".jp-TorchProf-title", has_text="marimo-cell")
        )
        check_sorts(page, cpu.first)
        gpu = page.locator(".jp-TorchProf-view", has=page.locator(".jp-TorchProf-title", has_text="a100"))
        check_zoom(page, gpu.first)
    finally:
        _evidence(page, root / "marimo")
        context.close()
    watch.check()
    assert watch.bokeh_files == [], watch.bokeh_files
