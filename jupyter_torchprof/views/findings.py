"""Findings as a few lines of text or static HTML, for the top of a profile's view.

One line per finding: severity, then the title (which carries the key
number). ``not checked`` rows that share a reason (a trace without device
data) collapse into one line naming the rules, so a CPU run does not open
with a wall of them. Every string from a trace is escaped in the HTML.
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

_NOT_CHECKED = "not checked"
_MORE = ""  # severity slot of the "(N more ...)" line

_STYLE = """
<style>
.jp-TorchProf-findings { margin: 4px 0 6px 0; }
.jp-TorchProf-findings ul { list-style: none; margin: 0; padding: 0; }
.jp-TorchProf-findings li { margin: 1px 0; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.jp-TorchProf-sev { display: inline-block; min-width: 6.5em; font-weight: 600; }
.jp-TorchProf-sev-high .jp-TorchProf-sev { color: var(--jp-error-color0, #b00020); }
.jp-TorchProf-sev-medium .jp-TorchProf-sev { color: var(--jp-warn-color0, #a15c00); }
.jp-TorchProf-sev-info .jp-TorchProf-sev { color: var(--jp-info-color0, #0b6bcb); }
.jp-TorchProf-sev-not-checked { color: var(--jp-ui-font-color2, #757575); }
</style>
"""


def _lines(findings: pd.DataFrame, limit: int | None) -> list[tuple[str, str, str]]:
    """(severity, text, tooltip) per shown line."""
    if findings is None or findings.empty:
        return []
    checked = findings[findings["severity"] != _NOT_CHECKED]
    unchecked = findings[findings["severity"] == _NOT_CHECKED]
    shown = checked if limit is None or limit < 0 else checked.head(limit)
    lines = [(str(r.severity), str(r.title), str(r.detail)) for r in shown.itertuples(index=False)]
    hidden = len(checked) - len(shown)
    if hidden > 0:
        lines.append((_MORE, f"({hidden} more in Profile.findings)", ""))
    # "not checked" rows with one shared reason (no device in the trace) become one line.
    by_reason: dict[str, list[Any]] = {}
    for r in unchecked.itertuples(index=False):
        reason = r.evidence.get("reason") if isinstance(r.evidence, dict) else None
        by_reason.setdefault(str(reason) if reason else f"\0{r.title}", []).append(r)
    for reason, rows in by_reason.items():
        if reason.startswith("\0") or len(rows) == 1:
            lines += [(_NOT_CHECKED, str(r.title), str(r.detail)) for r in rows]
            continue
        text = f"{len(rows)} device rules ({', '.join(str(r.rule) for r in rows)}): {reason}"
        for r in rows:
            would = r.evidence.get("ops_that_would_sync") if isinstance(r.evidence, dict) else None
            if would:
                text += (
                    " Found "
                    + ", ".join(f"{k} ×{v}" for k, v in would.items())
                    + ", which would sync on a device."
                )
        lines.append((_NOT_CHECKED, text, "\n".join(str(r.detail) for r in rows)))
    return lines


def findings_text(findings: pd.DataFrame, limit: int | None = 8) -> str:
    """The findings as text lines under a ``Findings`` header ("" when none).

    Parameters
    ----------
    findings
        ``Profile.findings``.
    limit
        Findings shown besides the ``not checked`` line(s); None or -1 for all.
    """
    lines = _lines(findings, limit)
    if not lines:
        return ""
    width = max(len(s) for s, _, _ in lines)
    out = ["Findings:"] + [
        f"  {sev.upper() if sev != _NOT_CHECKED else sev:<{width}}  {text}" for sev, text, _ in lines
    ]
    return "\n".join(out)


def findings_html(findings: pd.DataFrame, limit: int | None = 8) -> str:
    """The findings as a static HTML list ("" when none); details in tooltips."""
    lines = _lines(findings, limit)
    if not lines:
        return ""
    items = []
    for sev, text, tip in lines:
        if sev == _MORE:
            items.append(f"<li>{html.escape(text)}</li>")
            continue
        cls = "jp-TorchProf-sev-" + sev.replace(" ", "-")
        items.append(
            f'<li class="jp-TorchProf-finding {cls}" title="{html.escape(tip, quote=True)}">'
            f'<span class="jp-TorchProf-sev">{html.escape(sev)}</span> {html.escape(text)}</li>'
        )
    return f'{_STYLE}<div class="jp-TorchProf-findings"><ul>{"".join(items)}</ul></div>'


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
