"""The package's public names: in ``__all__`` and ``dir()``, reachable, and still cheap to import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jupyter_torchprof as jtp

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = {
    "load",
    "profile",
    "profiling",
    "Profile",
    "RankSet",
    "Comparison",
    "ProfileDiff",
    "TraceError",
    "TorchProfError",
    "load_ipython_extension",
    "unload_ipython_extension",
    "__version__",
}


def test_all_and_dir_name_the_public_api_only():
    assert set(jtp.__all__) == PUBLIC
    assert dir(jtp) == sorted(PUBLIC)
    for plumbing in ("Any", "TYPE_CHECKING", "annotations", "importlib"):
        assert plumbing not in dir(jtp)


def test_every_public_name_is_the_real_object():
    from jupyter_torchprof.errors import TorchProfError, TraceError
    from jupyter_torchprof.results.comparison import Comparison
    from jupyter_torchprof.results.profile import Profile
    from jupyter_torchprof.results.profile_diff import ProfileDiff
    from jupyter_torchprof.results.ranks import RankSet

    assert jtp.Profile is Profile and jtp.RankSet is RankSet
    assert jtp.Comparison is Comparison and jtp.ProfileDiff is ProfileDiff
    assert jtp.TraceError is TraceError and issubclass(jtp.TraceError, jtp.TorchProfError)
    assert TorchProfError is jtp.TorchProfError
    assert all(getattr(jtp, name) is not None for name in jtp.__all__)


def test_a_trace_error_is_caught_by_its_top_level_name(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    try:
        jtp.load(str(bad), progress=False)
    except jtp.TraceError as exc:
        assert "bad.json" in str(exc)
    else:  # pragma: no cover - the assertion is the point
        raise AssertionError("a broken trace loaded")


def test_import_and_dir_import_nothing_heavy():
    code = (
        "import sys, json, jupyter_torchprof as j; dir(j); j.TraceError; j.__all__; "
        "print(json.dumps([m for m in ('torch', 'pandas', 'bokeh', 'IPython') if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
