"""Fixtures for the browser tests: a JupyterLab server, Chromium, a watched page."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from urllib.parse import urlparse

import pytest
from labkit import CHROMIUM, CHROMIUM_ARGS, IGNORED_CONSOLE, LOCAL_HOSTS, LabServer, PageWatch


def pytest_collection_modifyitems(items):
    for item in items:
        if "browser" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(autouse=True)
def jp_asyncio_loop():
    """A loop of its own for pytest-jupyter's cleanup, never the thread's current one.

    These tests drive a JupyterLab in a subprocess through Playwright, whose
    sync API runs its own loop in this thread. pytest-jupyter's autouse
    fixture of this name takes the thread's loop and closes it after each
    test: once a test with ``jp_fetch`` had run before them in the same
    session (``tests/test_column_catalog.py`` then these), that was
    Playwright's running loop, and every browser test errored at teardown.
    """
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (scripts/setup.sh installs it)")
    root = tmp_path_factory.mktemp("lab")
    server = LabServer(root, root / ".torchprof" / "runs")
    yield server
    server.stop()


# Module scope, not session: a live sync_playwright() keeps its event loop
# current, and every asyncio user after it (nbclient, pytest-jupyter) would
# find "a running event loop" until the session ends.
@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (scripts/setup.sh installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, lab, request):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    pg = context.new_page()
    watch = PageWatch()

    def on_console(msg):
        if msg.type == "error" and not any(s in msg.text for s in IGNORED_CONSOLE):
            watch.console_errors.append(msg.text)

    def on_route(route):
        host = urlparse(route.request.url).hostname or ""
        scheme = urlparse(route.request.url).scheme
        if scheme in ("http", "https", "ws", "wss") and host not in LOCAL_HOSTS:
            watch.outside_requests.append(route.request.url)
            return route.abort()
        return route.continue_()

    pg.on("console", on_console)
    pg.on("pageerror", lambda exc: watch.console_errors.append(f"page error: {exc}"))
    context.route("**/*", on_route)
    pg.watch = watch
    yield pg
    shots = Path(os.environ.get("TORCHPROF_SCREENSHOTS", lab.root.parent / "screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    try:
        pg.screenshot(path=str(shots / f"{request.node.name}.png"), full_page=False)
    except Exception:
        pass
    context.close()
    watch.check()
