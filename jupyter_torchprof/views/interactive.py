"""Where the interactive view is shown, and its part of a profile's mimebundle.

Kept apart from `views.widget` so that deciding costs no import of
ipywidgets or bokeh: a terminal IPython never loads them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..results.comparison import Comparison
    from ..results.profile import Profile

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def widgets_available() -> bool:
    """True when the current kernel can show widgets (ipykernel with comms).

    A terminal IPython, a plain Python process or ``TORCHPROF_WIDGETS=0``
    get the text and static HTML instead; so do frontends that cannot have
    our JupyterLab extension put BokehJS on the page (VS Code, Colab), where
    the widget would only show an error. ``TORCHPROF_WIDGETS=1`` forces the
    widget wherever a kernel runs (for a page that loads BokehJS itself).
    """
    setting = os.environ.get("TORCHPROF_WIDGETS", "").strip().lower()
    if setting in ("0", "false", "no", "off"):
        return False
    if "ipykernel" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return False
    if setting not in ("1", "true", "yes", "on") and _frontend_without_bokehjs(shell):
        return False
    return all(importlib.util.find_spec(m) is not None for m in ("ipywidgets", "jupyter_bokeh"))


def _frontend_without_bokehjs(shell: Any) -> bool:
    # VS Code's kernels carry its notebook's path; Colab imports its module.
    return "__vsc_ipynb_file__" in shell.user_ns or "google.colab" in sys.modules


def interactive_bundle(profile: Profile, include: Any = None, exclude: Any = None) -> dict[str, Any]:
    """The widget part of a profile's mimebundle ({} where widgets cannot show).

    A failure to build the view never hides the profile: it is reported as a
    warning and the static output stays.
    """

    def build() -> Any:
        from .widget import ProfileView

        return ProfileView(profile)

    return _widget_part(build, "the interactive view", "the static table", include, exclude)


def comparison_widget_part(
    comparison: Comparison, include: Any = None, exclude: Any = None
) -> dict[str, Any]:
    """The eager | compiled | diff widget part of a comparison's mimebundle ({} where it cannot show)."""

    def build() -> Any:
        from .compare import ComparisonView

        return ComparisonView(comparison)

    return _widget_part(build, "the comparison view", "static tables", include, exclude)


def _widget_part(
    build: Callable[[], Any], what: str, instead: str, include: Any, exclude: Any
) -> dict[str, Any]:
    """``{WIDGET_MIME: ...}`` of the widget ``build()`` makes, or {} where it cannot show or fails to build."""
    if (include and WIDGET_MIME not in include) or (exclude and WIDGET_MIME in exclude):
        return {}
    if not widgets_available():
        return {}
    try:
        view = build()
    except Exception as exc:  # noqa: BLE001 - the static view must survive any bug here
        warnings.warn(
            f"torchprof: {what} could not be built ({type(exc).__name__}: {exc}); showing {instead}",
            stacklevel=4,
        )
        return {}
    part = view._repr_mimebundle_() or {}
    return {WIDGET_MIME: part[WIDGET_MIME]} if WIDGET_MIME in part else {}
