"""Two profiles side by side: what changed per op, per kernel, per step.

Used for eager vs torch.compile, for two cells, for a run against a saved
trace, and by the sidebar's Compare. Every function here is pure: tables in,
table out. Times are per step (divided by each side's step count) so that runs
with different ``--steps`` compare fairly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

#: Columns compared for each kind of table: (column, per-step?)
OP_METRICS = ("calls", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us")
KERNEL_METRICS = ("calls", "total_us")


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
    (b / a of the sort metric; inf when new, 0 when gone) and ``status``:
    ``both``, ``only_a`` (gone in b) or ``only_b`` (new in b). Sorted by the
    absolute change of ``sort_by`` (default: the last metric).
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
        ratio = np.where(va > 0, vb / va, np.where(vb > 0, np.inf, np.nan))
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


def headline(
    summary_a: dict[str, Any],
    summary_b: dict[str, Any],
    steps_a: pd.DataFrame | None = None,
    steps_b: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Wall, CPU-busy and device-busy time per step, a vs b, with spread and verdict.

    ``a_us``/``b_us`` are the means per step (the summary's figures); the
    speed-up (median a / median b: above 1 means b is faster, and medians
    because one descheduled step moves a mean), its interval, the spread
    columns and ``verdict`` come from `compare_samples` over each side's
    steps. Device rows are NaN when either side did not trace a device.
    """
    sa = step_samples(summary_a, steps_a)
    sb = step_samples(summary_b, steps_b)
    rows = []
    for label, key, _ in HEADLINE_METRICS:
        va = summary_a.get(key, np.nan)
        vb = summary_b.get(key, np.nan)
        va = np.nan if va is None else float(va)
        vb = np.nan if vb is None else float(vb)
        stats = compare_samples(sa[key], sb[key])
        rows.append({"metric": label, "a_us": va, "b_us": vb, "delta_us": vb - va, **stats})
    return pd.DataFrame(rows)


def verdict_text(row: Any, fmt_time: Any) -> str:
    """One headline row's verdict in words: ``1.82× faster (90% interval 1.60–2.05×, p=0.002, 8 vs 8 steps)``.

    ``fmt_time`` formats µs (passed in: analysis does not import views).
    """
    r = row if isinstance(row, dict) else row._asdict()
    verdict = r.get("verdict") or ""
    if not verdict:
        return ""
    if verdict == "no spread":
        return "one measurement per side: noise cannot be told from a change (profile several steps)"
    steps = f"{r['steps_a']} vs {r['steps_b']} steps"
    ranges = (
        f"per step A {fmt_time(r['a_min_us'])}–{fmt_time(r['a_max_us'])}, "
        f"B {fmt_time(r['b_min_us'])}–{fmt_time(r['b_max_us'])}"
    )
    if verdict == "within noise":
        hint = (
            ""
            if smallest_p(r["steps_a"], r["steps_b"]) < ALPHA / 5
            else "; raise --steps for a firmer answer"
        )
        return f"within noise ({ranges}, {steps}){hint}"
    sp, lo, hi = r["speedup"], r["speedup_low"], r["speedup_high"]
    if verdict == "too few steps":
        word = "faster" if sp > 1 else "slower"
        factor = sp if sp > 1 else 1 / sp
        return f"looks {factor:.2f}× {word}, but {steps} cannot show it at 95%: use --steps 5 or more"
    factor, lo, hi = (sp, lo, hi) if verdict == "faster" else (1 / sp, 1 / hi, 1 / lo)
    return f"{factor:.2f}× {verdict} (90% interval {lo:.2f}–{hi:.2f}×, p={r['p_value']:.2g}, {steps})"
