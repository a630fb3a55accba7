"""The controls of the inline view, as plain Python objects.

The view is one widget (`views.surface.ViewSurface`) whose front end draws a
tree of these nodes: boxes, tabs, text, toggle buttons, drop-downs, buttons,
HTML and bokeh figures. They keep the small part of the ipywidgets API the
view code uses (``value``, ``observe``, ``on_click``, ``add_class``,
``layout.display``, ``children``), but none of them is a widget of its own:
no comm, no model in the page's widget manager, nothing a host has to know
how to load. A host that shows one anywidget (VS Code, Colab, marimo) shows
the whole view.

A node reports each change to the surface that shows it, which sends the
node again (with its children) to the page; the page sends back what a
person did (a value set, a click), which lands in `Node.set_from_page` and
runs the observers as an ipywidgets trait change would.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

_ids = itertools.count(1)


class Change(dict):
    """What an observer receives: ``{"name", "old", "new", "owner"}`` (as ipywidgets' change)."""


class _Layout:
    """``node.layout.display = "none"`` hides a node, ``None`` shows it (ipywidgets' spelling)."""

    def __init__(self, node: Node) -> None:
        object.__setattr__(self, "_node", node)
        object.__setattr__(self, "display", None)
        object.__setattr__(self, "width", None)

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, name, object()) == value:
            return
        object.__setattr__(self, name, value)
        self._node.changed()


class Node:
    """One thing on the page; see the module docstring."""

    kind = "node"

    def __init__(self, cls: Sequence[str] = ()) -> None:
        self.id = f"n{next(_ids)}"
        self.classes: list[str] = list(cls)
        self.layout = _Layout(self)
        self._observers: dict[str, list[Callable[[Change], None]]] = {}
        #: The surface that shows this node (set when it is attached), told of each change.
        self.surface: Any = None

    # -- what the view code calls ------------------------------------------

    def add_class(self, name: str) -> Node:
        """Add a CSS class (as ipywidgets' ``add_class``)."""
        if name not in self.classes:
            self.classes.append(name)
            self.changed()
        return self

    def observe(self, handler: Callable[[Change], None], names: str = "value") -> None:
        """Call ``handler(change)`` whenever the attribute ``names`` changes."""
        self._observers.setdefault(names, []).append(handler)

    def close(self) -> None:
        """Forget the observers (the node holds no other resource)."""
        self._observers.clear()

    # -- the page's side ----------------------------------------------------

    def children_nodes(self) -> list[Node]:
        """The nodes drawn inside this one."""
        return []

    def to_json(self) -> dict[str, Any]:
        """What the page needs to draw this node and its children."""
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "cls": self.classes}
        if self.layout.display == "none":
            out["hidden"] = True
        if self.layout.width:
            out["width"] = self.layout.width
        out.update(self.props())
        kids = self.children_nodes()
        if kids:
            out["children"] = [k.to_json() for k in kids]
        return out

    def props(self) -> dict[str, Any]:
        """The node's own properties, as JSON."""
        return {}

    def set_from_page(self, value: Any) -> None:
        """A person changed this node's value on the page."""

    def click_from_page(self) -> None:
        """A person clicked this node on the page."""

    def changed(self) -> None:
        """Tell the surface that this node must be drawn again."""
        if self.surface is not None:
            self.surface.node_changed(self)

    def _notify(self, name: str, old: Any, new: Any) -> None:
        for handler in list(self._observers.get(name, ())):
            handler(Change(name=name, old=old, new=new, owner=self))

    def _set(self, name: str, value: Any, from_page: bool = False) -> None:
        """Set attribute ``_name``; redraw unless the page itself set it; run the observers."""
        old = getattr(self, "_" + name)
        if old == value and type(old) is type(value):
            return
        object.__setattr__(self, "_" + name, value)
        if not from_page:
            self.changed()
        self._notify(name, old, value)


class Box(Node):
    """Children in a column (``row=False``) or a row."""

    kind = "box"

    def __init__(self, children: Sequence[Node] = (), row: bool = False, cls: Sequence[str] = ()) -> None:
        super().__init__(cls)
        self._children: list[Node] = list(children)
        self.row = row

    @property
    def children(self) -> list[Node]:
        """The nodes inside (assign a new list to change them)."""
        return list(self._children)

    @children.setter
    def children(self, value: Sequence[Node]) -> None:
        self._children = list(value)
        self.changed()

    def children_nodes(self) -> list[Node]:  # noqa: D102
        return self._children

    def props(self) -> dict[str, Any]:  # noqa: D102
        return {"row": self.row}


