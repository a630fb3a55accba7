"""Rules 11-15: advice that needs no device, so a CPU-only run gets some too.

* step-time variance: steps of one loop far apart (46 ms, then 106 ms) make
  a per-step mean meaningless, and say something periodic or external ran;
* many tiny ops and time outside ops: a Python loop of thousands of
  microsecond ops per step pays dispatch, not arithmetic; a step mostly
  outside any op is Python, sleeps or I/O that the op table cannot show;
* CPU threads: torch using fewer intra-op threads than the usable cores
  (or more, so they contend);
* DataLoader: time in ``enumerate(DataLoader)#..._DataLoaderIter.__next__``;
* host copies: ``aten::copy_`` / ``to`` / ``contiguous`` / ``clone`` on the
  host (copies that launched device work are rule 5's). The ``copy_`` an
  ``aten::addmm`` (``baddbmm`` ...) makes to seed its output with the bias
  (``nn.Linear``) is torch's own way of computing ``bias + x @ W.T``, not a
  copy anyone can drop: it is left out and only counted in the evidence.

Every figure is a union over time of events clipped to the counted steps,
divided by the number of steps, so no impact exceeds the step. The rules
propose ``high`` (``medium`` for variance, whose first remedy is to measure
more) and the severity scale lowers it to what the time at stake allows.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ...format import fmt_time
from ...trace import categories as K
from .intervals import merge, overlap_with
from .model import HIGH, INFO, MEDIUM, NOT_CHECKED, Finding, Inputs, limit_rows, unique_rows
from .thresholds import Thresholds

#: Ops whose whole job is moving bytes on the host.
COPY_OPS = (
    "aten::copy_",
    "aten::to",
    "aten::_to_copy",
    "aten::contiguous",
    "aten::clone",
    "aten::_copy_from",
    "aten::_copy_from_and_resize",
)
#: Ops computing ``beta * self + alpha * (a @ b)`` that seed their output with
#: ``self`` (the bias of ``nn.Linear``) by an ``aten::copy_`` directly under them.
BIAS_SEED_OPS = frozenset(
    {"aten::addmm", "aten::_addmm_activation", "aten::baddbmm", "aten::addbmm", "aten::addmv", "aten::addr"}
)
#: How torch names one DataLoader iteration (``torch.utils.data.DataLoader``).
DATALOADER_RANGE = re.compile(r"^enumerate\(DataLoader\)#.*__next__$")


# --------------------------------------------------------------------------- #
# shared helpers


def _not_checked(rule: str, title: str, reason: str) -> Finding:
    return Finding(
        rule=rule,
        severity=NOT_CHECKED,
        title=title,
        detail=f"Not checked because {reason}",
        evidence={"reason": reason},
    )


def covered_per_step(inp: Inputs, rows: np.ndarray) -> np.ndarray:
    """For each step window, the time (µs) the union of ``rows`` covers inside it."""
    out = np.zeros(len(inp.windows))
    if not len(rows):
        return out
    rows = rows[np.argsort(inp.ts[rows], kind="stable")]
    s, e = inp.ts[rows], inp.end[rows]
    reach = float((e - s).max(initial=0.0))
    for k, (lo, hi) in enumerate(inp.windows):
        a, b = int(np.searchsorted(s, lo - reach)), int(np.searchsorted(s, hi))
        bs, be = merge(np.clip(s[a:b], lo, hi), np.clip(e[a:b], lo, hi))
        out[k] = float((be - bs).sum())
    return out


def step_walls(inp: Inputs) -> np.ndarray:
    """Length (µs) of each step window."""
    return np.array([hi - lo for lo, hi in inp.windows], dtype=np.float64)


def host_ops(inp: Inputs) -> np.ndarray:
    """``cpu_op`` rows that start inside a counted step (read-only: found once per `Inputs`, several rules ask)."""
    found = inp.__dict__.get("_host_ops")
    if found is None:
        ops = np.flatnonzero(inp.is_kind(K.CPU_OP))
        found = ops[inp.in_steps(ops)] if inp.has_steps and len(ops) else ops
        found.flags.writeable = False
        inp.__dict__["_host_ops"] = found
    return found


def has_ancestor(inp: Inputs, rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Which of ``rows`` have a host ancestor whose ``mask`` is True."""
    parent = inp.parent
    out = np.zeros(len(rows), dtype=bool)
    if not len(rows):
        return out
    # The parents first, for every row at once (most ops have an op for a
    # parent: their answer, without numbering and compacting every row).
    anc = parent[rows]
    up = anc >= 0
    out[up] = mask[anc[up]]
    # Then only the rows still climbing: one whose ancestor matched, or
    # that reached the root, has its answer and leaves the walk.
    idx = np.flatnonzero(up & ~out)
    anc = parent[anc[idx]]
    for _ in range(511):  # depth guard against a corrupt tree (512 levels in all)
        live = anc >= 0
        idx, anc = idx[live], anc[live]
        if not len(idx):
            break
        hit = mask[anc]
        out[idx[hit]] = True
        idx, anc = idx[~hit], parent[anc[~hit]]
    return out


