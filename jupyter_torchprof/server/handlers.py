"""Tornado handlers of the server extension."""

from __future__ import annotations

from typing import Any

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web

NAMESPACE = "jupyter-torchprof"


class BokehStaticHandler(JupyterHandler, web.StaticFileHandler):
    """BokehJS bundles of the installed bokeh package (no CDN, versions match)."""

    @web.authenticated
    def get(self, path: str, include_body: bool = True) -> Any:
        """Serve one file of bokeh's ``static/js`` folder."""
        return web.StaticFileHandler.get(self, path, include_body)

    @web.authenticated
    def head(self, path: str) -> Any:
        """Headers of one bundle (same access rule as GET)."""
        return web.StaticFileHandler.head(self, path)

    def set_extra_headers(self, path: str) -> None:
        """Let browsers cache the bundles: they change only with bokeh."""
        self.set_header("Cache-Control", "max-age=86400")


def bokeh_js_dir() -> str:
    """Folder holding ``bokeh.min.js`` and friends."""
    from bokeh.util.paths import bokehjs_path

    return str(bokehjs_path() / "js")


def setup_handlers(web_app: Any, server_app: Any = None) -> None:
    """Add the extension's routes to the Tornado application."""
    from .runs import runs_handlers, setup_runs

    base_url = web_app.settings["base_url"]
    handlers: list[Any] = [
        (
            url_path_join(base_url, NAMESPACE, "static", "bokeh", "(.*)"),
            BokehStaticHandler,
            {"path": bokeh_js_dir()},
        ),
    ]
    setup_runs(web_app, getattr(server_app, "root_dir", None))
    handlers += runs_handlers(url_path_join(base_url, NAMESPACE))
    web_app.add_handlers(".*$", handlers)
