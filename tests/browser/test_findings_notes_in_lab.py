"""Issue 23 item 4a in a real JupyterLab: what could not be checked sits below the findings, as notes.

A CPU run whose rules found something: the first line of the findings box is
a finding, the "Notes (not checked):" heading and its lines (each marked
``note``) are drawn below the last finding. A trace where nothing fired says
so on its first line, above the notes. The ``page`` fixture fails the test on
any console error or any request leaving this machine.
"""

from __future__ import annotations

import json

from labkit import open_notebook, run_all, write_notebook

# Many tiny ops: the tiny-ops rule fires on a CPU run (device rules: not checked).
FINDING_CELL = """%%torchprof --steps 2
acc = 0
for i in range(300):
    acc = x[i % 8] + acc
"""
# A constructed CPU trace whose one op fills its one step: no rule that can run fires
# (a live run's step times depend on this machine's load; this file does not).
QUIET_TRACE = [
    {
        "ph": "X",
        "cat": "user_annotation",
        "name": "ProfilerStep#1",
        "pid": 1,
        "tid": 1,
        "ts": 0,
        "dur": 10_000,
    },
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 9_998},
]

_TOP_JS = "(el) => el.getBoundingClientRect().top"


def test_notes_are_drawn_below_the_findings(page, lab):
    (lab.root / "quiet.json").write_text(json.dumps({"traceEvents": QUIET_TRACE}))
    write_notebook(
        lab.root,
        "notes.ipynb",
        [
            "%load_ext jupyter_torchprof\nimport torch\nx = torch.randn(8, 4)",
            FINDING_CELL,
            "%torchprof --load quiet.json",
        ],
    )
    open_notebook(page, lab, "notes.ipynb")
    run_all(page)
    views = page.locator(".jp-OutputArea-output .jp-TorchProf-view")
    views.nth(1).wait_for(timeout=120_000)

    box = views.nth(0).locator(".jp-TorchProf-findingsbox")
    items = box.locator("li")
    first = items.first
    assert "jp-TorchProf-note" not in (first.get_attribute("class") or "")
    assert first.locator(".jp-TorchProf-sev").inner_text().strip() in ("high", "medium", "info")
    findings = box.locator("li.jp-TorchProf-finding:not(.jp-TorchProf-note)")
    notes = box.locator("li.jp-TorchProf-note")
    assert findings.count() >= 1 and notes.count() >= 1
    heading = box.locator(".jp-TorchProf-notes-heading")
    assert heading.inner_text().strip() == "Notes (not checked):"
    last_finding = findings.nth(findings.count() - 1).evaluate(_TOP_JS)
    assert heading.evaluate(_TOP_JS) > last_finding
    for k in range(notes.count()):
        note = notes.nth(k)
        assert note.locator(".jp-TorchProf-sev").inner_text().strip() == "note"
        assert note.evaluate(_TOP_JS) > heading.evaluate(_TOP_JS)

    quiet = views.nth(1).locator(".jp-TorchProf-findingsbox")
    none = quiet.locator(".jp-TorchProf-nofinding")
    assert none.inner_text().strip() == "No findings: the rules that ran found nothing to point at."
    assert quiet.locator("li.jp-TorchProf-finding:not(.jp-TorchProf-note)").count() == 0
    assert none.evaluate(_TOP_JS) < quiet.locator(".jp-TorchProf-notes-heading").evaluate(_TOP_JS)
