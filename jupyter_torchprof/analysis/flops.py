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