def top_level_ops(inp: Inputs, ops: np.ndarray) -> np.ndarray:
    """The ops among ``ops`` with no op around them (one call from Python each).

    Those of `host_ops` are found once per `Inputs` (read-only), as several rules ask.
    """
    if ops is inp.__dict__.get("_host_ops"):
        found = inp.__dict__.get("_top_host_ops")
        if found is None:
            found = ops[~has_ancestor(inp, ops, inp.is_kind(K.CPU_OP))]
            found.flags.writeable = False
            inp.__dict__["_top_host_ops"] = found
        return found
    return ops[~has_ancestor(inp, ops, inp.is_kind(K.CPU_OP))]


def _time_by_name(inp: Inputs, rows: np.ndarray, n: int) -> dict[str, float]:
    """Summed duration per name among ``rows``, largest ``n``."""
    return dict(list(inp.count_names(rows, inp.dur[rows]).items())[:n])


def _step_label(inp: Inputs, k: int) -> str:
    return f"step {int(inp.steps['step'].iloc[k])}" if inp.has_steps else "the trace"


# --------------------------------------------------------------------------- #
# 11. step-time variance


def find_step_variance(inp: Inputs, th: Thresholds) -> list[Finding]:
    """Counted steps whose wall times lie far apart (the slowest against the fastest)."""
    n = len(inp.steps)
    if n < th.step_variance_min_steps:
        return [
            _not_checked(
                "step_variance",
                "Step-time variance not checked: fewer than 2 profiled steps",
                f"it compares steps and this trace has {n} counted step{'s' if n != 1 else ''}; "
                "profile more (--steps 5).",
            )
        ]
    walls = inp.steps["wall_us"].to_numpy(np.float64)
    first = 0
    rest = float(np.median(walls[1:]))
    # A slow first step is the cold-start rule's: compare the others.
    if walls[0] >= th.cold_start_ratio * rest and walls[0] - rest >= th.cold_start_min_excess_us:
        first = 1
    considered = np.arange(first, n)
    if len(considered) < 2:
        return []
    w = walls[considered]
    slow, fast = int(considered[np.argmax(w)]), int(considered[np.argmin(w)])
    hi, lo = float(walls[slow]), float(walls[fast])
    if lo <= 0 or hi < th.step_variance_ratio * lo or hi - lo < th.step_variance_min_excess_us:
        return []
    ops = host_ops(inp)
    op_time = covered_per_step(inp, ops)
    grew = _ops_that_grew(inp, ops, slow, fast)
    excess = float(np.maximum(w - lo, 0.0).sum()) / n
    extra = hi - lo
    in_ops = float(op_time[slow] - op_time[fast])
    detail = (
        f"Of the {fmt_time(extra)} more, {fmt_time(max(in_ops, 0.0))} went to ops"
        + (" (" + ", ".join(f"{k} +{fmt_time(v)}" for k, v in grew.items()) + ")" if grew else "")
        + f" and {fmt_time(max(extra - in_ops, 0.0))} to time outside any op (Python, garbage "
        "collection, another process on the machine). A per-step mean hides this: raise --steps "
        "and read the median, and look at the slow step in the timeline for something periodic "
        "(logging, checkpointing, the DataLoader refilling, the allocator growing)."
    )
    step_rows = np.flatnonzero(inp.is_step_range)
    names = inp.names[step_rows].astype(str)
    wanted = {f"ProfilerStep#{int(inp.steps['step'].iloc[k])}" for k in (slow, fast)}
    return [
        Finding(
            rule="step_variance",
            severity=MEDIUM,
            title=(
                f"Step time varies: {_step_label(inp, slow)} took {fmt_time(hi)}, "
                f"{_step_label(inp, fast)} {fmt_time(lo)} ({hi / lo:.1f}×)"
            ),
            detail=detail,
            evidence={
                "walls_us": {int(inp.steps["step"].iloc[k]): float(walls[k]) for k in range(n)},
                "slowest_step": int(inp.steps["step"].iloc[slow]),
                "fastest_step": int(inp.steps["step"].iloc[fast]),
                "slowest_us": hi,
                "fastest_us": lo,
                "median_us": float(np.median(w)),
                "ratio": hi / lo,
                "first_step_left_out": bool(first),
                "ops_us": {"slowest": float(op_time[slow]), "fastest": float(op_time[fast])},
                "ops_that_grew_us": grew,
                "above_fastest_per_step_us": excess,
            },
            impact_us=excess,
            event_rows=limit_rows(step_rows[np.isin(names, list(wanted))], th.max_event_rows),
            ops=list(grew),
        )
    ]


