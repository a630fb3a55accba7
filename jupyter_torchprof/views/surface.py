"""The one widget every inline view is: front-end code in the package, sent over its own comm.

`ViewSurface` is an anywidget: its front end (``assets/view.js``, an ES
module, with ``assets/view.css``) travels inside the widget's state, so a host
needs nothing but a widget manager to draw it: no labextension of ours or of
jupyter_bokeh's, no CDN. JupyterLab, Notebook 7, VS Code, Colab and marimo
all load anywidgets.

What a view shows is a tree of `views.ui` nodes; the page draws it and talks
to this object with small messages (``t`` says which):

=============  ===========  =================================================
page → kernel  ``hello``    send the tree (once per drawn copy of the view)
               ``bokehjs``  the page has no BokehJS: send it (once per page)
               ``doc``      send the bokeh document of figure ``id``
               ``set``      a person set node ``id``'s value (text, choice, tab)
               ``click``    a person clicked button ``id``
               ``ev``       bokeh events of figure ``id`` (pans, selections)
               ``download`` send the file offered under ``token``
kernel → page  ``tree``     the whole tree
               ``node``     one node again, with its children
               ``bokehjs``  BokehJS itself, one buffer per bundle
               ``doc``      a figure's document (one UTF-8 JSON buffer)
               ``patch``    a bokeh ``PATCH-DOC`` for figure ``id``
               ``ack``      the events sent last are applied: send the next
               ``retire``   the view was closed: show ``html`` (static) instead
               ``file``     a piece of a file asked for (``seq``, ``last``)
=============  ===========  =================================================

BokehJS comes from the installed bokeh package (so its version always
matches the Python side) and is never a synced trait: it is not written into
the notebook file. The page keeps it on ``window`` for every later view.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from . import ui

ASSETS = Path(__file__).parent / "assets"

#: Files the page may ask for (see `offer_download`): token → path.
_OFFERED: dict[str, Path] = {}
#: A file is sent in pieces of this size: one message stays well below any frontend's limit.
CHUNK = 4 << 20

#: BokehJS bundles the views need, in load order (core first).
BOKEH_BUNDLES = ("bokeh.min.js", "bokeh-gl.min.js", "bokeh-widgets.min.js", "bokeh-tables.min.js")


@functools.lru_cache(maxsize=1)
def bokehjs() -> tuple[str, tuple[bytes, ...]]:
    """The installed bokeh's version and its BokehJS bundles (read once per process)."""
    import bokeh
    from bokeh.util.paths import bokehjs_path

    folder = bokehjs_path() / "js"
    return bokeh.__version__, tuple((folder / name).read_bytes() for name in BOKEH_BUNDLES)


def offer_download(path: Path) -> str:
    """Let the page download ``path`` through the view's messages; returns the token the link carries.

    Only files offered here can be asked for: the page names a token, never a path.
    """
    token = secrets.token_hex(8)
    _OFFERED[token] = Path(path)
    return token


