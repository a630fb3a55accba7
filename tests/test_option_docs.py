"""Every option the magic accepts is in ``%%torchprof?`` and in the README's option table.

The help is generated from the magic's argument table, and the README's
table is written by hand; these tests keep the two from drifting apart again
(the table once missed --export, --export-table, --force, --output and the
--no-* forms), and hold the help's run counts to the constants the code uses.
"""

from __future__ import annotations

import re
from pathlib import Path

from jupyter_torchprof.capture.backends import registry
from jupyter_torchprof.capture.runner import INTERLEAVE_ROUNDS
from jupyter_torchprof.magics import TorchProf

README = Path(__file__).resolve().parents[1] / "README.md"
_OPTION = re.compile(r"(?<![\w-])(--?[a-z][\w-]*)")


def _accepted() -> set[str]:
    """Every option string the magic's parser accepts (``--memory`` and ``--no-memory``, ``-o`` …)."""
    parser = TorchProf.torchprof.parser
    return {s for action in parser._actions for s in action.option_strings if s not in ("-h", "--help")}


def _readme_option_table() -> list[str]:
    """The first cells of the table under '## The magic' whose header is '| option |'."""
    text = README.read_text()
    section = text.split("\n## The magic\n", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| option |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1])
    return rows


def test_the_parser_has_the_options_the_docs_promise():
    # A guard for the two tests below: they compare against this set.
    assert {"--export", "--export-table", "--force", "-o", "--output", "--no-memory", "--no-dynamic"} <= (
        _accepted()
    )


def test_every_option_is_in_the_help():
    doc = TorchProf.torchprof.__doc__
    written = set(_OPTION.findall(doc))
    missing = sorted(_accepted() - written)
    assert not missing, f"not in %%torchprof?: {missing}"


def test_every_option_is_in_the_readme_table_and_no_other():
    written = {opt for cell in _readme_option_table() for opt in _OPTION.findall(cell)}
    assert not sorted(_accepted() - written), (
        f"not in the README's option table: {sorted(_accepted() - written)}"
    )
    assert not sorted(written - _accepted()), (
        f"in the README's table, not accepted: {sorted(written - _accepted())}"
    )


def test_the_help_says_how_often_the_cell_runs():
    """The counts as the capture runs them (tests/test_magic.py counts the eager runs: 2 + 1 + 3)."""
    doc = " ".join(TorchProf.torchprof.__doc__.split())
    assert "runs ``warmup + 1 + steps`` times" in doc
    assert f"``max(steps, {INTERLEAVE_ROUNDS})`` more times in each mode" in doc
    assert "``max(warmup, 2) + 1 + steps`` times compiled" in doc
    for backend in registry().values():
        if backend.min_warmup:
            assert backend.label in doc, backend.label
            assert f"at least {backend.min_warmup} warm-up runs" in doc