def _ops_that_grew(inp: Inputs, ops: np.ndarray, slow: int, fast: int) -> dict[str, float]:
    """Op names whose time grew most from the fastest step to the slowest (top 3)."""
    top = top_level_ops(inp, ops)
    where = inp.step_of(top)
    a = inp.count_names(top[where == slow], inp.dur[top[where == slow]])
    b = inp.count_names(top[where == fast], inp.dur[top[where == fast]])
    diff = {k: v - b.get(k, 0.0) for k, v in a.items()}
    return {k: v for k, v in sorted(diff.items(), key=lambda kv: -kv[1])[:3] if v > 0}


# --------------------------------------------------------------------------- #
# 12. many tiny ops, time outside ops


def find_tiny_ops(inp: Inputs, th: Thresholds) -> list[Finding]:
    """Thousands of op calls per step that each take a few microseconds."""
    ops = host_ops(inp)
    if not len(ops):
        return [
            _not_checked(
                "tiny_ops",
                "Many tiny ops not checked: no host ops in the steps",
                "the trace records no host ops.",
            )
        ]
    top = top_level_ops(inp, ops)
    tiny = top[inp.dur[top] < th.tiny_op_us]
    per_step = len(tiny) / inp.n_steps
    if per_step < th.tiny_ops_min_per_step:
        return []
    counts = inp.count_names(tiny)
    names = list(counts)[:5]
    covered = covered_per_step(inp, tiny)
    impact = float(covered.sum()) / inp.n_steps
    med = float(np.median(inp.dur[tiny]))
    share = 100 * len(tiny) / len(top)
    return [
        Finding(
            rule="tiny_ops",
            severity=HIGH,
            title=(
                f"{per_step:,.0f} tiny ops{inp.per} (median {fmt_time(med)}, {share:.0f}% of op calls): "
                "Python overhead"
            ),
            detail=(
                "Each op called from Python costs a few µs of dispatch before any arithmetic, so "
                "thousands of them per step are a Python loop over elements or rows (most called: "
                + ", ".join(f"{k} ×{v / inp.n_steps:,.0f}{inp.per}" for k, v in list(counts.items())[:3])
                + "). Replace the loop with one tensor operation (broadcasting, indexing with a "
                "tensor, torch.where, scatter/gather), use the torch._foreach_* ops for lists of "
                "tensors, or let torch.compile fuse the calls."
            ),
            evidence={
                "tiny_ops": int(len(tiny)),
                "tiny_ops_per_step": per_step,
                "top_level_ops": int(len(top)),
                "tiny_share_pct": share,
                "median_us": med,
                "time_per_step_us": impact,
                "calls_by_name": {k: int(v) for k, v in list(counts.items())[:10]},
            },
            impact_us=impact,
            event_rows=limit_rows(tiny, th.max_event_rows),
            ops=names,
        )
    ]


