"""Notes on op rows (`analysis.notes`): what an op is and why it is in the table.

Each rule reads the trace through a `base.NoteContext` and returns
`base.Hit` rows keyed by op name. A rule fires on an op name only when
every call of it shows the pattern, so that a note never speaks for the
calls it was not true of.
"""

from __future__ import annotations

import numpy as np

from ...trace import categories as K
from .base import OPS, Annotation, Hit, NoteContext

#: Ops that only make a new view of their input's storage (new sizes,
#: strides or offset); ``reshape``/``contiguous`` copy when they must, which
#: shows as a child op, and the rule then stays silent.
METADATA_OPS = frozenset(
    {
        "aten::t",
        "aten::transpose",
        "aten::permute",
        "aten::view",
        "aten::_unsafe_view",
        "aten::reshape",
        "aten::as_strided",
        "aten::expand",
        "aten::expand_as",
        "aten::unsqueeze",
        "aten::squeeze",
        "aten::slice",
        "aten::select",
        "aten::narrow",
        "aten::alias",
        "aten::detach",
        "aten::lift_fresh",
        "aten::unflatten",
        "aten::flatten",
        "aten::numpy_T",
        "aten::split",
        "aten::chunk",
        "aten::unbind",
        "aten::contiguous",
        "aten::resolve_conj",
        "aten::resolve_neg",
    }
)

METADATA_ONLY = Annotation(
    "metadata-only",
    OPS,
    "metadata only: no device work",
    "The op makes a new view of its input: new sizes, strides or offset over the same memory. "
    "It launched no kernel and copied nothing in any of its calls; its time is host bookkeeping "
    "(dispatch and creating the tensor object), which grows with the number of calls, not the tensor size.",
)


def metadata_only(ctx: NoteContext) -> list[Hit]:
    """Views (`METADATA_OPS`) none of whose calls launched device work or called a copying op."""
    names = ctx.names
    ops = ctx.rows_of_kind(K.CPU_OP)
    candidate = np.zeros(len(names), dtype=bool)
    candidate[ops] = [n in METADATA_OPS for n in names[ops]]
    if not candidate.any():
        return []
    spoiled = candidate & ctx.launches_work
    # A call with a child op that is not itself a view did real work (reshape -> clone -> copy_).
    children = ops[ctx.parent[ops] >= 0]
    parents = ctx.parent[children]
    real_child = candidate[parents] & ~candidate[children]
    spoiled[parents[real_child]] = True
    good: dict[str, int] = {}
    bad: set[str] = set()
    for row in np.flatnonzero(candidate):
        name = names[row]
        if spoiled[row]:
            bad.add(name)
        else:
            good.setdefault(name, int(row))
    return [Hit(OPS, name, METADATA_ONLY.id, event=row) for name, row in good.items() if name not in bad]


OP_ANNOTATIONS: tuple[Annotation, ...] = (METADATA_ONLY,)
OP_RULES = (metadata_only,)