class ViewSurface(anywidget.AnyWidget):
    """The widget that draws a `views.ui` tree (see the module docstring).

    Parameters
    ----------
    root
        The tree to draw.
    static
        Makes what the page shows once the view is closed: its static form
        (``{"text/plain": ..., "text/html": ...}``), made only then.
    """

    _esm = ASSETS / "view.js"
    _css = ASSETS / "view.css"
    #: The installed bokeh's version: the page checks a BokehJS it already has against it.
    bokeh_version = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self, root: ui.Node, static: Callable[[], dict[str, str]] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(bokeh_version=bokehjs()[0], **kwargs)
        self.root = root
        self.static = static
        #: The output this view was displayed in, where the displayer knew it (see `views.widget.retire`).
        self.display_id: str | None = None
        self._nodes: dict[str, ui.Node] = {}
        self._dirty: dict[str, ui.Node] = {}
        self._batching = 0
        self._retired = False
        self._index(root)
        self.on_msg(self._on_page_message)

    # -- the tree ------------------------------------------------------------

    def _index(self, root: ui.Node) -> None:
        for node in ui.walk(root):
            node.surface = self
            self._nodes[node.id] = node

    def node_changed(self, node: ui.Node) -> None:
        """Send ``node`` (and its children) to the page again, at the end of the current batch."""
        self._index(node)  # new children join the tree
        self._dirty[node.id] = node
        if not self._batching:
            self._flush()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Changes made inside are sent together at the end (one message per changed node)."""
        self._batching += 1
        try:
            yield
        finally:
            self._batching -= 1
            if not self._batching:
                self._flush()

    def _flush(self) -> None:
        dirty, self._dirty = self._dirty, {}
        if self._retired or not dirty:
            return
        # A node whose ancestor is sent as well travels inside it.
        inside: set[str] = set()
        for node in dirty.values():
            inside.update(n.id for n in ui.walk(node)[1:])
        for node in dirty.values():
            if node.id not in inside:
                self._post({"t": "node", "node": node.to_json()})

    # -- messages ---------------------------------------------------------------

    def _post(self, content: dict[str, Any], buffers: list[bytes] | None = None) -> None:
        # ipywidgets drops a message when the widget has no comm (closed, or never shown).
        self.send(content, buffers)

    def send_patch(self, doc_id: str, content_json: str, ids: list[str], payloads: list[bytes]) -> None:
        """Send a bokeh ``PATCH-DOC`` of figure ``doc_id`` (see `views.bokeh_sync`)."""
        if not self._retired:
            self._post({"t": "patch", "id": doc_id, "content": content_json, "buffers": ids}, payloads)

    def _on_page_message(self, _widget: Any, content: Any, buffers: list[Any]) -> None:
        if not isinstance(content, dict) or self._retired:
            return
        kind = content.get("t")
        if kind == "hello":
            self._post({"t": "tree", "tree": self.root.to_json()})
        elif kind == "bokehjs":
            version, bundles = bokehjs()
            self._post({"t": "bokehjs", "version": version, "names": list(BOKEH_BUNDLES)}, list(bundles))
        elif kind == "doc":
            self._send_document(str(content.get("id", "")))
        elif kind == "download":
            self._send_file(str(content.get("token", "")))
        else:
            with self.batch():
                self._apply(kind, content)

    def _send_document(self, node_id: str) -> None:
        node = self._nodes.get(node_id)
        if isinstance(node, ui.Figure):
            text, ids, payloads = node.sync.document_json()
            self._post({"t": "doc", "id": node_id, "buffers": ids}, [text, *payloads])

    def _send_file(self, token: str) -> None:
        path = _OFFERED.get(token)
        head = {"t": "file", "token": token, "name": path.name if path else ""}
        try:
            if path is None:
                raise FileNotFoundError("this link is from an earlier kernel: export again")
            with path.open("rb") as fh:
                seq = 0
                while True:
                    piece = fh.read(CHUNK)
                    last = len(piece) < CHUNK
                    self._post({**head, "seq": seq, "last": last}, [piece])
                    seq += 1
                    if last:
                        return
        except OSError as exc:
            self._post({**head, "error": f"{type(exc).__name__}: {exc}"})

    def _apply(self, kind: Any, content: dict[str, Any]) -> None:
        node = self._nodes.get(str(content.get("id", "")))
        try:
            if node is None:
                return
            if kind == "set":
                node.set_from_page(content.get("value"))
            elif kind == "click":
                node.click_from_page()
            elif kind == "ev" and isinstance(node, ui.Figure):
                for event in content.get("events", []):
                    node.sync.apply(event)
        finally:
            if kind == "ev":
                self._post({"t": "ack", "id": content.get("id")})

    # -- the end ---------------------------------------------------------------

    def retire(self) -> dict[str, str]:
        """Show the static form on the page, then close; returns that static form ({} if none)."""
        if self._retired:
            return {}
        static = self.static() if self.static is not None else {}
        self._post({"t": "retire", "html": static.get("text/html", "")})
        self._retired = True
        for node in ui.walk(self.root):
            node.close()
        # A DOMWidget's Layout is a widget with a comm of its own, which
        # closing its owner leaves open.
        layout = getattr(self, "layout", None)
        self.close()
        if layout is not None:
            layout.close()
        return static
