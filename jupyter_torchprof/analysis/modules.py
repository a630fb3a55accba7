"""Which ``nn.Module`` each op ran in, and the time and kernels of each module.

Module calls reach the trace in one of three ways:

* ``%%torchprof --modules`` records one range per module call, a
  ``user_annotation`` called ``nn.Module: model.layers.0 (Linear)``;
* torch's Python tracer (``with_stack=True``) writes ``python_function``
  events called ``nn.Module: Linear_0``;
* TorchScript writes ``args."Module Hierarchy"`` on each op (the parsed
  ``module`` column).

An op's module is the innermost module range enclosing it on its thread
(the ranges nest on the host call tree like any other), else its TorchScript
hierarchy.

Backward work runs after every module call has returned, so no range encloses
it. It gets the module of the forward op that made its autograd node, marked
``MODULE · backward`` (e.g. ``model.0 (Linear) · backward``): a separate row
when ops are grouped by module, so forward and backward time stay apart. The
link is the autograd ``Sequence number`` (the parsed ``sequence`` column): the
engine's ``autograd::engine::evaluate_function: AddmmBackward0`` node carries
the number of the forward op (``aten::addmm``) that created it, and every op
under the node (``AddmmBackward0``, ``aten::mm`` ...) is that node's work.
Numbers count per forward thread and only grow, so the forward op taken is the
latest one with the node's number that started before it (Kineto's ``fwdbwd``
flows draw the same arrow; the number is on the events themselves). A node
whose forward op ran outside every module (``aten::sum`` of the loss) or has
no number (``AccumulateGrad``) gets no module, as before.

Everything here is pure: events and tree in, arrays and tables out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import categories as K
from .tree import ancestor_of, nearest_ancestor

#: Prefix of a module range's name (ours and torch's Python tracer's).
MODULE_PREFIX = "nn.Module: "
#: How torch names the autograd engine's call of one backward node.
BACKWARD_NODE_PREFIX = "autograd::engine::evaluate_function: "
#: Appended to a forward module's label for the backward work it caused.
BACKWARD_SUFFIX = " · backward"

_MODULE_TABLE_COLUMNS = [
    "module", "calls", "cpu_total_us", "self_cpu_us", "device_total_us", "ops", "kernels",
    "cpu_mean_us", "device_mean_us",
]  # fmt: skip


def module_ranges(events: pd.DataFrame) -> np.ndarray:
    """Whether each event is a module range (``nn.Module: …`` annotation or Python frame)."""
    cats = events["name"].cat.categories
    hit = np.array([isinstance(c, str) and c.startswith(MODULE_PREFIX) for c in cats] + [False])
    is_range = hit[events["name"].cat.codes.to_numpy()]
    return is_range & K.kind_mask(events, (K.USER_ANNOTATION, K.PYTHON_FUNCTION))


def module_label(name: str) -> str:
    """``nn.Module: model.0 (Linear)`` → ``model.0 (Linear)``."""
    return name[len(MODULE_PREFIX) :] if name.startswith(MODULE_PREFIX) else name


def enclosing_module(events: pd.DataFrame, parent: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Row of the innermost module range enclosing each event (-1 for none).

    A module range's own row points at the module range around it.
    """
    return nearest_ancestor(parent, depth, module_ranges(events))


def module_of(events: pd.DataFrame, parent: np.ndarray, depth: np.ndarray) -> pd.Series:
    """The module each event ran in, as a label (empty where none is known).

    The innermost enclosing module range wins; events outside every range
    keep TorchScript's ``Module Hierarchy`` when the trace has one, and
    backward work outside every range gets its forward op's module with
    `BACKWARD_SUFFIX` (see the module docstring).
    """
    owner = enclosing_module(events, parent, depth)
    names = events["name"]
    labels = np.array([module_label(str(c)) for c in names.cat.categories] + [""], dtype=object)
    codes = names.cat.codes.to_numpy()
    out = np.where(owner >= 0, labels[codes[np.maximum(owner, 0)]], "")
    if "module" in events.columns and events["module"].notna().any():
        script = events["module"].astype(object).fillna("").to_numpy()
        out = np.where(owner >= 0, out, script)
    backward = backward_modules(events, parent, depth, out)
    out = np.where((owner < 0) & (backward != ""), backward, out)
    return pd.Series(pd.Categorical(out), index=events.index)


def backward_nodes(events: pd.DataFrame) -> np.ndarray:
    """Whether each event is the autograd engine's call of a backward node (a host op)."""
    cats = events["name"].cat.categories
    hit = np.array([isinstance(c, str) and c.startswith(BACKWARD_NODE_PREFIX) for c in cats] + [False])
    return hit[events["name"].cat.codes.to_numpy()] & K.kind_mask(events, (K.CPU_OP,))


