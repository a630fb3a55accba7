"""How close to the hardware: achieved FLOP/s, bytes/s and % of the device's peak, per op and per kernel.

The FLOPs and bytes are our estimates (`flops.own_estimates`), which sit on
one op per call chain (an ``aten::conv2d``, an ``aten::addmm``...). An op's
rate is its estimate over its device total time (the kernels of everything
below it: a convolution's kernels are launched by the ops it calls). A
kernel gets a share of the estimate of the op holding it (the nearest op at
or above its launching op that has one), in proportion to its device time
among that op's kernels: its math kernels (GEMM, convolution, attention
families) when it has any, else all of them; copies and memsets get none
(they do no arithmetic). The peak that applies is that of the kernel's
precision as its name tells (`names`: ``sgemm``, ``s16816``, ``Tensile ... fp16``) when it
does, else that of the op's input type (fp32 inputs are taken as fp32, not
TF32). Nothing here reads a view or a file.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..trace import categories as K
from . import categories as C
from .hardware import DevicePeaks, precision_of_dtype, precision_of_kernel

#: Where the precision that picked a kernel's peak came from (the ``peak_precision`` column says it).
FROM_KERNEL = "kernel name"
FROM_OP = "op inputs"


def _rate(amount: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """``amount / seconds``, NaN where either is 0 (no estimate is not "0 FLOP/s")."""
    amount = np.asarray(amount, dtype=np.float64)
    seconds = np.asarray(seconds, dtype=np.float64)
    known = (amount > 0) & (seconds > 0)
    return np.divide(amount, seconds, out=np.full(len(amount), np.nan), where=known)


def _pct_of_peak(rate: np.ndarray, precisions: np.ndarray, peaks: DevicePeaks | None) -> np.ndarray:
    """``rate`` as a percentage of the peak of each row's precision; NaN where either is unknown."""
    out = np.full(len(rate), np.nan)
    if peaks is None:
        return out
    peak = np.array([peaks.peak(p) or np.nan for p in precisions], dtype=np.float64)
    ok = np.isfinite(rate) & np.isfinite(peak)
    out[ok] = 100.0 * rate[ok] / peak[ok]
    return out


def op_precisions(
    events: pd.DataFrame, est: pd.DataFrame, shares: pd.DataFrame, kernel_precision: dict[str, str]
) -> dict[str, str]:
    """Per op name, the precision whose peak applies, with where it came from (``tf32 (kernel name)``).

    That of the kernels holding its estimate when their names tell one
    (an fp32 GEMM run as TF32 ``s1688gemm`` is tf32), else its inputs'
    type; per name, the precision of most of its estimated FLOPs.
    """
    has = np.flatnonzero(est["est_flops"].to_numpy() > 0)
    if not len(has):
        return {}
    flops = est["est_flops"].to_numpy()
    label = {
        int(r): _label(precision_of_dtype(d), FROM_OP)
        for r, d in zip(has, est["est_dtype"].iloc[has].to_numpy(dtype=object), strict=True)
    }
    if len(shares):
        names = events["name"].astype(object).to_numpy()
        by_kernel = pd.DataFrame(
            {
                "holder": shares["holder"].to_numpy(),
                "p": [
                    precision_of_kernel(kernel_precision.get(n, "")) for n in names[shares["row"].to_numpy()]
                ],
                "f": shares["est_flops"].to_numpy(),
            }
        )
        by_kernel = by_kernel[by_kernel["p"] != ""]
        if len(by_kernel):
            top = (
                by_kernel.groupby(["holder", "p"])["f"].sum().reset_index().sort_values("f", ascending=False)
            )
            for holder, p in top.drop_duplicates("holder")[["holder", "p"]].itertuples(index=False):
                label[int(holder)] = _label(p, FROM_KERNEL)
    frame = pd.DataFrame(
        {
            "name": events["name"].astype(object).to_numpy()[has],
            "label": [label[int(r)] for r in has],
            "f": flops[has],
        }
    )
    frame = frame[frame["label"] != ""]
    top = frame.groupby(["name", "label"])["f"].sum().reset_index().sort_values("f", ascending=False)
    return dict(top.drop_duplicates("name")[["name", "label"]].itertuples(index=False))


def _label(precision: str, source: str) -> str:
    return f"{precision} ({source})" if precision else ""


