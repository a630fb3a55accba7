"""Open widget comms stay bounded over a long session with the interactive view on.

The views are built the way a notebook builds them: by displaying profiles in
an IPython kernel (ipykernel's in-process kernel: a real shell with real
comms, so ``widgets_available()`` is true). Only the newest
``MAX_LIVE_VIEWS`` views stay open; an evicted view must close every model
it made, its Layout and Style models included (they are widgets with comms
of their own: about 40 per view were left open, forever).
"""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("jupyter_bokeh")


@pytest.fixture
def kernel_shell(tmp_path, monkeypatch):
    """The shell of an in-process ipykernel, with the extension loaded."""
    from ipykernel.inprocess.manager import InProcessKernelManager
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("TORCHPROF_WIDGETS", raising=False)
    InteractiveShell.clear_instance()
    km = InProcessKernelManager()
    km.start_kernel()
    shell = km.kernel.shell
    assert shell.run_cell("%load_ext jupyter_torchprof").error_in_exec is None
    yield shell
    from jupyter_torchprof.store import wait_for_compression
    from jupyter_torchprof.views import widget as view_module

    wait_for_compression()
    while view_module._LIVE:
        view_module._LIVE.popleft().close()
    km.shutdown_kernel()
    InteractiveShell.clear_instance()


def _open() -> tuple[int, int]:
    """(widget models alive, comms open) in this process."""
    import comm
    from ipywidgets.widgets import widget as widget_module

    return len(widget_module._instances), len(comm.get_comm_manager().comms)


@pytest.mark.slow  # builds 100 views: about 15 s on an idle machine, 50 s on a busy one
def test_open_comms_stay_bounded_over_100_views(kernel_shell):
    from jupyter_torchprof.views import widget as view_module
    from jupyter_torchprof.views.interactive import widgets_available

    shell = kernel_shell
    assert widgets_available(), "the in-process kernel should show widgets"
    base_models, base_comms = _open()
    assert shell.run_cell("import torch\nx = torch.randn(64, 64)").error_in_exec is None

    # real runs, each shown with its interactive view
    for _ in range(3):
        res = shell.run_cell("%%torchprof --warmup 0 --steps 1\ny = x @ x")
        assert res.error_in_exec is None
    per_view = None
    counts = []
    for _ in range(100):
        before = _open()
        assert shell.run_cell("display(_torchprof)").error_in_exec is None
        after = _open()
        if per_view is None and len(view_module._LIVE) < view_module.MAX_LIVE_VIEWS:
            per_view = after[1] - before[1]
        counts.append(after)
    assert per_view and per_view > 30  # a view is dozens of models: the bound below is not trivial
    models, comms = counts[-1]
    live = len(view_module._LIVE)
    assert live == view_module.MAX_LIVE_VIEWS
    # every open comm belongs to a live view, and the count stopped growing
    assert comms - base_comms == live * per_view, (comms, base_comms, live, per_view)
    assert models - base_models == live * per_view
    assert counts[-1] == counts[60]
    # closing the live views leaves nothing open
    while view_module._LIVE:
        view_module._LIVE.popleft().close()
    assert _open() == (base_models, base_comms)


def test_a_closed_view_closes_its_layouts_and_styles(kernel_shell):
    from ipywidgets.widgets import widget as widget_module

    from jupyter_torchprof.views.widget import ProfileView, _widget_tree

    shell = kernel_shell
    shell.run_cell("import torch\nx = torch.randn(32, 32)")
    assert (
        shell.run_cell("%%torchprof --warmup 0 --steps 1 --quiet --memory\ny = x @ x").error_in_exec is None
    )
    profile = shell.user_ns["_torchprof"]
    before = set(widget_module._instances)
    view = ProfileView(profile)
    made = {k: w for k, w in widget_module._instances.items() if k not in before}
    kinds = {type(w).__name__ for w in made.values()}
    assert "Layout" in kinds and any(k.endswith("Style") for k in kinds)
    # the tree the view closes reaches every model it made
    assert {id(w) for w in made.values()} <= {id(w) for w in _widget_tree(view)}
    view.close()
    assert not [k for k in made if k in widget_module._instances]
    assert all(w.comm is None for w in made.values())
