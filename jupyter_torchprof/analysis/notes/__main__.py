"""``python -m jupyter_torchprof.analysis.notes``: print docs/annotations.md."""

import sys

from . import markdown

sys.stdout.write(markdown())
