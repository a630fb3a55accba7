"""A standalone HTML report: one file that opens offline, in any browser.

What the page holds, top to bottom: the run's summary, its findings, the op
and kernel tables (sortable: click a header), what the notes on their rows
mean (each note in a table links there), the steps and device streams, and
the timeline. A `Comparison` gets its headline and the eager vs compiled
diff tables first, then the same sections for each side.

How it stays offline and safe:

* the tables are plain HTML with a small fixed script that sorts them (every
  row is in the file, so the browser's find works, and the page prints);
* the timeline is the bokeh figure of `views.timeline`, embedded with BokehJS
  inlined (``bokeh.resources.INLINE``, only the bundles the figure needs), so
  nothing is fetched from a CDN; it shows the same level of detail as a
  notebook view before zooming, and the report says when narrow events are
  merged;
* a Content-Security-Policy forbids the page any request, so even a
  mistake here could not reach a host;
* every string from a trace (op, kernel, annotation names) is escaped with
  `format.esc`; in the timeline they travel as JSON data that bokeh draws
  as text.
"""

from __future__ import annotations

import datetime as _dt
import math
import secrets
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import pandas as pd

from .. import columns
from .._version import __version__
from ..columns import Column, format_cell, number
from ..format import esc, fmt_count, fmt_time, headline_chips, totals_label
from .notes_view import NOTE_KEY, explanations_html, note_links_html

if TYPE_CHECKING:  # pragma: no cover
    from ..results.comparison import Comparison
    from ..results.profile import Profile

#: Rows per table at most (the tables say how many were left out).
REPORT_ROWS = 5000
#: Glyph budget of each timeline in the file (what travels with it).
REPORT_GLYPHS = 60_000

#: No request of any kind; inline scripts and styles only. BokehJS compiles
#: the timeline's formatters with ``new Function`` (hence 'unsafe-eval') and
#: its save tool makes a blob: image.
CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; connect-src 'none'; worker-src blob:; form-action 'none'"
)


#: Where a timeline goes in the page body until bokeh's div replaces it;
#: random so that no name in a trace can spell it.
_SLOT_TOKEN = secrets.token_hex(12)


def _slot(key: str) -> str:
    return f"<!--tp-timeline-{_SLOT_TOKEN}-{key}-->"


# --------------------------------------------------------------------------- #
# tables


def _sort_attr(x: float | None) -> str:
    if x is None:
        return ""
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return repr(x)


def _cell(col: Column, rec: dict[str, Any], prefix: str = "") -> str:
    value = rec.get(col.key)
    text = format_cell(col, value)
    if col.key == NOTE_KEY:
        # Each note links to its explanation in this page (markup made and escaped by notes_view).
        return f'<td class="tp-note-cell">{note_links_html(value, rec.get("note_ids"), prefix)}</td>'
    if not col.numeric:
        if col.kind != "name":
            return f"<td>{esc(text)}</td>"
        tip = str(rec.get(col.title_key, text)) if col.title_key else text
        return f'<td class="tp-name" title="{esc(tip)}">{esc(text)}</td>'
    x = number(value)
    style = ""
    if col.kind == "pct" and x is not None:
        # A number we computed, never trace text: safe in a style attribute.
        style = f' style="--p:{max(0.0, min(100.0, x)):.1f}%"'
    cls = "tp-num tp-pct" if col.kind == "pct" else "tp-num"
    return f'<td class="{cls}" data-v="{_sort_attr(x)}"{style}>{esc(text)}</td>'


