"""Two profiles side by side: what changed per op, per kernel, per step.

Used for eager vs torch.compile, for two cells, for a run against a saved
trace, and by the sidebar's Compare. Every function here is pure: tables in,
table out; the columns compared are the caller's (the catalog marks them,
`columns.diff_metrics`). Times are per step (divided by each side's step
count) so that runs with different ``--steps`` compare fairly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def _per_step(table: pd.DataFrame, metrics: tuple[str, ...], steps: int) -> pd.DataFrame:
    out = table[["name", *metrics]].groupby("name", sort=False).sum()
    return out / max(steps, 1)


def diff_tables(
    a: pd.DataFrame,
    b: pd.DataFrame,
    metrics: tuple[str, ...],
    steps_a: int = 1,
    steps_b: int = 1,
    sort_by: str | None = None,
) -> pd.DataFrame:
    """Join two tables on ``name`` and compare ``metrics`` per step.

    Returns one row per name present on either side with ``<metric>_a``,
    ``<metric>_b``, ``<metric>_delta`` (b - a) for each metric, ``ratio``
    (b / a of the sort metric; NaN where a side has none: no number says
    "new" or "gone", the status does) and ``status``: ``both``, ``only_a``
    (gone in b) or ``only_b`` (new in b). Sorted by the absolute change of
    ``sort_by`` (default: the last metric).
    """
    sort_by = sort_by or metrics[-1]
    pa = _per_step(a, metrics, steps_a)
    pb = _per_step(b, metrics, steps_b)
    joined = pa.add_suffix("_a").join(pb.add_suffix("_b"), how="outer")
    in_a = joined.index.isin(pa.index)
    in_b = joined.index.isin(pb.index)
    joined = joined.fillna(0.0)
    for m in metrics:
        joined[f"{m}_delta"] = joined[f"{m}_b"] - joined[f"{m}_a"]
    va = joined[f"{sort_by}_a"].to_numpy()
    vb = joined[f"{sort_by}_b"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(in_a & in_b & (va > 0), vb / va, np.nan)
    joined["ratio"] = ratio
    joined["status"] = np.where(in_a & in_b, "both", np.where(in_a, "only_a", "only_b"))
    order = joined[f"{sort_by}_delta"].abs().sort_values(ascending=False, kind="stable").index
    joined = joined.loc[order].reset_index().rename(columns={"index": "name"})
    cols = ["name", "status"] + [f"{m}_{s}" for m in metrics for s in ("a", "b", "delta")] + ["ratio"]
    return joined[cols]


#: The headline's rows: label, summary key (mean per step), steps column.
HEADLINE_METRICS = (
    ("wall per step", "wall_per_step_us", "wall_us"),
    ("CPU busy per step", "cpu_busy_per_step_us", "cpu_busy_us"),
    ("device busy per step", "device_busy_per_step_us", "device_busy_us"),
)
#: Two-sided significance a verdict needs (rank test over the steps).
ALPHA = 0.05
#: Below this relative change of the medians two sides are "within noise"
#: however consistent the change.
MIN_EFFECT = 0.05
#: Bootstrap resamples for the speed-up interval (fixed seed: same input, same interval).
BOOTSTRAP_ROUNDS = 2000


def step_samples(summary: dict[str, Any], steps: pd.DataFrame | None) -> dict[str, np.ndarray]:
    """Per-step values of each headline metric (one value when the trace has no steps).

    Steps marked ``empty`` (no ops, no device work) are left out, as they
    are from the summary's means.
    """
    out: dict[str, np.ndarray] = {}
    usable = steps
    if usable is not None and "empty" in usable.columns:
        usable = usable.loc[~usable["empty"].astype(bool)]
    for _, key, col in HEADLINE_METRICS:
        if usable is not None and len(usable) and col in usable.columns:
            values = pd.to_numeric(usable[col], errors="coerce").to_numpy(np.float64)
        else:
            v = summary.get(key, np.nan)
            values = np.array([np.nan if v is None else float(v)])
        if key == "device_busy_per_step_us" and not summary.get("device_traced"):
            values = np.array([np.nan])
        out[key] = values
    return out


def _u_counts(m: int, n: int) -> np.ndarray:
    """How many orderings of m a's and n b's give each U (a's beating b's), for the exact test."""
    # f[i][j] = distribution of U for i a's and j b's; adding an a after the
    # others shifts U by the j b's it beats when it is the largest.
    f = [[np.zeros(1, dtype=np.float64) for _ in range(n + 1)] for _ in range(m + 1)]
    for i in range(m + 1):
        for j in range(n + 1):
            if i == 0 or j == 0:
                f[i][j] = np.ones(1)
                continue
            out = np.zeros(i * j + 1)
            with_a = f[i - 1][j]
            out[j : j + len(with_a)] += with_a
            with_b = f[i][j - 1]
            out[: len(with_b)] += with_b
            f[i][j] = out
    return f[m][n]


def rank_test(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of the Mann-Whitney rank test (do a and b come from one distribution?).

    Exact for small samples without ties (a notebook's handful of steps),
    the normal approximation with tie correction otherwise. Ranks make it
    indifferent to a single descheduled step, which min/max ranges are not.
    """
    m, n = len(a), len(b)
    if m == 0 or n == 0:
        return float("nan")
    both = np.concatenate([a, b])
    ranks = pd.Series(both).rank(method="average").to_numpy()
    u = float(ranks[:m].sum() - m * (m + 1) / 2)
    ties = len(np.unique(both)) < len(both)
    if not ties and m * n <= 900:
        counts = _u_counts(m, n)
        total = counts.sum()
        k = int(round(u))
        lower = counts[: k + 1].sum() / total
        upper = counts[k:].sum() / total
        return float(min(1.0, 2 * min(lower, upper)))
    mean = m * n / 2
    _, tie_counts = np.unique(both, return_counts=True)
    big_n = m + n
    var = m * n / 12 * ((big_n + 1) - (tie_counts**3 - tie_counts).sum() / (big_n * (big_n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u - mean) - 0.5) / np.sqrt(var)
    return float(min(1.0, math.erfc(max(z, 0.0) / np.sqrt(2))))


def smallest_p(m: int, n: int) -> float:
    """The smallest two-sided p-value the rank test can give with m and n steps."""
    return float(2 / math.comb(m + n, m)) if m and n else 1.0


def compare_samples(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """Spread of two sets of per-step values and whether they differ beyond noise.

    Returns ``a_median_us, a_min_us, a_max_us`` (and ``b_…``), ``steps_a``,
    ``steps_b``, ``speedup`` (median a / median b: above 1, b is faster),
    ``speedup_low``/``speedup_high`` (a 90 % bootstrap interval of that
    ratio, resampling each side's steps), ``p_value`` (`rank_test`) and
    ``verdict``:

    * ``faster`` / ``slower``: the rank test says the steps differ
      (p < `ALPHA`) and the medians differ by at least `MIN_EFFECT`;
    * ``within noise``: they do not;
    * ``too few steps``: the ranges do not even overlap, but with this few
      steps no result could reach p < `ALPHA` (3 and 3 steps: at best 0.1);
    * ``no spread``: a side has a single value (a trace without steps).
    """
    a = a[~np.isnan(a)]
    b = b[~np.isnan(b)]
    out: dict[str, Any] = {"steps_a": len(a), "steps_b": len(b)}
    for side, v in (("a", a), ("b", b)):
        out[f"{side}_median_us"] = float(np.median(v)) if len(v) else np.nan
        out[f"{side}_min_us"] = float(v.min()) if len(v) else np.nan
        out[f"{side}_max_us"] = float(v.max()) if len(v) else np.nan
    blank = {"speedup": np.nan, "speedup_low": np.nan, "speedup_high": np.nan, "p_value": np.nan}
    if not len(a) or not len(b):
        return {**out, **blank, "verdict": ""}
    med_a, med_b = out["a_median_us"], out["b_median_us"]
    speedup = med_a / med_b if med_b > 0 else np.nan
    if len(a) < 2 or len(b) < 2:
        return {**out, **blank, "speedup": speedup, "verdict": "no spread"}
    rng = np.random.default_rng(0)
    ra = np.median(rng.choice(a, size=(BOOTSTRAP_ROUNDS, len(a))), axis=1)
    rb = np.median(rng.choice(b, size=(BOOTSTRAP_ROUNDS, len(b))), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = ra / rb
    finite = ratios[np.isfinite(ratios)]
    low, high = (float(x) for x in np.percentile(finite, [5, 95])) if len(finite) else (np.nan, np.nan)
    p = rank_test(a, b)
    disjoint = b.max() < a.min() or b.min() > a.max()
    if np.isnan(speedup) or abs(speedup - 1) < MIN_EFFECT:
        verdict = "within noise"
    elif p < ALPHA:
        verdict = "faster" if speedup > 1 else "slower"
    elif disjoint and smallest_p(len(a), len(b)) >= ALPHA:
        verdict = "too few steps"
    else:
        verdict = "within noise"
    return {
        **out,
        "speedup": speedup,
        "speedup_low": low,
        "speedup_high": high,
        "p_value": p,
        "verdict": verdict,
    }


#: Rows measured on the host: a competing process, or a load that shifts between
#: two runs, moves them (device kernels are not slowed by a busy CPU).
HOST_METRICS = ("wall per step", "CPU busy per step", "process CPU per step")
#: The process's own CPU time per step (measured by the capture, not in the trace).
PROCESS_CPU = "process CPU per step"
#: How far the per-step times of identical code drift between two separate
#: runs on a shared machine: measured here (2 cores, other users' work),
#: the median step's own CPU time of one unchanged cell moved from 3.5 to
#: 4.8 ms (1.37×) between runs a few seconds apart; wall time moves far
#: more when a competing process starts. Two separate runs call a
#: host-side change a verdict only when the median step moved beyond this
#: factor; interleaved runs need no such margin.
RUN_SPREAD = 1.5
#: Evidence kinds a headline row rests on.
INTERLEAVED = "interleaved"
SEPARATE = "separate runs"


def signed_rank_test(d: np.ndarray) -> float:
    """Two-sided p-value of Wilcoxon's signed-rank test (are paired differences centred on 0?).

    Exact (every sign flip counted over the doubled ranks) for up to 40
    non-zero differences, the normal approximation beyond. Zero differences
    are dropped, as Wilcoxon does.
    """
    d = d[np.isfinite(d) & (d != 0)]
    n = len(d)
    if n == 0:
        return 1.0
    r2 = np.rint(pd.Series(np.abs(d)).rank(method="average").to_numpy() * 2).astype(np.int64)
    w, total = int(r2[d > 0].sum()), int(r2.sum())
    if n <= 40:
        counts = np.zeros(total + 1)
        counts[0] = 1.0
        for r in r2:
            shifted = np.zeros_like(counts)
            shifted[r:] = counts[: total + 1 - r]
            counts = counts + shifted
        counts /= counts.sum()
        return float(min(1.0, 2 * min(counts[: w + 1].sum(), counts[w:].sum())))
    mean, var = total / 2, float((r2.astype(np.float64) ** 2).sum()) / 4
    z = (abs(w - mean) - 1) / np.sqrt(var)
    return float(min(1.0, math.erfc(max(z, 0.0) / np.sqrt(2))))


def smallest_paired_p(n: int) -> float:
    """The smallest two-sided p-value the signed-rank test can give with n pairs."""
    return float(2 / 2**n) if n else 1.0


def _spread(out: dict[str, Any], a: np.ndarray, b: np.ndarray) -> None:
    for side, v in (("a", a), ("b", b)):
        out[f"{side}_median_us"] = float(np.median(v)) if len(v) else np.nan
        out[f"{side}_min_us"] = float(v.min()) if len(v) else np.nan
        out[f"{side}_max_us"] = float(v.max()) if len(v) else np.nan


def compare_pairs(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """`compare_samples` for interleaved runs: ``a[i]`` and ``b[i]`` ran back to back.

    The speed-up is the median of the per-pair ratios a / b, its interval a
    90 % bootstrap over the pairs and ``p_value`` the signed-rank test of
    their logarithms: a load that drifts slowly hits both runs of a pair
    alike and cancels out. ``steps_a``/``steps_b`` count the pairs.
    """
    keep = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    a, b = a[keep], b[keep]
    out: dict[str, Any] = {"steps_a": len(a), "steps_b": len(b), "evidence": INTERLEAVED}
    _spread(out, a, b)
    blank = {"speedup": np.nan, "speedup_low": np.nan, "speedup_high": np.nan, "p_value": np.nan}
    if len(a) < 2:
        word = "no spread" if len(a) else ""
        return {**out, **blank, "verdict": word, "step_verdict": word}
    logs = np.log(a / b)
    speedup = float(np.exp(np.median(logs)))
    rng = np.random.default_rng(0)
    boot = np.median(rng.choice(logs, size=(BOOTSTRAP_ROUNDS, len(logs))), axis=1)
    low, high = (float(np.exp(x)) for x in np.percentile(boot, [5, 95]))
    p = signed_rank_test(logs)
    if abs(speedup - 1) < MIN_EFFECT:
        verdict = "within noise"
    elif p < ALPHA:
        verdict = "faster" if speedup > 1 else "slower"
    elif (np.all(logs > 0) or np.all(logs < 0)) and smallest_paired_p(len(logs)) >= ALPHA:
        verdict = "too few steps"
    else:
        verdict = "within noise"
    stats = {"speedup": speedup, "speedup_low": low, "speedup_high": high, "p_value": p}
    return {**out, **stats, "verdict": verdict, "step_verdict": verdict}


def _separate_runs(stats: dict[str, Any], host: bool) -> dict[str, Any]:
    """One row's verdict between two separate runs: a host-side change must beat `RUN_SPREAD`.

    Steps inside one run are not independent samples of run-to-run
    variation, so the rank test alone would call identical code slower
    whenever the load shifted between the runs. ``step_verdict`` keeps what
    the steps alone said.
    """
    out = {**stats, "evidence": SEPARATE, "step_verdict": stats.get("verdict", "")}
    if host and out["verdict"] in ("faster", "slower"):
        sp = out["speedup"]
        beyond = sp > RUN_SPREAD if out["verdict"] == "faster" else sp < 1 / RUN_SPREAD
        if not beyond:
            out["verdict"] = "within noise"
    return out


def _busier_machine(wall: dict[str, Any], cpu: dict[str, Any] | None) -> dict[str, Any]:
    """The wall row when the process's CPU time says the change was the machine's load, not the code."""
    if cpu is None or wall.get("step_verdict") not in ("faster", "slower"):
        return wall
    # What the CPU time's own steps say, before the run-to-run margin.
    cpu_word = cpu.get("step_verdict", cpu.get("verdict"))
    if cpu_word == wall["step_verdict"] or cpu_word not in ("within noise", "faster", "slower"):
        return wall
    # Wall time moved, this process's own CPU time did not (or moved the
    # other way): another process took the cores during one of the runs.
    return {**wall, "verdict": "busier machine"}


def headline(
    summary_a: dict[str, Any],
    summary_b: dict[str, Any],
    steps_a: pd.DataFrame | None = None,
    steps_b: pd.DataFrame | None = None,
    cpu_a: np.ndarray | None = None,
    cpu_b: np.ndarray | None = None,
    paired: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
) -> pd.DataFrame:
    """Wall, CPU-busy, device-busy and process CPU time per step, a vs b, with spread and verdict.

    ``a_us``/``b_us`` are the means per step (the summary's figures); the
    speed-up (median a / median b: above 1 means b is faster), its interval,
    the spread columns and ``verdict`` come from each side's steps. The two
    sides are two separate runs unless ``paired`` gives, per row label
    (``wall per step``, ``process CPU per step``), values of runs that
    alternated (`compare_pairs`). ``cpu_a``/``cpu_b`` are the process's CPU
    time per step as the capture measured it (a row of its own when both
    are known). ``evidence`` says what a row's verdict rests on
    (``interleaved`` or ``separate runs``); ``verdict`` is ``faster``,
    ``slower``, ``within noise``, ``too few steps``, ``no spread`` or
    ``busier machine`` (wall time moved, the process's CPU time did not);
    ``reason`` says it in words (`verdict_text`).
    """
    sa = step_samples(summary_a, steps_a)
    sb = step_samples(summary_b, steps_b)
    metrics = [(label, key) for label, key, _ in HEADLINE_METRICS]
    paired = paired or {}
    if cpu_a is not None and cpu_b is not None and len(cpu_a) and len(cpu_b):
        sa["process_cpu_per_step_us"], sb["process_cpu_per_step_us"] = cpu_a, cpu_b
    elif PROCESS_CPU in paired:
        sa["process_cpu_per_step_us"], sb["process_cpu_per_step_us"] = paired[PROCESS_CPU]
    if "process_cpu_per_step_us" in sa:
        metrics.append((PROCESS_CPU, "process_cpu_per_step_us"))
    rows: dict[str, dict[str, Any]] = {}
    for label, key in metrics:
        va = _mean(summary_a.get(key), sa[key])
        vb = _mean(summary_b.get(key), sb[key])
        if label in paired:
            stats = compare_pairs(*paired[label])
        else:
            stats = _separate_runs(compare_samples(sa[key], sb[key]), label in HOST_METRICS)
        rows[label] = {"metric": label, "a_us": va, "b_us": vb, "delta_us": vb - va, **stats}
    rows["wall per step"] = _busier_machine(rows["wall per step"], rows.get(PROCESS_CPU))
    frame = pd.DataFrame(list(rows.values()))
    frame["reason"] = [verdict_text(r, _fmt_us) for r in frame.to_dict("records")]
    return frame


def _mean(summary_value: Any, samples: np.ndarray) -> float:
    """The summary's mean per step, else the mean of the samples."""
    if summary_value is not None and not (isinstance(summary_value, float) and np.isnan(summary_value)):
        return float(summary_value)
    finite = samples[np.isfinite(samples)]
    return float(finite.mean()) if len(finite) else np.nan


def _fmt_us(us: float) -> str:
    """µs as text."""
    from ..format import fmt_time

    return fmt_time(us)


def overall(table: pd.DataFrame) -> tuple[str, str]:
    """The one verdict of a comparison and its sentence, from a `headline` table.

    The wall row's, unless the process's CPU time (measured by the capture,
    barely moved by a competing process) tells more. Wall time that moved
    while the CPU time did not is ``busier machine`` (see `headline`). On
    runs that traced no device, where the host's work is the code's work,
    two separate runs are judged by their CPU time (their wall times met
    different loads), and interleaved runs by it when their wall times'
    change drowned in the load.
    """
    if table.empty:
        return "", ""
    rows = table.set_index("metric")
    wall = rows.loc["wall per step"].to_dict() if "wall per step" in rows.index else {}
    cpu = rows.loc[PROCESS_CPU].to_dict() if PROCESS_CPU in rows.index else None
    dev = rows.loc["device busy per step"] if "device busy per step" in rows.index else None
    traced = dev is not None and bool(np.isfinite(dev["a_us"]) or np.isfinite(dev["b_us"]))
    pick = wall
    if cpu is not None and not traced and wall.get("verdict") != "busier machine":
        if wall.get("evidence") == SEPARATE:
            # Between two runs the load differed: wall time says as much about
            # the machine as about the code, the process's CPU time far less.
            pick = cpu
        elif wall.get("verdict") not in ("faster", "slower") and cpu.get("verdict") in ("faster", "slower"):
            pick = cpu
    return str(pick.get("verdict") or ""), str(pick.get("reason") or "")


def _evidence(r: dict[str, Any]) -> str:
    """What a row's verdict rests on, in words."""
    if r.get("evidence") == INTERLEAVED:
        return f"evidence: {r['steps_a']} interleaved pairs of runs"
    if r.get("evidence") == SEPARATE:
        return "evidence: two separate runs, their spread between runs not measured"
    return "evidence: the steps of each side"


def _factor(r: dict[str, Any]) -> tuple[float, float, float, str]:
    """The speed-up as a factor above 1, its interval in the same direction, and the word."""
    sp, lo, hi = r["speedup"], r["speedup_low"], r["speedup_high"]
    if sp >= 1:
        return sp, lo, hi, "faster"
    return 1 / sp, 1 / hi, 1 / lo, "slower"


def verdict_text(row: Any, fmt_time: Any = None) -> str:
    """One headline row's verdict in words, with the evidence it rests on.

    ``1.82× faster (90% interval 1.60–2.05×, p=0.002, 8 vs 8 steps; evidence:
    8 interleaved pairs of runs)``. A "within noise" beside a speed-up that
    alone would suggest a change says why (the steps overlap, or two separate
    runs cannot tell so small a change from their drift). ``fmt_time``
    formats µs (default `format.fmt_time`).
    """
    r = row if isinstance(row, dict) else row._asdict()
    fmt_time = fmt_time or _fmt_us
    verdict = r.get("verdict") or ""
    if not verdict:
        return ""
    if verdict == "no spread":
        return "one measurement per side: noise cannot be told from a change (profile several steps)"
    paired = r.get("evidence") == INTERLEAVED
    steps = f"{r['steps_a']} pairs" if paired else f"{r['steps_a']} vs {r['steps_b']} steps"
    evidence = _evidence(r)
    if verdict == "busier machine":
        factor, _, _, word = _factor(r)
        busier = "B's" if word == "slower" else "A's"
        return (
            f"the machine was busier during {busier} run: wall time {factor:.2f}× {word}, but this "
            f"process's CPU time per step did not change with it: not a change in the code ({evidence})"
        )
    if verdict == "too few steps":
        factor, _, _, word = _factor(r)
        return f"looks {factor:.2f}× {word}, but {steps} cannot show it at 95%: use --steps {8 if paired else 5} or more ({evidence})"
    if verdict in ("faster", "slower"):
        factor, lo, hi, word = _factor(r)
        return f"{factor:.2f}× {word} (90% interval {lo:.2f}–{hi:.2f}×, p={r['p_value']:.2g}, {steps}; {evidence})"
    return _within_noise_text(r, fmt_time, steps, evidence)


def _within_noise_text(r: dict[str, Any], fmt_time: Any, steps: str, evidence: str) -> str:
    """'within noise', the spread, and why when the speed-up alone would suggest a change."""
    ranges = (
        f"per step A {fmt_time(r['a_min_us'])}–{fmt_time(r['a_max_us'])}, "
        f"B {fmt_time(r['b_min_us'])}–{fmt_time(r['b_max_us'])}"
    )
    hint = "" if smallest_p(r["steps_a"], r["steps_b"]) < ALPHA / 5 else "; raise --steps for a firmer answer"
    text = f"within noise ({ranges}, {steps}){hint}; {evidence}"
    sp = r.get("speedup")
    if sp is None or not np.isfinite(sp) or abs(sp - 1) < MIN_EFFECT:
        return text
    factor, lo, hi, word = _factor(r)
    shown = (
        f"{factor:.2f}× {word} [{lo:.2f}–{hi:.2f}]"
        if np.isfinite(lo) and np.isfinite(hi)
        else f"{factor:.2f}× {word}"
    )
    if r.get("step_verdict") in ("faster", "slower"):
        why = (
            f"the steps alone say {shown}, but two separate runs on a shared machine drift by up to "
            f"{RUN_SPREAD:.1f}× (--compare interleaves its runs; else repeat both runs)"
        )
    else:
        why = f"the medians differ ({shown}) but the steps overlap (p={r.get('p_value', np.nan):.2g})"
    return f"{text}. Why not a verdict: {why}"