def _precision_word(label: str) -> str:
    """``tf32`` of ``tf32 (kernel name)``."""
    return label.split(" ", 1)[0] if label else ""


def add_op_rates(
    table: pd.DataFrame, precisions: dict[str, str], device_traced: bool, peaks: DevicePeaks | None
) -> pd.DataFrame:
    """An op table holding ``est_flops`` and ``est_bytes`` with ``est_flops_per_s``, ``est_gbps``, ``peak_pct``.

    Over the device total time when the device was traced, else the CPU
    total time (as ``flops_per_s``); % of peak only for a traced device
    whose peaks are known.
    """
    time_col = "device_total_us" if device_traced else "cpu_total_us"
    seconds = table[time_col].to_numpy(np.float64) * 1e-6
    rate = _rate(table["est_flops"].to_numpy(), seconds)
    table["est_flops_per_s"] = rate
    table["est_gbps"] = _rate(table["est_bytes"].to_numpy(), seconds) / 1e9
    names = table["name"].astype(object).to_numpy()
    labels = [precisions.get(n, "") if f > 0 else "" for n, f in zip(names, table["est_flops"], strict=True)]
    table["peak_precision"] = labels
    prec = np.array([_precision_word(x) for x in labels], dtype=object)
    table["peak_pct"] = _pct_of_peak(rate, prec, peaks if device_traced else None)
    # Ours beside torch's: est_flops right after flops / flops_per_s.
    ours = ["est_flops", "est_flops_per_s", "est_gbps", "peak_precision", "peak_pct", "est_bytes"]
    cols = [c for c in table.columns if c not in ours]
    at = cols.index("flops_per_s") + 1 if "flops_per_s" in cols else len(cols)
    return table[cols[:at] + ours + cols[at:]]


def _holders(parent: np.ndarray, ops: np.ndarray, has: np.ndarray) -> np.ndarray:
    """For each op row in ``ops``: the nearest row at or above it with an estimate, -1 where none."""
    out = np.full(len(ops), -1)
    cur = ops.copy()
    while True:
        live = (cur >= 0) & (out < 0)
        if not live.any():
            return out
        found = live & has[np.maximum(cur, 0)]
        out[found] = cur[found]
        cur = np.where(live & ~found, parent[np.maximum(cur, 0)], -1)


#: Kernel families that do an op's arithmetic (`categories.name_family`).
MATH_FAMILIES = frozenset({C.GEMM, C.CONV, C.ATTENTION})


