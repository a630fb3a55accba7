"""Jupyter server extension: BokehJS for offline views, and the runs REST API.

Loaded by ``jupyter server`` through ``jupyter-config/`` (see
``_jupyter_server_extension_points`` in the package). Importing it must stay
light: no torch, no pandas.
"""

from __future__ import annotations

from typing import Any

from .handlers import setup_handlers


def _load_jupyter_server_extension(server_app: Any) -> None:
    """Register the handlers under ``<base_url>/jupyter-torchprof/``."""
    setup_handlers(server_app.web_app, server_app)
    server_app.log.info("jupyter_torchprof server extension loaded")


# Older jupyter_server / notebook versions look for this name.
load_jupyter_server_extension = _load_jupyter_server_extension
