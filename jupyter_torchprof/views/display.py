"""The one entry from a result object to what a notebook or a terminal shows.

Every result's mimebundle carries ``text/plain`` and a static ``text/html``
(a terminal IPython, nbconvert and notebook viewers read those), and the
interactive widget joins them where a widget frontend can show it: it never
replaces them. A result's ``_repr_mimebundle_``, ``table()`` and ``view()``
come here through `jupyter_torchprof.presentation`, which also hands the
views the export menu (views never import export).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import columns
from ..format import esc

if TYPE_CHECKING:  # pragma: no cover
    from ..results.comparison import Comparison
    from ..results.profile import Profile
    from ..results.profile_diff import ProfileDiff
    from ..results.ranks import RankSet
    from .export_control import ExportMenu

_STATIC = '<div class="jp-TorchProf-static">{}</div>'


# --------------------------------------------------------------------------- #
# Profile


def profile_text(
    profile: Profile,
    sort: str | None = None,
    row_limit: int | None = None,
    kernels: bool = True,
    findings: bool = True,
    width: int | None = None,
) -> str:
    """The op table (and kernel table) as text, fitted to ``width`` (`text.fit_width`); see `Profile.table`."""
    from .findings import findings_text
    from .text import fit_width, kernel_table_text, op_table_text, summary_line, wrap_lines, wrap_summary

    width = fit_width(width)
    limit = profile.row_limit if row_limit is None or row_limit == 0 else row_limit
    device = bool(profile.summary["device_traced"])
    parts = [wrap_summary(summary_line(profile.summary), width)]
    if profile.error:
        parts.append(wrap_lines(f"! {profile.error}", width))
    parts += [wrap_lines(f"note: {n}", width) for n in profile.notes]
    if findings and (text := findings_text(profile.findings)):
        parts.append(wrap_lines(text, width))
    steps = int(profile.summary["steps"])
    ops = profile.sorted_ops(sort)
    key = sort or profile.sort
    sorted_by = columns.sort_column(key, ops.columns) if key else None
    rows = None if limit < 0 else limit
    parts.append(op_table_text(ops, device, rows, steps=steps, width=width, sort=sorted_by))
    if kernels and device and not profile.kernels.empty:
        k_rows = None if limit < 0 else min(limit, 10)
        parts.append(kernel_table_text(profile.kernels, k_rows, steps=steps, width=width))
    return "\n".join(parts)


def profile_static_html(profile: Profile) -> str:
    """The static HTML of a profile: summary, findings, op and kernel tables."""
    from .findings import findings_html, insert_findings
    from .html import profile_html, static_explanations

    page = profile_html(
        profile.summary,
        profile.sorted_ops(),
        profile.kernels,
        profile.notes,
        profile.error,
        profile.row_limit,
        static_explanations(profile),
    )  # the captions say "totals over N steps" (from summary["steps"])
    return insert_findings(page, findings_html(profile.findings))


def profile_bundle(
    profile: Profile, include: Any = None, exclude: Any = None, export_menu: ExportMenu | None = None
) -> dict[str, Any]:
    """Text, static HTML and (where it can show) the interactive view of a profile."""
    from .interactive import interactive_bundle

    bundle = {"text/plain": profile_text(profile), "text/html": profile_static_html(profile)}
    bundle.update(interactive_bundle(profile, include, exclude, export_menu))
    return bundle


def profile_widget(
    profile: Profile,
    max_glyphs: int = 100_000,
    all_frames: bool = False,
    export_menu: ExportMenu | None = None,
) -> Any:
    """The interactive view (one widget with bokeh figures); see `Profile.view`."""
    from .widget import ProfileView

    return ProfileView(profile, max_glyphs=max_glyphs, all_frames=all_frames, export_menu=export_menu)


# --------------------------------------------------------------------------- #
# ProfileDiff, Comparison, RankSet


def diff_bundle(diff: ProfileDiff) -> dict[str, Any]:
    """A diff's headline as text and static HTML."""
    text = diff.text()
    rows = "".join(f"<div>{esc(line)}</div>" for line in text.splitlines())
    return {"text/plain": text, "text/html": _STATIC.format(rows)}


