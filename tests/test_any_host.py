"""The interactive view is offered to every kernel with a widget manager, and to marimo.

VS Code and Colab kernels used to get the static table only (the view needed
BokehJS from our JupyterLab extension). The view is now one anywidget that
brings its own front end, so a kernel that says it is VS Code's or Colab's
gets the widget too; marimo, which has no ipykernel, gets it through the
``_display_`` hook. The browser tests (tests/browser/test_hosts.py) check
that the widget draws in each host that can run here.
"""

from __future__ import annotations

import sys
import types

import pytest
from tracefiles import real_trace

pytest.importorskip("anywidget")

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def _kernel(tmp_path_factory):
    """One in-process ipykernel (real comms) for the module, with the extension loaded."""
    from ipykernel.inprocess.ipkernel import InProcessInteractiveShell
    from ipykernel.inprocess.manager import InProcessKernelManager
    from IPython.core.interactiveshell import InteractiveShell

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path_factory.mktemp("kernel"))
        mp.setenv("TORCHPROF_RUN_DIR", str(tmp_path_factory.mktemp("runs")))
        mp.delenv("TORCHPROF_WIDGETS", raising=False)
        InteractiveShell.clear_instance()
        InProcessInteractiveShell.clear_instance()  # or a second in-process kernel has no get_ipython()
        km = InProcessKernelManager()
        km.start_kernel()
        shell = km.kernel.shell
        assert shell.run_cell("%load_ext jupyter_torchprof").error_in_exec is None
        yield shell
        km.shutdown_kernel()
        InteractiveShell.clear_instance()
        InProcessInteractiveShell.clear_instance()  # or a second in-process kernel has no get_ipython()


@pytest.fixture
def kernel_shell(_kernel):
    """The module's kernel shell, as a plain kernel (no host marker) after each test."""
    yield _kernel
    _kernel.user_ns.pop("__vsc_ipynb_file__", None)
    from jupyter_torchprof.views import widget as view_module

    while view_module._LIVE:
        view_module._LIVE.popleft().close()


def _bundle(profile) -> dict:
    data = profile._repr_mimebundle_()
    return data[0] if isinstance(data, tuple) else data


@pytest.fixture(scope="module")
def cpu_profile():
    import jupyter_torchprof

    return jupyter_torchprof.load(real_trace("cpu_only.pt.trace.json.gz"))


def test_a_vscode_kernel_gets_the_widget(kernel_shell, cpu_profile):
    kernel_shell.user_ns["__vsc_ipynb_file__"] = "/home/someone/profile.ipynb"
    bundle = _bundle(cpu_profile)
    assert WIDGET_MIME in bundle and {"text/plain", "text/html"} <= set(bundle)


def test_a_colab_kernel_gets_the_widget(kernel_shell, cpu_profile, monkeypatch):
    colab = types.ModuleType("google.colab")
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    bundle = _bundle(cpu_profile)
    assert WIDGET_MIME in bundle and {"text/plain", "text/html"} <= set(bundle)


def test_the_widget_is_one_self_contained_anywidget(kernel_shell, cpu_profile):
    """Its front end travels in its own state: no module a host would have to fetch."""
    import anywidget

    from jupyter_torchprof.views.widget import ProfileView

    view = ProfileView(cpu_profile)
    widget = view.widget()
    try:
        assert isinstance(widget, anywidget.AnyWidget)
        state = widget.get_state()
        esm, css = str(state["_esm"]), str(state["_css"])
        assert "export default" in esm and "render" in esm
        assert ".jp-TorchProf-view" in css
        # No URL in the front end: nothing is fetched from any network.
        assert "http://" not in esm and "https://" not in esm
        assert "http" not in css
        # BokehJS is not in the state (it would be written into every saved notebook).
        assert sum(len(str(v)) for v in state.values()) < 100_000
    finally:
        view.close()


def test_marimo_gets_the_widget_through_display_hook(cpu_profile):
    """marimo has no ipykernel: it shows what ``_display_`` returns (an anywidget)."""
    import anywidget

    shown = cpu_profile._display_()
    try:
        assert isinstance(shown, anywidget.AnyWidget)
    finally:
        from jupyter_torchprof.views import widget as view_module

        while view_module._LIVE:
            view_module._LIVE.popleft().close()


def test_a_widget_that_cannot_be_built_leaves_the_static_view_in_marimo(cpu_profile, monkeypatch):
    from jupyter_torchprof.views import display

    def broken(*_a, **_k):
        raise RuntimeError("no widgets here")

    monkeypatch.setattr(display, "profile_widget", broken)
    with pytest.warns(UserWarning, match="static tables"):
        shown = cpu_profile._display_()
    assert "jp-TorchProf-static" in shown._repr_html_()
