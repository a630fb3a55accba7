"""Notes on op rows (`analysis.notes`): what an op is and why it is in the table.

Each rule reads the trace through a `base.NoteContext` and returns
`base.Hit` rows keyed by op name. A rule fires on an op name only when
every call of it shows the pattern, so that a note never speaks for the
calls it was not true of (or says "in N of M calls").

The rules by subject live in ``ops_*.py`` (GEMM bias and launch sizing,
attention, the profiler's own rows, compiled code, copies made by
out-of-place ops); this module holds the view rule and the registry.
"""

from __future__ import annotations

import numpy as np

from .base import OPS, Annotation, Hit, NoteContext
from .ops_attention import ATTENTION_ANNOTATIONS, ATTENTION_RULES
from .ops_common import children, name_mask, verdicts
from .ops_compiled import COMPILED_ANNOTATIONS, COMPILED_RULES
from .ops_copies import COPY_ANNOTATIONS, COPY_RULES
from .ops_gemm import GEMM_ANNOTATIONS, GEMM_RULES
from .ops_profiler import PROFILER_ANNOTATIONS, PROFILER_RULES

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

METADATA_NO_COPY = Annotation(
    "metadata-only-host",
    OPS,
    "metadata only: no copy",
    "The op makes a new view of its input: new sizes, strides or offset over the same memory. None of its "
    "calls ran a copying op under it. This run traced the host only, so whether it launched device work is "
    "not known here; its time is host bookkeeping (dispatch and creating the tensor object).",
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
    """Views (`METADATA_OPS`) none of whose calls launched device work or called a copying op.

    On a host-only run "launched nothing" cannot be read; the note then
    says only what the call tree shows: no copy.
    """
    candidate = name_mask(ctx, METADATA_OPS.__contains__)
    rows = np.flatnonzero(candidate)
    if not len(rows):
        return []
    spoiled = candidate & ctx.launches_work if ctx.device_traced else np.zeros(len(candidate), dtype=bool)
    # A call with a child op that is not itself a view did real work (reshape -> clone -> copy_).
    kids, parents = children(ctx, rows)
    spoiled[parents[~candidate[kids]]] = True
    good = {name: first for name, first, n_ok, n in verdicts(ctx, rows, ~spoiled[rows]) if n_ok == n}
    note = METADATA_ONLY if ctx.device_traced else METADATA_NO_COPY
    return [Hit(OPS, name, note.id, event=row) for name, row in good.items()]


OP_ANNOTATIONS: tuple[Annotation, ...] = (
    METADATA_ONLY,
    METADATA_NO_COPY,
    *GEMM_ANNOTATIONS,
    *ATTENTION_ANNOTATIONS,
    *PROFILER_ANNOTATIONS,
    *COMPILED_ANNOTATIONS,
    *COPY_ANNOTATIONS,
)
OP_RULES = (metadata_only, *GEMM_RULES, *ATTENTION_RULES, *PROFILER_RULES, *COMPILED_RULES, *COPY_RULES)
