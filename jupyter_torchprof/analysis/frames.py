"""Python frames of ``with_stack``: the user's code, or the machinery around it.

In a notebook most recorded frames are not the user's: ipykernel's event loop
(tornado, asyncio, zmq), IPython's cell runner, torch.profiler's own calls and
our progress thread, the threads that wait on worker processes (ours, kept
between loads of a folder of ranks, or a DataLoader's). They bury the cell's
frames on the timeline. A frame is
machinery when its source file belongs to one of those packages. A plain frame
(a built-in such as ``<built-in method …>``, a frozen module, a top-level
standard-library file such as ``contextlib.py``) is whatever the nearest other
frame above it is: ``contextlib`` under IPython is machinery, under the user's
code it is the user's. Every frame that encloses one of torchprof's own frames
is machinery too: it is the stack that ran the magic (a kernel's event loop, a
test runner, a script), never the cell. The cell's own frames
(``/tmp/ipykernel_…/….py``, ``<ipython-input-…>``) and the packages it calls
(torch, the user's model code) stay.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..trace import categories as K
from .tree import nearest_ancestor, subtree_sums

#: Source paths of the kernel machinery, as they appear at the start of a frame's name.
_MACHINERY = re.compile(
    r"(^|/)(ipykernel|IPython|tornado|asyncio|zmq|traitlets|jupyter_client|jupyter_core|comm|"
    r"jupyter_torchprof|debugpy|concurrent/futures|multiprocessing|torch/profiler|torch/autograd/profiler(_util)?\.py|"
    r"threading\.py|selectors\.py|runpy\.py|queue\.py|socket\.py|logging)(/|\.py|\(|$)"
)
_OURS = re.compile(r"(^|/)jupyter_torchprof/")
_PLAIN = re.compile(r"^(<built-in|<frozen |\w+\.py\()")


def machinery_name(name: str) -> bool:
    """Whether a frame name points into the kernel machinery (see the module docstring)."""
    path = name.split("(", 1)[0]
    return bool(_MACHINERY.search(path))


def machinery_frames(events: pd.DataFrame, parent: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Which events are Python frames of the machinery (False for everything else)."""
    is_py = K.kind_mask(events, (K.PYTHON_FUNCTION,))
    if not is_py.any():
        return is_py
    cats = events["name"].cat.categories
    codes = events["name"].cat.codes.to_numpy()
    by_name = np.array([machinery_name(str(c)) for c in cats] + [False])
    plain = np.array([bool(_PLAIN.match(str(c))) for c in cats] + [False])[codes]
    own = is_py & by_name[codes]
    ours = is_py & np.array([bool(_OURS.search(str(c).split("(", 1)[0])) for c in cats] + [False])[codes]
    if ours.any():
        own |= is_py & (subtree_sums(parent, depth, ours.astype(np.float64)) > 0)
    inherits = is_py & plain
    if inherits.any():
        caller = nearest_ancestor(parent, depth, is_py & ~plain)
        take = inherits & (caller >= 0)
        own[take] = own[caller[take]]
    return own
