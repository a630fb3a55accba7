"""`analysis.links.linked_events` (what the timeline highlights on a click) against the raw trace.

The oracle is the classic definition, in plain Python on the JSON: an op's
device work is the work whose runtime launch (same ``correlation``) ran on
the op's thread inside the op's time range; device work's links are its
launch and the innermost op around that launch.
"""

from __future__ import annotations

import numpy as np
import pytest
from tracefiles import raw_events, real_trace

from jupyter_torchprof.analysis.links import linked_events
from jupyter_torchprof.runs.load import load
from jupyter_torchprof.trace import categories as K

TRACES = ["gp100_sgd_step_user_annotation.pt.trace.json.gz", "mi250_rocm_train.pt.trace.json.gz"]
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _key(e: dict, t0: float = 0.0) -> tuple:
    """(name, start) of an event; ``t0`` is where the profile's time axis starts (its ``meta.t0_us``)."""
    return (str(e.get("name")), round(float(e["ts"]) - t0, 3))


def _raw_links(path):
    """(ops, launches by correlation, device work by correlation), from the JSON alone."""
    events = [e for e in raw_events(path) if e.get("ph") == "X" and "dur" in e]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    launches = {}
    device = {}
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if corr is None:
            continue
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            launches[corr] = e
        elif e.get("cat") in DEVICE_CATS:
            device.setdefault(corr, []).append(e)
    return ops, launches, device


@pytest.mark.parametrize("name", TRACES)
def test_an_ops_device_work_is_what_its_launches_started(name: str) -> None:
    path = real_trace(name)
    profile = load(path)
    ev = profile.events
    kind = ev["kind"].to_numpy(object)
    activity = np.flatnonzero(np.isin(kind, K.DEVICE_ACTIVITY) & (ev["op"].to_numpy() >= 0))
    ops, launches, device = _raw_links(path)
    t0_us = float(profile.meta.t0_us)
    by_key = {
        (str(n), round(float(t), 3)): i for i, (n, t) in enumerate(zip(ev["name"], ev["ts"], strict=True))
    }
    checked = 0
    for op in sorted(ops, key=lambda e: -float(e["dur"]))[:40]:
        t0, t1 = float(op["ts"]), float(op["ts"]) + float(op["dur"])
        expected = set()
        for corr, launch in launches.items():
            if launch["pid"] == op["pid"] and launch["tid"] == op["tid"] and t0 <= float(launch["ts"]) <= t1:
                expected |= {_key(d, t0_us) for d in device.get(corr, [])}
        row = by_key.get(_key(op, t0_us))
        if row is None or not expected:
            continue
        got = linked_events(ev, np.array([row]), activity)
        got_device = {
            _key({"name": ev["name"].iat[r], "ts": ev["ts"].iat[r]}) for r in got if kind[r] in K.DEVICE_KINDS
        }
        assert got_device == expected, op["name"]
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize("name", TRACES)
def test_device_work_links_to_its_launch_and_op(name: str) -> None:
    profile = load(real_trace(name))
    ev = profile.events
    kind = ev["kind"].to_numpy(object)
    activity = np.flatnonzero(np.isin(kind, K.DEVICE_ACTIVITY) & (ev["op"].to_numpy() >= 0))
    for row in activity[:: max(len(activity) // 30, 1)]:
        got = set(linked_events(ev, np.array([row]), activity).tolist())
        launch, op = int(ev["launch"].iat[row]), int(ev["op"].iat[row])
        assert got == {r for r in (launch, op) if r >= 0}
        assert str(ev["kind"].iat[op]) in K.OP_KINDS
        # the op encloses the launch in time, on the launch's thread
        assert ev["ts"].iat[op] <= ev["ts"].iat[launch] <= ev["ts"].iat[op] + ev["dur"].iat[op]
        assert ev["tid"].iat[op] == ev["tid"].iat[launch]


def test_nothing_selected_links_nothing() -> None:
    profile = load(real_trace(TRACES[0]))
    assert len(linked_events(profile.events, np.array([], dtype=np.int64), np.array([1, 2]))) == 0