def find_outside_ops(inp: Inputs, th: Thresholds) -> list[Finding]:
    """Most of the step spent outside any op (CPU runs; rule 1 covers device runs)."""
    if inp.device_traced:
        return []
    ops = host_ops(inp)
    if not len(ops) and not np.any(inp.is_kind(K.CPU_OP)):
        return [
            _not_checked(
                "outside_ops",
                "Time outside ops not checked: no host ops in the trace",
                "the trace records no host ops.",
            )
        ]
    walls = step_walls(inp)
    covered = covered_per_step(inp, ops)
    outside = np.maximum(walls - covered, 0.0)
    total = float(walls.sum())
    ops_pct = 100 * float(covered.sum()) / total if total > 0 else 100.0
    per = float(outside.sum()) / inp.n_steps
    if ops_pct >= th.outside_ops_min_pct or per < th.outside_ops_min_us:
        return []
    around = _ranges_over(inp, ops, outside.sum())
    where = (
        " Ranges over that time: " + ", ".join(f"{k} {v:.0f}%" for k, v in list(around.items())[:3]) + "."
        if around
        else ""
    )
    return [
        Finding(
            rule="outside_ops",
            severity=HIGH,
            title=f"{100 - ops_pct:.0f}% of the {inp.unit} outside any op ({fmt_time(per)}{inp.per})",
            detail=(
                "Ops cover only part of the step; the rest is Python between ops, time.sleep, I/O, "
                "data preparation, or waiting on another thread or process, which the op table cannot "
                "show." + where + " Profile with --stack to see the Python functions that take it, "
                "and move data preparation out of the loop (or into DataLoader workers)."
            ),
            evidence={
                "ops_pct": ops_pct,
                "outside_per_step_us": per,
                "outside_us_by_step": outside.tolist(),
                "ranges_over_outside_pct": around,
            },
            impact_us=per,
            event_rows=limit_rows(np.flatnonzero(inp.is_step_range), th.max_event_rows),
            ops=list(around),
        )
    ]


def _ranges_over(inp: Inputs, ops: np.ndarray, outside_total: float) -> dict[str, float]:
    """Share (%) of the time outside ops that each named range covers (top 5).

    ``record_function`` ranges only: Python frames (--stack) nest up to the
    kernel's own loop, whose outermost frame would "cover" everything. The
    20 names with the most time are looked at, so thousands of module
    ranges stay cheap.
    """
    if outside_total <= 0:
        return {}
    rows = np.flatnonzero(inp.is_kind(K.USER_ANNOTATION) & ~inp.is_step_range)
    if inp.has_steps and len(rows):
        rows = rows[(inp.end[rows] > inp.windows[0][0]) & (inp.ts[rows] < inp.windows[-1][1])]
    if not len(rows):
        return {}
    out: dict[str, float] = {}
    ob_s, ob_e = merge(inp.ts[ops], inp.end[ops]) if len(ops) else (np.array([]), np.array([]))
    codes = inp.name_codes[rows]
    # Summed per code + 1 (code -1: no name) in row order, as np.unique's
    # inverse did, without sorting the rows.
    uniq = inp.codes_in(rows)
    total = np.bincount(codes + 1, weights=inp.dur[rows])[uniq + 1]
    for code in uniq[np.argsort(-total, kind="stable")[:20]].tolist():
        mine = rows[codes == code]
        cov = covered_per_step(inp, mine)
        # ... less what ops inside those ranges cover.
        rs, re_ = merge(inp.ts[mine], inp.end[mine])
        in_ops = float(overlap_with(ob_s, ob_e, rs, re_).sum()) if len(ob_s) else 0.0
        pct = 100 * max(float(cov.sum()) - in_ops, 0.0) / outside_total
        if pct >= 5:
            out[inp.name_of_code(code)] = min(pct, 100.0)
    return dict(sorted(out.items(), key=lambda kv: -kv[1])[:5])


# --------------------------------------------------------------------------- #
# 13. CPU threads