def table_html(
    frame: pd.DataFrame,
    cols: list[Column],
    table_id: str,
    caption: str,
    sorted_by: str | None = None,
    limit: int = REPORT_ROWS,
    compact: bool = False,
    prefix: str = "",
) -> str:
    """A sortable HTML table of ``frame`` (every cell escaped).

    Parameters
    ----------
    frame
        Rows in the order shown first.
    cols
        Catalog columns to show; those missing from ``frame`` are left out.
    table_id
        ``id`` of the table element.
    caption
        What the table is (escaped); the row count is added.
    sorted_by
        Field ``frame`` is sorted by (marked in the header).
    limit
        Rows included at most.
    compact
        Size the table to its content instead of the page width.
    prefix
        Prefix of the notes' anchors a Note cell links to (one side of a comparison).
    """
    cols = [c for c in cols if c.key in frame.columns]
    shown = frame.head(limit)
    head = []
    for c in cols:
        numeric = c.numeric
        sort = ' aria-sort="descending"' if c.key == sorted_by else ""
        tip = f' title="{esc(c.tip)}"' if c.tip else ""
        kind = 'data-type="num" class="tp-num"' if numeric else 'data-type="text"'
        head.append(f'<th scope="col" {kind}{sort}{tip}><button type="button">{esc(c.title)}</button></th>')
    body = []
    for rec in shown.to_dict("records"):
        body.append("<tr>" + "".join(_cell(c, rec, prefix) for c in cols) + "</tr>")
    count = (
        f"top {fmt_count(len(shown))} of {fmt_count(len(frame))} rows"
        if len(shown) < len(frame)
        else f"{fmt_count(len(frame))} row{'s' if len(frame) != 1 else ''}"
    )
    return (
        f'<div class="tp-tablewrap{" tp-compact" if compact else ""}"><table class="tp-sortable" id="{esc(table_id)}">'
        f"<caption>{esc(caption)} · {esc(count)} · click a header to sort</caption>"
        f"<thead><tr>{''.join(head)}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


# --------------------------------------------------------------------------- #
# sections of one profile


#: The op columns of the report: the catalog's, but for the grouping keys
#: (`Column.group`: the report's op table is grouped by name).
REPORT_OP_KEYS = tuple(c.key for c in columns.OPS if not c.group)
#: The op diff columns of the report: self times only (`Column.role`), and
#: no "Reads as" (the widget's, beside torch.compile's names).
REPORT_DIFF_OP_KEYS = tuple(c.key for c in columns.diff_ops() if c.role != "total" and c.key != "label")


def _op_columns(profile: Profile, ops: pd.DataFrame) -> list[Column]:
    device = bool(profile.summary.get("device_traced"))
    return columns.shown(columns.pick(columns.OPS, REPORT_OP_KEYS), ops, device)


def _summary_html(profile: Profile) -> str:
    s = profile.summary
    chips = headline_chips(s)
    if s.get("device_traced"):
        chips.append(("kernels", fmt_count(s.get("kernels"))))
    else:
        chips.append(("device time", "not traced"))
    chips.append(("events", fmt_count(s.get("events"))))
    if s.get("rank") is not None and s.get("world_size"):
        chips.append(("rank", f"{s['rank']} of {s['world_size']}"))
    if s.get("compile_s") is not None:
        chips.append(("compile", f"{float(s['compile_s']):.1f} s"))
    parts = ['<div class="tp-chips">']
    for label, value in chips:
        parts.append(f'<span class="tp-chip"><span class="tp-label">{esc(label)}</span> {esc(value)}</span>')
    parts.append("</div>")
    facts = []
    if profile.trace_path is not None:
        facts.append(f"trace {profile.trace_path.name}")
    cap = profile.capture
    if cap is not None:
        facts.append(
            f"captured on {cap.device} with {cap.warmup} warm-up run(s) and {cap.steps} profiled step(s)"
        )
        on = [k for k, v in (cap.options or {}).items() if v]
        if on:
            facts.append("recorded: " + ", ".join(on))
    if facts:
        parts.append(f'<p class="tp-facts">{esc(" · ".join(facts))}</p>')
    if profile.partial:
        parts.append('<p class="tp-warn">partial profile: the run was interrupted</p>')
    if profile.error:
        parts.append(f'<p class="tp-error">{esc(profile.error)}</p>')
    for note in profile.notes:
        parts.append(f'<p class="tp-warn">{esc(note)}</p>')
    return "".join(parts)


def _findings_html(profile: Profile) -> str:
    from .findings import flat_lines

    try:
        findings = profile.findings
    except Exception as exc:  # noqa: BLE001 - a failing rule must not cost the report
        return f'<p class="tp-warn">{esc(f"findings unavailable: {type(exc).__name__}: {exc}")}</p>'
    lines = flat_lines(findings, None)
    if not lines:
        return '<p class="tp-muted">Nothing to point at.</p>'
    items = []
    for sev, text, detail in lines:
        cls = "tp-sev-" + (sev.replace(" ", "-") or "more")
        label = f'<span class="tp-sev">{esc(sev)}</span> ' if sev else ""
        if detail:
            items.append(
                f'<li class="{cls}"><details><summary>{label}{esc(text)}</summary>'
                f'<p class="tp-detail">{esc(detail)}</p></details></li>'
            )
        else:
            items.append(f'<li class="{cls}">{label}{esc(text)}</li>')
    return f'<ul class="tp-findings">{"".join(items)}</ul>'


def _ops_html(profile: Profile, prefix: str) -> str:
    ops = profile.sorted_ops()
    if ops.empty:
        return '<p class="tp-muted">No ops in this trace.</p>'
    cols = _op_columns(profile, ops)
    device = bool(profile.summary.get("device_traced"))
    metric = columns.op_sort(profile.sort, device, ops.columns)
    totals = f"self CPU {fmt_time(ops['self_cpu_us'].sum())}"
    if device:
        totals += f" · self device {fmt_time(ops['self_device_us'].sum())}"
    what = totals_label(profile.summary.get("steps", 0))
    return table_html(ops, cols, f"{prefix}ops", f"Ops · {what}", sorted_by=metric, prefix=prefix) + (
        f'<p class="tp-muted">Sums over all rows ({esc(what)}): {esc(totals)}.</p>'
    )


def _kernels_html(profile: Profile, prefix: str) -> str:
    k = profile.kernels
    if not profile.summary.get("device_traced") or k.empty:
        return '<p class="tp-muted">No device work in this trace.</p>'
    k = k.sort_values("total_us", ascending=False, kind="stable")
    total = f"{fmt_time(k['total_us'].sum())} in {fmt_count(k['calls'].sum())} calls"
    return (
        table_html(
            k,
            columns.shown(columns.KERNELS, k),
            f"{prefix}kernels",
            f"Kernels, copies and memsets · {totals_label(profile.summary.get('steps', 0))}",
            "total_us",
            prefix=prefix,
        )
        + f'<p class="tp-muted">Device time over all rows: {esc(total)}.</p>'
    )


def _notes_html(profile: Profile, prefix: str) -> str:
    try:
        listed = explanations_html(profile, prefix)
    except Exception as exc:  # noqa: BLE001 - a failing rule must not cost the report
        return f'<p class="tp-warn">{esc(f"notes unavailable: {type(exc).__name__}: {exc}")}</p>'
    return listed or '<p class="tp-muted">No notes on any row.</p>'


def _steps_html(profile: Profile, prefix: str) -> str:
    steps = profile.steps
    parts = []
    if not steps.empty:
        cols = columns.shown(columns.STEPS, steps, bool(profile.summary.get("device_traced")))
        parts.append(table_html(steps, cols, f"{prefix}steps", "Steps", compact=True))
    streams = profile.streams
    if profile.summary.get("device_traced") and not streams.empty:
        parts.append(
            table_html(streams, list(columns.STREAMS), f"{prefix}streams", "Device streams", compact=True)
        )
    return "".join(parts) or '<p class="tp-muted">No ProfilerStep ranges in this trace.</p>'


@dataclass
class _TimelinePart:
    model: Any | None
    hint: str
    lod: str = ""


def _timeline_part(profile: Profile) -> _TimelinePart:
    from .timeline import Timeline

    try:
        tl = Timeline(profile, max_glyphs=REPORT_GLYPHS)
    except Exception as exc:  # noqa: BLE001 - the tables are worth writing without it
        return _TimelinePart(None, f"timeline unavailable: {type(exc).__name__}: {exc}")
    if not tl.lanes:
        return _TimelinePart(None, "no events to draw")
    hint = "drag to pan · Ctrl + wheel or the box tool to zoom · hover for names and times"
    lod = []
    if not tl.detailed:
        lod.append(
            "Reduced level of detail: events narrower than a pixel are merged into one box per row "
            "(hover says how many), and zooming in this file does not add detail. For every event, "
            "load the trace in a notebook (%torchprof --load) or open it in Perfetto."
        )
    if tl.hidden:
        lod.append(f"{fmt_count(tl.hidden)} deeply nested events are not drawn.")
    return _TimelinePart(tl.model, hint, " ".join(lod))


def _profile_sections(
    profile: Profile, prefix: str, level: int, nav: list[tuple[str, str]]
) -> tuple[str, Any]:
    """The sections of one profile, and its timeline model (or None)."""
    h = f"h{level}"
    parts = [f'<section id="{prefix}summary-section" class="tp-summary">{_summary_html(profile)}</section>']
    sections = [
        ("findings", "Findings", _findings_html(profile)),
        ("ops", "Ops", _ops_html(profile, prefix)),
        ("kernels", "Kernels", _kernels_html(profile, prefix)),
        ("notes", "What the notes mean", _notes_html(profile, prefix)),
        ("steps", "Steps and streams", _steps_html(profile, prefix)),
    ]
    for key, title, body in sections:
        nav.append((f"{prefix}{key}", title))
        parts.append(f'<section id="{prefix}{key}-section"><{h}>{esc(title)}</{h}>{body}</section>')
    tl = _timeline_part(profile)
    nav.append((f"{prefix}timeline", "Timeline"))
    slot = _slot(prefix) if tl.model is not None else ""
    parts.append(
        f'<section id="{prefix}timeline-section"><{h}>Timeline</{h}>'
        f'<p class="tp-muted">{esc(tl.hint)}</p>'
        + (f'<p class="tp-lod" id="{prefix}timeline-lod">{esc(tl.lod)}</p>' if tl.lod else "")
        + f"{slot}</section>"
    )
    return "".join(parts), tl.model


# --------------------------------------------------------------------------- #
# the page


def _asset(name: str) -> str:
    """A file of ``views/assets`` (the report's stylesheet and script, kept as the files they are)."""
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


_CSS = _asset("report.css")

#: Sorts a table on a header click: numbers largest first, text A→Z, a second
#: click reverses; unknown values stay last; ties keep their order.
_SORT_JS = _asset("report_sort.js")


def _embed(models: dict[str, Any]) -> tuple[str, str, dict[str, str]]:
    """BokehJS (inline) for ``models``, the script rendering them, and their divs."""
    if not models:
        return "", "", {}
    from bokeh.embed import components
    from bokeh.embed.bundle import bundle_for_objs_and_resources
    from bokeh.resources import INLINE

    bundle = bundle_for_objs_and_resources(list(models.values()), INLINE)
    if bundle.js_files or bundle.css_files:  # pragma: no cover - INLINE never links
        raise RuntimeError("bokeh asked for external resources in an offline report")
    script, divs = components(models)
    return bundle.scripts(tag=True), script, divs


#: Shown only where scripts do not run: JupyterLab opens HTML files in a
#: sandboxed frame until the user trusts them, and the timeline is drawn by
#: a script, so it would be a silent blank.
NO_SCRIPT_HINT = (
    '<noscript><p class="tp-noscript" role="note">Scripts are off here, so the timeline is not drawn '
    "and the tables do not sort. In JupyterLab, click <b>Trust HTML</b> in this file's toolbar; "
    "or open the file in a browser tab.</p></noscript>"
)


def _page(title: str, subtitle: str, nav: list[tuple[str, str]], body: str, models: dict[str, Any]) -> str:
    bokeh_js, bokeh_script, divs = _embed(models)
    for key, div in divs.items():
        body = body.replace(_slot(key), f'<div class="tp-timeline">{div}</div>', 1)
    links = "".join(f'<a href="#{esc(anchor)}-section">{esc(text)}</a>' for anchor, text in nav)
    made = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="jupyter_torchprof {esc(__version__)}">\n'
        f"<title>{esc(title)}</title>\n<style>{_CSS}</style>\n{bokeh_js}\n</head>\n<body>\n<main>\n"
        f'<header><h1>{esc(title)}</h1><p class="tp-sub">{esc(subtitle)}</p></header>\n'
        f"{NO_SCRIPT_HINT}\n"
        f"<nav>{links}</nav>\n{body}\n"
        f"<footer>Written by jupyter_torchprof {esc(__version__)} on {esc(made)}. "
        "This file is self-contained and opens offline.</footer>\n"
        f"</main>\n<script>{_SORT_JS}</script>\n{bokeh_script}\n</body>\n</html>\n"
    )


