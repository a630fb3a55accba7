"""A comparison shows its spread and says "within noise" unless a change beats it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from jupyter_torchprof.analysis.diff import (
    ALPHA,
    MIN_EFFECT,
    compare_samples,
    headline,
    rank_test,
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