def find_threads(inp: Inputs, th: Thresholds) -> list[Finding]:
    """The intra-op thread count of torch against the cores this process may use."""
    if inp.device_traced:
        return []  # on a device run the host's ops mostly launch work: not the lever
    threads, cores = inp.num_threads, inp.cpu_cores
    if not threads or not cores:
        return [
            _not_checked(
                "threads",
                "CPU thread count not checked: not recorded in the trace",
                "a trace file does not record torch.get_num_threads(); profile the cell with "
                "%%torchprof in the session that runs it.",
            )
        ]
    ops = host_ops(inp)
    covered = covered_per_step(inp, ops)
    walls = step_walls(inp)
    ops_pct = 100 * float(covered.sum()) / max(float(walls.sum()), 1e-9)
    op_lanes = len(
        {(p, t) for p, t in zip(inp.events["pid"].iloc[ops], inp.events["tid"].iloc[ops], strict=True)}
    )
    top = _time_by_name(inp, top_level_ops(inp, ops), 5)
    evidence: dict[str, Any] = {
        "num_threads": int(threads),
        "num_threads_read": inp.threads_source,
        "usable_cores": int(cores),
        "ops_pct": ops_pct,
        "host_threads_with_ops": op_lanes,
        "ops_time_us": top,
    }
    if threads > cores:
        return [
            Finding(
                rule="threads",
                severity=INFO,
                title=f"torch uses {threads} threads on {cores} usable cores",
                detail=(
                    "More intra-op threads than cores makes them take turns (and spin), which slows "
                    f"every parallel op. Call torch.set_num_threads({cores}) or set OMP_NUM_THREADS={cores} "
                    "(containers and CPU affinity often give fewer cores than os.cpu_count() reports)."
                ),
                evidence=evidence,
                ops=list(top),
            )
        ]
    if threads == cores or ops_pct < th.threads_min_op_pct:
        return []
    op_per_step = float(covered.sum()) / inp.n_steps
    # Amdahl's bound for ops that split perfectly across threads.
    impact = op_per_step * (1 - threads / cores)
    evidence["at_most_saved_per_step_us"] = impact
    return [
        Finding(
            rule="threads",
            severity=HIGH,
            title=(
                f"torch uses {threads} of {cores} usable cores; ops fill {ops_pct:.0f}% of the {inp.unit}"
            ),
            detail=(
                f"Ops that split their work across intra-op threads (matmul, convolution, large "
                f"elementwise ops) run on {threads} thread{'s' if threads != 1 else ''} while {cores} cores "
                f"are free; ideally up to {fmt_time(impact)}{inp.per} less. Call "
                f"torch.set_num_threads({cores}) (or unset OMP_NUM_THREADS / MKL_NUM_THREADS), unless "
                "other processes need those cores. Most op time: " + ", ".join(top) + "."
            ),
            evidence=evidence,
            impact_us=impact,
            event_rows=limit_rows(top_level_ops(inp, ops)[:200], th.max_event_rows),
            ops=list(top),
        )
    ]


# --------------------------------------------------------------------------- #
# 14. DataLoader


def find_dataloader(inp: Inputs, th: Thresholds) -> list[Finding]:
    """Time the step waits in ``DataLoader`` iterations.

    Silent where no DataLoader was iterated in the steps: nothing is missing
    from the trace then, the cell just loads no data through one.
    """
    ann = np.flatnonzero(inp.is_kind(K.USER_ANNOTATION))
    if not len(ann):
        return []
    # Match the distinct names once, not every range.
    loaders = {str(n) for n in set(inp.names[ann].tolist()) if DATALOADER_RANGE.match(str(n))}
    rows = inp.rows_named(loaders, ann) if loaders else ann[:0]
    if inp.has_steps and len(rows):
        rows = rows[inp.in_steps(rows)]
    if not len(rows):
        return []
    covered = covered_per_step(inp, rows)
    walls = step_walls(inp)
    per = float(covered.sum()) / inp.n_steps
    pct = 100 * float(covered.sum()) / max(float(walls.sum()), 1e-9)
    if pct < th.dataloader_min_step_pct:
        return []
    kinds = sorted({str(n).rsplit("#", 1)[-1].split(".")[0] for n in inp.names[rows]})
    single = any("SingleProcess" in k for k in kinds)
    if single:
        remedy = (
            "The loader runs in this process (num_workers=0), so every batch is read, decoded and "
            "collated while the model waits. Set DataLoader(num_workers=N) (a few per accelerator, "
            "at most the free cores), persistent_workers=True, and pin_memory=True on a GPU run; "
            "or make the dataset's __getitem__ cheaper (decode once, cache)."
        )
    else:
        remedy = (
            "The workers do not keep up with the model: raise num_workers or prefetch_factor, make "
            "the transforms cheaper (or move them to the device), and check the storage's speed."
        )
    return [
        Finding(
            rule="dataloader",
            severity=HIGH,
            title=(
                f"DataLoader takes {pct:.0f}% of the {inp.unit} ({fmt_time(per)}{inp.per}, "
                f"{len(rows) / inp.n_steps:.3g} batches{inp.per})"
            ),
            detail=remedy,
            evidence={
                "iterator": kinds,
                "calls": int(len(rows)),
                "time_per_step_us": per,
                "step_pct": pct,
                "median_call_us": float(np.median(inp.dur[rows])),
            },
            impact_us=per,
            event_rows=limit_rows(rows, th.max_event_rows),
            ops=sorted(set(inp.names[rows].astype(str).tolist())),
        )
    ]


# --------------------------------------------------------------------------- #
# 15. host copies


