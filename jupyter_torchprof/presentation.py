"""Where a result value meets the code that shows it and writes it.

A `Profile` shows itself (``_repr_mimebundle_``, ``table()``, ``view()``) and
writes itself (``export()``), as Python's display protocol wants: Jupyter,
marimo and a terminal ask the value. But the code that renders (``views/``)
and writes (``export``) sits above ``results/`` and imports it. So each of
those few methods imports this module when it is called, and this module
binds the two: the views get the export menu passed in (views never import
export). These are the only upward imports from ``results/``, each one a
named method that only delegates here; `tests/test_import_layers.py` lists
them and fails on any other.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import export, export_menu
from .views import display

if TYPE_CHECKING:  # pragma: no cover
    from .results.comparison import Comparison
    from .results.profile import Profile
    from .results.profile_diff import ProfileDiff
    from .results.ranks import RankSet


# --------------------------------------------------------------------------- #
# Profile


def profile_text(profile: Profile, *args: Any) -> str:
    """`Profile.table`: the op and kernel tables as text (`views.display.profile_text`)."""
    return display.profile_text(profile, *args)


def profile_static_html(profile: Profile) -> str:
    """The static HTML of a profile (summary, findings, tables)."""
    return display.profile_static_html(profile)


def profile_bundle(profile: Profile, include: Any = None, exclude: Any = None) -> dict[str, Any]:
    """`Profile._repr_mimebundle_`: text, static HTML and the interactive view with its Export menu."""
    return display.profile_bundle(profile, include, exclude, export_menu)


def hosted_profile(profile: Profile) -> Any:
    """`Profile._display_` (marimo): the one widget, or the static view."""
    return display.hosted_profile(profile, export_menu)


def profile_widget(profile: Profile, max_glyphs: int, all_frames: bool) -> Any:
    """`Profile.view`: the interactive view with its Export menu."""
    return display.profile_widget(profile, max_glyphs, all_frames, export_menu)


def export_profile(profile: Profile, path: str | Path, force: bool, table: str) -> Any:
    """`Profile.export`: the file(s) the path's suffix asks for (`export.export`)."""
    return export.export(profile, path, force=force, table=table)


# --------------------------------------------------------------------------- #
# ProfileDiff, Comparison, RankSet


def diff_bundle(diff: ProfileDiff) -> dict[str, Any]:
    """`ProfileDiff._repr_mimebundle_`: the headline as text and static HTML."""
    return display.diff_bundle(diff)


def comparison_bundle(comparison: Comparison, include: Any = None, exclude: Any = None) -> dict[str, Any]:
    """`Comparison._repr_mimebundle_`: headline, both static profiles and the toggle widget."""
    return display.comparison_bundle(comparison, include, exclude, export_menu)


def hosted_comparison(comparison: Comparison) -> Any:
    """`Comparison._display_` (marimo)."""
    return display.hosted_comparison(comparison, export_menu)


def export_comparison(comparison: Comparison, path: str | Path, force: bool, table: str) -> Any:
    """`Comparison.export` (`export.export_comparison`)."""
    return export.export_comparison(comparison, path, force=force, table=table)


def rankset_text(ranks: RankSet) -> str:
    """`RankSet.text`: the cross-rank table as text."""
    return display.rankset_text(ranks)


def rankset_bundle(ranks: RankSet, include: Any = None, exclude: Any = None) -> dict[str, Any]:
    """`RankSet._repr_mimebundle_`: the cross-rank table and the rank view."""
    return display.rankset_bundle(ranks, include, exclude, export_menu)


def hosted_rankset(ranks: RankSet) -> Any:
    """`RankSet._display_` (marimo)."""
    return display.hosted_rankset(ranks, export_menu)


def rankset_widget(ranks: RankSet) -> Any:
    """`RankSet.view`: the rank view, each rank's view with its Export menu."""
    return display.rankset_widget(ranks, export_menu)
