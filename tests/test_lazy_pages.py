"""The view builds its Kernels, Timeline and Memory pages when first shown, not with the view.

Building every page up front made the first view of a small cell wait for a
timeline nobody had opened (issue 23, item 3). These tests count what is
built: constructing a `ProfileView` builds the Ops page only; selecting a
tab, from Python or from the page (the message the front end sends on a
click), builds that page and sends it; code that reaches for
``view.timeline`` / ``view.kernels`` / ``view.k_module`` still gets them. The
browser tests (tests/browser/test_views_in_lab.py) click the tabs in a real
JupyterLab.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule
from tracefiles import real_trace

import jupyter_torchprof as jt
from jupyter_torchprof.views import ui
from jupyter_torchprof.views import widget as widget_mod

pytest.importorskip("anywidget")


@pytest.fixture(scope="module")
def gpu_profile():
    """A real GPU trace: it has kernels, so the view has a Kernels page."""
    return jt.load(real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz"))


@pytest.fixture(scope="module")
def memory_profile(tmp_path_factory):
    """A CPU run recorded with torch's own profiler, allocations included: the view has a Memory page."""
    path = tmp_path_factory.mktemp("lazy") / "trace.json"
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=2),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
        profile_memory=True,
    ) as prof:
        for _ in range(3):
            model(x).sum().backward()
            prof.step()
    return jt.load(path)


