"""Device-side analysis checked against computations straight from the trace files.

Every oracle here reads the file with the standard library (tracefiles.raw_events)
and computes with plain Python. Times are taken relative to the first complete
event, as the parser does, so that both sides round timestamps the same way
(the V100 trace's epoch-based float timestamps have a 0.25 µs resolution).
"""

from __future__ import annotations

import copy
import gzip
import json
from collections import Counter, defaultdict

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracefiles import GPU_TRACES, raw_events, real_trace, union_length

from jupyter_torchprof import load
from jupyter_torchprof.analysis.tree import nest, nest_reference
from jupyter_torchprof.results.profile import Profile
from jupyter_torchprof.trace.parser import parse_document

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
STEP_TRACES = [
    "a100_nccl_rank0.pt.trace.json.gz",
    "v100_ddp_ns_timestamps.pt.trace.json.gz",
    "diff_pair/control.pt.trace.json.gz",
    "mi250_rocm_train.pt.trace.json.gz",
]


class Raw:
    """A trace's complete events with times relative to the first one."""

    def __init__(self, name: str) -> None:
        self.path = real_trace(name)
        self.events = [e for e in raw_events(self.path) if e.get("ph") == "X" and e.get("cat") != "Trace"]
        t0 = min(float(e["ts"]) for e in self.events)
        for e in self.events:
            e["_s"] = float(e["ts"]) - t0
            e["_e"] = e["_s"] + float(e.get("dur", 0))
        self.device = [e for e in self.events if e["cat"] in DEVICE_CATS]
        self.steps = sorted(
            (e["_s"], e["_e"])
            for e in self.events
            if str(e["name"]).startswith("ProfilerStep#") and e["cat"].lower() == "user_annotation"
        )

    @staticmethod
    def lane(e):
        a = e.get("args", {})
        return a.get("device", e["pid"]), a.get("stream", e["tid"])


@pytest.mark.parametrize("name", STEP_TRACES)
def test_per_step_breakdown(name):
    raw = Raw(name)
    p = load(str(raw.path))
    steps = p.steps
    assert len(steps) == len(raw.steps)

    # The host range's time window (the device work of each step by launch is
    # checked in test_step_attribution.py).
    for k, (lo, hi) in enumerate(raw.steps):
        row = steps.iloc[k]
        assert row["start_us"] == pytest.approx(lo)
        assert row["wall_us"] == pytest.approx(hi - lo)
        busy = union_length(
            [(max(e["_s"], lo), min(e["_e"], hi)) for e in raw.device if e["_e"] > lo and e["_s"] < hi]
        )
        assert row["device_busy_in_window_us"] == pytest.approx(busy, abs=1e-6)
        assert row["device_idle_in_window_us"] == pytest.approx(hi - lo - busy, abs=1e-6)


@pytest.mark.parametrize("name", ["a100_nccl_rank0.pt.trace.json.gz", "diff_pair/test.pt.trace.json.gz"])
def test_memcpy_bytes_and_bandwidth(name):
    raw = Raw(name)
    p = load(str(raw.path))
    nbytes, time, calls = Counter(), Counter(), Counter()
    for e in raw.device:
        if e["cat"] in ("gpu_memcpy", "gpu_memset"):
            nbytes[e["name"]] += e["args"]["bytes"]
            time[e["name"]] += e["dur"]
            calls[e["name"]] += 1
    table = p.memcpy.set_index("name")
    assert set(table.index) == set(calls)
    for n in calls:
        assert table.loc[n, "calls"] == calls[n]
        assert table.loc[n, "bytes"] == pytest.approx(nbytes[n])
        assert table.loc[n, "bandwidth_gbps"] == pytest.approx(nbytes[n] / (time[n] * 1e3))
    # the kernel table counts the work the counted steps launched (all of it
    # here but the copies queued before the trace started, see test_queued_work)
    from test_step_attribution import Raw as Attributed

    steps = Attributed(name)
    counted = set(steps.counted())
    step_bytes = Counter()
    for e, o in zip(steps.device, steps.owner, strict=True):
        if e["cat"] in ("gpu_memcpy", "gpu_memset") and o in counted:
            step_bytes[e["name"]] += e["args"]["bytes"]
    k = p.kernels.set_index("name")
    assert set(k.index[k["kind"] != "kernel"]) == set(step_bytes)
    for n in step_bytes:
        assert k.loc[n, "bytes"] == pytest.approx(step_bytes[n])


