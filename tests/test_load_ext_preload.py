"""``%load_ext`` imports what every profile needs (`magics.preload`), and nothing heavier.

A session's first small profile paid pandas and the trace/analysis modules
between the end of its last step and its op table (issue 25); they are
imported when the extension loads instead. torch (the notebook imports it)
and bokeh (the view's) stay out of ``%load_ext``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import json, sys
from IPython.core.interactiveshell import InteractiveShell
import jupyter_torchprof.magics as magics
if sys.argv[1] == "broken":
    # A module that cannot be imported: the extension still loads, the run that needs it says why.
    magics.PRELOADED = ("jupyter_torchprof.no_such_module", *magics.PRELOADED)
shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "jupyter_torchprof")
print(json.dumps({
    "magic": "torchprof" in shell.magics_manager.magics["cell"],
    "loaded": [m for m in magics.PRELOADED if m in sys.modules],
    "heavy": [m for m in ("torch", "bokeh") if m in sys.modules],
    "native": "lib" in sys.modules["jupyter_torchprof.trace.native"]._state,
}))
"""


def _load_ext(mode: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, mode], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_load_ext_imports_what_a_profile_needs_but_not_torch_or_bokeh():
    from jupyter_torchprof.magics import PRELOADED

    got = _load_ext("plain")
    assert got["magic"]
    assert got["loaded"] == list(PRELOADED)
    assert "jupyter_torchprof.results.profile" in got["loaded"]
    assert got["heavy"] == []
    assert got["native"]  # looked for (and loaded where a compiler or a built library is)


def test_a_module_that_fails_to_import_does_not_stop_the_extension():
    from jupyter_torchprof.magics import PRELOADED

    got = _load_ext("broken")
    assert got["magic"]
    assert got["loaded"] == list(PRELOADED)
