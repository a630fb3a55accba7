"""Words the copy and sync rules share: what a copy's name says, and which op caused it.

Rule 4 (`sync`) and rule 5 (`copies`) both read copy names and both name
the op behind an event, so the two live here, below both rules, and neither
rule imports the other.
"""

from __future__ import annotations

import re

import numpy as np

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


def cause_labels(inp: Inputs, levels: np.ndarray) -> list[str]:
    """`cause_label` of the op chains in ``levels`` (`Inputs.op_levels`: one column per chain, no row).

    Worked out once per distinct (outermost op, outermost trigger, innermost
    op, more than one op, trigger outermost): thousands of copies name a
    few causes, and a label per copy cost most of the copy rule.
    """
    n = levels.shape[1]
    if not n:
        return []
    top = levels.shape[0] - 1
    col = np.arange(n)
    is_op = levels >= 0
    codes = inp.name_codes[np.maximum(levels, 0)].astype(np.int64)
    # Whether each name is a trigger, tested once per name present.
    present = np.unique(codes[is_op])
    flag = np.array([inp.name_of_code(c) in TRIGGERS for c in present.tolist()] + [False])
    trig = is_op & flag[np.minimum(np.searchsorted(present, codes), len(present))]
    count = is_op.sum(axis=0)
    outer = levels[top - np.argmax(is_op[::-1], axis=0), col]
    inner = levels[np.argmax(is_op, axis=0), col]
    trigger = np.where(trig.any(axis=0), levels[top - np.argmax(trig[::-1], axis=0), col], -1)
    known = count > 0
    keys = np.stack(
        [
            np.where(known, inp.name_codes[np.maximum(outer, 0)], -2),
            np.where(trigger >= 0, inp.name_codes[np.maximum(trigger, 0)], -2),
            np.where(known, inp.name_codes[np.maximum(inner, 0)], -2),
            count > 1,
            (trigger >= 0) & (trigger == outer),
        ],
        axis=1,
    )
    uniq, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    labels = [
        _label_of(inp, int(outer[f]), int(trigger[f]), int(inner[f]), bool(k[3])) if k[0] != -2 else
        "(no op: a direct call)"
        for k, f in zip(uniq.tolist(), first.tolist(), strict=True)
    ]  # fmt: skip
    return [labels[i] for i in inv.ravel().tolist()]


def _label_of(inp: Inputs, outer: int, trigger: int, inner: int, many: bool) -> str:
    """`cause_label` of a chain from its outermost op, outermost trigger (-1: none) and innermost op."""
    first = inp.op_name(outer)
    if trigger >= 0:
        n = inp.op_name(trigger)
        return n if trigger == outer else f"{n} in {first}"
    return f"{first} › {inp.op_name(inner)}" if many else first
