"""The runs sidebar in a real JupyterLab, driven in Debian's Chromium.

A person's path: run %%torchprof cells, see the runs appear in the sidebar
without reloading, open one, sort its op table, download its trace and load
it back, compare two runs, reload the page (sidebar and panel come back),
delete a run after confirming. Numbers shown are checked against the trace
files read with the json module.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from labkit import open_notebook, run_all, write_notebook

SETUP = (
    "%load_ext jupyter_torchprof\n"
    "import torch\n"
    "model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))\n"
    "x = torch.randn(16, 32)"
)
FIRST = "%%torchprof --steps 2 --name sidebar-first\ny = model(x)"
SECOND = "%%torchprof --steps 3 --name sidebar-second\ny = model(x)\ny = model(x)"


def shots_dir(lab) -> Path:
    path = Path(os.environ.get("TORCHPROF_SCREENSHOTS", lab.root.parent / "screenshots"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _wait_for_saved_workspace(lab, text: str, timeout: float = 60) -> None:
    """Wait until a saved JupyterLab workspace mentions ``text`` (a restorable panel)."""
    import json
    import time

    deadline = time.time() + timeout
    while time.time() < deadline:
        found = lab.api("GET", "/lab/api/workspaces")
        if text in json.dumps(found):
            return
        time.sleep(0.5)
    raise AssertionError(f"no saved workspace mentions {text!r} after {timeout} s")


def row(page, name: str):
    return page.locator(".jp-TorchProf-run", has=page.locator(".jp-TorchProf-runName", has_text=name))


def raw_calls(trace: Path) -> Counter:
    from tracefiles import raw_events

    return Counter(e["name"] for e in raw_events(trace) if e.get("cat") == "cpu_op")


def column(page, scope: str, key: str) -> list[str]:
    """Texts of one column of a sortable table, in display order."""
    return page.evaluate(
        """([scope, key]) => {
            const table = document.querySelector(scope + ' table');
            const ths = Array.from(table.tHead.rows[0].cells);
            const i = ths.findIndex(th => th.dataset.key === key);
            return Array.from(table.tBodies[0].rows).map(r => r.cells[i].textContent);
        }""",
        [scope, key],
    )


def as_int(text: str) -> int:
    return int(text.replace(",", ""))


def test_sidebar_runs_open_sort_download_compare_restore_delete(page, lab, tmp_path):
    shots = shots_dir(lab)
    write_notebook(lab.root, "sidebar.ipynb", [SETUP, FIRST, SECOND])
    open_notebook(page, lab, "sidebar.ipynb")

    # the sidebar: a tab in the left area with a tooltip
    tab = page.locator('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="jupyter-torchprof-runs"]')
    assert "Profiler runs" in (tab.get_attribute("title") or "")
    tab.click()
    sidebar = page.locator("#jupyter-torchprof-runs")
    sidebar.wait_for(state="visible")
    page.wait_for_selector("#jupyter-torchprof-runs .jp-TorchProf-runStatus:has-text('run')")
    assert row(page, "sidebar-first").count() == 0

    # run the cells: the runs appear without a reload
    run_all(page)
    row(page, "sidebar-second").wait_for(timeout=30_000)
    row(page, "sidebar-first").wait_for(timeout=30_000)
    names = sidebar.locator(".jp-TorchProf-runName").all_inner_texts()
    assert names.index("sidebar-second") < names.index("sidebar-first")  # newest first
    first = row(page, "sidebar-first")
    meta = first.locator(".jp-TorchProf-runMeta").inner_text()
    assert "CPU" in meta and "/step" in meta
    assert first.locator(".jp-TorchProf-runTopName").inner_text().startswith("aten::")
    first_id = first.get_attribute("data-run-id")
    second_id = row(page, "sidebar-second").get_attribute("data-run-id")
    first_trace = lab.run_dir / first_id / "trace.json.gz"
    assert first_trace.exists()

    # the filter box
    sidebar.locator(".jp-TorchProf-runFilter").fill("sidebar-fir")
    page.wait_for_function(
        "() => document.querySelectorAll('#jupyter-torchprof-runs .jp-TorchProf-run').length === 1"
    )
    sidebar.locator(".jp-TorchProf-runFilter").fill("")
    row(page, "sidebar-second").wait_for()
    page.screenshot(path=str(shots / "sidebar-list.png"))

    # open the first run: summary, op table, timeline, in the main area
    first.locator(".jp-TorchProf-runMain").click()
    view = ".jp-TorchProf-runView"
    page.wait_for_selector(f"{view} .jp-TorchProf-ops table", timeout=60_000)
    assert page.locator(f"{view} .jp-TorchProf-runTitle").inner_text() == "sidebar-first"
    summary = page.locator(f"{view} .jp-TorchProf-runSummary").inner_text()
    assert "CPU" in summary and "Steps" in summary

    # the calls shown are the trace's own counts
    calls = raw_calls(first_trace)
    shown = dict(
        zip(
            column(page, f"{view} .jp-TorchProf-ops", "name"),
            column(page, f"{view} .jp-TorchProf-ops", "calls"),
            strict=True,
        )
    )
    aten = {k: as_int(v) for k, v in shown.items() if k.startswith("aten::")}
    assert aten and aten == {k: calls[k] for k in aten}, (shown, calls)

    # sort: a header click orders by calls (biggest first), a second click reverses
    header = page.locator(f'{view} .jp-TorchProf-ops th[data-key="calls"]')
    header.click()
    down = [as_int(t) for t in column(page, f"{view} .jp-TorchProf-ops", "calls")]
    assert down == sorted(down, reverse=True)
    assert header.get_attribute("aria-sort") == "descending"
    header.click()
    up = [as_int(t) for t in column(page, f"{view} .jp-TorchProf-ops", "calls")]
    assert up == sorted(up) and up != down
    assert header.get_attribute("aria-sort") == "ascending"

    # the timeline is drawn by BokehJS from the server (no kernel needed)
    page.wait_for_selector(f"{view} .jp-TorchProf-runTimeline .bk-Figure, {view} .jp-TorchProf-runTimeline p")
    page.screenshot(path=str(shots / "sidebar-run-panel.png"))

    # download the trace from the sidebar and load it back
    with page.expect_download() as info:
        first.locator(".jp-TorchProf-download").click()
    download = info.value
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    assert saved.name == f"{first_id}.pt.trace.json.gz"
    assert saved.read_bytes() == first_trace.read_bytes()
    import jupyter_torchprof

    loaded = jupyter_torchprof.load(str(saved))
    assert loaded.ops.set_index("name").loc["aten::addmm", "calls"] == calls["aten::addmm"]

    # compare the two runs: older = A (baseline)
    row(page, "sidebar-second").locator(".jp-TorchProf-runSelect").check()
    first.locator(".jp-TorchProf-runSelect").check()
    sidebar.locator(".jp-TorchProf-compare").click()
    diff = ".jp-TorchProf-diffView"
    page.wait_for_selector(f"{diff} .jp-TorchProf-opDiff table", timeout=60_000)
    names_ab = page.locator(f"{diff} .jp-TorchProf-diffName").all_inner_texts()
    assert names_ab == ["sidebar-first", "sidebar-second"]
    second_calls = raw_calls(lab.run_dir / second_id / "trace.json.gz")
    per_step = dict(
        zip(
            column(page, f"{diff} .jp-TorchProf-opDiff", "name"),
            zip(
                column(page, f"{diff} .jp-TorchProf-opDiff", "calls_a"),
                column(page, f"{diff} .jp-TorchProf-opDiff", "calls_b"),
                strict=True,
            ),
            strict=True,
        )
    )
    a, b = per_step["aten::addmm"]
    assert float(a) == calls["aten::addmm"] / 2 and float(b) == second_calls["aten::addmm"] / 3
    page.screenshot(path=str(shots / "sidebar-compare.png"))

    # a reload restores the sidebar and the open run panel. JupyterLab 4.6
    # did not save the workspace in the first seconds after the compare tab
    # opened (a known gap, see the README); a later tab switch saves it, as a
    # person makes one: switch, come back, and reload once it is saved.
    page.wait_for_timeout(5000)
    page.locator(".lm-TabBar-tab", has_text="Run: sidebar-first").first.click()
    page.wait_for_timeout(500)
    page.locator(".lm-TabBar-tab", has_text="Compare:").first.click()
    _wait_for_saved_workspace(lab, "jupyter-torchprof-compare:")
    page.goto(lab.url("/lab/tree/sidebar.ipynb"))
    page.wait_for_selector("#jupyter-torchprof-runs .jp-TorchProf-run", timeout=60_000)
    page.wait_for_selector(f"{view} .jp-TorchProf-ops table", state="attached", timeout=60_000)
    page.wait_for_selector(f"{diff} .jp-TorchProf-opDiff table", state="attached", timeout=60_000)
    assert page.locator("#jupyter-torchprof-runs").is_visible()

    # dark theme: same panel, theme colours
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
    page.locator(".lm-TabBar-tab", has_text="sidebar-first").first.click()
    page.wait_for_timeout(500)
    page.screenshot(path=str(shots / "sidebar-dark.png"))
    bg = page.evaluate(
        "() => getComputedStyle(document.querySelector('.jp-TorchProf-runView')).backgroundColor"
    )
    rgb = [int(v) for v in bg[bg.index("(") + 1 : bg.index(")")].split(",")[:3]]
    assert sum(rgb) < 3 * 100, bg  # dark background from the theme variables
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'", timeout=30_000)

    # delete the first run (after confirming): gone from the list, the disk and the main area
    first = row(page, "sidebar-first")
    first.locator(".jp-TorchProf-delete").click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for()
    assert "sidebar-first" in dialog.inner_text()
    dialog.locator(".jp-mod-accept").click()
    first.wait_for(state="detached", timeout=30_000)
    assert not (lab.run_dir / first_id).exists()
    assert (lab.run_dir / second_id).exists()
    page.wait_for_selector(view, state="detached", timeout=10_000)
    assert row(page, "sidebar-second").count() == 1