def VBox(children: Sequence[Node] = (), cls: Sequence[str] = ()) -> Box:  # noqa: N802 - ipywidgets' name
    """A column of nodes."""
    return Box(children, row=False, cls=cls)


def HBox(children: Sequence[Node] = (), cls: Sequence[str] = ()) -> Box:  # noqa: N802 - ipywidgets' name
    """A row of nodes (wrapping when the window is narrow)."""
    return Box(children, row=True, cls=cls)


class HTML(Node):
    """Trusted HTML made by this package (everything from a trace is escaped before)."""

    kind = "html"

    def __init__(self, value: str = "", cls: Sequence[str] = ()) -> None:
        super().__init__(cls)
        self._value = value

    @property
    def value(self) -> str:
        """The HTML."""
        return self._value

    @value.setter
    def value(self, v: str) -> None:
        self._set("value", v)

    def props(self) -> dict[str, Any]:  # noqa: D102
        return {"html": self._value}


class Text(Node):
    """A one-line text box; ``value`` follows each keystroke."""

    kind = "text"

    def __init__(self, value: str = "", placeholder: str = "", cls: Sequence[str] = ()) -> None:
        super().__init__(cls)
        self._value = value
        self.placeholder = placeholder

    @property
    def value(self) -> str:
        """The text."""
        return self._value

    @value.setter
    def value(self, v: str) -> None:
        self._set("value", v)

    def props(self) -> dict[str, Any]:  # noqa: D102
        return {"value": self._value, "placeholder": self.placeholder}

    def set_from_page(self, value: Any) -> None:  # noqa: D102
        self._set("value", str(value), from_page=True)


class _Choice(Node):
    """A choice among ``options``, ``[(label, value), ...]``; the page sends the index."""

    def __init__(
        self,
        options: Sequence[tuple[str, Any]],
        value: Any = None,
        tooltips: Sequence[str] = (),
        description: str = "",
        cls: Sequence[str] = (),
    ) -> None:
        super().__init__(cls)
        self._options = [(str(label), v) for label, v in options]
        self._value = value if value is not None or not self._options else self._options[0][1]
        self.tooltips = list(tooltips)
        self.description = description

    @property
    def options(self) -> list[tuple[str, Any]]:
        """``[(label, value), ...]``."""
        return list(self._options)

    @options.setter
    def options(self, options: Sequence[tuple[str, Any]]) -> None:
        self._options = [(str(label), v) for label, v in options]
        self.changed()

    @property
    def value(self) -> Any:
        """The chosen option's value."""
        return self._value

    @value.setter
    def value(self, v: Any) -> None:
        self._set("value", v)

    def _index(self) -> int:
        for i, (_, v) in enumerate(self._options):
            if v == self._value and type(v) is type(self._value):
                return i
        return -1

    def props(self) -> dict[str, Any]:  # noqa: D102
        return {
            "labels": [label for label, _ in self._options],
            "index": self._index(),
            "tips": self.tooltips,
            "description": self.description,
        }

    def set_from_page(self, value: Any) -> None:  # noqa: D102
        if isinstance(value, int) and 0 <= value < len(self._options):
            self._set("value", self._options[value][1], from_page=True)


class ToggleButtons(_Choice):
    """A row of buttons, one pressed."""

    kind = "toggle"


class Dropdown(_Choice):
    """A drop-down menu."""

    kind = "select"


class Button(Node):
    """A push button."""

    kind = "button"

    def __init__(self, description: str = "", tooltip: str = "", cls: Sequence[str] = ()) -> None:
        super().__init__(cls)
        self._description = description
        self.tooltip = tooltip
        self._clicks: list[Callable[[Button], None]] = []

    @property
    def description(self) -> str:
        """The button's label."""
        return self._description

    @description.setter
    def description(self, v: str) -> None:
        self._set("description", v)

    def on_click(self, handler: Callable[[Button], None]) -> None:
        """Call ``handler(button)`` on each click."""
        self._clicks.append(handler)

    def click(self) -> None:
        """Click the button from Python (as ipywidgets' ``Button.click``)."""
        for handler in list(self._clicks):
            handler(self)

    def click_from_page(self) -> None:  # noqa: D102
        self.click()

    def props(self) -> dict[str, Any]:  # noqa: D102
        return {"label": self._description, "tip": self.tooltip}

    def close(self) -> None:  # noqa: D102
        self._clicks.clear()
        super().close()


