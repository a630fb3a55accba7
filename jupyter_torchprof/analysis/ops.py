"""The op table: one row per host op (and per input shape when asked).

Numbers follow torch's ``key_averages()`` definitions so that the two agree:

* ``cpu_total_us``: sum of the op's durations;
* ``self_cpu_us``: that minus the durations of its direct children on the
  host call tree (ops, annotations, runtime calls, Python frames);
* ``self_device_us``: device time of the kernels, copies and memsets whose
  launch the op encloses most closely;
* ``device_total_us``: the same for the op and everything below it;
* ``cpu_mem_bytes`` / ``device_mem_bytes``: bytes allocated (net of frees)
  inside the op's interval on any thread, and ``self_*`` that minus its
  children's.

A row is a (name, kind) pair, as torch keys rows by name and whether the
event is a user annotation: ``record_function("aten::mm")`` is not the op.
``ProfilerStep#k`` ranges are merged into one ``ProfilerStep*`` row, as torch
does, and an op whose parent has the same name and no other child is folded
into that parent, as torch's ``EventList._remove_dup_nodes`` does
(`tree.folded_into`): ``aten::sum`` calling ``aten::sum`` is one call, whose
self time, self device time and self memory include the inner one's.

Everything is a total over the profiled steps (divide by the step count for
per step); ``*_mean_us`` is per call.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .. import columns
from ..trace import categories as K
from ..trace import native
from .flops import FLOPS_COLUMNS, estimate_flops
from .memory import memory_in_intervals
from .tree import NATIVE_FROM_NODES, children_sums, folded_into, subtree_sums, unique_inverse

STEP_PATTERN = re.compile(r"^ProfilerStep#\d+$")
STEP_ROW = "ProfilerStep*"

#: The op table's columns in every profile, in order (grouping, FLOP and
#: memory columns follow when asked for or recorded).
OP_TABLE_COLUMNS = (
    "name",
    "kind",
    "calls",
    "self_cpu_us",
    "cpu_total_us",
    "self_device_us",
    "device_total_us",
    "self_cpu_pct",
    "self_device_pct",
    "cpu_mean_us",
    "device_mean_us",
)

#: Group-by choices of `op_table`.
GROUPINGS = ("name", "shape", "stack", "module")
#: The events column each grouping adds to the key.
_GROUP_COLUMN = {"shape": "input_dims", "stack": "stack", "module": "module"}


def _step_merged_codes(names: pd.Series, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer name codes of ``rows`` with every ``ProfilerStep#k`` merged into ``ProfilerStep*``.

    Returns (code per row, name per code). The renaming looks at the distinct
    names (categories) only, never at each row.
    """
    new_codes, uniques = _step_merge_map(names)
    return new_codes[names.cat.codes.to_numpy()[rows]], uniques


