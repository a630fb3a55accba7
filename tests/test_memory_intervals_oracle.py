"""Memory in intervals: the empty intervals skipped and the leaner counting give torch's sums bit for bit.

The oracle is the computation before: a binary search of every interval's
two bounds among the sorted records and the difference of the prefix sums.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jupyter_torchprof.analysis.memory import INTERVAL_TOLERANCE_US, memory_in_intervals


def _oracle(start, end, memory, tolerance):
    ts = memory["ts"].to_numpy(np.float64)
    order = np.argsort(ts, kind="stable")
    ts = ts[order]
    nbytes = np.nan_to_num(memory["bytes"].to_numpy(np.float64)[order])
    on_cpu = memory["device_type"].to_numpy()[order] == 0
    lo = np.searchsorted(ts, start - tolerance, side="left")
    hi = np.searchsorted(ts, end + tolerance, side="right")
    out = []
    for sel in (on_cpu, ~on_cpu):
        csum = np.concatenate([[0.0], np.cumsum(np.where(sel, nbytes, 0.0))])
        out.append(csum[hi] - csum[lo])
    return out


def _case(rng, records, events, trial):
    # Integer microseconds and half-steps: records fall on bounds, ties everywhere.
    ts = rng.integers(0, 4 * records, records) / rng.choice([1.0, 2.0])
    nbytes = rng.choice([-4096.0, -512.0, 512.0, 1024.0, 3.5], records)
    if trial % 3 == 0:
        nbytes[rng.random(records) < 0.05] = np.nan
    if trial % 5 == 4:
        # A sum that overflows: the prefix sums turn infinite, the empty intervals NaN.
        nbytes[records // 2] = 1.7e308
        nbytes[records // 2 + 1] = 1.7e308
    memory = pd.DataFrame(
        {"ts": ts, "bytes": nbytes, "device_type": rng.choice([0, 1], records, p=[0.3, 0.7])}
    )
    start = rng.integers(-10, 4 * records + 10, events).astype(float)
    if trial % 2:
        start.sort()  # runs in order, as one thread's events
    dur = rng.choice([0.0, 0.5, 1.0, 3.0, 40.0], events)
    end = start + dur
    if trial % 4 == 3:
        # Bounds reversed: counted in full, as before.
        flip = rng.random(events) < 0.01
        end[flip] = start[flip] - 2.0
    return start, end, memory


@pytest.mark.parametrize("records, events", [(300, 2000), (6000, 40_000), (9000, 20_000)])
def test_memory_in_intervals_equals_the_oracle(records, events):
    rng = np.random.default_rng(records)
    for trial in range(10):
        start, end, memory = _case(rng, records, events, trial)
        for tolerance in (INTERVAL_TOLERANCE_US, 0.0, 0.5):
            # The overflowing trials warn as the computation before did.
            with np.errstate(over="ignore", invalid="ignore"):
                got = memory_in_intervals(start, end, memory, tolerance)
                want = _oracle(start, end, memory, tolerance)
            for side in (0, 1):
                # Bit for bit: the same prefix-sum indices give the same floats (NaN too).
                assert np.array_equal(got[side].view(np.int64), want[side].view(np.int64)), (
                    trial,
                    tolerance,
                    side,
                )


def test_memory_in_intervals_counts_most_intervals_empty():
    # The skipped intervals are really skipped: no record inside gives exactly +0.0.
    memory = pd.DataFrame({"ts": [10.0, 20.0], "bytes": [64.0, -64.0], "device_type": [0, 0]})
    start = np.array([0.0, 10.0, 11.0, 20.0, 21.0])
    end = np.array([5.0, 10.0, 19.0, 25.0, 30.0])
    host, device = memory_in_intervals(start, end, memory)
    assert host.tolist() == [0.0, 64.0, 0.0, -64.0, 0.0]
    assert not np.signbit(host[host == 0]).any()
    assert device.tolist() == [0.0] * 5
