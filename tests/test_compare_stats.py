"""A comparison shows its spread and says "within noise" unless a change beats it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from jupyter_torchprof.analysis.diff import (
    ALPHA,
    MIN_EFFECT,
    RUN_SPREAD,
    compare_pairs,
    compare_samples,
    headline,
    overall,
    rank_test,
    signed_rank_test,
    smallest_p,
    verdict_text,
)
from jupyter_torchprof.format import fmt_time

# --------------------------------------------------------------------------- #
# the rule, on numbers chosen to sit on each side of it


def _brute_p(a: np.ndarray, b: np.ndarray) -> float:
    """The rank test's two-sided p by enumerating every split of the pooled values (the oracle)."""
    both = np.concatenate([a, b])

    def u(x, y):
        return sum((xi > yj) + 0.5 * (xi == yj) for xi in x for yj in y)

    u0 = u(a, b)
    us = []
    for idx in itertools.combinations(range(len(both)), len(a)):
        rest = np.delete(both, list(idx))
        us.append(u(both[list(idx)], rest))
    us = np.array(us)
    return min(1.0, 2 * min((us <= u0).mean(), (us >= u0).mean()))


def test_rank_test_equals_the_permutation_count():
    rng = np.random.default_rng(1)
    for _ in range(25):
        m, n = rng.integers(2, 7, 2)
        a, b = rng.normal(0, 1, m), rng.normal(0.8, 1, n)
        assert rank_test(a, b) == pytest.approx(_brute_p(a, b), abs=1e-12)
    assert smallest_p(3, 3) == pytest.approx(0.1)


def test_rank_test_with_ties_is_close_to_the_permutation_count():
    a = np.array([1.0, 2, 2, 3, 4, 4, 5])
    b = np.array([2.0, 3, 5, 6, 6, 7])
    assert rank_test(a, b) == pytest.approx(_brute_p(a, b), abs=0.05)


def test_overlapping_steps_are_within_noise():
    a = np.array([100.0, 130.0, 110.0, 125.0, 104.0])
    b = np.array([90.0, 120.0, 105.0, 131.0, 99.0])
    s = compare_samples(a, b)
    assert s["verdict"] == "within noise"
    assert (s["a_min_us"], s["a_median_us"], s["a_max_us"]) == (100.0, 110.0, 130.0)
    assert (s["b_min_us"], s["b_max_us"]) == (90.0, 131.0)
    assert s["speedup"] == pytest.approx(110.0 / 105.0)
    assert s["speedup_low"] <= s["speedup"] <= s["speedup_high"]
    assert s["speedup_low"] < 1 < s["speedup_high"]


def test_a_real_change_is_a_verdict_and_one_outlier_does_not_hide_it():
    a = np.array([200.0, 210.0, 205.0, 198.0, 215.0, 202.0, 207.0, 199.0])
    b = a / 2 + np.array([1.0, -1.0, 0.5, 0.0, 2.0, 0.2, -0.4, 0.3])
    b[3] = 900.0  # one step descheduled: ranges overlap, ranks still tell
    s = compare_samples(a, b)
    assert s["verdict"] == "faster", s
    assert s["p_value"] < ALPHA
    assert s["speedup"] == pytest.approx(np.median(a) / np.median(b))
    assert 1.5 < s["speedup_low"] <= s["speedup"] <= s["speedup_high"]
    assert compare_samples(b, a)["verdict"] == "slower"


def test_a_tiny_change_is_noise_even_when_consistent():
    a = np.array([100.0, 100.5, 100.2, 100.1, 100.4, 100.3])
    b = a * (1 - MIN_EFFECT / 2) - 0.6
    assert b.max() < a.min()
    assert compare_samples(a, b)["verdict"] == "within noise"


def test_three_steps_cannot_show_a_change_and_say_so():
    s = compare_samples(np.array([10.0, 11, 12]), np.array([5.0, 5.5, 6]))
    assert s["verdict"] == "too few steps"
    text = verdict_text(s, fmt_time)
    assert text.startswith("looks 2.00× faster") and "--steps 5" in text


def test_one_value_per_side_has_no_spread():
    assert compare_samples(np.array([5.0]), np.array([1.0]))["verdict"] == "no spread"


