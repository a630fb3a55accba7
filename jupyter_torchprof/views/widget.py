"""The inline interactive view: one widget (`views.surface`) drawing `views.ui` nodes and bokeh figures.

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

Only the Ops page is built with the view; Kernels, Timeline and Memory are
built the first time their tab is shown (`ui.LazyPage`), or when code asks
for them (``view.timeline``, ``view.kernels``): the timeline of a small run
took longer to build than everything the first page shows.

`views.interactive` decides where the view is built (an ipykernel with
comms); everywhere else the profile's text and static HTML are what is
shown, and they travel in the same mimebundle as the widget, so a notebook
opened without the widget state still reads well.

The whole view is one anywidget: its front end and BokehJS reach the page
through the widget's own messages, so every host with a widget manager
(JupyterLab, Notebook 7, VS Code, Colab) and marimo show it, offline, with no
extension of ours on the page.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from ..analysis.links import linked_events
from ..format import esc, fmt_count, headline_chips
from . import ui as W
from .memory import build_memory, has_memory
from .notes_view import first_event, row_notes, row_notes_html
from .tables import DEFAULT_ROWS, MAX_ROWS, KernelTable, OpTable, available_groupings

if TYPE_CHECKING:  # pragma: no cover
    from ..results.profile import Profile
    from .export_control import ExportMenu
    from .timeline import Timeline

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


class OneWidget:
    """What `ProfileView` and `views.compare.ComparisonView` share: shown as one `ViewSurface`.

    A subclass sets ``root`` (its `views.ui` tree) and ``_surface = None``,
    and says which result a closed view shows the static form of (`_shown`).
    """

    root: Any
    _surface: Any

    def _shown(self) -> Any:
        raise NotImplementedError

    def widget(self) -> Any:
        """The one widget that shows this view (made on first use, counted in the live views)."""
        if self._surface is None:
            from .surface import ViewSurface

            shown = self._shown()
            self._surface = ViewSurface(self.root, static=lambda: static_bundle(shown))
            keep_live(self)
        return self._surface

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return self.widget()._repr_mimebundle_(include=include, exclude=exclude)

    def _display_(self) -> Any:
        # marimo's hook: it shows an anywidget by itself.
        return self.widget()

    def close(self) -> None:
        """Close the view: its widget shows the static form instead, every node lets go of its callbacks.

        The timeline's figure and the tables keep the profile's arrays; a
        closed view holds none of them through the page any more. A view
        that holds others (a comparison's pages, a rank's view) closes them
        first, then calls this.
        """
        if self._surface is not None:
            retire(self._surface)
            self._surface = None
        else:
            for node in W.walk(self.root):
                node.close()


class ProfileView(OneWidget):
    """The interactive view of a `Profile` (see the module docstring).

    Displaying it shows one widget (`views.surface.ViewSurface`); inside a
    comparison its `root` is one page of the comparison's own widget.

    Parameters
    ----------
    profile
        The profile to show.
    max_glyphs
        Glyph budget of the timeline.
    all_frames
        Also draw the kernel machinery's Python frames (``--stack`` runs).
    export_menu
        The Export control's formats and writing (`jupyter_torchprof.export_menu`,
        passed in: views never import export); None shows no Export control.
    """

    def __init__(
        self,
        profile: Profile,
        max_glyphs: int = 100_000,
        all_frames: bool = False,
        export_menu: ExportMenu | None = None,
    ) -> None:
        self.profile = profile
        self._max_glyphs, self._all_frames = max_glyphs, all_frames
        self.header = W.HTML(header_html(profile), cls=["jp-TorchProf-headerbox"])
        # The slot the findings fill once `Profile.findings` exists.
        self.findings = W.HTML(self._findings_html(), cls=["jp-TorchProf-findingsbox"])
        self.findings.layout.display = None if self.findings.value else "none"

        self.ops = OpTable(profile)
        self._timeline: Timeline | None = None
        self._kernels: KernelTable | None = None
        #: Events a table selection outlines, kept until the timeline is built.
        self._pending_highlight: tuple[str, np.ndarray, np.ndarray, str] | None = None
        device = bool(profile.summary["device_traced"]) and not profile.kernels.empty

        # Only the Ops page is built now; the others when first shown (`ui.LazyPage`).
        pages: list[tuple[str, W.Node]] = [(f"Ops ({fmt_count(len(profile.ops))})", self._ops_page())]
        self._kernel_slot = W.LazyPage(self._kernels_page) if device else None
        if self._kernel_slot is not None:
            pages.append((f"Kernels ({fmt_count(len(profile.kernels))})", self._kernel_slot))
        self._timeline_slot = W.LazyPage(self._timeline_page)
        pages.append(("Timeline", self._timeline_slot))
        self._timeline_tab = len(pages) - 1
        self._memory_slot = W.LazyPage(self._memory_page) if has_memory(profile) else None
        if self._memory_slot is not None:
            pages.append(("Memory", self._memory_slot))
        # Where each step's device time went (families and idle causes), when a device was traced.
        self._steps_slot = W.LazyPage(self._steps_page) if device else None
        if self._steps_slot is not None:
            pages.append(("Steps", self._steps_slot))
        self.tabs = W.Tabs([p for _, p in pages], [t for t, _ in pages], cls=["jp-TorchProf-tabs"])
        # Export: format menu, button, what was written and a download link.
        from .export_control import ExportControl

        self.export = ExportControl(profile, export_menu) if export_menu is not None else None
        below = [self.export.box] if self.export is not None else []
        self.root = W.VBox([self.header, self.findings, self.tabs, *below], cls=["jp-TorchProf-view"])
        self._surface: Any = None

    # -- pages built when first shown ----------------------------------------------

    @property
    def timeline(self) -> Timeline:
        """The timeline (its page is built on first use: here, or when its tab is first shown)."""
        self.tabs.fill(self._timeline_tab)
        assert self._timeline is not None, "the timeline page could not be built"
        return self._timeline

    @property
    def kernels(self) -> KernelTable | None:
        """The kernel table (built with its page on first use); None without device kernels."""
        if self._kernel_slot is None:
            return None
        self.tabs.fill(self.tabs.children.index(self._kernel_slot))
        return self._kernels

    #: Attributes set by a page's builder, and the page that sets each.
    _PAGE_ATTRS = {
        **dict.fromkeys(
            ("k_page", "k_filter", "k_per_step", "k_status", "k_all", "k_selection", "k_goto", "k_module"),
            "kernels",
        ),
        **dict.fromkeys(("tl_hint", "tl_detail"), "timeline"),
    }

    def __getattr__(self, name: str) -> Any:
        # Only for attributes not set yet: those of a page not built yet build it.
        page = ProfileView._PAGE_ATTRS.get(name)
        if page is None or "tabs" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        getattr(self, page)
        if name not in self.__dict__:
            raise AttributeError(f"{name!r}: this profile has no {page} page")
        return self.__dict__[name]

    def built_pages(self) -> list[str]:
        """Titles of the pages built so far (the Ops page always is)."""
        tabs = self.tabs
        return [
            tabs.get_title(i)
            for i, page in enumerate(tabs.children)
            if not isinstance(page, W.LazyPage) or page.built
        ]

    def _shown(self) -> Any:
        return self.profile

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

    def _bokeh_model(self, model: Any, cls: str) -> W.Node:
        return W.Figure(model, cls=[cls])

    def _ops_page(self) -> W.Node:
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
        self.op_group.add_class("jp-TorchProf-groupby")
        self.op_group.layout.display = None if len(groups) > 1 else "none"
        self.op_mode = W.ToggleButtons(
            options=[("self", "self"), ("total", "total")],
            value="self",
            tooltips=["time in the op itself", "time in the op and everything it called"],
        )
        self.op_mode.add_class("jp-TorchProf-toggle")
        self.op_mode.add_class("jp-TorchProf-selftotal")
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

    def _kernels_page(self) -> W.Node:
        self._kernels = KernelTable(self.profile)
        page = TablePage(self.profile, self._kernels, "filter kernels: substring, or regex like gemm|conv")
        modules = list(self.profile.modules["module"]) if not self.profile.modules.empty else []
        # Module → its kernels: only where modules were recorded (--modules, --stack).
        self.k_module = W.Dropdown(
            options=[("all modules", "")] + [(m, m) for m in modules], value="", description="launched in"
        )
        self.k_module.layout.display = None if modules else "none"
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
        from .roofline import RooflineSection

        # The roofline: a toggle beside the filter, the plot below the table (or why there is none).
        self.k_roofline = RooflineSection(self.profile, self._bokeh_model)
        toggle = [self.k_roofline.toggle] if self.k_roofline.toggle is not None else []
        body = self._table_page(page, [self.k_module, *toggle], "kernels", "jp-TorchProf-kerneltable")
        body.children = [*body.children, self.k_roofline.slot]
        return body

    def _table_page(self, page: TablePage, extra: list[W.Node], which: str, cls: str) -> W.Node:
        """Wire a table page to the timeline (selection, "show in timeline") and lay it out."""
        page.goto.on_click(lambda _: self._goto(page.rows))
        page.note_goto.on_click(lambda _: self._goto(first_event(page.notes)))
        page.table.source.selected.on_change("indices", self._table_selection(which))
        return page.layout(extra, self._bokeh_model(page.table.model, cls))

    def _timeline_page(self) -> W.Node:
        from .timeline import Timeline  # bokeh.plotting with it: not on the first view's path

        tl = self._timeline = Timeline(self.profile, max_glyphs=self._max_glyphs, all_frames=self._all_frames)
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
        self.tl_detail = W.HTML(cls=["jp-TorchProf-detail"])
        tl.on_pick = lambda pairs: setattr(self.tl_detail, "value", _details_html(pairs))
        tl.attach()
        figure = self._bokeh_model(tl.model, "jp-TorchProf-timeline")
        if self._pending_highlight is not None:
            self._outline(*self._pending_highlight)
        return W.VBox([self.tl_hint, figure, self.tl_detail], cls=["jp-TorchProf-page"])

    def _steps_page(self) -> W.Node:
        from .breakdown_chart import build_step_chart

        hint = (
            "device time per step: busy time by kernel family (overlapping work shares its time), "
            "then idle time by HTA's causes · hover a part for its time"
        )
        figure = self._bokeh_model(build_step_chart(self.profile), "jp-TorchProf-stepchart")
        return W.VBox(
            [W.HTML(f'<div class="jp-TorchProf-hint">{esc(hint)}</div>'), figure], cls=["jp-TorchProf-page"]
        )

    def _memory_page(self) -> W.Node:
        figure = self._bokeh_model(build_memory(self.profile), "jp-TorchProf-memory")
        return W.VBox([figure], cls=["jp-TorchProf-page"])

    # -- behaviour ------------------------------------------------------------

    def _table_selection(self, which: str) -> Any:
        last: list[tuple[int, ...]] = [()]

        def handler(attr: str, old: Any, new: Any) -> None:
            key = tuple(new or ())
            if key == last[0]:
                return  # the same change delivered twice, or echoed back
            last[0] = key
            page = self.op_page if which == "ops" else self.k_page
            if not key:
                page.clear_selection()
                self._pending_highlight = None
                if self._timeline is not None:
                    self._timeline.highlight(np.array([], dtype=np.int64))
                return
            table = page.table
            rows = np.unique(np.concatenate([table.event_rows(i) for i in key]))
            names = table.shown.iloc[list(key)]["name"].astype(str).tolist()
            what = names[0] if len(names) == 1 else f"{len(names)} rows"
            page.rows = rows
            # The rows' notes: each one's explanation, and the event that showed it.
            page.notes = row_notes(self.profile, which, names)
            page.note_goto.layout.display = None if len(first_event(page.notes)) else "none"
            if self._timeline is None:
                # Not built: the outline waits for it (a row click does not
                # pay for a page nobody opened); the links are known now.
                linked = linked_events(self.profile.events, rows, self._activity_rows())
                self._pending_highlight = (which, rows, linked, what)
                page.selection.value = esc(
                    f"{what}: {fmt_count(len(rows))} event(s) and {fmt_count(len(linked))} linked "
                    "launch/kernel event(s); outlined in the timeline when its tab is opened"
                ) + row_notes_html(page.notes)
                page.goto.layout.display = None
                return
            self._outline(which, rows, self._timeline.linked(rows), what)

        return handler

    def _activity_rows(self) -> np.ndarray:
        """Device activity with a launching op (`Timeline`'s own, without building it)."""
        from ..trace import categories as K

        ev = self.profile.events
        return np.flatnonzero(K.kind_mask(ev, K.DEVICE_ACTIVITY) & (ev["op"].to_numpy() >= 0))

    def _outline(self, which: str, rows: np.ndarray, linked: np.ndarray, what: str) -> None:
        """Outline ``rows`` and ``linked`` in the (built) timeline; the selection line says how many."""
        assert self._timeline is not None
        self._pending_highlight = None
        page = self.op_page if which == "ops" else self.k_page
        drawn = self._timeline.highlight(np.concatenate([rows, linked]))
        text = (
            f"{what}: {fmt_count(len(rows))} event(s) and {fmt_count(len(linked))} linked "
            f"launch/kernel event(s); {fmt_count(drawn)} outlined in the timeline"
        )
        page.selection.value = esc(text) + row_notes_html(page.notes)
        page.goto.layout.display = None if drawn else "none"

    def _goto(self, rows: np.ndarray) -> None:
        window = self.timeline.extent(rows)
        self.tabs.selected_index = self._timeline_tab
        if window is not None:
            self.timeline.zoom_to(*window)


class TablePage:
    """What the op and kernel pages share around their table.

    A filter (substring or regex) and the totals | per step toggle before
    the page's own controls; under the table, the status line with its "show
    all" button, and the selection line with "show in timeline".
    """

    def __init__(self, profile: Profile, table: OpTable | KernelTable, placeholder: str) -> None:
        self.table = table
        self.filter = W.Text(placeholder=placeholder, cls=["jp-TorchProf-filter"])
        self.per_step = _per_step_toggle(profile)
        self.status = W.HTML(cls=["jp-TorchProf-status"])
        self.all = W.Button(description="show all", cls=["jp-TorchProf-button"])
        self.selection = W.HTML(cls=["jp-TorchProf-selection"])
        self.goto = W.Button(description="show in timeline →", cls=["jp-TorchProf-button"])
        self.goto.layout.display = "none"
        self.note_goto = W.Button(
            description="note's event in timeline →",
            tooltip="show the event that showed the selected row's note",
            cls=["jp-TorchProf-button", "jp-TorchProf-notegoto"],
        )
        self.note_goto.layout.display = "none"
        #: Events of the rows selected in the table (what "show in timeline" zooms to).
        self.rows = np.array([], dtype=np.int64)
        #: The selected rows' notes (`notes_view.row_notes`).
        self.notes: list[Any] = []
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
        self.note_goto.layout.display = "none"
        self.notes = []

    def layout(self, extra: list[W.Node], table_widget: W.Node) -> W.Box:
        """The page: filter, ``extra`` controls, per-step toggle; the table; status; selection."""
        controls = W.HBox([self.filter, *extra, self.per_step], cls=["jp-TorchProf-controls"])
        footer = W.HBox([self.status, self.all], cls=["jp-TorchProf-footer"])
        sel = W.HBox([self.selection, self.goto, self.note_goto], cls=["jp-TorchProf-selectionbox"])
        return W.VBox([controls, table_widget, footer, sel], cls=["jp-TorchProf-page"])


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


def static_bundle(profile: Any) -> dict[str, str]:
    """What a closed view shows: the result's text and static HTML (as in the notebook file)."""
    try:
        bundle = profile._repr_mimebundle_(include=["text/plain", "text/html"])
        return {k: bundle[k] for k in ("text/plain", "text/html") if k in bundle}
    except Exception as exc:  # noqa: BLE001 - a closed view must not raise
        text = f"the profile cannot be shown: {exc}"
        return {"text/plain": text, "text/html": f'<div class="jp-TorchProf-static">{esc(text)}</div>'}


def keep_live(view: Any) -> None:
    """Count ``view`` among the live views; the oldest beyond `MAX_LIVE_VIEWS` turn static."""
    _LIVE.append(view)
    while len(_LIVE) > MAX_LIVE_VIEWS:
        _LIVE.popleft().close()


def retire(surface: Any) -> None:
    """Close ``surface``: its page shows the static form, and so does the notebook file where it can.

    The output a view was displayed in (``display_id`` known: the magic
    shows its result with one) is updated to the static bundle, so a saved
    notebook holds the tables, not a reference to a widget that is gone.
    """
    display_id = getattr(surface, "display_id", None)
    static = surface.retire()
    if display_id and static:
        try:
            from IPython.display import update_display

            update_display(static, raw=True, display_id=display_id)
        except Exception:  # noqa: BLE001 - no shell (a script): the page was told already
            pass