class Built:
    """Counts the page builders called: the timeline, the kernel table, the memory figure."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from jupyter_torchprof.views import timeline as timeline_mod

        self.counts = {"timeline": 0, "kernels": 0, "memory": 0}
        for name, owner, attr in (
            ("timeline", timeline_mod.Timeline, "__init__"),
            ("kernels", widget_mod.KernelTable, "__init__"),
        ):
            monkeypatch.setattr(owner, attr, self._counting(name, getattr(owner, attr)))
        monkeypatch.setattr(widget_mod, "build_memory", self._counting("memory", widget_mod.build_memory))

    def _counting(self, name, fn):
        def wrapped(*args, **kwargs):
            self.counts[name] += 1
            return fn(*args, **kwargs)

        return wrapped


def _tab(view, title: str) -> int:
    titles = [view.tabs.get_title(i) for i in range(len(view.tabs.children))]
    return next(i for i, t in enumerate(titles) if t.split(" (")[0] == title)


def _classes(tree: dict) -> set[str]:
    """Every CSS class in a node tree as sent to the page."""
    found, stack = set(), [tree]
    while stack:
        node = stack.pop()
        found.update(node.get("cls", []))
        stack.extend(node.get("children", []))
    return found


class Page:
    """A stand-in for the front end: what the surface sends, and the messages a click sends back."""

    def __init__(self, view) -> None:
        self.view = view
        self.surface = view.widget()
        self.sent: list[dict] = []
        self.surface.send = lambda content, buffers=None: self.sent.append(content)

    def say(self, content: dict) -> None:
        self.surface._on_page_message(self.surface, content, [])

    def tree(self) -> dict:
        self.say({"t": "hello"})
        return next(m["tree"] for m in reversed(self.sent) if m["t"] == "tree")


def test_a_new_view_builds_the_ops_page_only(gpu_profile, memory_profile, monkeypatch):
    built = Built(monkeypatch)
    for p in (gpu_profile, memory_profile):
        view = widget_mod.ProfileView(p)
        try:
            assert view.built_pages() == [view.tabs.get_title(0)]
            assert view.tabs.get_title(0).startswith("Ops (")
            tree = json.dumps(view.root.to_json())
            for cls in ("jp-TorchProf-timeline", "jp-TorchProf-kerneltable", "jp-TorchProf-memory"):
                assert cls not in tree
            assert "jp-TorchProf-optable" in tree
        finally:
            view.close()
    assert built.counts == {"timeline": 0, "kernels": 0, "memory": 0}


@pytest.mark.parametrize("title", ["Kernels", "Timeline"])
def test_a_tab_clicked_on_the_page_builds_its_page_and_sends_it(gpu_profile, monkeypatch, title):
    built = Built(monkeypatch)
    view = widget_mod.ProfileView(gpu_profile)
    page = Page(view)
    try:
        assert "jp-TorchProf-timeline" not in _classes(page.tree())
        index = _tab(view, title)
        page.sent.clear()
        page.say({"t": "set", "id": view.tabs.id, "value": index})
        key = {"Kernels": "kernels", "Timeline": "timeline"}[title]
        assert built.counts[key] == 1
        assert view.tabs.selected_index == index
        # The tab set travels again, the new page in it (one message), at the index clicked.
        nodes = [m["node"] for m in page.sent if m["t"] == "node"]
        assert [n["id"] for n in nodes] == [view.tabs.id]
        assert nodes[0]["index"] == index
        cls = {"Kernels": "jp-TorchProf-kerneltable", "Timeline": "jp-TorchProf-timeline"}[title]
        assert cls in _classes(nodes[0]["children"][index])
        # The new page's figure can be asked for: the surface knows its nodes.
        figure = next(n for n in ui.walk(view.tabs.children[index]) if isinstance(n, ui.Figure))
        page.say({"t": "doc", "id": figure.id})
        assert any(m["t"] == "doc" and m["id"] == figure.id for m in page.sent)
        # Shown again: not built again.
        page.say({"t": "set", "id": view.tabs.id, "value": 0})
        page.say({"t": "set", "id": view.tabs.id, "value": index})
        assert built.counts[key] == 1
    finally:
        view.close()


def test_selecting_a_tab_from_python_builds_it(memory_profile, monkeypatch):
    built = Built(monkeypatch)
    view = widget_mod.ProfileView(memory_profile)
    page = Page(view)
    try:
        page.tree()
        page.sent.clear()
        view.tabs.selected_index = _tab(view, "Memory")
        assert built.counts == {"timeline": 0, "kernels": 0, "memory": 1}
        nodes = [m["node"] for m in page.sent if m["t"] == "node"]
        assert len(nodes) == 1 and nodes[0]["id"] == view.tabs.id
        assert "jp-TorchProf-memory" in _classes(nodes[0])
    finally:
        view.close()


def test_code_that_reaches_for_a_page_gets_it_built(gpu_profile, monkeypatch):
    built = Built(monkeypatch)
    view = widget_mod.ProfileView(gpu_profile)
    try:
        assert view.kernels is not None and built.counts["kernels"] == 1
        assert view.k_module.layout.display == "none"  # no modules recorded
        assert built.counts["timeline"] == 0
        assert view.timeline.glyph_count > 0 and built.counts["timeline"] == 1
        assert "drag to pan" in view.tl_hint.value
        assert view.kernels is view.kernels and built.counts["kernels"] == 1
        assert sorted(view.built_pages()) == sorted(view.tabs.get_title(i) for i in range(3))
    finally:
        view.close()
    cpu = widget_mod.ProfileView(jt.load(real_trace("cpu_only.pt.trace.json.gz")))
    try:
        assert cpu.kernels is None
        with pytest.raises(AttributeError):
            cpu.k_module  # noqa: B018 - no kernel page to build
    finally:
        cpu.close()


def test_a_row_selected_before_the_timeline_is_built_is_outlined_when_it_is(gpu_profile, monkeypatch):
    built = Built(monkeypatch)
    view = widget_mod.ProfileView(gpu_profile)
    try:
        names = list(view.ops.source.data["name"])
        i = next(k for k, n in enumerate(names) if n.startswith("aten::") and "mm" in n)
        view.ops.source.selected.indices = [i]
        assert built.counts["timeline"] == 0
        assert "outlined in the timeline when its tab is opened" in view.op_selection.value
        assert view.op_goto.layout.display is None
        # Independently, from the events frame: the op's own events and the kernels they launched.
        ev = gpu_profile.events
        kind = ev["kind"].astype(str).to_numpy()
        own = np.flatnonzero((ev["name"].astype(str).to_numpy() == names[i]) & (kind == "cpu_op"))
        launched = np.flatnonzero(np.isin(ev["op"].to_numpy(), own) & (kind == "kernel"))
        assert len(own) and len(launched)
        view.op_goto.click()  # "show in timeline": the page is built, outlined, and shown
        assert built.counts["timeline"] == 1
        assert view.tabs.selected_index == view._timeline_tab
        outlined = set(view.timeline.highlighted.tolist())
        assert set(own.tolist()) <= outlined and set(launched.tolist()) <= outlined
        assert f"{len(outlined)} outlined in the timeline" in view.op_selection.value.replace(",", "")
        assert names[i] in view.op_selection.value
    finally:
        view.close()


def test_a_closed_view_lets_go_of_its_unbuilt_pages(gpu_profile):
    view = widget_mod.ProfileView(gpu_profile)
    slot = view._timeline_slot
    view.close()
    assert slot._build is None  # the builder held the view, and through it the profile
