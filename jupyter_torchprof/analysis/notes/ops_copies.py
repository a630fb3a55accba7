"""Notes on out-of-place ops that copy their input because they are written as clone + in-place twin.

``aten::masked_fill`` (like ``index_put``, ``masked_scatter``,
``index_fill``...) is implemented as ``clone`` then ``masked_fill_`` on the
clone: the trace shows ``aten::clone`` (with its ``aten::copy_``, on a GPU a
copy kernel) and the in-place twin directly under the op. Ops such as
``add``/``mul`` allocate their output instead and show no copy; the rule
stays silent on them unless a copy is really there.

The in-place twin skips the copy, but is only safe where nothing else needs
the input, and where autograd does not: an op recorded under autograd
carries a sequence number, and its backward op the same one. The advice is
given only where no call of the op had a sequence number.
"""

from __future__ import annotations

import numpy as np

from .base import OPS, Annotation, Hit, NoteContext
from .ops_common import children, name_rows, named, of_calls, verdicts

_COPIES = ("aten::clone", "aten::copy_")
#: Out-of-place ops with an in-place twin (``name_``); any other op counts when its twin is seen under it.
TWINS = frozenset(
    {
        "aten::masked_fill",
        "aten::masked_scatter",
        "aten::index_put",
        "aten::index_fill",
        "aten::index_add",
        "aten::index_copy",
        "aten::scatter",
        "aten::scatter_add",
        "aten::add",
        "aten::sub",
        "aten::mul",
        "aten::div",
        "aten::clamp",
        "aten::relu",
        "aten::fill",
    }
)

COPIES_INPUT = Annotation(
    "copies-input",
    OPS,
    "copies its input first (the in-place twin would not)",
    "This out-of-place op is implemented as a copy of its input (aten::clone, its aten::copy_, on a GPU a "
    "copy kernel) followed by its in-place twin (masked_fill -> clone + masked_fill_) on the copy. The copy "
    "costs a read and a write of the whole tensor. Calling the in-place form (x.masked_fill_(...)) skips it "
    "where the original tensor is not needed afterwards.",
)
INPLACE_SAFE = Annotation(
    "inplace-safe",
    OPS,
    "no autograd here: the in-place twin would skip the copy",
    "No call of this op was recorded under autograd (no sequence number, so no backward op uses its input), "
    "so the in-place twin (masked_fill_ for masked_fill) computes the same result without copying the "
    "input, provided your code does not read the original tensor afterwards.",
)


def _twin(name: str) -> str:
    return name + "_"


def _twin_codes(ctx: NoteContext, rows: np.ndarray) -> np.ndarray:
    """Per row: the name code of its op's in-place twin (``name_``), -2 where the trace holds no such name."""
    codes, categories = ctx.name_codes
    index = {str(c): i for i, c in enumerate(categories)}
    twin_of = np.array([index.get(_twin(str(c)), -2) for c in categories] + [-2], dtype=np.int64)
    return twin_of[codes[rows]]


def copies_input(ctx: NoteContext) -> list[Hit]:
    """Out-of-place ops whose calls clone their input then run their in-place twin on it."""
    names = ctx.names
    ops = name_rows(ctx, lambda n: n.startswith("aten::") and not n.endswith("_"))
    if not len(ops):
        return []
    kids, parents = children(ctx, ops)
    copied = np.zeros(len(names), dtype=bool)
    copied[parents[named(ctx, kids, _COPIES)]] = True
    twin_seen = np.zeros(len(names), dtype=bool)
    twin_seen[parents[_twin_codes(ctx, parents) == ctx.name_codes[0][kids]]] = True
    rows = ops[copied[ops] & (twin_seen[ops] | named(ctx, ops, TWINS))]
    if not len(rows):
        return []
    # every call of those names, copied or not, so that a note says how many calls copied
    every = ops[named(ctx, ops, set(names[rows].tolist()))]
    ok = copied[every]
    seq = ctx.events["sequence"].to_numpy() if "sequence" in ctx.events.columns else np.full(len(names), -1)
    hits = []
    for name, first, n_ok, n in verdicts(ctx, every, ok):
        twin = _twin(name).removeprefix("aten::")
        text = f"copies its input first ({twin} would not){of_calls(n_ok, n)}"
        hits.append(Hit(OPS, name, COPIES_INPUT.id, text, first))
        if (seq[every[names[every] == name]] < 0).all():
            hits.append(
                Hit(OPS, name, INPLACE_SAFE.id, f"no autograd here: {twin} would skip the copy", first)
            )
    return hits


COPY_ANNOTATIONS = (COPIES_INPUT, INPLACE_SAFE)
COPY_RULES = (copies_input,)
