"""Where the interactive view is shown, and its part of a profile's mimebundle.

Kept apart from `views.widget` so that deciding costs no import of
ipywidgets or bokeh: a terminal IPython never loads them.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..results.comparison import Comparison
    from ..results.profile import Profile
    from ..results.ranks import RankSet
    from .export_control import ExportMenu

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def widgets_available() -> bool:
    """True when the current kernel can show widgets (ipykernel with comms).

    Every host with a widget manager draws the view (JupyterLab, Notebook 7,
    VS Code, Colab): it is one anywidget whose front end travels with it.
    A terminal IPython, a plain Python process or ``TORCHPROF_WIDGETS=0``
    get the text and static HTML instead. (marimo has no ipykernel: it asks
    a result for its widget through ``_display_``.)
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
    return all(importlib.util.find_spec(m) is not None for m in ("ipywidgets", "anywidget"))


#: The output the result being displayed goes to (set by `shown_in`), so a view
#: closed later can turn that output static (`views.widget.retire`).
_DISPLAY_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("torchprof_display_id", default=None)


@contextlib.contextmanager
def shown_in(display_id: str) -> Iterator[None]:
    """Views built while displaying inside this block belong to output ``display_id``."""
    token = _DISPLAY_ID.set(display_id)
    try:
        yield
    finally:
        _DISPLAY_ID.reset(token)


def interactive_bundle(
    profile: Profile, include: Any = None, exclude: Any = None, export_menu: ExportMenu | None = None
) -> dict[str, Any]:
    """The widget part of a profile's mimebundle ({} where widgets cannot show).

    A failure to build the view never hides the profile: it is reported as a
    warning and the static output stays.
    """

    def build() -> Any:
        from .widget import ProfileView

        return ProfileView(profile, export_menu=export_menu)

    return _widget_part(build, "the interactive view", "the static table", include, exclude)


def comparison_widget_part(
    comparison: Comparison, include: Any = None, exclude: Any = None, export_menu: ExportMenu | None = None
) -> dict[str, Any]:
    """The eager | compiled | diff widget part of a comparison's mimebundle ({} where it cannot show)."""

    def build() -> Any:
        from .compare import ComparisonView

        return ComparisonView(comparison, export_menu)

    return _widget_part(build, "the comparison view", "static tables", include, exclude)


def rankset_widget_part(
    ranks: RankSet, include: Any = None, exclude: Any = None, export_menu: ExportMenu | None = None
) -> dict[str, Any]:
    """The rank view's part of a rank set's mimebundle ({} where it cannot show); see `views.rank_view`."""

    def build() -> Any:
        from .rank_view import RankView

        return RankView(ranks, export_menu)

    return _widget_part(build, "the rank view", "the static table", include, exclude)


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
    surface = view.widget()
    surface.display_id = _DISPLAY_ID.get()
    part = surface._repr_mimebundle_() or {}
    if isinstance(part, tuple):  # (data, metadata), as anywidget returns it
        part = part[0] or {}
    return {WIDGET_MIME: part[WIDGET_MIME]} if WIDGET_MIME in part else {}