def _math_kernels(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Whether each of ``rows`` is a math kernel, classified once per distinct name."""
    names = events["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        cats = names.cat.categories.to_numpy(object)
        codes = names.cat.codes.to_numpy()[rows].astype(np.int64)
        # Only the names of these rows (kernels), not every op name of the trace.
        present = np.unique(codes[codes >= 0])
        is_math = np.zeros(len(cats) + 1, dtype=bool)
        is_math[present] = [C.name_family(str(c)) in MATH_FAMILIES for c in cats[present].tolist()]
        return is_math[codes]
    return np.array([C.name_family(str(n)) in MATH_FAMILIES for n in names.to_numpy()[rows]], dtype=bool)


def kernel_shares(
    events: pd.DataFrame, parent: np.ndarray, op_of_device: np.ndarray, est: pd.DataFrame
) -> pd.DataFrame:
    """Each kernel's share of its holding op's estimate, in proportion to device time.

    Returns one row per kernel event holding a share: ``row`` (position in
    ``events``), ``holder`` (that of the op holding the estimate),
    ``est_flops``, ``est_bytes`` and ``op_precision``.
    """
    kernels = np.flatnonzero(K.kind_mask(events, (K.KERNEL,)) & (op_of_device >= 0))
    flops = est["est_flops"].to_numpy()
    empty = pd.DataFrame({"row": [], "holder": [], "est_flops": [], "est_bytes": [], "op_precision": []})
    if not len(kernels) or not (flops > 0).any():
        return empty
    holder = _holders(np.asarray(parent), op_of_device[kernels], flops > 0)
    kernels, holder = kernels[holder >= 0], holder[holder >= 0]
    if not len(kernels):
        return empty
    dur = events["dur"].to_numpy(np.float64)[kernels]
    # Where an op's kernels include math ones (GEMM, convolution,
    # attention), they alone share its FLOPs: addmm's bias copy does none.
    codes, uniq = pd.factorize(holder)
    math = _math_kernels(events, kernels)
    has_math = np.bincount(codes, weights=math, minlength=len(uniq)) > 0
    counted = math | ~has_math[codes]
    kernels, holder, dur, codes = kernels[counted], holder[counted], dur[counted], codes[counted]
    # Each holder's device time over its kernels, every kernel it launched
    # (not only the counted steps'), so a share does not depend on the step filter.
    total = np.bincount(codes, weights=dur, minlength=len(uniq))[codes]
    share = np.divide(dur, total, out=np.zeros(len(dur)), where=total > 0)
    return pd.DataFrame(
        {
            "row": kernels,
            "holder": holder,
            "est_flops": flops[holder] * share,
            "est_bytes": est["est_bytes"].to_numpy()[holder] * share,
            "op_precision": _precisions(est["est_dtype"], holder),
        },
        copy=False,  # fresh arrays: not stacked into blocks (a copy of every share row)
    )


def _precisions(dtypes: pd.Series, rows: np.ndarray) -> Any:
    """`precision_of_dtype` of ``dtypes`` at ``rows``, once per distinct element type.

    Only the rows asked for are read: the column holds one value per event.
    A categorical column (`flops.own_estimates`) is read by code, and the
    answer is a categorical too: a string per kernel row made and checked
    cost most of the kernel shares.
    """
    if isinstance(dtypes.dtype, pd.CategoricalDtype):
        codes = dtypes.cat.codes.to_numpy()[rows].astype(np.int64)
        # Code -1 (a missing type) reads the sentinel last.
        labels = [*dtypes.cat.categories.to_numpy(dtype=object).tolist(), np.nan]
        found, uniq = pd.factorize(np.array([precision_of_dtype(d) for d in labels], dtype=object))
        return pd.Categorical.from_codes(found[codes], categories=uniq.astype(object))
    codes, uniq = pd.factorize(dtypes.iloc[rows].to_numpy(dtype=object), use_na_sentinel=False)
    found = [precision_of_dtype(d) for d in uniq]
    return [found[c] for c in codes.tolist()]


def add_kernel_rates(
    table: pd.DataFrame, events: pd.DataFrame, shares: pd.DataFrame, keep_rows: np.ndarray | None,
    peaks: DevicePeaks | None,
) -> None:  # fmt: skip
    """Estimated FLOPs, bytes, rates, intensity and % of peak on the kernel table (by kernel name).

    ``keep_rows`` (positions in ``events``) are the kernels the table counts
    (the counted steps' work); None: all. Adds ``est_flops``, ``est_bytes``,
    ``est_flops_per_s``, ``est_gbps``, ``intensity`` (FLOP per byte),
    ``peak_precision`` (e.g. ``fp32 (kernel name)``) and ``peak_pct``.
    """
    if keep_rows is not None and len(shares):
        # A mask over the events, not np.isin (which sorts both sides).
        kept = np.zeros(len(events), dtype=bool)
        kept[np.asarray(keep_rows, dtype=np.int64)] = True
        shares = shares[kept[shares["row"].to_numpy(np.int64)]]
    f, b, p = _sums_by_name(events["name"], shares)
    key = table["name"].astype(object).tolist()
    table["est_flops"] = np.array([f.get(n, 0.0) for n in key], dtype=np.float64)
    table["est_bytes"] = np.array([b.get(n, 0.0) for n in key], dtype=np.float64)
    seconds = table["total_us"].to_numpy(np.float64) * 1e-6
    rate = _rate(table["est_flops"].to_numpy(), seconds)
    table["est_flops_per_s"] = rate
    table["est_gbps"] = _rate(table["est_bytes"].to_numpy(), seconds) / 1e9
    table["intensity"] = _rate(table["est_flops"].to_numpy(), table["est_bytes"].to_numpy())
    from_name = [precision_of_kernel(p) for p in table.get("precision", pd.Series([""] * len(table)))]
    from_op = np.array([p.get(n, "") for n in key], dtype=object)
    prec = np.array([a or b for a, b in zip(from_name, from_op, strict=True)], dtype=object)
    source = [FROM_KERNEL if a else FROM_OP for a in from_name]
    table["peak_precision"] = [
        _label(p, s) if f > 0 else "" for p, s, f in zip(prec, source, table["est_flops"], strict=True)
    ]
    table["peak_pct"] = _pct_of_peak(rate, prec, peaks)


def _sums_by_name(
    names: pd.Series, shares: pd.DataFrame
) -> tuple[dict[str, float], dict[str, float], dict[str, str]]:
    """Per kernel name: summed ``est_flops``, summed ``est_bytes``, first non-missing ``op_precision``.

    What ``groupby("name").agg(sum, sum, first)`` gave, without a string
    index: the groups are numbered as its factorize numbered them (names in
    sorted order, a missing name dropped), and pandas sums over those
    numbers (compensated, or reduceat where they lie in order: the same bits).
    """
    rows = shares["row"].to_numpy(np.int64)
    if isinstance(names.dtype, pd.CategoricalDtype):
        codes = names.cat.codes.to_numpy()[rows].astype(np.int64)
        present = np.unique(codes[codes >= 0])
        labels = names.cat.categories.to_numpy(dtype=object)[present]
        by_label = np.argsort(labels, kind="stable")
        rank = np.full(len(names.cat.categories) + 1, -1, dtype=np.int64)
        rank[present[by_label]] = np.arange(len(present))
        ids, uniq = rank[codes], labels[by_label]
    else:
        ids, uniq = pd.factorize(names.to_numpy(dtype=object)[rows], sort=True)
    groups, f, b = _group_sums(ids, len(uniq), shares["est_flops"].to_numpy(), shares["est_bytes"].to_numpy())
    prec, missing = _values_and_gaps(shares["op_precision"])
    ok = np.flatnonzero((ids >= 0) & ~missing)
    first = np.full(len(uniq), len(ids), dtype=np.int64)
    np.minimum.at(first, ids[ok], ok)
    names_of = uniq[groups].tolist()
    has_first = first[groups] < len(ids)
    return (
        dict(zip(names_of, f.tolist(), strict=True)),
        dict(zip(names_of, b.tolist(), strict=True)),
        {
            n: prec(first[g])
            for n, g, h in zip(names_of, groups.tolist(), has_first.tolist(), strict=True)
            if h
        },
    )


#: Share rows from which `_group_sums` sums in C: below, pandas costs less than the call.
NATIVE_FROM_ROWS = 1 << 14


def _group_sums(
    ids: np.ndarray, groups: int, flops: np.ndarray, moved: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(groups present, FLOPs and bytes summed per group) as ``Series.groupby(ids).sum()`` gives them, bit for bit.

    Many rows, every id a group (no missing name) and the library there:
    pandas' compensated sums in C (`native.group_sums`), where pandas'
    groupby factorized the ids again and checked their order for each column.
    """
    from ..trace import native

    if len(ids) >= NATIVE_FROM_ROWS and groups and (ids >= 0).all():
        f = native.group_sums(ids, flops, groups)
        b = native.group_sums(ids, moved, groups) if f is not None else None
        if b is not None:
            # Each id is a group (the ids number the names present), as pandas' index.
            return np.arange(groups, dtype=np.int64), f, b
    # A missing name is no group (groupby drops it).
    key = np.where(ids >= 0, ids, np.nan) if (ids < 0).any() else ids
    # One Series each, as the old agg summed each column.
    fs = pd.Series(flops).groupby(key).sum()
    bs = pd.Series(moved).groupby(key).sum()
    return fs.index.to_numpy().astype(np.int64), fs.to_numpy(), bs.to_numpy()


def _values_and_gaps(column: pd.Series) -> tuple[Any, np.ndarray]:
    """(value at a position, missing mask) of ``column``; a categorical is read by code, not made into objects."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy()
        labels = column.cat.categories.to_numpy(dtype=object)
        # Categories hold no missing value: code -1 is the only one.
        return (lambda i: labels[codes[i]]), codes < 0
    values = column.to_numpy(dtype=object)
    return (lambda i: values[i]), np.asarray(pd.isna(values), dtype=bool)


def peak_note(device_name: str) -> str:
    """The one note an unknown device gets (no % of peak is shown, never 0)."""
    return (
        f"% of peak: no peak figures for {device_name or 'this device'} in the table of devices "
        "(analysis/hardware.py), so FLOP/s are shown without a % of peak"
    )