@pytest.mark.parametrize(
    "name", ["gp100_sgd_step_user_annotation.pt.trace.json.gz", "a100_nccl_rank0.pt.trace.json.gz"]
)
def test_gpu_user_annotations(name):
    raw = Raw(name)
    ann = [e for e in raw.events if e["cat"] == "gpu_user_annotation"]
    got = load(str(raw.path)).gpu_annotations
    assert len(got) == len(ann) > 0
    assert got["dur"].sum() == pytest.approx(sum(e["dur"] for e in ann))
    assert Counter(got["name"].astype(str)) == Counter(e["name"] for e in ann)


@pytest.mark.parametrize("name", ["a100_nccl_rank0.pt.trace.json.gz", "triton_kernel.pt.trace.json.gz"])
def test_kernel_launch_arguments(name):
    raw = Raw(name)
    p = load(str(raw.path))
    k = p.kernels.set_index("name")
    regs, grids = defaultdict(list), defaultdict(Counter)
    for e in raw.device:
        if e["cat"] == "kernel":
            regs[e["name"]].append(e["args"]["registers per thread"])
            grids[e["name"]][json.dumps(e["args"]["grid"], separators=(",", ":"))] += 1
    for n in regs:
        assert k.loc[n, "registers"] == pytest.approx(np.mean(regs[n]))
        top = grids[n].most_common()
        assert k.loc[n, "grid"] in {g for g, c in top if c == top[0][1]}


# --------------------------------------------------------------------------- #
# links


def _launch_oracle(raw: Raw):
    """For each device event (by correlation), its runtime launch from the file."""
    launches = {}
    for e in raw.events:
        if e["cat"] in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launches.setdefault(e["args"]["correlation"], e)
    return launches


@pytest.mark.parametrize("name", GPU_TRACES)
def test_every_kernel_links_to_its_launch(name):
    raw = Raw(name)
    p = load(str(raw.path))
    oracle = _launch_oracle(raw)
    table = p.launches
    ev = p.events
    assert len(table) == sum(1 for e in raw.events if e["cat"] in DEVICE_CATS | {"cuda_sync"})
    linked = 0
    for row in table.itertuples(index=False):
        launch = oracle.get(row.correlation)
        if launch is None:
            continue
        linked += 1
        assert row.launch_row >= 0
        assert row.launch_name == launch["name"]
        assert abs(row.launch_ts - launch["_s"]) < 1e-6
        assert abs(row.launch_delay_us - (row.ts - launch["_s"])) < 1e-6
        # the reverse: the launch row is the runtime event with that correlation
        assert ev["correlation"].iat[row.launch_row] == row.correlation
    assert linked >= 0.9 * len(table)
    # launch overhead summary against the same pairs
    pairs = [
        (oracle[e["args"]["correlation"]]["name"], e["_s"] - oracle[e["args"]["correlation"]]["_s"])
        for e in raw.events
        if e["cat"] in DEVICE_CATS | {"cuda_sync"} and e.get("args", {}).get("correlation") in oracle
    ]
    summary = p.launch_summary.set_index("launch_name")
    delays = [d for _, d in pairs]
    assert summary.loc["all", "delay_mean_us"] == pytest.approx(np.mean(delays))
    assert summary.loc["all", "delay_max_us"] == pytest.approx(max(delays))
    by_api = defaultdict(list)
    for api, d in pairs:
        by_api[api].append(d)
    for api, ds in by_api.items():
        assert summary.loc[api, "delay_median_us"] == pytest.approx(np.median(ds))


@pytest.mark.parametrize("route", ["memory", "file"])
@pytest.mark.parametrize("name", ["a100_nccl_rank0.pt.trace.json.gz", "diff_pair/control.pt.trace.json.gz"])
def test_flows_link_kernels_without_correlation_ids(name, route, tmp_path):
    """Older traces link launches only by flow events (ac2g / async_cpu_to_gpu).

    The file's flow pairs are the oracle: a flow's start sits on the launch,
    its finish on the kernel. The document is changed (correlation ids
    dropped from device events) and parsed again: in memory (flows read in
    the one pass), and from a file (flows deferred by default, so the parser
    must notice the missing ids and read them in its second pass).
    """
    path = real_trace(name)
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    flow_cats = {"ac2g", "async_cpu_to_gpu"}
    starts = {e["id"]: e for e in doc["traceEvents"] if e.get("ph") == "s" and e.get("cat") in flow_cats}
    ends = {e["id"]: e for e in doc["traceEvents"] if e.get("ph") == "f" and e.get("cat") in flow_cats}
    stripped = copy.deepcopy(doc)
    for e in stripped["traceEvents"]:
        if e.get("cat") in DEVICE_CATS:
            e.get("args", {}).pop("correlation", None)
    if route == "memory":
        p = Profile(parse_document(stripped, "stripped"))
    else:
        path = tmp_path / "stripped.pt.trace.json.gz"
        with gzip.open(path, "wt") as fh:
            json.dump(stripped, fh)
        p = load(path)
    assert p.meta.flows_unread == 0
    t0 = p.meta.t0_us
    launches = p.launches
    # device events by start time (µs relative to t0, rounded to a nanosecond)
    by_ts: dict[int, list] = defaultdict(list)
    for r in launches.itertuples(index=False):
        by_ts[round(r.ts * 1000)].append(r)
    checked = 0
    for fid, f in ends.items():
        s = starts.get(fid)
        cands = by_ts.get(round((float(f["ts"]) - t0) * 1000), []) if s is not None else []
        if len(cands) != 1:
            continue
        r = cands[0]
        assert r.link == "flow"
        assert r.launch_ts == pytest.approx(float(s["ts"]) - t0, abs=1e-6)
        checked += 1
    assert checked > 100


