"""One bokeh document kept in step between the kernel and the page.

What bokeh's server does over its websocket, done over the view's own widget
messages: the page asks for the document once it shows the figure
(`DocumentSync.document_json`); every change made in Python (new timeline
detail after a zoom, an outline after a selection) goes to the page as a
``PATCH-DOC`` message; what a person does in the page (a pan, a selection, a
header click) comes back as a bokeh event and is applied to the Python
document, which runs the model's Python callbacks.

Echoes are cut on both sides: a change the page sent is applied with this
object as its setter, and the patch bokeh makes of it is not sent back; the
page likewise ignores its own document's events while it applies a patch.
"""

from __future__ import annotations

from typing import Any


class DocumentSync:
    """The bokeh document of one `views.ui.Figure`.

    Parameters
    ----------
    model
        The root model (a figure, a table, a layout); it is given a document
        of its own when it has none.
    node
        The figure node; its surface sends the messages.
    """

    def __init__(self, model: Any, node: Any) -> None:
        from .style import ready_on_document

        self.node = node
        self.doc = ready_on_document(model).document
        self.doc_id = node.id
        #: True once a page has the document: before that, changes need no patch.
        self.on_page = False
        self._closed = False
        self.doc.on_change_dispatch_to(self)

    # -- kernel → page --------------------------------------------------------

    def document_json(self) -> tuple[bytes, list[str], list[bytes]]:
        """The whole document as JSON (UTF-8), with (here: no) binary buffers and their ids.

        Inline, not as binary buffers: bokeh's deferred encoding sends every
        array in full width, and the timeline's document came to 827 kB that
        way against 305 kB inline (the A100 trace; `bench_view_wire`).
        """
        from bokeh.core.json_encoder import serialize_json

        self.on_page = True
        return serialize_json(self.doc.to_json(deferred=False)).encode(), [], []

    def _document_patched(self, event: Any) -> None:
        # bokeh calls this for every change of the document (see the module docstring).
        if self._closed or not self.on_page or event.setter is self:
            return
        surface = self.node.surface
        if surface is None:
            return
        from bokeh.protocol import Protocol

        msg = Protocol().create("PATCH-DOC", [event])
        ids = [b.id for b in msg.buffers]
        payloads = [b.to_bytes() for b in msg.buffers]
        surface.send_patch(self.doc_id, msg.content_json, ids, payloads)

    # -- page → kernel -------------------------------------------------------

    def apply(self, content: dict[str, Any]) -> None:
        """Apply one event the page's document reported (a change or a UI event)."""
        if self._closed:
            return
        from bokeh.core.serialization import Deserializer, Serialized
        from bokeh.model import Model

        kind = content.get("kind")
        if kind == "ModelChanged" and content.get("attr") == "data":
            # BokehJS reports back every data change made from Python; nothing
            # in the page edits our sources, so what it sends is an echo.
            return
        event = Deserializer(list(self.doc.models), setter=self).deserialize(
            Serialized(content=content, buffers=[])
        )
        kind = event["kind"]
        if kind == "ModelChanged":
            model, attr = event["model"], event["attr"]
            if not isinstance(model, Model):
                return
            descriptor = model.lookup(attr)
            new = descriptor.property.prepare_value(model, descriptor.name, event["new"])
            old = descriptor._get(model)
            descriptor._set(model, old, new, setter=self)
            for callback in model._callbacks.get(attr, []):
                callback(attr, old, new)
        elif kind == "MessageSent" and event.get("msg_type") == "bokeh_event":
            self.doc.callbacks.trigger_event(event["msg_data"])

    def close(self) -> None:
        """Stop sending patches (the view is gone)."""
        if not self._closed:
            self._closed = True
            try:
                self.doc.remove_on_change(self)
            except Exception:  # noqa: BLE001 - closing twice, or a document already cleared
                pass
