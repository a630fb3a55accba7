"""House rule: the run folder has one owner, ``jupyter_torchprof/runs/``.

What a run folder holds (its record ``run.json``, the caches ``*.tables.npz`` and
``*.timeline.npz``) and where the store lives (``.torchprof/runs``) are named in
``runs/`` and nowhere else in the package, not even in a comment: a module that
needs one of them imports it from ``runs`` (if it sits above it) or is handed
it (if it sits below, as the trace finder is handed ``runs.NOT_TRACES``).

``.torchprof`` is looked for as a folder name: the magic's own attribute
(``TorchProf.torchprof``, the ``%torchprof`` method) is not a path.
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jupyter_torchprof"
OWNER = PACKAGE / "runs"

#: What only the owner may name: a label, and the pattern that finds it in source text.
NAMES: dict[str, re.Pattern[str]] = {
    "run.json": re.compile(re.escape("run.json")),
    ".tables.npz": re.compile(re.escape(".tables.npz")),
    ".timeline.npz": re.compile(re.escape(".timeline.npz")),
    # a folder name: not right after a name, a call or a subscript (``self.torchprof``)
    ".torchprof": re.compile(r"(?<![\w)\]])\.torchprof\b"),
}


def _modules(under: Path) -> list[Path]:
    return sorted(under.rglob("*.py"))


def _hits(path: Path) -> list[str]:
    found = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for label, pattern in NAMES.items():
            if pattern.search(line):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{n}: {label}: {line.strip()[:100]}")
    return found


def test_no_module_outside_runs_names_the_run_folders_files() -> None:
    outside = [p for p in _modules(PACKAGE) if OWNER not in p.parents]
    assert len(outside) > 60, "the walk missed the package"
    hits = [h for p in outside for h in _hits(p)]
    assert not hits, "the run folder named outside runs/ (import it from runs, or pass it in):\n" + "\n".join(
        hits
    )


def test_runs_itself_names_each_of_them() -> None:
    """The patterns find what they look for: each name is in runs/ (so the rule above can fail)."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in _modules(OWNER))
    missing = [label for label, pattern in NAMES.items() if not pattern.search(text)]
    assert not missing, missing


def test_the_folder_pattern_tells_a_path_from_the_magics_attribute() -> None:
    folder = NAMES[".torchprof"]
    assert folder.search('Path(".torchprof") / "runs"') and folder.search("./.torchprof/runs")
    assert folder.search("``.torchprof/runs/<id>``")
    assert not folder.search("TorchProf.torchprof.parser") and not folder.search("self.torchprof(line)")
