"""The runs sidebar as a JupyterLab citizen: its commands in the palette, its refresh period in the settings."""

from __future__ import annotations

import json

from labkit import open_notebook, write_notebook


def _count_list_requests(page, seconds: float) -> int:
    seen: list[str] = []

    def on_request(req) -> None:
        if req.url.split("?")[0].endswith("/jupyter-torchprof/runs"):
            seen.append(req.url)

    page.on("request", on_request)
    page.wait_for_timeout(int(seconds * 1000))
    page.remove_listener("request", on_request)
    return len(seen)


def _set_refresh(lab, seconds: float) -> None:
    raw = json.dumps({"refreshSeconds": seconds})
    lab.api("PUT", "/lab/api/settings/jupyter-torchprof:runs", {"raw": raw})


def test_palette_lists_the_commands_and_the_settings_set_the_refresh(page, lab):
    write_notebook(lab.root, "palette.ipynb", ["1 + 1"])
    _set_refresh(lab, 1)
    open_notebook(page, lab, "palette.ipynb")

    # The command palette offers the sidebar's commands under "Profiler".
    page.evaluate("window.jupyterapp.commands.execute('apputils:activate-command-palette')")
    search = page.locator(".lm-CommandPalette-input")
    search.wait_for()
    search.fill("Profiler Runs")
    items = page.locator(".lm-CommandPalette-item")
    items.first.wait_for()
    labels = items.all_inner_texts()
    assert any("Show Profiler Runs" in t for t in labels), labels
    assert any("Refresh Profiler Runs" in t for t in labels), labels
    page.keyboard.press("Escape")

    # Open the sidebar: with refreshSeconds = 1 it asks for the list about every second.
    page.evaluate("window.jupyterapp.commands.execute('jupyter-torchprof:show-runs')")
    page.locator("#jupyter-torchprof-runs").wait_for(state="visible")
    fast = _count_list_requests(page, 5)
    assert fast >= 3, fast

    # Another period in the settings: after a reload the sidebar asks far less often.
    _set_refresh(lab, 60)
    open_notebook(page, lab, "palette.ipynb")
    page.evaluate("window.jupyterapp.commands.execute('jupyter-torchprof:show-runs')")
    page.locator("#jupyter-torchprof-runs").wait_for(state="visible")
    page.wait_for_timeout(1000)  # the first listing, on showing
    try:
        slow = _count_list_requests(page, 5)
        assert slow <= 1, slow
    finally:
        # The server (and its settings) serve the other browser tests too.
        _set_refresh(lab, 4)
