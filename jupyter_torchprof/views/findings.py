"""Findings as a few lines of text or static HTML, for the top of a profile's view.

One line per finding: severity, then the title (which carries the key
number). In HTML each line is a ``<details>`` element: a click opens what it
means and what to do (the rule's detail, with the time at stake), so the
remedy is on the page, not only in a tooltip. Findings past the limit sit in
one more expander ("N more findings") that opens all of them. The same HTML
works in the inline widget, in a notebook's static output and in nbconvert:
``<details>`` needs no script.

In the widget the HTML sits in a flex item that would grow to its widest
line (min-width: auto), so the style lets it shrink to the view's width:
that is what makes the ellipsis appear instead of a cut.

``not checked`` rows are notes, not findings: they say what the trace
could not show, so they come after every finding (the hidden ones' expander
included), under their own "Notes" heading, each marked ``note``. When no
rule found anything, the first line says so: a note never takes the top
slot. Rows that share a reason (a trace without device data) become one
note: the reason once, then the rules' names, each once. A line too long for
the view ends in an ellipsis; its full text is in the expander. Every string
from a trace is escaped in the HTML.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..format import fmt_time

_NOT_CHECKED = "not checked"
_MORE = ""  # severity slot of the "(N more ...)" line
#: How a not-checked line is marked where it is shown.
NOTE = "note"
#: The heading above the notes.
NOTES_HEADING = "Notes (not checked):"
#: The first line when no rule that ran found anything.
NOTHING_FOUND = "No findings: the rules that ran found nothing to point at."

_STYLE = """
<style>
.jp-TorchProf-findingsbox > .widget-html-content { min-width: 0; width: 100%; }
.jp-TorchProf-findings { margin: 4px 0 6px 0; width: 100%; min-width: 0; max-width: 100%; overflow: hidden; }
.jp-TorchProf-findings ul { list-style: none; margin: 0; padding: 0; }
.jp-TorchProf-findings li { margin: 1px 0; min-width: 0; }
.jp-TorchProf-findings summary { cursor: pointer; white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; max-width: 100%; }
.jp-TorchProf-findings details[open] > summary { white-space: normal; }
.jp-TorchProf-finding-detail { margin: 2px 0 4px 1.6em; white-space: normal;
  color: var(--jp-ui-font-color1, #333); }
.jp-TorchProf-finding-stake { margin: 0 0 4px 1.6em; color: var(--jp-ui-font-color2, #616161); }
.jp-TorchProf-more > summary { color: var(--jp-brand-color1, #1976d2); }
.jp-TorchProf-sev { display: inline-block; min-width: 6.5em; font-weight: 600; }
.jp-TorchProf-sev-high .jp-TorchProf-sev { color: var(--jp-error-color0, #b00020); }
.jp-TorchProf-sev-medium .jp-TorchProf-sev { color: var(--jp-warn-color0, #a15c00); }
.jp-TorchProf-sev-info .jp-TorchProf-sev { color: var(--jp-info-color0, #0b6bcb); }
.jp-TorchProf-sev-not-checked { color: var(--jp-ui-font-color2, #757575); }
.jp-TorchProf-notes { margin-top: 3px; color: var(--jp-ui-font-color2, #757575); }
.jp-TorchProf-notes-heading, .jp-TorchProf-nofinding { margin: 1px 0; font-style: italic; }
</style>
"""


@dataclass
class Line:
    """One shown line: a finding, or one group of ``not checked`` rules."""

    severity: str
    text: str
    detail: str
    rules: tuple[str, ...] = ()
    stake: str = ""


def _stake(r: Any) -> str:
    """The time at stake as a phrase ("42 ms per step, 34.0% of the step"), or ""."""
    impact = float(getattr(r, "impact_us", 0.0) or 0.0)
    if impact <= 0:
        return ""
    ev = r.evidence if isinstance(r.evidence, dict) else {}
    pct = ev.get("impact_step_pct")
    unit = ev.get("impact_unit") or "step"
    share = f", {pct:.1f}% of the {unit}" if isinstance(pct, (int, float)) else ""
    lowered = ev.get("rule_severity")
    note = f"; the rule said {lowered}, the share of the {unit} makes it {r.severity}" if lowered else ""
    per = " per step" if unit == "step" else ""
    return f"At stake: {fmt_time(impact)}{per}{share}{note}."


def _label(r: Any) -> str:
    """A not-checked row's rule name as its title says it ("Device idle gaps")."""
    title = str(r.title)
    cut = title.find(" not checked")
    return title[:cut] if cut > 0 else str(r.rule)


def _unchecked_lines(unchecked: pd.DataFrame) -> list[Line]:
    """One line per reason: the reason once, then every rule it stopped."""
    groups: dict[str, list[Any]] = {}
    for r in unchecked.itertuples(index=False):
        reason = r.evidence.get("reason") if isinstance(r.evidence, dict) else None
        groups.setdefault(str(reason) if reason else f"\0{r.detail}", []).append(r)
    lines = []
    for key, rows in groups.items():
        if len(rows) == 1:
            (r,) = rows
            lines.append(Line(_NOT_CHECKED, str(r.title), str(r.detail), (str(r.rule),)))
            continue
        reason = key.lstrip("\0")
        sentence = reason[:1].upper() + reason[1:]
        names = [_label(r) for r in rows]
        extra = []
        for r in rows:
            would = r.evidence.get("ops_that_would_sync") if isinstance(r.evidence, dict) else None
            if would:
                extra.append(
                    "Found "
                    + ", ".join(f"{k} ×{v}" for k, v in would.items())
                    + ", which would sync on a device."
                )
        text = f"{sentence} {len(rows)} rules: {', '.join(names)}."
        # The reason once (the rows repeat it, one per rule) and what was found anyway.
        detail = " ".join([f"Not checked because {reason}", *extra])
        lines.append(Line(_NOT_CHECKED, " ".join([text, *extra]), detail, tuple(str(r.rule) for r in rows)))
    return lines


def finding_lines(findings: pd.DataFrame | None, limit: int | None = None) -> tuple[list[Line], list[Line]]:
    """(shown, hidden) lines: checked findings up to ``limit``, then the not-checked groups.

    Parameters
    ----------
    findings
        ``Profile.findings``.
    limit
        Checked findings shown before the rest are hidden; None or -1 for all.
    """
    if findings is None or findings.empty:
        return [], []
    checked = findings[findings["severity"] != _NOT_CHECKED]
    unchecked = findings[findings["severity"] == _NOT_CHECKED]
    lines = [
        Line(str(r.severity), str(r.title), str(r.detail), (str(r.rule),), _stake(r))
        for r in checked.itertuples(index=False)
    ]
    cut = len(lines) if limit is None or limit < 0 else limit
    return lines[:cut] + _unchecked_lines(unchecked), lines[cut:]


def flat_lines(findings: pd.DataFrame, limit: int | None) -> list[tuple[str, str, str]]:
    """(severity, text, detail) per line, a "(N more ...)" line for the hidden (report, text)."""
    shown, hidden = finding_lines(findings, limit)
    checked = [ln for ln in shown if ln.severity != _NOT_CHECKED]
    out = [(ln.severity, ln.text, " ".join(p for p in (ln.detail, ln.stake) if p)) for ln in checked]
    if hidden:
        out.append((_MORE, f"({len(hidden)} more in Profile.findings)", ""))
    out += [(ln.severity, ln.text, ln.detail) for ln in shown if ln.severity == _NOT_CHECKED]
    return out


def findings_text(findings: pd.DataFrame, limit: int | None = 8) -> str:
    """The findings as text lines under a ``Findings`` header ("" when none), then the notes.

    Parameters
    ----------
    findings
        ``Profile.findings``.
    limit
        Findings shown besides the notes; None or -1 for all.
    """
    shown, hidden = finding_lines(findings, limit)
    if not shown and not hidden:
        return ""
    checked = [ln for ln in shown if ln.severity != _NOT_CHECKED]
    notes = [ln for ln in shown if ln.severity == _NOT_CHECKED]
    width = max((len(ln.severity) for ln in checked), default=0)
    out = ["Findings:"]
    out += [f"  {ln.severity.upper():<{width}}  {ln.text}" for ln in checked]
    if hidden:
        out.append(f"  {'':<{width}}  ({len(hidden)} more in Profile.findings)")
    if not checked and not hidden:
        out.append(f"  {NOTHING_FOUND}")
    if notes:
        out.append(NOTES_HEADING)
        out += [f"  {NOTE}  {ln.text}" for ln in notes]
    return "\n".join(out)


def _item_html(line: Line) -> str:
    cls = "jp-TorchProf-sev-" + line.severity.replace(" ", "-")
    label = line.severity
    if line.severity == _NOT_CHECKED:
        cls, label = cls + " jp-TorchProf-note", NOTE
    rules = html.escape(" ".join(line.rules), quote=True)
    body = f'<div class="jp-TorchProf-finding-detail">{html.escape(line.detail)}</div>'
    if line.stake:
        body += f'<div class="jp-TorchProf-finding-stake">{html.escape(line.stake)}</div>'
    return (
        f'<li class="jp-TorchProf-finding {cls}" data-rules="{rules}"><details>'
        f'<summary title="{html.escape(line.text, quote=True)}">'
        f'<span class="jp-TorchProf-sev">{html.escape(label)}</span> '
        f'<span class="jp-TorchProf-finding-title">{html.escape(line.text)}</span></summary>'
        f"{body}</details></li>"
    )


def findings_html(findings: pd.DataFrame, limit: int | None = 8) -> str:
    """The findings as static HTML ("" when none), then the notes.

    Each finding opens on a click to its detail (the remedy) and the time at
    stake; the findings past ``limit`` are in a "N more findings" expander.
    The notes (not-checked rules) follow under their heading, marked ``note``.
    """
    shown, hidden = finding_lines(findings, limit)
    if not shown and not hidden:
        return ""
    checked = [ln for ln in shown if ln.severity != _NOT_CHECKED]
    unchecked = [ln for ln in shown if ln.severity == _NOT_CHECKED]
    parts = [_STYLE, '<div class="jp-TorchProf-findings">']
    if not checked and not hidden:
        parts.append(f'<p class="jp-TorchProf-nofinding">{html.escape(NOTHING_FOUND)}</p>')
    parts.append("<ul>" + "".join(_item_html(ln) for ln in checked) + "</ul>")
    if hidden:
        word = "finding" if len(hidden) == 1 else "findings"
        parts.append(
            f'<details class="jp-TorchProf-more"><summary>{len(hidden)} more {word} (click to show)</summary>'
            "<ul>" + "".join(_item_html(ln) for ln in hidden) + "</ul></details>"
        )
    if unchecked:
        parts.append(
            f'<div class="jp-TorchProf-notes"><p class="jp-TorchProf-notes-heading">{html.escape(NOTES_HEADING)}</p>'
            "<ul>" + "".join(_item_html(ln) for ln in unchecked) + "</ul></div>"
        )
    parts.append("</div>")
    return "".join(parts)


def insert_findings(page: str, block: str) -> str:
    """Put a findings block into a static profile page, before its first table."""
    if not block:
        return page
    at = page.find("<table")
    if at < 0:
        at = page.rfind("</div>")
    if at < 0:
        return block + page
    return page[:at] + block + page[at:]