def forward_of_backward(events: pd.DataFrame, parent: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """For each backward node, the row of the forward op that created it (-1 elsewhere or unknown).

    The forward op is the latest op outside backward work, with the node's
    ``sequence`` number, that started before the node.
    """
    n = len(events)
    result = np.full(n, -1, dtype=np.int64)
    is_node = backward_nodes(events)
    if "sequence" not in events.columns or not is_node.any():
        return result
    seq = events["sequence"].to_numpy()
    in_backward = is_node | (nearest_ancestor(parent, depth, is_node) >= 0)
    forward = np.flatnonzero((seq >= 0) & ~in_backward & K.kind_mask(events, (K.CPU_OP,)))
    nodes = np.flatnonzero(is_node & (seq >= 0))
    rows = np.concatenate([forward, nodes])
    is_query = np.concatenate([np.zeros(len(forward), bool), np.ones(len(nodes), bool)])
    # By number, then start time, forward ops before a node starting at the same
    # time: the forward op a node takes is the last one before it in this order.
    order = np.lexsort((is_query, events["ts"].to_numpy()[rows], seq[rows]))
    rows, is_query = rows[order], is_query[order]
    last = np.maximum.accumulate(np.where(is_query, -1, np.arange(len(rows))))
    hit = is_query & (last >= 0)
    hit[hit] = seq[rows[last[hit]]] == seq[rows[hit]]
    result[rows[hit]] = rows[last[hit]]
    return result


def backward_modules(
    events: pd.DataFrame, parent: np.ndarray, depth: np.ndarray, forward: np.ndarray
) -> np.ndarray:
    """``"<module> · backward"`` for every event of a backward node whose forward op had a module, else "".

    ``forward`` is each event's own module label ("" for none), from which
    the forward op's is read.
    """
    n = len(events)
    out = np.full(n, "", dtype=object)
    fwd = forward_of_backward(events, parent, depth)
    nodes = np.flatnonzero(fwd >= 0)
    if not len(nodes):
        return out
    node_label = np.full(n, "", dtype=object)
    known = forward[fwd[nodes]] != ""
    node_label[nodes[known]] = forward[fwd[nodes[known]]] + BACKWARD_SUFFIX
    is_node = backward_nodes(events)
    top = np.where(is_node, np.arange(n), nearest_ancestor(parent, depth, is_node))
    inside = np.flatnonzero(top >= 0)
    out[inside] = node_label[top[inside]]
    return out


def has_modules(events: pd.DataFrame) -> bool:
    """Whether the trace knows modules at all (ranges or TorchScript hierarchy)."""
    if module_ranges(events).any():
        return True
    return "module" in events.columns and bool(events["module"].notna().any())


def module_table(
    events: pd.DataFrame,
    parent: np.ndarray,
    depth: np.ndarray,
    costs: pd.DataFrame,
    op_of_device: np.ndarray,
) -> pd.DataFrame:
    """One row per module: its calls, time, ops and kernels (totals over the trace).

    Columns: ``module`` (label, e.g. ``model.0 (Linear)``), ``calls``,
    ``cpu_total_us`` (sum of the module's ranges), ``self_cpu_us`` (that
    minus everything called inside: the module's own Python), ``device_total_us``
    (device time of all work launched inside, child modules included),
    ``ops`` (op calls directly in it, not in a child module), ``kernels``
    (device activities launched directly in it), means per call. Sorted by
    device total, else CPU total.
    """
    is_range = module_ranges(events)
    rows = np.flatnonzero(is_range)
    if not len(rows):
        return pd.DataFrame(
            {c: pd.Series(dtype=object if c == "module" else float) for c in _MODULE_TABLE_COLUMNS}
        )
    names = events["name"].astype(object).to_numpy()
    dur = events["dur"].to_numpy()
    owner = enclosing_module(events, parent, depth)
    is_op = K.kind_mask(events, (K.CPU_OP,))
    # The module of an op is its innermost range; of a kernel, its launching op's.
    op_owner = np.where(is_op, owner, -1)
    dev = np.flatnonzero(K.kind_mask(events, K.DEVICE_ACTIVITY) & (op_of_device >= 0))
    dev_owner = owner[op_of_device[dev]]
    n = len(events)
    direct_ops = np.bincount(op_owner[op_owner >= 0], minlength=n)
    direct_kernels = np.bincount(dev_owner[dev_owner >= 0], minlength=n)
    frame = pd.DataFrame(
        {
            "module": [module_label(str(x)) for x in names[rows]],
            "calls": 1,
            "cpu_total_us": dur[rows],
            "self_cpu_us": costs["self_cpu_us"].to_numpy()[rows],
            "device_total_us": costs["device_total_us"].to_numpy()[rows],
            "ops": direct_ops[rows],
            "kernels": direct_kernels[rows],
        }
    )
    table = frame.groupby("module", sort=False).sum().reset_index()
    table["cpu_mean_us"] = table["cpu_total_us"] / table["calls"]
    table["device_mean_us"] = table["device_total_us"] / table["calls"]
    key = "device_total_us" if table["device_total_us"].sum() > 0 else "cpu_total_us"
    return table.sort_values(key, ascending=False, kind="stable").reset_index(drop=True)[
        _MODULE_TABLE_COLUMNS
    ]


def device_rows_of_module(
    events: pd.DataFrame, parent: np.ndarray, op_of_device: np.ndarray, module: str
) -> np.ndarray:
    """Rows of the device activities launched inside ``module`` (child modules included)."""
    cats = events["name"].cat.categories
    match = np.array([isinstance(c, str) and module_label(c) == module for c in cats] + [False])
    wanted = module_ranges(events) & match[events["name"].cat.codes.to_numpy()]
    if not wanted.any():
        return np.array([], dtype=np.int64)
    dev = np.flatnonzero(K.kind_mask(events, K.DEVICE_ACTIVITY) & (op_of_device >= 0))
    launcher = op_of_device[dev]
    # The module range above each launcher only (not every event's: a walk of the tree).
    inside = wanted[launcher] | (ancestor_of(parent, wanted, launcher) >= 0)
    return dev[inside]