def test_the_interval_is_reproducible():
    rng = np.random.default_rng(3)
    a, b = rng.normal(100, 10, 6), rng.normal(80, 10, 6)
    assert compare_samples(a, b) == compare_samples(a, b)


def test_verdict_words_name_the_ranges_and_the_hint():
    h = headline(
        {"wall_per_step_us": 110.0, "cpu_busy_per_step_us": 100.0, "device_traced": False},
        {"wall_per_step_us": 105.0, "cpu_busy_per_step_us": 95.0, "device_traced": False},
        _steps([100, 130, 100]),
        _steps([90, 120, 105]),
    ).set_index("metric")
    text = verdict_text(h.loc["wall per step"].to_dict(), fmt_time)
    assert text.startswith("within noise (per step A 100 µs–130 µs, B 90 µs–120 µs, 3 vs 3 steps)")
    assert "raise --steps" in text
    assert h.loc["wall per step", "a_us"] == 110.0  # the summary's mean per step
    assert np.isnan(h.loc["device busy per step", "speedup"])


def test_empty_steps_are_left_out_of_the_spread():
    steps = _steps([100, 101, 102, 0.5])
    steps["empty"] = [False, False, False, True]
    h = headline({"wall_per_step_us": 101.0}, {"wall_per_step_us": 101.0}, steps, steps).set_index("metric")
    assert h.loc["wall per step", "a_min_us"] == 100
    assert h.loc["wall per step", "steps_a"] == 3


def _steps(wall: list[float]):
    import pandas as pd

    return pd.DataFrame({"step": range(len(wall)), "wall_us": wall, "cpu_busy_us": wall})


# --------------------------------------------------------------------------- #
# a load that shifts between runs (issue 27)


def _brute_signed_p(d: np.ndarray) -> float:
    """The signed-rank test's two-sided p by flipping every sign (the oracle)."""
    d = d[d != 0]
    ranks = np.argsort(np.argsort(np.abs(d))) + 1.0  # no ties in the data used here
    w0 = ranks[d > 0].sum()
    ws = np.array(
        [ranks[list(s)].sum() for k in range(len(d) + 1) for s in itertools.combinations(range(len(d)), k)]
    )
    return min(1.0, 2 * min((ws <= w0).mean(), (ws >= w0).mean()))


def test_signed_rank_test_equals_every_sign_flip():
    rng = np.random.default_rng(4)
    for _ in range(20):
        d = rng.normal(0.3, 1, rng.integers(3, 11))
        assert signed_rank_test(d) == pytest.approx(_brute_signed_p(d), abs=1e-12)


