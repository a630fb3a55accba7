"""JupyterLab loads our extension and BokehJS from this server, offline."""

from __future__ import annotations

from labkit import open_notebook, run_all, write_notebook


def test_bokeh_comes_from_the_kernel_when_a_view_needs_it(page, lab):
    """No BokehJS at start-up; the first view gets the installed bokeh's from the kernel, not a server route."""
    import bokeh

    fetched: list[str] = []
    bundles = ("bokeh.min.js", "bokeh-gl.min.js", "bokeh-widgets.min.js", "bokeh-tables.min.js")
    page.on("request", lambda r: fetched.append(r.url) if r.url.split("?")[0].endswith(bundles) else None)
    write_notebook(
        lab.root,
        "smoke.ipynb",
        [
            "%load_ext jupyter_torchprof\nimport torch\nx = torch.randn(8, 8)",
            "%%torchprof --steps 1\ny = x @ x",
        ],
    )
    open_notebook(page, lab, "smoke.ipynb")
    page.wait_for_timeout(2000)
    assert page.evaluate("typeof window.Bokeh") == "undefined"  # nothing loaded for a page without views
    run_all(page)
    page.wait_for_function("() => window.Bokeh !== undefined && !!window.Bokeh.Tables", timeout=60_000)
    assert page.evaluate("window.Bokeh.version") == bokeh.__version__
    assert fetched == [], fetched


def test_torchprof_cell_runs_in_lab(page, lab):
    write_notebook(
        lab.root,
        "run.ipynb",
        [
            "%load_ext jupyter_torchprof\nimport torch\nm = torch.nn.Linear(8, 8)\nx = torch.randn(4, 8)",
            "%%torchprof --steps 2\ny = m(x)",
        ],
    )
    open_notebook(page, lab, "run.ipynb")
    run_all(page)
    page.wait_for_selector(".jp-TorchProf-view", timeout=60_000)
    # The op table lives in bokeh's shadow DOM; Playwright's text locators pierce it.
    # Look in the cell's output only: the runs sidebar names the same top op (hidden while closed).
    output = page.locator(".jp-OutputArea-output")
    output.get_by_text("aten::addmm", exact=True).first.wait_for(timeout=30_000)
