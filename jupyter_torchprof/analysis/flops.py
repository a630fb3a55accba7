"""Floating-point operation estimates from recorded input shapes.

torch computes FLOPs for a handful of ops when ``with_flops=True`` but does not
write them into the exported trace, so we recompute them from the shapes the
trace does hold, with the same formulas (2 per multiply-add for GEMMs and
convolutions, one per element for elementwise add/mul) and on the same ops
(``aten::conv2d`` only, not the ``aten::convolution`` it calls). Ops without a
formula get 0, as in torch, and so does a call whose operands are not the
tensors torch reads its sizes from (``validateInput`` in torch's
``profiler/util.cpp``): an ``aten::add`` whose first input is a Scalar is
0 FLOPs, not the one element of its empty shape. Only ops have FLOPs: a
``record_function("aten::mm")`` range is an annotation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pandas as pd

from ..trace.categories import CPU_OP, kind_mask


def _numel(shape: list[int]) -> int:
    out = 1
    for d in shape:
        out *= int(d)
    return out


def _as_ints(value: Any, default: list[int]) -> list[int]:
    if isinstance(value, str) and value.startswith("["):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return default
    if isinstance(value, list) and all(isinstance(v, (int, float)) for v in value) and value:
        return [int(v) for v in value]
    if isinstance(value, (int, float)):
        return [int(value)] * len(default)
    if isinstance(value, str):
        try:
            return [int(value)] * len(default)
        except ValueError:
            return default
    return default


def _conv2d(dims: list[Any], concrete: list[Any]) -> int:
    if len(dims) < 2 or len(dims[0]) != 4 or len(dims[1]) != 4:
        return 0
    n, c_in, h, w = dims[0]
    c_out, _, kh, kw = dims[1]
    stride = _as_ints(concrete[3] if len(concrete) > 3 else None, [1, 1])
    padding = _as_ints(concrete[4] if len(concrete) > 4 else None, [0, 0])
    dilation = _as_ints(concrete[5] if len(concrete) > 5 else None, [1, 1])
    groups = _as_ints(concrete[6] if len(concrete) > 6 else None, [1])[0] or 1
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + 2 * padding[-1] - dilation[-1] * (kw - 1) - 1) // stride[-1] + 1
    return 2 * n * oh * ow * kh * kw * c_in * c_out // groups


def _mm(a: list[int], b: list[int]) -> int:
    if len(a) != 2 or len(b) != 2:
        return 0
    return 2 * a[0] * a[1] * b[1]


def _bmm(a: list[int], b: list[int]) -> int:
    if len(a) != 3 or len(b) != 3:
        return 0
    return 2 * a[0] * a[1] * a[2] * b[2]


#: Per op with a formula: how many inputs torch wants and which of them
#: must be tensors, else it saves no sizes and counts 0 (torch 2.13,
#: ``saveExtraArgs``).
_TENSOR_INPUTS: dict[str, tuple[int, tuple[int, ...]]] = {
    "aten::conv2d": (7, (0, 1)),
    "aten::mm": (2, (0, 1)),
    "aten::addmm": (3, (0, 1, 2)),
    "aten::bmm": (2, (0, 1)),
    "aten::baddbmm": (3, (0, 1, 2)),
    "aten::mul": (1, (0,)),
    "aten::add": (1, (0,)),
}
#: ``Input type`` values of inputs that are not tensors (a tensor's is its
#: dtype: ``float``, ``long int``, ``c10::Half`` ...; None's is empty).
_NOT_TENSOR = frozenset({"", "Scalar", "ScalarList", "TensorList", "GenericList"})


def torch_reads_sizes(name: str, types: list[Any] | None) -> bool:
    """Whether torch would compute ``name``'s FLOPs from inputs of these ``Input type`` values.

    Parameters
    ----------
    name
        Op name (``aten::add``).
    types
        The event's ``Input type`` list; None when the trace has none (then
        the shapes alone decide, as before types were recorded).

    Returns
    -------
    False when torch's rule gives the call 0 FLOPs whatever its shapes.
    """
    need = _TENSOR_INPUTS.get(name)
    if need is None or types is None:
        return True
    count, tensors = need
    return len(types) >= count and all(
        isinstance(types[i], str) and types[i] not in _NOT_TENSOR for i in tensors
    )


def flops_of(name: str, dims: list[Any], concrete: list[Any], types: list[Any] | None = None) -> int:
    """FLOPs of one call of ``name`` with input shapes ``dims`` (and input types ``types``, if recorded)."""
    if not torch_reads_sizes(name, types):
        return 0
    try:
        if name == "aten::mm" and len(dims) >= 2:
            return _mm(dims[0], dims[1])
        if name == "aten::addmm" and len(dims) >= 3:
            return _mm(dims[1], dims[2])
        if name == "aten::bmm" and len(dims) >= 2:
            return _bmm(dims[0], dims[1])
        if name == "aten::baddbmm" and len(dims) >= 3:
            return _bmm(dims[1], dims[2])
        if name == "aten::conv2d":
            # Only the user-facing op: ``aten::convolution`` and
            # ``aten::_convolution`` run inside it with the same shapes, and
            # torch gives them no FLOPs, so the column sums once per conv.
            return _conv2d(dims, concrete)
        if name in ("aten::mul", "aten::add") and dims and isinstance(dims[0], list):
            return _numel(dims[0])
    except (TypeError, ValueError, IndexError):
        return 0
    return 0


#: The events columns `estimate_flops` reads.
FLOPS_COLUMNS = ("name", "kind", "input_dims", "input_types", "concrete_inputs")


def _column(events: pd.DataFrame, col: str) -> np.ndarray | None:
    return events[col].astype(object).to_numpy() if col in events else None


def _loads(text: str) -> Any:
    """A JSON cell, or None when empty or unreadable."""
    if not text:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def estimate_flops(events: pd.DataFrame) -> np.ndarray:
    """FLOPs per event (0 where unknown or not an op), computed once per distinct call.

    Parameters
    ----------
    events
        Events with `FLOPS_COLUMNS` (``input_types``, ``concrete_inputs``
        and ``kind`` may be missing).

    Returns
    -------
    One float per event.
    """
    n = len(events)
    if n == 0 or "input_dims" not in events:
        return np.zeros(n)
    key = pd.DataFrame(
        {
            "name": events["name"].astype(object).to_numpy(),
            "dims": events["input_dims"].astype(object).to_numpy(),
            "concrete": _column(events, "concrete_inputs"),
            "types": _column(events, "input_types"),
        }
    )
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(key.fillna("")))
    values = np.zeros(len(uniques))
    for i, (name, dims, concrete, types) in enumerate(uniques):
        d = _loads(dims)
        if not d:
            continue
        c = _loads(concrete)
        t = _loads(types)
        values[i] = flops_of(name, d, c if isinstance(c, list) else [], t if isinstance(t, list) else None)
    out = values[codes]
    if "kind" in events:
        # torch computes FLOPs for ops only; an annotation named like one
        # (``record_function("aten::mm")``) has none.
        out[~kind_mask(events, (CPU_OP,))] = 0.0
    return out


# --------------------------------------------------------------------------- #
# our own estimates: the FLOPs torch does not count
#
# torch's ``flops`` (above) counts matmuls and ``aten::conv2d`` only. The
# estimates below add convolutions of every rank and their transposes,
# scaled dot-product attention and ``aten::linear``, with the same rules
# where torch counts (2 FLOPs per multiply-add; a bias add is not counted),
# so ``est_flops`` equals ``flops`` on mm, addmm, bmm, baddbmm and conv2d.
#
# Where the FLOPs sit: on the OUTERMOST op of a call chain that has a formula
# and whose arguments the trace recorded (`_keep_outermost`). An
# ``aten::conv1d`` holds its convolution and the ``aten::convolution`` /
# ``aten::_convolution`` below it get none; ``aten::scaled_dot_product_attention``
# holds the attention and its backend op (``_scaled_dot_product_flash_attention``,
# ``_efficient_attention``, the math path's ``bmm``) gets none; a backend op
# called directly (a compiled graph) holds its own. ``aten::einsum`` and
# ``aten::matmul`` have no formula, so the ``bmm``/``mm`` they call (the leaf)
# holds it. ``aten::linear`` is the one exception: it defers to the GEMM
# below it (``addmm`` or ``matmul``→``mm``), as torch counts there, and holds
# the FLOPs only when nothing below it has a formula. So a chain is counted
# once, never on both a parent and its child.
#
# Attention is dense and forward: 2·L·S·E for QKᵀ plus 2·L·S·Ev for the
# product with V, per batch and head (4·B·H·L·S·E when Ev = E), whether or
# not ``is_causal`` lets a kernel skip half (torch.utils.flop_counter does
# the same). Backward ops (``convolution_backward``, the attention
# ``*_backward`` ops) have no formula yet: their ``mm``/``bmm`` leaves count.

#: Bytes per element of a tensor's ``Input type``.
_ELEMENT_BYTES = {
    "double": 8,
    "float": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
}

_SDPA_OPS = frozenset(
    {
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_attention_math",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
        "aten::_scaled_dot_product_fused_attention_overrideable",
    }
)
#: Forward convolutions by rank: (stride, padding, dilation, groups) argument positions.
_CONV_OPS = {f"aten::conv{d}d": d for d in (1, 2, 3)}
#: Transposed convolutions: (input, weight, bias, stride, padding, output_padding, groups, dilation).
_CONV_T_OPS = {f"aten::conv_transpose{d}d": d for d in (1, 2, 3)}
_GEMM_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"})
#: Ops whose estimate stands back for one below them (see the notes above).
_DEFERRING = frozenset({"aten::linear"})
#: Every op with an estimate.
EST_OPS = frozenset(
    {*_SDPA_OPS, *_CONV_OPS, *_CONV_T_OPS, *_GEMM_OPS, *_DEFERRING, "aten::convolution", "aten::_convolution"}
)


@dataclass(frozen=True)
class Estimate:
    """One call's estimate: FLOPs, bytes read and written (inputs and output), the inputs' element type."""

    flops: float
    bytes: float
    dtype: str


def _prod(values: list[int]) -> int:
    out = 1
    for v in values:
        out *= int(v)
    return out


def _ints(value: Any, rank: int) -> list[int] | None:
    """A recorded int list (``"[2, 1]"``, ``"2"``) as ``rank`` ints; None when not recorded (``""``)."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and not value.startswith("["):
        try:
            value = int(value)
        except ValueError:
            return None  # a padding given as a word ("same"): the trace does not say which
    parsed = _as_ints(value if not isinstance(value, int) else [value], [])
    if not parsed:
        return None
    if len(parsed) == 1 and rank > 1:
        parsed = parsed * rank
    return parsed if len(parsed) == rank else None


def _conv_forward(x: list[int], w: list[int], stride: Any, pad: Any, dil: Any) -> tuple[int, int] | None:
    """(FLOPs, output elements) of a forward convolution: 2·N·C_out·∏out·(C_in/groups)·∏kernel."""
    rank = len(w) - 2
    if rank < 1 or len(x) not in (rank + 1, rank + 2):
        return None
    n = x[0] if len(x) == rank + 2 else 1
    s, p, d = _ints(stride, rank), _ints(pad, rank), _ints(dil, rank)
    if s is None or p is None or d is None:
        return None
    space = x[-rank:]
    out = [(space[i] + 2 * p[i] - d[i] * (w[2 + i] - 1) - 1) // s[i] + 1 for i in range(rank)]
    if min(out) <= 0:
        return None
    # w = [C_out, C_in / groups, *kernel]
    return 2 * n * _prod(out) * w[0] * w[1] * _prod(w[2:]), n * w[0] * _prod(out)


def _conv_transposed(
    x: list[int], w: list[int], stride: Any, pad: Any, out_pad: Any, dil: Any, groups: Any
) -> tuple[int, int] | None:
    """(FLOPs, output elements) of a transposed convolution.

    It is the gradient of a forward convolution with respect to that one's
    input, so it costs what that forward one does: every input element
    meets every kernel element of each output channel of its group,
    2·N·∏in·C_in·(C_out/groups)·∏kernel (weight = [C_in, C_out/groups, *kernel]).
    """
    rank = len(w) - 2
    if rank < 1 or len(x) not in (rank + 1, rank + 2):
        return None
    n = x[0] if len(x) == rank + 2 else 1
    s, p, op, d = _ints(stride, rank), _ints(pad, rank), _ints(out_pad, rank), _ints(dil, rank)
    g = _ints(groups, 1)
    if s is None or p is None or op is None or d is None or g is None:
        return None
    space = x[-rank:]
    out = [(space[i] - 1) * s[i] - 2 * p[i] + d[i] * (w[2 + i] - 1) + op[i] + 1 for i in range(rank)]
    flops = 2 * n * _prod(space) * w[0] * w[1] * _prod(w[2:])
    return flops, n * w[1] * g[0] * _prod(out)


def _attention(q: list[int], k: list[int], v: list[int]) -> tuple[int, int] | None:
    """(FLOPs, output elements) of softmax(QKᵀ)V: 2·B·H·L·S·(E + Ev); q = [..., L, E], k = [..., S, E], v = [..., S, Ev]."""
    if len(q) < 2 or len(k) < 2 or len(v) < 2:
        return None
    batch = _prod(q[:-2])
    big_l, e = q[-2], q[-1]
    s, ev = k[-2], v[-1]
    return 2 * batch * big_l * s * (e + ev), batch * big_l * ev


def _gemm(name: str, dims: list[Any]) -> tuple[int, int] | None:
    a, b = (dims[1], dims[2]) if name in ("aten::addmm", "aten::baddbmm") else (dims[0], dims[1])
    if name in ("aten::mm", "aten::addmm") and len(a) == 2 and len(b) == 2:
        return 2 * a[0] * a[1] * b[1], a[0] * b[1]
    if name in ("aten::bmm", "aten::baddbmm") and len(a) == 3 and len(b) == 3:
        return 2 * a[0] * a[1] * a[2] * b[2], a[0] * a[1] * b[2]
    return None


def _linear(x: list[int], w: list[int]) -> tuple[int, int] | None:
    """(FLOPs, output elements) of x·Wᵀ: 2·∏x[:-1]·in·out (w = [out, in])."""
    if len(w) != 2 or not x or x[-1] != w[1]:
        return None
    rows = _prod(x[:-1])
    return 2 * rows * w[1] * w[0], rows * w[0]


def _flops_and_output(name: str, dims: list[Any], concrete: list[Any]) -> tuple[int, int] | None:
    """(FLOPs, output elements) of one call, None when the recorded arguments do not tell."""

    def arg(i: int) -> Any:
        return concrete[i] if i < len(concrete) else None

    if len(dims) < 2:
        return None
    if name in _GEMM_OPS:
        return (
            _gemm(name, dims) if len(dims) >= (3 if name in ("aten::addmm", "aten::baddbmm") else 2) else None
        )
    if name in _SDPA_OPS:
        return _attention(dims[0], dims[1], dims[2]) if len(dims) >= 3 else None
    if name == "aten::linear":
        return _linear(dims[0], dims[1])
    if name in _CONV_OPS:
        if _ints(arg(6), 1) is None:
            return None
        return _conv_forward(dims[0], dims[1], arg(3), arg(4), arg(5))
    if name in _CONV_T_OPS:
        return _conv_transposed(dims[0], dims[1], arg(3), arg(4), arg(5), arg(7), arg(6))
    if name in ("aten::convolution", "aten::_convolution"):
        # (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, ...)
        if str(arg(6)).lower() == "true":
            return _conv_transposed(dims[0], dims[1], arg(3), arg(4), arg(7), arg(5), arg(8))
        if _ints(arg(8), 1) is None:
            return None
        return _conv_forward(dims[0], dims[1], arg(3), arg(4), arg(5))
    return None


def estimate_call(name: str, dims: list[Any], concrete: list[Any], types: list[Any]) -> Estimate | None:
    """Our estimate of one call of ``name`` (None when it has no formula or its arguments were not recorded).

    ``bytes`` is every tensor input read once plus the output written once,
    at the element size of each input's type (the output at the first
    input's): what a kernel that keeps nothing in cache must move.
    """
    if name not in EST_OPS or not isinstance(dims, list):
        return None
    try:
        got = _flops_and_output(name, dims, concrete)
    except (TypeError, ValueError, IndexError):
        return None
    if got is None or got[0] <= 0:
        return None
    flops, out_elements = got
    tensors = [
        (d, t) for d, t in zip(dims, types, strict=False) if isinstance(d, list) and d and t in _ELEMENT_BYTES
    ]
    dtype = tensors[0][1] if tensors else ""
    size = _ELEMENT_BYTES.get(dtype, 0)
    moved = sum(_prod(d) * _ELEMENT_BYTES[t] for d, t in tensors) + out_elements * size
    return Estimate(float(flops), float(moved), dtype)


#: The events columns `own_estimates` reads (besides ``name`` and ``kind``).
EST_COLUMNS = ("input_dims", "input_types", "concrete_inputs")


def _estimates_of_calls(events: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FLOPs, bytes and element type of each of ``rows``, computed once per distinct call.

    Calls are told apart by the codes of their name and `EST_COLUMNS` (a
    missing cell reads ""): the labels of a distinct call are looked up
    once, where a string per row and column cost most of the kernel table.
    """
    columns = [_codes_at(events, c, rows) for c in ("name", *EST_COLUMNS)]
    call = np.zeros(len(rows), dtype=np.int64)
    for codes, labels in columns:
        # Re-factorized after each column, so the combined key stays dense.
        call, _ = pd.factorize(call * (len(labels) + 1) + codes + 1)
    first = np.zeros(int(call.max(initial=-1)) + 1, dtype=np.int64)
    first[call[::-1]] = np.arange(len(rows) - 1, -1, -1)  # the first row of each call
    flops = np.zeros(len(first))
    moved = np.zeros(len(first))
    dtype = np.full(len(first), "", dtype=object)
    for i, row in enumerate(first.tolist()):
        name, dims, types, concrete = (labels[codes[row]] for codes, labels in columns)
        d, t, c = _loads(dims), _loads(types), _loads(concrete)
        est = estimate_call(name, d, c if isinstance(c, list) else [], t if isinstance(t, list) else [])
        if est is not None:
            flops[i], moved[i], dtype[i] = est.flops, est.bytes, est.dtype
    return flops[call], moved[call], dtype[call]


def _codes_at(events: pd.DataFrame, col: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(code per row, label per code) of ``col`` at ``rows``; code -1 reads "" (missing or no column)."""
    if col not in events:
        return np.full(len(rows), -1, dtype=np.int64), np.array([""], dtype=object)
    values = events[col]
    if isinstance(values.dtype, pd.CategoricalDtype):
        codes = values.cat.codes.to_numpy()[rows].astype(np.int64)
        labels = values.cat.categories.to_numpy(dtype=object)
    else:
        codes, labels = pd.factorize(values.to_numpy(dtype=object)[rows])
        codes, labels = codes.astype(np.int64), np.asarray(labels, dtype=object)
    # Code -1 indexes the last label: "", as fillna("") read a missing cell.
    return codes, np.append(labels, np.array([""], dtype=object))


def _ancestor_flags(parent: np.ndarray, rows: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """For each of ``rows``: whether any strict ancestor is ``marked`` (one step up the tree per pass)."""
    hit = np.zeros(len(rows), dtype=bool)
    cur = parent[rows]
    while True:
        live = cur >= 0
        if not live.any():
            return hit
        hit[live] |= marked[cur[live]]
        cur = np.where(live, parent[np.maximum(cur, 0)], -1)


def _mark_ancestors(parent: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """A mask of every strict ancestor of ``rows``."""
    out = np.zeros(n, dtype=bool)
    cur = parent[rows]
    cur = cur[cur >= 0]
    while len(cur):
        cur = cur[~out[cur]]  # a branch already walked needs no second walk
        out[cur] = True
        cur = parent[cur]
        cur = cur[cur >= 0]
    return out


def _keep_outermost(
    rows: np.ndarray, deferring: np.ndarray, flops: np.ndarray, parent: np.ndarray, n: int
) -> np.ndarray:
    """Which estimated events keep their FLOPs: one per call chain (see the notes above `_ELEMENT_BYTES`).

    ``rows``: the candidates (sorted), the only events with an estimate;
    ``deferring`` (those named in `_DEFERRING`) and ``flops`` at them; ``n``
    events in all. Returns one flag per candidate. (Masks of every event
    were made here, eight passes over ten million events for a few
    hundred thousand candidates.)
    """
    has = flops > 0
    deferring = has & deferring
    claims = np.zeros(n, dtype=bool)
    claims[rows[has & ~deferring]] = True
    keep = has.copy()
    held = np.flatnonzero(has)
    keep[held[_ancestor_flags(parent, rows[held], claims)]] = False
    # aten::linear stands back for a GEMM kept below it.
    below = _mark_ancestors(parent, rows[keep & ~deferring], n)
    keep[deferring & below[rows]] = False
    return keep


def own_estimates(events: pd.DataFrame, parent: np.ndarray) -> pd.DataFrame:
    """Our FLOPs and bytes per event (`estimate_call`), each call chain counted once.

    Parameters
    ----------
    events
        Events with ``name``, ``kind`` and `EST_COLUMNS` (any may be missing: no estimates).
    parent
        Host call tree (`tree.host_tree`'s ``parent``).

    Returns
    -------
    ``est_flops`` and ``est_bytes`` (0 where none) and ``est_dtype`` (the
    inputs' element type, "" where none; a categorical), aligned with ``events``.
    """
    n = len(events)
    flops, moved = np.zeros(n), np.zeros(n)
    labels, at = np.array([""], dtype=object), None
    rows = _candidates(events) if n and "input_dims" in events else np.array([], dtype=np.int64)
    if len(rows):
        flops[rows], moved[rows], dtype = _estimates_of_calls(events, rows)
        # The names' test runs on the categories, not on a string per event.
        deferring = _named(events, _DEFERRING, rows)
        keep = _keep_outermost(rows, deferring, flops[rows], np.asarray(parent), n)
        # Zeroed in place at the candidates left out: elsewhere both are 0
        # already (two new arrays of every event were 150 MB on 9M events).
        dropped = rows[~keep]
        flops[dropped] = 0.0
        moved[dropped] = 0.0
        # Element types by code: a few distinct ones over every event ("" first).
        codes, uniq = pd.factorize(np.concatenate([[""], np.where(keep, dtype, "")]).astype(object))
        labels = np.asarray(uniq, dtype=object)
        at = np.zeros(n, dtype=_code_type(len(labels)))
        at[rows] = codes[1:]
    if at is None:
        at = np.zeros(n, dtype=np.int8)
    # One frame made at the end (a frame of defaults, then three column
    # replacements, was a fixed cost on every trace).
    # The element types as a categorical (codes into the few labels): a
    # string per event was half of this function on a million events, for
    # a column read only at the rows with an estimate.
    est_dtype = pd.Categorical.from_codes(at, labels) if n else np.array([], dtype=object)
    # copy=False: the arrays are this call's own, and stacking the two float
    # columns into one block copied 150 MB on a 9M-event trace.
    return pd.DataFrame(
        {"est_flops": flops, "est_bytes": moved, "est_dtype": est_dtype}, index=events.index, copy=False
    )


def _code_type(labels: int) -> type:
    """The integer type pandas keeps a categorical's codes in for ``labels`` categories (no conversion pass)."""
    for t in (np.int8, np.int16, np.int32):
        if labels < np.iinfo(t).max:
            return t
    return np.int64


def _candidates(events: pd.DataFrame) -> np.ndarray:
    """The ``cpu_op`` events named in `EST_OPS`."""
    candidate = _named(events, EST_OPS)
    if "kind" in events:
        candidate &= kind_mask(events, (CPU_OP,))
    return np.flatnonzero(candidate)


def _named(events: pd.DataFrame, names: Any, rows: np.ndarray | None = None) -> np.ndarray:
    """``events["name"].isin(names)`` as a boolean array (at ``rows`` only, if given), tested once per distinct name where the column is categorical."""
    col = events["name"]
    if isinstance(col.dtype, pd.CategoricalDtype):
        # Code -1 (a missing name) reads the False appended last.
        hit = np.append(col.cat.categories.isin(list(names)), False)
        codes = col.cat.codes.to_numpy()
        return hit[codes if rows is None else codes[rows]]
    found = np.asarray(col.isin(list(names)), dtype=bool)
    return found if rows is None else found[rows]
