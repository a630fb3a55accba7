"""Floating-point operation estimates from recorded input shapes.

torch computes FLOPs for a handful of ops when ``with_flops=True`` but does not
write them into the exported trace, so we recompute them from the shapes the
trace does hold, with the same formulas (2 per multiply-add for GEMMs and
convolutions, one per element for elementwise add/mul) and on the same ops
(``aten::conv2d`` only, not the ``aten::convolution`` it calls). Ops without a
formula get 0, as in torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pandas as pd


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


def flops_of(name: str, dims: list[Any], concrete: list[Any]) -> int:
    """FLOPs of one call of ``name`` with input shapes ``dims``."""
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
FLOPS_COLUMNS = ("name", "input_dims", "concrete_inputs")


def estimate_flops(events: pd.DataFrame) -> np.ndarray:
    """FLOPs per event (0 where unknown), computed once per distinct call shape."""
    n = len(events)
    if n == 0 or "input_dims" not in events:
        return np.zeros(n)
    key = pd.DataFrame(
        {
            "name": events["name"].astype(object).to_numpy(),
            "dims": events["input_dims"].astype(object).to_numpy(),
            "concrete": events["concrete_inputs"].astype(object).to_numpy()
            if "concrete_inputs" in events
            else None,
        }
    )
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(key.fillna("")))
    values = np.zeros(len(uniques))
    for i, (name, dims, concrete) in enumerate(uniques):
        if not dims:
            continue
        try:
            d = orjson.loads(dims)
            c = orjson.loads(concrete) if concrete else []
        except orjson.JSONDecodeError:
            continue
        values[i] = flops_of(name, d, c if isinstance(c, list) else [])
    return values[codes]