# --------------------------------------------------------------------------- #
# nesting: the vectorised walk equals the stack walk


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.integers(0, 40),
            st.integers(0, 12),
            st.sampled_from([0.0, 0.0004, 0.5]),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_nest_equals_the_stack_walk(rows):
    lane = np.array([r[0] for r in rows])
    start = np.array([r[1] + r[3] for r in rows], dtype=float)
    end = start + np.array([r[2] for r in rows], dtype=float) * np.array(
        [1.0 if r[3] != 0.5 else 0.7 for r in rows]
    )
    p2, d2 = nest_reference(lane, start, end, 0.001)
    for p1, d1 in _nest_both_ways(lane, start, end, 0.001):
        assert (p1 == p2).all() and (d1 == d2).all()


def _nest_both_ways(lane, start, end, tolerance):
    """`nest` by the C walk (integer lanes), and by array operations (other lanes, and TORCHPROF_NATIVE=0)."""
    import os

    from jupyter_torchprof.trace import native

    if native.compiler() is not None:  # where it can be built, the C walk is what runs
        one = np.zeros(1, dtype=np.int64)
        assert native.stack_walk_ordered(one, one, np.zeros(1), np.ones(1), 0.0) is not None
    out = [
        nest(lane, start, end, tolerance),
        nest(np.asarray(lane).astype(np.float64), start, end, tolerance),
    ]
    before = os.environ.get("TORCHPROF_NATIVE")
    os.environ["TORCHPROF_NATIVE"] = "0"
    try:
        out.append(nest(lane, start, end, tolerance))
    finally:
        if before is None:
            del os.environ["TORCHPROF_NATIVE"]
        else:
            os.environ["TORCHPROF_NATIVE"] = before
    return out


@pytest.mark.parametrize("name", GPU_TRACES)
def test_host_tree_equals_the_stack_walk_on_real_traces(name):
    from jupyter_torchprof.analysis.tree import lane_keys
    from jupyter_torchprof.trace import categories as K

    p = load(str(real_trace(name)))
    ev = p._data.events
    idx = np.flatnonzero(K.kind_mask(ev, K.HOST_KINDS))
    lane = lane_keys(ev["pid"].to_numpy()[idx], ev["tid"].to_numpy()[idx])
    s = ev["ts"].to_numpy()[idx]
    e = s + ev["dur"].to_numpy()[idx]
    b = nest_reference(lane, s, e, p.meta.time_precision_us)
    for a in _nest_both_ways(lane, s, e, p.meta.time_precision_us):
        assert (a[0] == b[0]).all() and (a[1] == b[1]).all()


@pytest.mark.parametrize("name", GPU_TRACES)
def test_deferred_flows_change_no_link_and_read_back_on_demand(name):
    """Loading a file leaves flow events unread when correlation ids link every launch.

    Nothing may change for it: the links, the launch table and every event
    column equal those of a parse that read the flows; and ``Profile.flows``
    reads them from the file on first access, matching the launch-flow
    events counted straight from the file.
    """
    path = real_trace(name)
    deferred = load(path)
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    full = Profile(parse_document(doc, str(path)))
    pd.testing.assert_frame_equal(deferred.launches, full.launches)
    pd.testing.assert_frame_equal(deferred.events, full.events)
    flows = [
        e
        for e in doc["traceEvents"]
        if e.get("ph") in ("s", "f") and e.get("cat") in ("ac2g", "async_cpu_to_gpu", "async_gpu")
    ]
    all_flow_events = sum(1 for e in doc["traceEvents"] if e.get("ph") in ("s", "f"))
    assert deferred.meta.flows_unread == all_flow_events
    read = deferred.flows
    assert deferred.meta.flows_unread == 0
    assert len(read) == len(flows)
    assert sorted(read["id"].tolist()) == sorted(int(e["id"]) for e in flows)
    assert int(read["is_start"].sum()) == sum(e["ph"] == "s" for e in flows)
    pd.testing.assert_frame_equal(read, full.flows)
