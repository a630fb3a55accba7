"""Open widget comms stay bounded over a long session with the interactive view on.

The views are built the way a notebook builds them: by displaying profiles in
an IPython kernel (ipykernel's in-process kernel: a real shell with real
comms, so ``widgets_available()`` is true). A view is one widget (its comm and its Layout's);
only the newest ``MAX_LIVE_VIEWS`` views stay open, and an evicted view turns
into its static form, on the page and in the output the notebook saves.
"""

from __future__ import annotations

import pytest

pytest.importorskip("anywidget")


@pytest.fixture
def kernel_shell(tmp_path, monkeypatch):
    """The shell of an in-process ipykernel, with the extension loaded."""
    from ipykernel.inprocess.ipkernel import InProcessInteractiveShell
    from ipykernel.inprocess.manager import InProcessKernelManager
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("TORCHPROF_WIDGETS", raising=False)
    InteractiveShell.clear_instance()
    InProcessInteractiveShell.clear_instance()  # or a second in-process kernel has no get_ipython()
    km = InProcessKernelManager()
    km.start_kernel()
    shell = km.kernel.shell
    assert shell.run_cell("%load_ext jupyter_torchprof").error_in_exec is None
    yield shell
    from jupyter_torchprof.runs.store import wait_for_compression
    from jupyter_torchprof.views import widget as view_module

    wait_for_compression()
    while view_module._LIVE:
        view_module._LIVE.popleft().close()
    km.shutdown_kernel()
    InteractiveShell.clear_instance()
    InProcessInteractiveShell.clear_instance()  # or a second in-process kernel has no get_ipython()


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
    assert per_view == 2  # the whole view is one widget: its model and its Layout's
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


def test_an_evicted_view_turns_static_on_the_page_and_in_the_saved_output(kernel_shell, monkeypatch):
    from jupyter_torchprof.views import widget as view_module

    shell = kernel_shell
    monkeypatch.setattr(view_module, "MAX_LIVE_VIEWS", 2)
    published: list[tuple[str, dict]] = []
    pub = shell.display_pub
    original = pub.publish

    def record(data, metadata=None, *args, **kwargs):
        published.append((kwargs.get("transient", {}).get("display_id") or "", dict(kwargs), data))
        return original(data, metadata, *args, **kwargs)

    monkeypatch.setattr(pub, "publish", record)
    shell.run_cell("import torch\nx = torch.randn(32, 32)")
    for i in range(3):
        res = shell.run_cell(f"%%torchprof --warmup 0 --steps 1 --name run{i}\ny = x @ x")
        assert res.error_in_exec is None
    shown = [(d, data) for d, kw, data in published if WIDGET_MIME in data]
    assert len(shown) == 3 and all(d for d, _ in shown), "the magic shows each view with a display id"
    first_id = shown[0][0]
    # The third view evicted the first: its output was replaced by the static bundle.
    updates = [(kw, data) for d, kw, data in published if d == first_id and kw.get("update")]
    assert len(updates) == 1, published
    data = updates[0][1]
    assert WIDGET_MIME not in data
    assert "jp-TorchProf-static" in data["text/html"] and "run0" in data["text/plain"]
    # The evicted view's widget is closed; the two newest are open.
    assert [v._surface is None for v in view_module._LIVE] == [False, False]


WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