def _drifting_pairs(factor: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """8 rounds under a load that triples half-way; b takes ``factor`` times a's work."""
    load = np.where(np.arange(8) < 4, 1.0, 3.0)
    a = 5000 * load * rng.uniform(0.95, 1.05, 8)
    b = 5000 * factor * load * rng.uniform(0.95, 1.05, 8)
    return a, b


def test_interleaved_pairs_see_through_a_shifting_load():
    rng = np.random.default_rng(5)
    a, b = _drifting_pairs(1.0, rng)
    assert compare_pairs(a, b)["verdict"] == "within noise"
    slow = compare_pairs(*_drifting_pairs(2.0, rng))
    assert slow["verdict"] == "slower" and slow["p_value"] < ALPHA
    assert slow["speedup_low"] <= slow["speedup"] <= slow["speedup_high"] < 0.6
    # Treated as two unrelated sets of steps, the tripled load hides the 2× change.
    assert compare_samples(*_drifting_pairs(2.0, rng))["verdict"] == "within noise"
    text = verdict_text({**slow, "metric": "wall per step"}, fmt_time)
    assert "× slower" in text and "evidence: 8 interleaved pairs" in text


def _summary(wall: float, device: bool = False) -> dict:
    return {"wall_per_step_us": wall, "cpu_busy_per_step_us": wall, "device_traced": device}


def _two_runs(wall_a, wall_b, cpu_a, cpu_b):
    """Two separate runs' headline from their per-step wall and process CPU times."""
    return headline(
        _summary(float(np.mean(wall_a))),
        _summary(float(np.mean(wall_b))),
        _steps(list(wall_a)),
        _steps(list(wall_b)),
        np.asarray(cpu_a, float),
        np.asarray(cpu_b, float),
    )


QUIET = np.array([5000.0, 5100, 4950, 5050, 5020, 4980, 5080, 4990])


def test_a_busier_machine_is_not_called_a_slower_code():
    """Wall time doubled, the process's CPU time did not: the machine, not the code."""
    h = _two_runs(QUIET, QUIET * 2.1, QUIET, QUIET[::-1] * 1.01)
    wall = h.set_index("metric").loc["wall per step"]
    assert wall["step_verdict"] == "slower"  # what the steps alone say ...
    assert wall["verdict"] == "busier machine"  # ... is not what is shown
    assert wall["evidence"] == "separate runs"
    word, sentence = overall(h)
    assert word == "busier machine"
    assert sentence.startswith("the machine was busier during B's run") and "two separate runs" in sentence


def test_twice_the_work_is_slower_even_when_the_light_side_ran_on_a_busy_machine():
    """The light side's wall time doubled by load: wall alike, CPU time tells the 2× work."""
    h = _two_runs(QUIET * 2, QUIET * 2.02, QUIET, QUIET * 2)
    rows = h.set_index("metric")
    assert rows.loc["wall per step", "verdict"] == "within noise"
    assert rows.loc["process CPU per step", "verdict"] == "slower"
    word, sentence = overall(h)
    assert word == "slower" and sentence.startswith("2.00× slower")


def test_a_change_smaller_than_the_drift_between_runs_is_within_noise_and_says_why():
    change = 1.3
    assert change < RUN_SPREAD
    h = _two_runs(QUIET, QUIET * change, QUIET, QUIET * change)
    cpu = h.set_index("metric").loc["process CPU per step"]
    assert cpu["step_verdict"] == "slower" and cpu["verdict"] == "within noise"
    assert cpu["speedup_high"] < 1  # the interval excludes 1 ...
    assert "drift" in cpu["reason"] and "1.30× slower [" in cpu["reason"]  # ... and the reason says why
    assert overall(h)[0] == "within noise"


def test_without_cpu_times_two_runs_rest_on_wall_time_with_the_run_spread():
    h = headline(_summary(5000.0), _summary(10000.0), _steps(list(QUIET)), _steps(list(QUIET * 2)))
    assert "process CPU per step" not in set(h["metric"])
    word, sentence = overall(h)
    assert word == "slower" and "two separate runs" in sentence


# --------------------------------------------------------------------------- #
# real runs on this (noisy, shared) machine

CELL = "y = a @ a\n"


@pytest.fixture
def one_thread():
    """One intra-op thread: on a loaded 2-core machine, spinning OpenMP threads
    make a tiny matmul take milliseconds, which drowns the change under test."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _run(shell, size: int, name: str):
    shell.run_cell(f"import torch\na = torch.randn({size}, {size})")
    shell.run_cell_magic("torchprof", f"--steps 8 --warmup 2 -q -o {name}", CELL)
    return shell.user_ns[name]


def test_identical_code_is_within_noise(shell, one_thread):
    # The first profiled run of a process pays one-time costs (seen: 1.38× the
    # wall per step of the next, on a quiet machine): a real difference the
    # rank test rightly reports, so the two compared runs both come after it.
    _run(shell, 192, "cold")
    first = _run(shell, 192, "first")
    second = _run(shell, 192, "second")
    d = first.diff(second)
    wall = d.headline.set_index("metric").loc["wall per step"]
    assert wall["steps_a"] == wall["steps_b"] == 8
    assert wall["verdict"] == "within noise", d.text()
    assert "within noise" in d.text()
    assert any("same cell source" in n for n in d.notes)


def test_a_real_slow_down_is_reported_with_its_interval(shell, one_thread):
    small = _run(shell, 64, "small")
    big = _run(shell, 640, "big")  # 1000× the multiply-adds
    d = small.diff(big)
    wall = d.headline.set_index("metric").loc["wall per step"]
    assert wall["verdict"] == "slower", d.text()
    assert wall["speedup_low"] <= wall["speedup"] <= wall["speedup_high"] < 1
    line = next(line for line in d.text().splitlines() if "wall per step" in line)
    assert "× slower (90% interval" in line and "p=" in line
    # Same cell text, other inputs: the note says so without hiding the change.
    assert any("unless the inputs" in n for n in d.notes)
