"""Where the interactive view is shown, and its part of a profile's mimebundle.

Kept apart from `views.widget` so that deciding costs no import of
ipywidgets or bokeh: a terminal IPython never loads them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
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
    if (include and WIDGET_MIME not in include) or (exclude and WIDGET_MIME in exclude):
        return {}
    if not widgets_available():
        return {}
    try:
        from .widget import ProfileView

        view = ProfileView(profile)
    except Exception as exc:  # noqa: BLE001 - the static view must survive any bug here
        warnings.warn(
            f"torchprof: the interactive view could not be built ({type(exc).__name__}: {exc}); "
            "showing the static table",
            stacklevel=2,
        )
        return {}
    bundle = view._repr_mimebundle_() or {}
    return {WIDGET_MIME: bundle[WIDGET_MIME]} if WIDGET_MIME in bundle else {}


def comparison_widget_part(
    comparison: Comparison, include: Any = None, exclude: Any = None
) -> dict[str, Any]:
    """The eager | compiled | diff widget part of a comparison's mimebundle ({} where it cannot show)."""
    if (include and WIDGET_MIME not in include) or (exclude and WIDGET_MIME in exclude):
        return {}
    if not widgets_available():
        return {}
    try:
        from .compare import ComparisonView

        view = ComparisonView(comparison)
    except Exception as exc:  # noqa: BLE001 - the static view must survive any bug here
        warnings.warn(
            f"torchprof: the comparison view could not be built ({exc}); showing static tables", stacklevel=2
        )
        return {}
    part = view._repr_mimebundle_() or {}
    return {WIDGET_MIME: part[WIDGET_MIME]} if WIDGET_MIME in part else {}