def profile_report_html(profile: Profile) -> str:
    """The standalone report of one `Profile` (see the module docstring)."""
    nav: list[tuple[str, str]] = [("summary", "Summary")]
    body, model = _profile_sections(profile, "", 2, nav)
    models = {"": model} if model is not None else {}
    return _page(profile.name, "torch.profiler report", nav, body, models)


def comparison_report_html(comparison: Comparison) -> str:
    """The standalone report of a `Comparison`: headline, diff, then each side."""
    nav: list[tuple[str, str]] = [("headline", "Headline")]
    lines = "".join(f"<li>{esc(line)}</li>" for line in comparison.headline_lines())
    parts = [f'<section id="headline-section"><h2>Eager vs compiled</h2><ul class="tp-headline">{lines}</ul>']
    tb = getattr(comparison.compile_stats, "traceback", None)
    if tb:
        parts.append(f"<details><summary>full traceback</summary><pre>{esc(tb)}</pre></details>")
    parts.append("</section>")
    ops, kernels = comparison.diff_ops, comparison.diff_kernels
    if not ops.empty:
        device = "self_device_us_delta" in ops and ops["self_device_us_delta"].abs().sum() > 0
        cols = columns.pick(columns.diff_ops("eager", "compiled"), REPORT_DIFF_OP_KEYS)
        cols = [c for c in cols if device or not c.device]
        nav.append(("diff-ops", "Op changes"))
        parts.append(
            '<section id="diff-ops-section"><h2>Op changes (per step)</h2>'
            + table_html(ops, cols, "diff-ops", "Ops, eager vs compiled, per step")
            + "</section>"
        )
    if not kernels.empty:
        nav.append(("diff-kernels", "Kernel changes"))
        parts.append(
            '<section id="diff-kernels-section"><h2>Kernel changes (per step)</h2>'
            + table_html(
                kernels,
                columns.diff_kernels("eager", "compiled"),
                "diff-kernels",
                "Kernels, eager vs compiled, per step",
            )
            + "</section>"
        )
    models: dict[str, Any] = {}
    for label, p in (("eager", comparison.eager), ("compiled", comparison.compiled)):
        if p is None:
            continue
        side_nav: list[tuple[str, str]] = []
        body, model = _profile_sections(p, f"{label}-", 3, side_nav)
        nav.append((label, label.capitalize()))
        parts.append(f'<section id="{label}-section"><h2>{esc(label.capitalize())}: {esc(p.name)}</h2>')
        parts.append(body + "</section>")
        if model is not None:
            models[f"{label}-"] = model
    return _page(
        f"{comparison.name}: eager vs compiled",
        "torch.profiler comparison report",
        nav,
        "".join(parts),
        models,
    )


def report_html(result: Profile | Comparison) -> str:
    """One standalone HTML page for a `Profile` or a `Comparison`.

    The page needs no network: BokehJS is inlined for the timeline, the
    tables are plain HTML sorted by a small inline script, and a
    Content-Security-Policy forbids any request.

    Parameters
    ----------
    result
        A profile (``%%torchprof``, `jupyter_torchprof.load`) or the result
        of ``%%torchprof --compare``.

    Returns
    -------
    str
        The whole HTML document.
    """
    if hasattr(result, "compiled") and hasattr(result, "eager"):
        return comparison_report_html(result)  # type: ignore[arg-type]
    return profile_report_html(result)  # type: ignore[arg-type]