def _step_merge_map(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """The merged code of each name code (`_step_merged_codes`; code -1 reads the last, ``""``'s) and the name per merged code."""
    cats = names.cat.categories.to_numpy(object)
    renamed = [STEP_ROW if STEP_PATTERN.match(c) else c for c in cats]
    new_codes, uniques = pd.factorize(np.array(renamed + [""], dtype=object))
    return new_codes, np.asarray(uniques, dtype=object)


class KeyCodes:
    """A group key's integer codes for every event, read at the counted rows (through ``remap`` where given: code -1 reads its last entry).

    ``span``: the values lie in ``[-1, span)``. `_aggregate` groups on
    these where they lie (`native.group_keys`) or reads them at the rows.
    """

    __slots__ = ("codes", "remap", "span")

    def __init__(self, codes: np.ndarray, span: int, remap: np.ndarray | None = None) -> None:
        self.codes, self.span, self.remap = codes, span, remap

    def at(self, where: np.ndarray) -> np.ndarray:
        """The values at rows ``where``."""
        picked = self.codes[where]
        return picked if self.remap is None else self.remap[picked]


def event_costs(
    events: pd.DataFrame,
    parent: np.ndarray,
    depth: np.ndarray,
    op_of_device: np.ndarray,
    memory: pd.DataFrame | None = None,
    memory_owner: np.ndarray | None = None,
) -> pd.DataFrame:
    """Per-event self and total costs (CPU time, device time, memory).

    Parameters
    ----------
    events
        Events frame.
    parent, depth
        Host call tree (`tree.host_tree`).
    op_of_device
        For each event, the op that launched it (`links.link_device_events`).
    memory
        ``[memory]`` events; each host event's memory is what was allocated
        inside its interval on any thread, as in torch (`_memory_costs`).
    memory_owner
        Not needed by that rule; accepted so that callers passing the op
        enclosing each ``[memory]`` event need no change.
    """
    n = len(events)
    dur = events["dur"].to_numpy()
    is_host = depth >= 0
    # The nodes with a parent, found once for every sum over children in
    # numpy (each pass over ten million events costs a tenth of a second);
    # the C paths of a large tree need none.
    native_tree = n >= NATIVE_FROM_NODES and native.library() is not None
    kids = None if native_tree else np.flatnonzero(parent >= 0)
    self_cpu = _self_values(parent, depth, is_host, dur, kids)

    is_dev = K.kind_mask(events, K.DEVICE_ACTIVITY) & (op_of_device >= 0)
    self_device = np.bincount(op_of_device[is_dev], weights=dur[is_dev], minlength=n)[:n]
    self_device = self_device.astype(float, copy=False)
    device_total = subtree_sums(parent, depth, self_device)

    names = events["name"].cat.codes.to_numpy()
    out = {
        "self_cpu_us": self_cpu,
        "self_device_us": self_device,
        "device_total_us": device_total,
        "folded_into": folded_into(parent, depth, names, None if kids is None else kids[depth[kids] >= 0]),
    }
    if memory is not None and len(memory):
        out.update(_memory_costs(events, parent, depth, memory, kids))
    # copy=False: fresh arrays, which a copy would only stack into one block
    # (on ten million events, a second of copying per table).
    return pd.DataFrame(out, index=events.index, copy=False)


def _self_values(
    parent: np.ndarray, depth: np.ndarray, is_host: np.ndarray, values: np.ndarray, kids: np.ndarray | None
) -> np.ndarray:
    """``values`` minus the host children's, 0.0 off the host tree.

    In C on a large tree (`native.self_values`: the same additions, one
    array made); else the children's sums' own buffer takes the difference.
    """
    if len(parent) >= NATIVE_FROM_NODES:
        done = native.self_values(parent, depth, values)
        if done is not None:
            return done
    own = children_sums(parent, np.where(is_host, values, 0.0), kids)
    np.subtract(values, own, out=own)
    own[~is_host] = 0.0
    return own


def _memory_costs(
    events: pd.DataFrame, parent: np.ndarray, depth: np.ndarray, memory: pd.DataFrame, kids: np.ndarray | None
) -> dict[str, np.ndarray]:
    """Memory of each host event and of the event alone, as torch counts them.

    torch gives an event every allocation inside its interval on any thread
    (`memory.memory_in_intervals`), and its self memory is that minus its
    children's: an allocation made on another thread (a forked TorchScript
    task) while an op waits is the op's own, which an owner-on-the-same-
    thread rule would miss.
    """
    is_host = depth >= 0
    host = np.flatnonzero(is_host)
    start = events["ts"].to_numpy()[host]
    # (ts + dur)[host], the same floats, without an end for every event
    # (on ten million events each fresh array costs tens of ms of page faults).
    end = start + events["dur"].to_numpy()[host]
    out: dict[str, np.ndarray] = {}
    n = len(events)
    for label, inside in zip(("cpu_mem", "device_mem"), memory_in_intervals(start, end, memory), strict=True):
        total = np.zeros(n)
        some = inside.any()
        if some or np.signbit(inside).any():
            # (A -0.0 is kept as it was, so the column's bits do not change.)
            total[host] = inside
        if not some:
            # No record of this device (a host-only run's device memory): every
            # self figure is 0, without summing zeros over the tree.
            out[f"self_{label}_bytes"] = np.zeros(n)
        else:
            # total - children's, 0 off the host (total is 0 there already).
            out[f"self_{label}_bytes"] = _self_values(parent, depth, is_host, total, kids)
        out[f"{label}_bytes"] = total
    return out


class AtRows:
    """A column of every event that the table reads at its counted rows (`_aggregate` sums it in place, or gathers it)."""

    __slots__ = ("column",)

    def __init__(self, column: np.ndarray) -> None:
        self.column = column


#: A summed column: aligned with the counted rows, or read at them.
Counted = np.ndarray | AtRows


def _at_rows(values: np.ndarray | AtRows, rows: np.ndarray | None) -> np.ndarray:
    """``values`` as an array aligned with the counted rows (gathered where it is an `AtRows`)."""
    return values.column[rows] if isinstance(values, AtRows) else values


def _fold_self_costs(costs: pd.DataFrame, rows: np.ndarray, in_place: bool = False) -> dict[str, Counted]:
    """Self costs at ``rows`` (events not folded) with each folded event's share moved to the ancestor that absorbs it.

    Totals need no change: the absorbing ancestor encloses the folded event,
    so its total already holds it (the folded row is simply not counted).
    Returns the columns at ``rows`` as arrays (``folded_into`` left out):
    only the counted rows are gathered, no copy of every event's column.
    With ``in_place``, a float column that takes no folded share is
    returned as `AtRows` (read where it lies, not gathered).
    """
    into = costs["folded_into"].to_numpy()
    folded = np.flatnonzero(into >= 0)
    # Each absorbing ancestor once (its sums' bin), and where it is among
    # ``rows``: the shares are added up per ancestor, not into a column of
    # every event (each one tens of ms of page faults on a large trace).
    targets, bin_of = unique_inverse(into[folded])
    at = np.searchsorted(rows, targets)
    counted = at < len(rows)
    counted[counted] = rows[at[counted]] == targets[counted]
    out: dict[str, np.ndarray] = {}
    for col in costs.columns:
        if col == "folded_into":
            continue
        values = costs[col].to_numpy()
        if values.dtype == np.float64 and not values.any():
            # A column of zeros (device memory without device records): its
            # rows and folded shares are zeros, without a gather of each.
            out[col] = np.zeros(len(rows))
            continue
        moves = col.startswith("self_") and len(folded)
        if in_place and values.dtype == np.float64 and not moves:
            out[col] = AtRows(values)
            continue
        picked = values[rows]
        if moves:
            # The float64 sum each row held before, as when the whole column
            # was folded: each ancestor's shares added in row order from 0.0
            # (np.bincount's), and 0.0 added where none came.
            moved = np.zeros(len(rows))
            shares = np.bincount(bin_of, weights=values[folded], minlength=len(targets))
            moved[at[counted]] = shares[counted]
            picked = picked.astype(np.float64, copy=False)
            np.add(picked, moved, out=picked)
        out[col] = picked
    return out


def op_table(
    events: pd.DataFrame,
    costs: pd.DataFrame,
    group_by: str = "name",
    flops: bool = False,
    include_python: bool = False,
    group_values: pd.Series | None = None,
) -> pd.DataFrame:
    """Aggregate host events into the op table.

    Parameters
    ----------
    events, costs
        Events frame and its `event_costs`. Events folded into a same-name
        parent (``costs["folded_into"]``) are counted in that parent, as in
        torch.
    group_by
        ``"name"``; ``"shape"`` (name + input shapes, needs ``record_shapes``);
        ``"stack"`` (name + Python call stack, needs ``with_stack``);
        ``"module"`` (name + module hierarchy, needs ``--modules``).
    flops
        Add an estimated ``flops`` column (needs input shapes).
    include_python
        Also list Python frames (``with_stack``); off by default because
        they drown the ops.
    group_values
        Categorical labels aligned with ``events`` to group by instead of
        the events column of ``group_by`` (the module each op ran in, from
        `modules.module_of`, which the parsed column only has for TorchScript).

    Returns
    -------
    DataFrame sorted by self device time (or self CPU time when nothing ran
    on a device), columns ``name, kind, calls, self_cpu_us, cpu_total_us,
    self_device_us, device_total_us, self_cpu_pct, self_device_pct,
    cpu_mean_us, device_mean_us`` plus grouping, ``flops`` (with
    ``flops_per_s``, see `_add_flop_rate`) and memory columns.
    """
    if group_by not in GROUPINGS:
        raise ValueError(f"group_by must be one of {', '.join(GROUPINGS)}, not {group_by!r}")
    kinds = K.OP_KINDS + ((K.PYTHON_FUNCTION,) if include_python else ())
    # The counted rows: ops not folded into a same-name parent.
    rows = np.flatnonzero(K.kind_mask(events, kinds) & (costs["folded_into"].to_numpy() < 0))
    # On a large table the sums read columns where they lie (`AtRows`): a
    # gathered copy of each costs its pages' faults (tens of ms apiece).
    in_place = len(rows) >= NATIVE_FROM_ROWS and native.library() is not None
    folded_costs = _fold_self_costs(costs, rows, in_place)
    keys, labels = _key_codes(events, rows, group_by, group_values, in_place)
    values = _counted_values(events, folded_costs, rows, flops, in_place)
    # The table is built as arrays and made a frame once: on a small trace,
    # pandas' per-column overhead cost more than the whole aggregation.
    table = _aggregate(keys, labels, values, rows)
    kind_names = np.array(list(events["kind"].cat.categories), dtype=object)
    table["kind"] = kind_names[table["kind"]]
    _add_shares_and_means(table)
    if flops:
        _add_flop_rate(table)
    return _ordered(table, grouping=list(labels)[1:])


def _key_codes(
    events: pd.DataFrame,
    rows: np.ndarray,
    group_by: str,
    group_values: pd.Series | None,
    in_place: bool = False,
) -> tuple[dict[str, np.ndarray | KeyCodes], dict[str, np.ndarray]]:
    """Integer codes of the group keys of ``rows`` (``name``, ``kind``, then the grouping's).

    Returns the codes per key and, per labelled key (``name`` first), the
    label of each code; code -1 (missing) picks the label array's trailing ``""``.
    With ``in_place``, each key is a `KeyCodes` (codes of every event,
    read at the rows only where needed).
    """
    # Group on integer codes, not on strings: a million Python name strings
    # would cost more than the aggregation itself. Names come back per group.
    kind = events["kind"]
    keys: dict[str, np.ndarray | KeyCodes]
    if in_place:
        new_codes, names = _step_merge_map(events["name"])
        keys = {
            "name": KeyCodes(events["name"].cat.codes.to_numpy(), len(names), new_codes),
            "kind": KeyCodes(kind.cat.codes.to_numpy(), len(kind.cat.categories)),
        }
    else:
        name_code, names = _step_merged_codes(events["name"], rows)
        keys = {"name": name_code, "kind": kind.cat.codes.to_numpy()[rows]}
    labels: dict[str, np.ndarray] = {"name": names}
    extra = _GROUP_COLUMN.get(group_by)
    if extra is not None:
        label = {"input_dims": "input_shapes"}.get(extra, extra)
        col = events[extra] if group_values is None else group_values
        codes = col.cat.codes.to_numpy()
        keys[label] = KeyCodes(codes, len(col.cat.categories)) if in_place else codes[rows]
        labels[label] = np.array([*col.cat.categories.to_numpy(object), ""], dtype=object)
    return keys, labels


def _counted_values(
    events: pd.DataFrame, costs: dict[str, Counted], rows: np.ndarray, flops: bool, in_place: bool = False
) -> dict[str, Counted]:
    """The columns the table sums, at ``rows``, in the table's order (``dur`` is the total CPU time).

    ``costs``: the cost columns at ``rows`` already (`_fold_self_costs`).
    With ``in_place``, ``dur`` is an `AtRows`.
    """
    # Only the summed columns are gathered, as arrays: selecting rows of the
    # frames (thirty columns, most of them device-only) costs more than the
    # aggregation.
    dur = events["dur"].to_numpy()
    out: dict[str, Counted] = {"cpu_total_us": AtRows(dur) if in_place else dur[rows]}
    for col in ("self_cpu_us", "self_device_us", "device_total_us"):
        out[col] = costs[col]
    for col, values in costs.items():
        # memory columns, and our FLOP estimates (`flops.own_estimates`) when the caller adds them
        if col.endswith("_bytes") or col.startswith("est_"):
            out[col] = values
    if flops:
        wanted = ["name", "kind", *(c for c in FLOPS_COLUMNS if c in events and c not in ("name", "kind"))]
        out["flops"] = estimate_flops(events[wanted].iloc[rows])
    return out


def _aggregate(
    keys: dict[str, np.ndarray | KeyCodes],
    labels: dict[str, np.ndarray],
    values: dict[str, Counted],
    rows: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """One row per distinct key (name, kind and grouping), in order of first appearance: calls and sums.

    The kind is part of the key, as ``is_user_annotation`` is of torch's: a
    ``record_function("aten::mm")`` range is a row of its own, not more
    calls of the op ``aten::mm``. Returns the columns as arrays.
    ``rows``: where the `AtRows` values and `KeyCodes` keys are read.
    """
    group, first = _group_keys(keys, rows)
    table: dict[str, np.ndarray] = {
        key: codes.at(rows[first]) if isinstance(codes, KeyCodes) else codes[first]
        for key, codes in keys.items()
    }
    for key, names in labels.items():
        # code -1 (missing) picks the trailing "" of each label array
        table[key] = names[table[key]]
    table["calls"] = np.bincount(group, minlength=len(first)).astype(np.int64)
    # pandas' grouped sum (compensated, in row order) over one integer key:
    # the figures of the grouped aggregation this replaces, bit for bit.
    # A float column of zeros (device memory of a host-only trace, or no
    # memory recorded) sums to 0 in every group: no pass of pandas for it.
    sums = _native_group_sums(group, len(first), values, rows)
    rest = {c: _at_rows(v, rows) for c, v in values.items() if c not in sums}
    # (Every float column is summed in C or none is: in C a column of
    # zeros sums to +0.0 in each group, as below.)
    zero = [c for c, v in rest.items() if v.dtype == np.float64 and not v.any()]
    summed = {c: v for c, v in rest.items() if c not in zero}
    if summed:
        frame = pd.DataFrame(summed, copy=False).groupby(group, sort=False).sum()
        sums.update({c: frame[c].to_numpy() for c in summed})
    for col in ("self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us", *values):
        table.setdefault(col, np.zeros(len(first)) if col in zero else sums[col])
    return table


def _native_group_sums(
    group: np.ndarray, groups: int, values: dict[str, Counted], rows: np.ndarray | None
) -> dict[str, np.ndarray]:
    """The float64 columns of ``values`` summed by ``group`` in C (`native.group_sums`: pandas' bits), where it applies.

    Through pandas a large table's sums cost several passes besides the
    additions (the groups factorized again, checked for order). Empty where
    the rows are few (the call costs more than pandas), the library is
    missing, or the groups are sorted (pandas then adds by np.add.reduceat):
    pandas sums those.
    """
    out: dict[str, np.ndarray] = {}
    if len(group) < NATIVE_FROM_ROWS:
        return out
    for col, v in values.items():
        column, at = (v.column, rows) if isinstance(v, AtRows) else (v, None)
        if column.dtype != np.float64 or (at is None and not column.any()):
            # (a column of zeros at the rows: no sums to make, see `_aggregate`)
            continue
        done = native.group_sums(group, column, groups, at=at)
        if done is None:
            return {}
        out[col] = done
    return out


def _group_keys(
    keys: dict[str, np.ndarray | KeyCodes], rows: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """`_group_codes` of the keys at the counted rows: in one C pass over `KeyCodes` where they lie (`native.group_keys`), else on the codes read at the rows.

    Both number the tuples of key values by first appearance, so they agree.
    """
    if (
        rows is not None
        and len(rows) >= NATIVE_FROM_ROWS
        and all(isinstance(k, KeyCodes) for k in keys.values())
    ):
        sources = [(k.codes, k.remap, k.span) for k in keys.values() if isinstance(k, KeyCodes)]
        done = native.group_keys(rows, len(sources[0][0]), sources, max(4 * len(rows), 1 << 16))
        if done is not None:
            return done[0], done[2]
    return _group_codes([k.at(rows) if isinstance(k, KeyCodes) else k for k in keys.values()])


def _group_codes(keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Group number of each row over the key columns (numbered by first appearance), and each group's first row."""
    n = len(keys[0])
    group: np.ndarray | None = None
    groups = 1
    firsts: np.ndarray | None = None
    for codes in keys:
        # Pairs of (group so far, code) as one integer, numbered in order of
        # first appearance, in linear time (no sort). The first key is its
        # codes alone (every row is in group 0 before it).
        width = int(codes.max(initial=0)) + 2
        shifted = codes.astype(np.int64) + 1
        combined = shifted if group is None else group * width + shifted
        if groups * width <= max(4 * n, 1 << 16):
            group, groups, firsts = _dense_numbers(combined, groups * width)
        else:
            group, uniques = pd.factorize(combined)
            groups, firsts = len(uniques), None
    if group is None:
        group = np.zeros(n, dtype=np.int64)
    if firsts is None:
        # Groups are numbered by first appearance: each starts where the
        # running maximum of the numbers first reaches it.
        running = np.maximum.accumulate(group) if len(group) else group
        firsts = np.flatnonzero(np.r_[True, running[1:] > running[:-1]]) if len(group) else group
    return group, firsts[:groups]


#: Rows from which `_dense_numbers` calls the native library.
NATIVE_FROM_ROWS = 1 << 14


def _dense_numbers(values: np.ndarray, span: int) -> tuple[np.ndarray, int, np.ndarray]:
    """``pd.factorize(values)`` for integers in ``[0, span)``: numbers in order of first appearance, how many, and where each first appears.

    Each value's first position by one ``np.minimum.at`` over a table of
    ``span`` slots: on ten million rows, hashing them (factorize) cost
    several times more. The native library does it in one pass
    (`native.dense_numbers`: ten times less again); this is its fallback.
    """
    # (A small table costs less in numpy than the call into the library.)
    done = native.dense_numbers(values, span) if len(values) >= NATIVE_FROM_ROWS else None
    if done is not None:
        return done
    n = len(values)
    first = np.full(span, n, dtype=np.int64)
    np.minimum.at(first, values, np.arange(n))
    present = np.flatnonzero(first < n)
    present = present[np.argsort(first[present], kind="stable")]
    number = np.zeros(span, dtype=np.int64)
    number[present] = np.arange(len(present))
    return number[values], len(present), first[present]


def _add_shares_and_means(table: dict[str, np.ndarray]) -> None:
    """Each row's share of the self times, and the mean times per call."""
    rows = len(table["calls"])
    for share, col in (("self_cpu_pct", "self_cpu_us"), ("self_device_pct", "self_device_us")):
        # np.nansum is pandas' Series.sum: NaN as 0, numpy's pairwise sum.
        total = np.nansum(table[col])
        table[share] = 100 * table[col] / total if total > 0 else np.zeros(rows)
    table["cpu_mean_us"] = table["cpu_total_us"] / table["calls"]
    table["device_mean_us"] = table["device_total_us"] / table["calls"]


def _add_flop_rate(table: dict[str, np.ndarray]) -> None:
    """``flops_per_s``: each row's FLOPs over its device total time, or CPU total time on a host-only run.

    Total, not self, time: torch counts a convolution's FLOPs on
    ``aten::conv2d`` while the kernels are launched by the ops below it, so
    its self device time is 0. NaN where either side is 0 (nothing counted,
    or no time to divide by): a rate of "0 FLOP/s" would read as "idle".
    """
    device = np.nansum(table["self_device_us"]) > 0
    seconds = np.asarray(table["device_total_us" if device else "cpu_total_us"], np.float64) * 1e-6
    flops = np.asarray(table["flops"], np.float64)
    known = (seconds > 0) & (flops > 0)
    table["flops_per_s"] = np.divide(flops, seconds, out=np.full(len(flops), np.nan), where=known)


def _ordered(table: dict[str, np.ndarray], grouping: list[str]) -> pd.DataFrame:
    """`OP_TABLE_COLUMNS`, the grouping, then the rest; by self device time (else self CPU time)."""
    stats = list(OP_TABLE_COLUMNS[1:])
    rest = [c for c in table if c not in ["name", *stats, *grouping]]
    sort_key = columns.default_sort(np.nansum(table["self_device_us"]) > 0)
    # Descending on both keys, ties in row order, NaN last: what
    # ``sort_values([sort_key, "cpu_total_us"], ascending=False, kind="stable")``
    # does (it negates the floats and lexsorts them).
    order = np.lexsort((-table["cpu_total_us"], -table[sort_key]))
    return pd.DataFrame({c: table[c][order] for c in ["name", *stats, *grouping, *rest]}, copy=False)


#: Columns of the op and kernel tables that add up over steps. Per-call
#: statistics (mean, min, median, max), shares and kernel attributes do not.
ADDITIVE_COLUMNS = frozenset(
    {
        "calls",
        "self_cpu_us",
        "cpu_total_us",
        "self_device_us",
        "device_total_us",
        "total_us",
        "flops",
        "est_flops",
        "est_bytes",
        "bytes",
        "self_cpu_mem_bytes",
        "cpu_mem_bytes",
        "self_device_mem_bytes",
        "device_mem_bytes",
    }
)


def per_step(table: pd.DataFrame, steps: int) -> pd.DataFrame:
    """A table of totals over ``steps`` profiled steps, as averages per step.

    The op and kernel tables hold totals over every profiled step (like
    ``key_averages()``), so an op's self CPU time can exceed one step's wall
    time. Dividing the additive columns (`ADDITIVE_COLUMNS`) by the step
    count gives the mean per step; ``calls`` becomes calls per step (a
    float). Shares and per-call statistics are the same either way.
    """
    out = table.copy()
    n = max(int(steps), 1)
    for col in out.columns:
        if col in ADDITIVE_COLUMNS:
            out[col] = out[col].astype(np.float64) / n
    return out
