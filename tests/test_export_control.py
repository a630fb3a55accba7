"""The Export control says the file it will write, and runs of one cell never collide."""

from __future__ import annotations

import re

from jupyter_torchprof import export_menu
from jupyter_torchprof.export_menu import run_stem
from jupyter_torchprof.views.export_control import ExportControl


def _runs(shell, n: int):
    shell.run_cell("import torch\nx = torch.randn(16, 16)")
    out = []
    for k in range(n):
        shell.run_cell_magic("torchprof", f"--steps 1 -q -o r{k}", "y = x @ x\n")
        out.append(shell.user_ns[f"r{k}"])
    return out


def _hint_name(control: ExportControl) -> str:
    text = re.sub(r"<[^>]+>", "", control.hint.value)
    return re.search(r"→ \./torchprof-exports/(\S+)", text).group(1)


def test_two_runs_of_one_cell_get_their_own_names(shell):
    a, b = _runs(shell, 2)
    assert a.name == b.name  # both named after the cell
    assert run_stem(a) != run_stem(b)
    assert a.run_dir.name in run_stem(a)


def test_the_hint_names_the_file_the_click_writes(shell, tmp_path):
    (p,) = _runs(shell, 1)
    control = ExportControl(p, export_menu)
    try:
        for _ in range(3):
            promised = _hint_name(control)
            written = control.run()
            assert written is not None and written.name == promised
        assert [w.name for w in control.written] == [
            f"{run_stem(p)}.json.gz",
            f"{run_stem(p)}-2.json.gz",
            f"{run_stem(p)}-3.json.gz",
        ]
        assert _hint_name(control) == f"{run_stem(p)}-4.json.gz"
    finally:
        control.close()


def test_an_html_report_says_how_to_see_it_in_jupyterlab(shell):
    (p,) = _runs(shell, 1)
    control = ExportControl(p, export_menu)
    try:
        control.menu.value = next(c.key for c in control.choices if c.suffix == ".html")
        path = control.run()
        text = control.plain
        assert "Trust HTML" in text
        page = path.read_text(encoding="utf-8")
        # Where scripts are off (JupyterLab's sandboxed HTML viewer) the page says why it is blank.
        noscript = re.search(r"<noscript>(.*?)</noscript>", page, re.S).group(1)
        assert "Trust HTML" in noscript and "timeline" in noscript
    finally:
        control.close()
