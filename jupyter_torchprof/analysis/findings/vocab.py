"""Words the copy and sync rules share: what a copy's name says, and which op caused it.

Rule 4 (`sync`) and rule 5 (`copies`) both read copy names and both name
the op behind an event, so the two live here, below both rules, and neither
rule imports the other.
"""

from __future__ import annotations

import re

from .model import Inputs

#: Kineto's memcpy names: the direction, then on CUDA ``(source -> destination)``
#: memory kinds (``Memcpy HtoD (Pageable -> Device)``).
COPY_NAME = re.compile(
    r"memcpy\s+(HtoD|DtoH|DtoD|PtoP|HtoH|DtoA|AtoD|AtoH|HtoA)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.I
)
#: Ops that must bring a value to the host (and so wait for the device).
SYNC_OPS = (
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::nonzero",
    "aten::masked_select",
    "aten::_unique2",
    "aten::unique_consecutive",
    "aten::repeat_interleave",
)
#: Ops that explain why a copy or a sync happened, checked outermost first.
TRIGGERS = (*SYNC_OPS, "aten::to", "aten::_to_copy", "aten::copy_")


def parse_copy_name(name: str) -> tuple[str, str, str]:
    """(direction, source memory, destination memory) of a memcpy event name.

    Unknown parts are ``""``; the direction is ``"other"`` when the name does
    not say.
    """
    m = COPY_NAME.search(name)
    if not m:
        return "other", "", ""
    d = m.group(1)
    direction = d[0].upper() + "to" + d[-1].upper()
    return direction, (m.group(2) or ""), (m.group(3) or "")


def cause_label(inp: Inputs, ops: list[int], row: int = -1) -> str:
    """Short name of the op that caused a sync or copy.

    ``ops`` is the op chain (outermost first) above event ``row``; without
    ops the innermost ``record_function`` range around ``row`` names it.
    """
    if not ops:
        a = inp.annotation_of(row) if row >= 0 else -1
        return f"(no op) in {inp.names[a]}" if a >= 0 else "(no op: a direct call)"
    names = [inp.op_name(r) for r in ops]
    for i, n in enumerate(names):
        if n in TRIGGERS:
            return n if i == 0 else f"{n} in {names[0]}"
    return names[0] if len(names) == 1 else f"{names[0]} › {names[-1]}"
