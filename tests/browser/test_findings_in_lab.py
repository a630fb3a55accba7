"""The findings box of the inline view in a real JupyterLab, as a person sees it.

A long line ends in an ellipsis inside the box (not cut by it); a click on a
finding opens its remedy; a click on "N more findings" shows every finding
the Python object holds. The ``page`` fixture fails the test on any console
error or any request leaving this machine.
"""

from __future__ import annotations

import os
from pathlib import Path

from labkit import open_notebook, run_all, write_notebook
from tracefiles import real_trace

from jupyter_torchprof import load

# Geometry of an element: its box, whether its text overflows, its text-overflow.
_BOX_JS = """
(el) => {
  const r = el.getBoundingClientRect();
  const s = getComputedStyle(el);
  return {left: r.left, right: r.right, width: r.width, height: r.height,
          scroll: el.scrollWidth, client: el.clientWidth, overflow: s.textOverflow,
          // checkVisibility sees a closed <details>' content (content-visibility: hidden)
          visible: el.checkVisibility() && r.width > 0 && r.height > 0};
}
"""

CPU_CELL = """%%torchprof --steps 2
acc = 0
for i in range(300):
    acc = x[i % 8] + acc
acc.sum().item()
time.sleep(0.03)
"""


def _shot(page, lab, name: str, locator) -> None:
    path = Path(os.environ.get("TORCHPROF_SCREENSHOTS", lab.root.parent / "screenshots"))
    path.mkdir(parents=True, exist_ok=True)
    locator.screenshot(path=str(path / f"{name}.png"))


def _box(locator) -> dict:
    return locator.evaluate(_BOX_JS)


def test_findings_box_clips_with_an_ellipsis_and_opens_on_a_click(page, lab):
    trace = real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    write_notebook(
        lab.root,
        "findings.ipynb",
        [
            "%load_ext jupyter_torchprof\nimport time, torch\nx = torch.randn(8, 4)",
            CPU_CELL,
            f"%torchprof --load {trace}",
        ],
    )
    open_notebook(page, lab, "findings.ipynb")
    run_all(page)
    views = page.locator(".jp-OutputArea-output .jp-TorchProf-view")
    views.nth(1).wait_for(timeout=60_000)

    # -- the CPU run: the long "not checked" line ends in an ellipsis inside the box
    cpu = views.nth(0).locator(".jp-TorchProf-findingsbox")
    box = _box(cpu)
    assert box["visible"] and box["width"] > 50
    line = cpu.locator("li.jp-TorchProf-sev-not-checked summary", has_text="rules:").first
    geo = _box(line)
    assert geo["overflow"] == "ellipsis" and geo["scroll"] > geo["client"]  # clipped, with "…"
    assert geo["right"] <= box["right"] + 1  # inside the box, not cut off by it
    # the CPU rules had something to say on a CPU-only run
    checked = cpu.locator("li.jp-TorchProf-finding:not(.jp-TorchProf-sev-not-checked)")
    assert checked.count() >= 1
    _shot(page, lab, "findings_cpu_closed", cpu)
    # a click opens the whole line and the reason, once
    line.click()
    detail = cpu.locator("li.jp-TorchProf-sev-not-checked", has_text="rules:").first.locator(
        ".jp-TorchProf-finding-detail"
    )
    detail.wait_for(state="visible", timeout=10_000)
    assert detail.inner_text().count("Not checked because") == 1
    assert _box(line)["height"] > geo["height"]  # it wraps once open
    _shot(page, lab, "findings_cpu_open", cpu)

    # -- the loaded trace: five findings shown, the rest one click away
    f = load(str(trace)).findings
    want = f[f["severity"] != "not checked"]
    gp = views.nth(1).locator(".jp-TorchProf-findingsbox")
    titles = gp.locator(
        "li.jp-TorchProf-finding:not(.jp-TorchProf-sev-not-checked) .jp-TorchProf-finding-title"
    )
    visible = [t for t in titles.all() if _box(t)["visible"]]
    assert len(visible) == min(5, len(want))
    more = gp.locator("details.jp-TorchProf-more > summary")
    assert more.inner_text().startswith(f"{len(want) - 5} more findings")
    more.click()
    visible = [t.inner_text() for t in titles.all() if _box(t)["visible"]]
    assert visible == want["title"].tolist()
    # a finding opens to its remedy, the text the Python object holds
    first = gp.locator("li.jp-TorchProf-finding").first
    assert not _box(first.locator(".jp-TorchProf-finding-detail"))["visible"]
    first.locator("summary").click()
    shown = first.locator(".jp-TorchProf-finding-detail")
    shown.wait_for(state="visible", timeout=10_000)
    assert shown.inner_text().strip() == want.iloc[0]["detail"].strip()
    _shot(page, lab, "findings_loaded_open", gp)