def find_host_copies(inp: Inputs, th: Thresholds) -> list[Finding]:
    """Host time in copy ops (casts, ``.contiguous()``, ``.clone()``) that launched no device work."""
    ops = host_ops(inp)
    if not len(ops):
        return [
            _not_checked(
                "host_copies",
                "Host copies not checked: no host ops in the steps",
                "the trace records no host ops.",
            )
        ]
    copies = inp.rows_named(COPY_OPS, ops)
    if not len(copies):
        return []
    is_copy = np.zeros(len(inp.events), dtype=bool)
    is_copy[copies] = True
    # The outermost copy of each chain (aten::to › _to_copy › copy_ is one copy) ...
    copies = copies[~has_ancestor(inp, copies, is_copy)]
    # ... that launched nothing: a copy to or from a device is rule 5's.
    launched = _launch_ancestors(inp)
    copies = copies[~launched[copies]]
    is_seed = bias_seed_copies(inp, copies)
    seeds, copies = copies[is_seed], copies[~is_seed]
    if not len(copies):
        return []
    covered = covered_per_step(inp, copies)
    walls = step_walls(inp)
    pct = 100 * float(covered.sum()) / max(float(walls.sum()), 1e-9)
    if pct < th.host_copy_min_step_pct:
        return []
    per = float(covered.sum()) / inp.n_steps
    by_name = _time_by_name(inp, copies, th.host_copy_reported)
    calls = inp.count_names(copies)
    callers = _callers(inp, copies)
    return [
        Finding(
            rule="host_copies",
            severity=HIGH,
            title=(
                f"Host copies take {pct:.0f}% of the {inp.unit} ({fmt_time(per)}{inp.per}, "
                f"{len(copies) / inp.n_steps:,.0f} calls{inp.per})"
            ),
            detail=(
                "Copies are pure memory traffic: "
                + ", ".join(f"{k} {fmt_time(v / inp.n_steps)}{inp.per}" for k, v in by_name.items())
                + (" (called from " + ", ".join(callers) + ")" if callers else "")
                + ". Convert dtypes once outside the loop (not .float()/.to(dtype) every step), keep "
                "tensors in the layout the next op wants instead of .contiguous() after "
                "transpose/permute, drop .clone() where nothing writes to the tensor, and use "
                "in-place or out= variants."
            ),
            evidence={
                "time_per_step_us": per,
                "step_pct": pct,
                "calls": int(len(copies)),
                "time_by_name_us": by_name,
                "calls_by_name": {k: int(v) for k, v in calls.items()},
                "callers": callers,
                # torch's own bias copies inside addmm & co., left out of every figure above
                "bias_seed_copies": int(len(seeds)),
                "bias_seed_time_per_step_us": float(covered_per_step(inp, seeds).sum()) / inp.n_steps,
            },
            impact_us=per,
            event_rows=limit_rows(copies, th.max_event_rows),
            ops=list(by_name),
        )
    ]


def bias_seed_copies(inp: Inputs, rows: np.ndarray) -> np.ndarray:
    """Which of ``rows`` are an ``aten::copy_`` whose parent op is `BIAS_SEED_OPS` (the bias seed)."""
    if not len(rows):
        return np.zeros(0, dtype=bool)
    parent = inp.parent[rows]
    seed_parent = np.zeros(len(rows), dtype=bool)
    ok = parent >= 0
    seed_parent[ok] = inp.name_flags(parent[ok], lambda name: name in BIAS_SEED_OPS)
    return seed_parent & inp.name_flags(rows, lambda name: name == "aten::copy_")


def _launch_ancestors(inp: Inputs) -> np.ndarray:
    """True for every host event with a runtime call (a launch, a memcpy) below it."""
    marked = np.zeros(len(inp.events), dtype=bool)
    anc = inp.parent[np.flatnonzero(inp.is_kind(K.RUNTIME))]
    for _ in range(512):
        anc = anc[anc >= 0]
        if not len(anc):
            break
        anc = unique_rows(anc)
        marked[anc] = True
        anc = inp.parent[anc]
    return marked


def _callers(inp: Inputs, rows: np.ndarray) -> list[str]:
    """The ops directly around copies, most copy time first (top 3)."""
    parent = inp.parent[rows]
    ok = parent >= 0
    ok[ok] = inp.is_kind(K.CPU_OP)[parent[ok]]
    if not ok.any():
        return []
    return list(inp.count_names(parent[ok], inp.dur[rows[ok]]))[:3]