class LazyPage(Box):
    """A tab page made the first time it is shown (`Tabs` calls `fill`).

    Until then it is an empty column: a page nobody opens costs neither the
    time to build it (the timeline of a small run took a second) nor the
    bytes to send it. ``build()`` returns the page's node; once built, the
    page is this box's one child, sent to the page with the tabs around it.
    """

    def __init__(self, build: Callable[[], Node], cls: Sequence[str] = ()) -> None:
        super().__init__((), row=False, cls=cls)
        self._build: Callable[[], Node] | None = build
        self.built = False

    def fill(self) -> None:
        """Build the page now, if it is not built yet (a build that raises is shown on the page)."""
        if self.built or self._build is None:
            return
        build, self._build = self._build, None
        self.built = True
        try:
            page = build()
        except Exception as exc:  # noqa: BLE001 - one page failing must not take the view down
            import html

            text = f"this page could not be built: {type(exc).__name__}: {exc}"
            page = HTML(f'<div class="jp-TorchProf-error">{html.escape(text)}</div>')
        self.children = [page]

    def close(self) -> None:  # noqa: D102 - the builder holds the view (and its profile)
        self._build = None
        super().close()


class Tabs(Node):
    """Pages under a row of tabs; ``selected_index`` is the page shown.

    A `LazyPage` among the pages is built when it is first selected, from
    Python or from the page, before the selection is sent or its observers run.
    """

    kind = "tabs"

    def __init__(self, children: Sequence[Node], titles: Sequence[str], cls: Sequence[str] = ()) -> None:
        super().__init__(cls)
        self._children = list(children)
        self.titles = tuple(titles)
        self._selected_index = 0

    @property
    def children(self) -> list[Node]:
        """The pages."""
        return list(self._children)

    def get_title(self, index: int) -> str:
        """The title of page ``index`` (as ipywidgets' ``Tab.get_title``)."""
        return self.titles[index]

    @property
    def selected_index(self) -> int:
        """The page shown."""
        return self._selected_index

    @selected_index.setter
    def selected_index(self, v: int) -> None:
        self._select(int(v), from_page=False)

    def fill(self, index: int) -> None:
        """Build page ``index`` if it is a `LazyPage` not built yet; the tabs are sent again with it.

        The whole tab set is sent, not the page alone: the page keeps which
        page is hidden on the tab set's element, which a page sent alone
        would lose.
        """
        page = self._children[index] if 0 <= index < len(self._children) else None
        if isinstance(page, LazyPage) and not page.built:
            with _batch(self.surface):
                page.fill()
                self.changed()

    def _select(self, index: int, from_page: bool) -> None:
        with _batch(self.surface):
            self.fill(index)
            self._set("selected_index", index, from_page=from_page)

    def children_nodes(self) -> list[Node]:  # noqa: D102
        return self._children

    def props(self) -> dict[str, Any]:  # noqa: D102
        return {"titles": list(self.titles), "index": self._selected_index}

    def set_from_page(self, value: Any) -> None:  # noqa: D102
        if isinstance(value, int) and 0 <= value < len(self._children):
            self._select(value, from_page=True)


def _batch(surface: Any) -> Any:
    """The surface's batch (changes sent together), or nothing when no surface shows the node."""
    import contextlib

    return surface.batch() if surface is not None else contextlib.nullcontext()


class Details(Node):
    """A collapsed section with a summary line (HTML ``<details>``)."""

    kind = "details"

    def __init__(self, child: Node, title: str, cls: Sequence[str] = ()) -> None:
        super().__init__(cls)
        self.child = child
        self.title = title

    def children_nodes(self) -> list[Node]:  # noqa: D102
        return [self.child]

    def props(self) -> dict[str, Any]:  # noqa: D102
        return {"title": self.title}


class Figure(Node):
    """A bokeh model (figure, table, layout), drawn by BokehJS in the page.

    Its document is sent when the page first shows it; changes on either
    side travel as bokeh document patches (`views.bokeh_sync`).
    """

    kind = "bokeh"

    def __init__(self, model: Any, cls: Sequence[str] = ()) -> None:
        super().__init__(cls)
        from .bokeh_sync import DocumentSync

        self.model = model
        self.sync = DocumentSync(model, self)

    def props(self) -> dict[str, Any]:  # noqa: D102
        return {"doc": self.sync.doc_id}

    def close(self) -> None:  # noqa: D102
        self.sync.close()
        super().close()


def walk(root: Node) -> list[Node]:
    """``root`` and every node inside it, parents first."""
    found, stack = [], [root]
    seen: set[str] = set()
    while stack:
        node = stack.pop()
        if node.id in seen:
            continue
        seen.add(node.id)
        found.append(node)
        stack.extend(reversed(node.children_nodes()))
    return found