def comparison_bundle(
    comparison: Comparison, include: Any = None, exclude: Any = None, export_menu: ExportMenu | None = None
) -> dict[str, Any]:
    """An eager vs compiled comparison: headline, both static profiles, and the toggle widget."""
    from .interactive import comparison_widget_part

    lines = "".join(f"<div>{esc(line)}</div>" for line in comparison.headline_lines())
    tb = ""
    if comparison.compile_stats.traceback:
        tb = (
            "<details><summary>full traceback</summary>"
            f"<pre>{esc(comparison.compile_stats.traceback)}</pre></details>"
        )
    head = f'<div class="jp-TorchProf-summary">{esc(comparison.name)}: eager vs compiled</div>'
    parts = [_STATIC.format(head + lines + tb)]
    for label, p in (("eager", comparison.eager), ("compiled", comparison.compiled)):
        if p is not None:
            parts.append(f"<h4>{esc(label)}</h4>" + profile_static_html(p))
    bundle = {"text/plain": comparison.text(), "text/html": "".join(parts)}
    bundle.update(comparison_widget_part(comparison, include, exclude, export_menu))
    return bundle


def rankset_text(ranks: RankSet) -> str:
    """The cross-rank table as text, with the stragglers."""
    from .findings import findings_text
    from .ranks import rank_table_text
    from .text import fit_width, wrap_lines

    width = fit_width(None)
    text = f"{ranks.name}: {len(ranks)} ranks\n" + rank_table_text(ranks.table, width)
    if ranks.notes:
        text += "\n" + wrap_lines("\n".join(f"note: {n}" for n in ranks.notes), width)
    found = wrap_lines(findings_text(ranks.straggler_findings), width)
    return text + "\n" + found if found else text


def rankset_bundle(
    ranks: RankSet, include: Any = None, exclude: Any = None, export_menu: ExportMenu | None = None
) -> dict[str, Any]:
    """The cross-rank table as text and static HTML, and the rank view where widgets show (`views.rank_view`)."""
    from .findings import findings_html
    from .html import table_html
    from .ranks import rank_headers, rank_rows

    tips = [c.tip for c in columns.RANKS]
    body = table_html(
        rank_rows(ranks.table), rank_headers(), caption=f"{ranks.name}: {len(ranks)} ranks", tips=tips
    )
    body += findings_html(ranks.straggler_findings)
    from .interactive import rankset_widget_part

    bundle = {"text/plain": rankset_text(ranks), "text/html": _STATIC.format(body)}
    bundle.update(rankset_widget_part(ranks, include, exclude, export_menu))
    return bundle


# --------------------------------------------------------------------------- #
# hosts without IPython's display (marimo)


class _Static:
    """A static bundle that marimo (or any ``_repr_html_`` reader) shows as it is."""

    def __init__(self, bundle: dict[str, Any]) -> None:
        self.bundle = bundle

    def _repr_html_(self) -> str:
        return self.bundle.get("text/html", "")

    def __repr__(self) -> str:
        return self.bundle.get("text/plain", "")


def hosted_profile(profile: Profile, export_menu: ExportMenu | None = None) -> Any:
    """What a profile shows through marimo's ``_display_`` hook: its one widget (see `_hosted`)."""
    return _hosted(profile, lambda: profile_widget(profile, export_menu=export_menu).widget())


def hosted_comparison(comparison: Comparison, export_menu: ExportMenu | None = None) -> Any:
    """What a comparison shows through marimo's ``_display_`` hook: its one widget (see `_hosted`)."""
    from .compare import ComparisonView

    return _hosted(comparison, lambda: ComparisonView(comparison, export_menu).widget())


def rankset_widget(ranks: RankSet, export_menu: ExportMenu | None = None) -> Any:
    """The interactive view of a rank set (`views.rank_view.RankView`); see `RankSet.view`."""
    from .rank_view import RankView

    return RankView(ranks, export_menu)


def hosted_rankset(ranks: RankSet, export_menu: ExportMenu | None = None) -> Any:
    """What a rank set shows through marimo's ``_display_`` hook: its one widget (see `_hosted`)."""
    from .rank_view import RankView

    return _hosted(ranks, lambda: RankView(ranks, export_menu).widget())


def _hosted(result: Any, build: Any) -> Any:
    """``build()``, or the result's text and static HTML when the widget cannot be built.

    marimo has no ipykernel, so no mimebundle ever carries the widget there;
    it shows an anywidget returned from ``_display_`` natively. A failure is
    a warning and the static view, as in a notebook.
    """
    import warnings

    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - the static view must survive any bug here
        warnings.warn(
            f"torchprof: the interactive view could not be built ({type(exc).__name__}: {exc}); "
            "showing the static tables",
            stacklevel=3,
        )
    return _Static(result._repr_mimebundle_(include=["text/plain", "text/html"]))
