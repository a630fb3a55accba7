"""The inline interactive view: an ipywidgets container with bokeh inside.

Layout, top to bottom: a header (run name, device, steps, time per step,
device busy), the findings when the profile has any, then tabs:

* **Ops**: filter box, group by name / input shape / stack / module, self vs
  total, the sortable table (top rows; "show all"), exact totals. Selecting
  a row outlines its events and kernels in the timeline.
* **Kernels**: the same for kernels, copies and memsets.
* **Timeline**: host threads and device streams (`views.timeline`); zooming
  fetches detail from the kernel, clicking a kernel names the op that
  launched it (and the reverse).
* **Memory** when allocations were recorded.

`views.interactive` decides where the view is built (an ipykernel with
comms); everywhere else the profile's text and static HTML are what is
shown, and they travel in the same mimebundle as the widget, so a notebook
opened without the widget state still reads well.

BokehJS itself is put on the page by our JupyterLab extension, served by our
server extension: nothing here loads it from a network.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import ipywidgets as W
import numpy as np

from ..format import esc, fmt_count, headline_chips
from .memory import build_memory, has_memory
from .tables import DEFAULT_ROWS, MAX_ROWS, KernelTable, OpTable, available_groupings
from .timeline import Timeline

if TYPE_CHECKING:  # pragma: no cover
    from ..results.profile import Profile

#: Views kept alive; older ones are closed so that re-running a cell many
#: times does not keep every old profile in memory.
MAX_LIVE_VIEWS = 24
_LIVE: deque[ProfileView] = deque()

_GROUP_LABELS = {"name": "name", "shape": "input shape", "stack": "stack", "module": "module"}


# --------------------------------------------------------------------------- #
# HTML pieces (everything from the trace is escaped)


def header_html(profile: Profile) -> str:
    """Run name and headline numbers as chips."""
    s = profile.summary
    chips = headline_chips(s)
    chips.append(("events", fmt_count(s.get("events"))))
    if s.get("rank") is not None and s.get("world_size"):
        chips.append(("rank", f"{s['rank']} of {s['world_size']}"))
    parts = ['<div class="jp-TorchProf-header">']
    parts.append(f'<div class="jp-TorchProf-title">{esc(profile.name)}</div>')
    parts.append('<div class="jp-TorchProf-chips">')
    for label, value in chips:
        parts.append(
            f'<span class="jp-TorchProf-chip"><span class="jp-TorchProf-chip-label">{esc(label)}</span> '
            f'<span class="jp-TorchProf-chip-value">{esc(value)}</span></span>'
        )
    parts.append("</div>")
    if profile.error:
        parts.append(f'<div class="jp-TorchProf-error">{esc(profile.error)}</div>')
    for note in profile.notes:
        parts.append(f'<div class="jp-TorchProf-note">{esc(note)}</div>')
    parts.append("</div>")
    return "".join(parts)


def _details_html(pairs: list[tuple[str, str]]) -> str:
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in pairs)
    return f'<table class="jp-TorchProf-details">{rows}</table>'


# --------------------------------------------------------------------------- #
# the view


class ProfileView(W.VBox):
    """The interactive view of a `Profile` (see the module docstring).

    Parameters
    ----------
    profile
        The profile to show.
    max_glyphs
        Glyph budget of the timeline.
    """

    def __init__(
        self, profile: Profile, max_glyphs: int = 100_000, all_frames: bool = False, **kwargs: Any
    ) -> None:
        self.profile = profile
        self.header = W.HTML(header_html(profile))
        self.header.add_class("jp-TorchProf-headerbox")
        # The slot the findings fill once `Profile.findings` exists.
        self.findings = W.HTML(self._findings_html())
        self.findings.add_class("jp-TorchProf-findingsbox")
        self.findings.layout.display = None if self.findings.value else "none"
        # Full width, so a long line ends in an ellipsis instead of being cut.
        self.findings.layout.width = "100%"

        self.timeline = Timeline(profile, max_glyphs=max_glyphs, all_frames=all_frames)
        self.ops = OpTable(profile)
        device = bool(profile.summary["device_traced"]) and not profile.kernels.empty
        self.kernels = KernelTable(profile) if device else None

        pages: list[tuple[str, W.Widget]] = [(f"Ops ({fmt_count(len(profile.ops))})", self._ops_page())]
        if self.kernels is not None:
            pages.append((f"Kernels ({fmt_count(len(profile.kernels))})", self._kernels_page()))
        pages.append(("Timeline", self._timeline_page()))
        self._timeline_tab = len(pages) - 1
        if has_memory(profile):
            pages.append(("Memory", self._memory_page()))
        self.tabs = W.Tab(children=[p for _, p in pages])
        self.tabs.titles = tuple(t for t, _ in pages)
        self.tabs.add_class("jp-TorchProf-tabs")
        # Export: format menu, button, what was written and a download link.
        from .export_control import ExportControl

        self.export = ExportControl(profile)
        super().__init__(children=[self.header, self.findings, self.tabs, self.export.box], **kwargs)
        self.add_class("jp-TorchProf-view")
        self.layout.width = "100%"
        _LIVE.append(self)
        while len(_LIVE) > MAX_LIVE_VIEWS:
            _LIVE.popleft().close()

    # -- findings slot -------------------------------------------------------

    def _findings_html(self) -> str:
        try:
            findings = getattr(self.profile, "findings", None)
        except Exception as exc:  # noqa: BLE001 - a failing rule must not hide the profile
            return f'<div class="jp-TorchProf-note">{esc(f"findings unavailable: {exc}")}</div>'
        if findings is None or len(findings) == 0:
            return ""
        from .findings import findings_html

        return findings_html(findings, limit=5)

    # -- pages ----------------------------------------------------------------

    def _bokeh_model(self, model: Any, cls: str) -> W.Widget:
        bm = bokeh_pane(model)
        bm.add_class(cls)
        bm.layout.width = "100%"
        return bm

    def _ops_page(self) -> W.Widget:
        page = TablePage(self.profile, self.ops, "filter ops: substring, or regex like ^aten::(mm|addmm)$")
        groups = available_groupings(self.profile)
        self.op_group = W.ToggleButtons(
            options=[(_GROUP_LABELS[g], g) for g in groups],
            value="name",
            tooltips=[
                f"one row per op {_GROUP_LABELS[g]}" if g != "name" else "one row per op name" for g in groups
            ],
        )
        self.op_group.add_class("jp-TorchProf-toggle")
        self.op_group.layout.display = None if len(groups) > 1 else "none"
        self.op_mode = W.ToggleButtons(
            options=[("self", "self"), ("total", "total")],
            value="self",
            tooltips=["time in the op itself", "time in the op and everything it called"],
        )
        self.op_mode.add_class("jp-TorchProf-toggle")
        self.op_group.observe(lambda ch: page.refresh(group_by=ch["new"]), "value")
        self.op_mode.observe(lambda ch: page.refresh(mode=ch["new"]), "value")
        self.op_page = page
        self.op_filter, self.op_per_step = page.filter, page.per_step
        self.op_status, self.op_all, self.op_selection, self.op_goto = (
            page.status,
            page.all,
            page.selection,
            page.goto,
        )
        return self._table_page(page, [self.op_group, self.op_mode], "ops", "jp-TorchProf-optable")

    def _kernels_page(self) -> W.Widget:
        assert self.kernels is not None
        page = TablePage(self.profile, self.kernels, "filter kernels: substring, or regex like gemm|conv")
        modules = list(self.profile.modules["module"]) if not self.profile.modules.empty else []
        # Module → its kernels: only where modules were recorded (--modules, --stack).
        self.k_module = W.Dropdown(
            options=[("all modules", "")] + [(m, m) for m in modules],
            value="",
            description="launched in",
            layout=W.Layout(width="auto", display=None if modules else "none"),
            style={"description_width": "initial"},
        )
        self.k_module.add_class("jp-TorchProf-module")
        self.k_module.observe(lambda ch: page.refresh(module=ch["new"]), "value")
        self.k_page = page
        self.k_filter, self.k_per_step = page.filter, page.per_step
        self.k_status, self.k_all, self.k_selection, self.k_goto = (
            page.status,
            page.all,
            page.selection,
            page.goto,
        )
        return self._table_page(page, [self.k_module], "kernels", "jp-TorchProf-kerneltable")

    def _table_page(self, page: TablePage, extra: list[W.Widget], which: str, cls: str) -> W.Widget:
        """Wire a table page to the timeline (selection, "show in timeline") and lay it out."""
        page.goto.on_click(lambda _: self._goto(page.rows))
        page.table.source.selected.on_change("indices", self._table_selection(which))
        return page.layout(extra, self._bokeh_model(page.table.model, cls))

    def _timeline_page(self) -> W.Widget:
        tl = self.timeline
        hint = "drag to pan · Ctrl + wheel or the box tool to zoom · click an op or a kernel to link it"
        if not tl.detailed:
            hint += " · narrow events are merged until you zoom in"
        if tl.hidden:
            hint += f" · {fmt_count(tl.hidden)} deeply nested events not drawn"
        if tl.machinery_hidden:
            hint += (
                f" · {fmt_count(tl.machinery_hidden)} Python frames of the kernel machinery hidden "
                "(Profile.view(all_frames=True) shows them)"
            )
        self.tl_hint = W.HTML(f'<div class="jp-TorchProf-hint">{esc(hint)}</div>')
        self.tl_detail = W.HTML()
        self.tl_detail.add_class("jp-TorchProf-detail")
        tl.on_pick = lambda pairs: setattr(self.tl_detail, "value", _details_html(pairs))
        tl.attach()
        page = W.VBox([self.tl_hint, self._bokeh_model(tl.model, "jp-TorchProf-timeline"), self.tl_detail])
        page.add_class("jp-TorchProf-page")
        return page

    def _memory_page(self) -> W.Widget:
        page = W.VBox([self._bokeh_model(build_memory(self.profile), "jp-TorchProf-memory")])
        page.add_class("jp-TorchProf-page")
        return page

    # -- behaviour ------------------------------------------------------------

    def _table_selection(self, which: str) -> Any:
        last: list[tuple[int, ...]] = [()]

        def handler(attr: str, old: Any, new: Any) -> None:
            key = tuple(new or ())
            if key == last[0]:
                return  # the same change delivered twice, or echoed back
            last[0] = key
            page = self.op_page if which == "ops" else self.k_page
            table, label, button = page.table, page.selection, page.goto
            if not key:
                page.clear_selection()
                self.timeline.highlight(np.array([], dtype=np.int64))
                return
            rows = np.unique(np.concatenate([table.event_rows(i) for i in key]))
            linked = self.timeline.linked(rows)
            drawn = self.timeline.highlight(np.concatenate([rows, linked]))
            names = table.shown.iloc[list(key)]["name"].astype(str).tolist()
            what = names[0] if len(names) == 1 else f"{len(names)} rows"
            n_linked = len(linked)
            text = (
                f"{what}: {fmt_count(len(rows))} event(s) and {fmt_count(n_linked)} linked "
                f"launch/kernel event(s); {fmt_count(drawn)} outlined in the timeline"
            )
            label.value = esc(text)
            page.rows = rows
            button.layout.display = None if drawn else "none"

        return handler

    def _goto(self, rows: np.ndarray) -> None:
        window = self.timeline.extent(rows)
        self.tabs.selected_index = self._timeline_tab
        if window is not None:
            self.timeline.zoom_to(*window)

    def close(self) -> None:
        """Close the view and every widget model it made.

        That is the widgets inside it and also each one's Layout and Style
        models: those are widgets with comms of their own, which closing
        their owner leaves open (about 40 per view, kept for the kernel's
        lifetime).
        """
        for widget in _widget_tree(self)[1:]:
            widget.close()
        super().close()


class TablePage:
    """What the op and kernel pages share around their table.

    A filter (substring or regex) and the totals | per step toggle before
    the page's own controls; under the table, the status line with its "show
    all" button, and the selection line with "show in timeline".
    """

    def __init__(self, profile: Profile, table: OpTable | KernelTable, placeholder: str) -> None:
        self.table = table
        self.filter = W.Text(placeholder=placeholder, continuous_update=True, layout=W.Layout(width="380px"))
        self.filter.add_class("jp-TorchProf-filter")
        self.per_step = _per_step_toggle(profile)
        self.status = W.HTML()
        self.status.add_class("jp-TorchProf-status")
        self.all = W.Button(description="show all", layout=W.Layout(width="auto"))
        self.all.add_class("jp-TorchProf-button")
        self.selection = W.HTML()
        self.selection.add_class("jp-TorchProf-selection")
        self.goto = W.Button(
            description="show in timeline", icon="arrow-right", layout=W.Layout(width="auto")
        )
        self.goto.add_class("jp-TorchProf-button")
        self.goto.layout.display = "none"
        #: Events of the rows selected in the table (what "show in timeline" zooms to).
        self.rows = np.array([], dtype=np.int64)
        self.filter.observe(lambda ch: self.refresh(pattern=ch["new"]), "value")
        self.per_step.observe(lambda ch: self.refresh(per_step=ch["new"]), "value")
        self.all.on_click(
            lambda _: self.refresh(limit=DEFAULT_ROWS if table.limit > DEFAULT_ROWS else MAX_ROWS)
        )
        self.sync_footer()

    def refresh(self, **changes: Any) -> None:
        """Apply ``changes`` to the table (`OpTable.update`), then its footer; the selection is gone."""
        self.table.update(**changes)
        self.sync_footer()
        self.clear_selection()

    def sync_footer(self) -> None:
        """The status line, and "show all" / "top N" as the rows shown call for."""
        table, button = self.table, self.all
        self.status.value = esc(table.status())
        matched = table.matched
        if table.limit > DEFAULT_ROWS:
            button.description = f"top {DEFAULT_ROWS}"
            button.layout.display = None
        elif matched > len(table.shown):
            n = min(matched, MAX_ROWS)
            button.description = f"show all {fmt_count(n)}" if n == matched else f"show {fmt_count(n)}"
            button.layout.display = None
        else:
            button.layout.display = "none"

    def clear_selection(self) -> None:
        """No selection line, no "show in timeline"."""
        self.selection.value = ""
        self.goto.layout.display = "none"

    def layout(self, extra: list[W.Widget], table_widget: W.Widget) -> W.VBox:
        """The page: filter, ``extra`` controls, per-step toggle; the table; status; selection."""
        controls = W.HBox([self.filter, *extra, self.per_step])
        controls.add_class("jp-TorchProf-controls")
        footer = W.HBox([self.status, self.all])
        footer.add_class("jp-TorchProf-footer")
        sel = W.HBox([self.selection, self.goto])
        sel.add_class("jp-TorchProf-selectionbox")
        page = W.VBox([controls, table_widget, footer, sel])
        page.add_class("jp-TorchProf-page")
        return page


def _per_step_toggle(profile: Profile) -> W.ToggleButtons:
    """Totals over the profiled steps (as key_averages) or the mean per step."""
    steps = int(profile.summary["steps"])
    toggle = W.ToggleButtons(
        options=[("totals", False), ("per step", True)],
        value=False,
        tooltips=[
            f"sums over all {steps} profiled steps, as torch's key_averages()"
            if steps
            else "sums over the trace",
            f"totals ÷ {max(steps, 1)}: the mean per step",
        ],
    )
    toggle.add_class("jp-TorchProf-toggle")
    toggle.add_class("jp-TorchProf-perstep")
    # Without step ranges there is nothing to divide by.
    toggle.layout.display = None if steps > 1 else "none"
    return toggle


def bokeh_pane(model: Any) -> W.Widget:
    """A ``BokehModel`` widget for ``model`` that may be closed twice.

    jupyter_bokeh's ``close`` fails when called again (ipywidgets calls it
    once more when the widget is garbage collected); events from the
    browser are combined while the kernel is busy (pans send many), and
    echoes of our own data updates are dropped unread.
    """
    global _PANE
    if _PANE is None:
        from jupyter_bokeh import BokehModel

        class BokehPane(BokehModel):
            def close(self) -> None:
                if getattr(self, "_torchprof_closed", False):
                    return
                self._torchprof_closed = True
                super().close()

            def _sync_model(self, model: Any, content: dict[str, Any], buffers: list[Any]) -> None:
                # BokehJS echoes every data change made from Python back to
                # the kernel; nothing in the browser edits our sources, so
                # skip decoding what was just sent.
                if content.get("kind") == "ModelChanged" and content.get("attr") == "data":
                    return
                super()._sync_model(model, content, buffers)

        _PANE = BokehPane
    from .style import ready_on_document

    return _PANE(ready_on_document(model), combine_events=True)


_PANE: Any = None


def _widget_tree(root: W.Widget) -> list[W.Widget]:
    """``root`` and every widget reachable through its synced traits.

    Children, tab pages, and the ``layout`` and ``style`` models are all
    traits holding widgets; each appears once, parents before children.
    """
    found: list[W.Widget] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        widget = stack.pop()
        if id(widget) in seen:
            continue
        seen.add(id(widget))
        found.append(widget)
        for name in widget.keys:
            value = getattr(widget, name, None)
            values = value if isinstance(value, (list, tuple)) else (value,)
            stack.extend(v for v in values if isinstance(v, W.Widget) and id(v) not in seen)
    return found
