"""Device idle time per step by Holistic Trace Analysis's causes (`Profile.idle_breakdown`).

Held on every real trace: the causes sum to the steps' device idle time (and,
without a counted step, to the recording's span minus its busy time, summed
straight from the trace JSON); the per-stream breakdown equals HTA's own
``get_idle_time_breakdown`` run on the same file, cause by cause.
"""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from tracefiles import GPU_TRACES, REAL_TRACES, raw_events, real_trace, union_length

from jupyter_torchprof.analysis import breakdown as B
from jupyter_torchprof.analysis.kernels import activity_rows
from jupyter_torchprof.results.profile import Profile

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
CAUSES = list(B.IDLE_CAUSES.values())


@pytest.fixture(scope="module")
def profiles():
    return {name: Profile.from_file(real_trace(name)) for name in REAL_TRACES}


def _device_intervals(name: str) -> list[tuple[float, float]]:
    return [
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in raw_events(real_trace(name))
        if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS
    ]


@pytest.mark.parametrize("name", REAL_TRACES)
def test_causes_sum_to_the_steps_device_idle(profiles, name):
    p = profiles[name]
    idle = p.idle_breakdown
    assert np.allclose(idle[CAUSES].sum(axis=1), idle["idle_us"], rtol=1e-9, atol=1e-6)
    assert (idle[CAUSES].to_numpy() >= -1e-9).all()
    steps = idle[idle["step"] != B.WHOLE_TRACE]
    assert len(steps) == len(p.steps)
    want = p.steps["device_idle_us"].to_numpy()
    assert np.allclose(steps["idle_us"], want, rtol=1e-3, atol=1e-6), (steps["idle_us"].tolist(), want)


@pytest.mark.parametrize("name", REAL_TRACES)
def test_without_a_counted_step_the_whole_trace_is_one_row(profiles, name):
    p = profiles[name]
    whole = p.idle_breakdown[p.idle_breakdown["step"] == B.WHOLE_TRACE]
    counted = bool(len(p.steps)) and bool(p.steps["counted"].any())
    assert len(whole) == (0 if counted else 1)
    if not counted:
        spans = _device_intervals(name)
        want = (max(e for _, e in spans) - min(s for s, _ in spans) - union_length(spans)) if spans else 0.0
        assert whole["idle_us"].iloc[0] == pytest.approx(want, rel=1e-3, abs=1e-6)


def _hta_breakdown(name: str, folder) -> tuple[pd.DataFrame, set[int]]:
    """HTA's idle time breakdown of one trace (its one rank, timestamps kept to the ns) and the
    correlation ids of the device work it analysed (HTA leaves out the last step's)."""
    from hta.configs.env_options import HTAEnvOptions
    from hta.trace_analysis import TraceAnalysis

    folder.mkdir()
    shutil.copy(real_trace(name), folder / "rank-0.json.gz")
    options = HTAEnvOptions.instance()
    rounding = options.disable_ns_rounding()
    options.set_disable_ns_rounding(True)
    try:
        analyzer = TraceAnalysis(trace_dir=str(folder))
        (rank,) = analyzer.t.traces  # the rank the file names (diff_pair's are not 0)
        out, _ = analyzer.get_idle_time_breakdown(ranks=[rank], visualize=False)
    finally:
        options.set_disable_ns_rounding(rounding)
    df = analyzer.t.get_trace(rank)
    return out, set(df.loc[df["stream"] >= 0, "correlation"].astype(int).tolist())


@pytest.mark.parametrize("name", GPU_TRACES)
def test_per_stream_breakdown_equals_hta(profiles, name, tmp_path):
    """Over the device work HTA analyses, each stream's idle time per cause is HTA's."""
    p = profiles[name]
    hta, analysed = _hta_breakdown(name, tmp_path / "hta")
    ev = p.parsed_events
    act = activity_rows(ev)
    rows = act[np.isin(ev["correlation"].to_numpy()[act], list(analysed))]
    assert len(rows), "HTA analysed no device work"
    ours = pd.DataFrame(
        B.stream_idle(B.stream_gaps(ev, p._links, rows)), columns=["device", "stream", *CAUSES, "idle_us"]
    )
    ours = ours.groupby("stream")[CAUSES].sum()  # HTA keys streams without their device
    theirs = hta.pivot_table(index="stream", columns="idle_category", values="idle_time", aggfunc="sum")
    theirs = theirs.reindex(columns=["host_wait", "kernel_wait", "other"]).fillna(0.0)
    theirs.columns = CAUSES
    assert sorted(ours.index) == sorted(int(s) for s in theirs.index)
    for stream, row in ours.iterrows():
        # HTA rounds what it returns to 0.01 us.
        assert row.to_numpy() == pytest.approx(theirs.loc[stream].to_numpy(), abs=0.02), (stream, row)


#: Traces with steps (or a whole recording) whose device work all ran on one stream.
ONE_STREAM = [
    "gp100_sgd_step_user_annotation.pt.trace.json.gz",
    "mi250_rocm_train.pt.trace.json.gz",
    "triton_kernel.pt.trace.json.gz",
    "v100_ddp_ns_timestamps.pt.trace.json.gz",
]


@pytest.mark.parametrize("name", ONE_STREAM)
def test_a_step_on_one_stream_reads_as_hta_reads_that_stream(profiles, name):
    """Where a step's work ran on one stream, the device-level causes are HTA's for that stream
    over the same work (the per-stream code is the one held equal to HTA above)."""
    p = profiles[name]
    ev = p.parsed_events
    act = activity_rows(ev)
    stream = ev["stream"].to_numpy()[act]
    compared = 0
    for pos, row in p.idle_breakdown.iterrows():
        whole = row["step"] == B.WHOLE_TRACE
        mine = np.ones(len(act), dtype=bool) if whole else p._device_steps == pos
        if not mine.any():
            continue
        assert len(set(stream[mine].tolist())) == 1, row["label"]
        (hta_row,) = B.stream_idle(B.stream_gaps(ev, p._links, act[mine]))
        assert list(row[CAUSES]) == pytest.approx(list(hta_row[2:5]), abs=1e-6), (row["label"], hta_row)
        compared += 1
    assert compared


@pytest.mark.parametrize("name", GPU_TRACES)
def test_per_step_stream_rows_add_up_to_the_streams_over_the_steps_work(profiles, name):
    """Profile.idle_by_stream: a stream's rows over the steps are its gaps before the steps' work."""
    p = profiles[name]
    by_stream = p.idle_by_stream
    if len(p.steps):
        rows = by_stream[by_stream["step"] != B.WHOLE_TRACE]
        assert set(rows["step"]) <= set(p.steps["step"])
        mine = np.flatnonzero(p._device_steps >= 0)
    else:
        rows = by_stream
        mine = None
    assert np.allclose(rows[CAUSES].sum(axis=1), rows["idle_us"])
    gaps = B.stream_gaps(p.parsed_events, p._links, activity_rows(p.parsed_events))
    want = {(d, s): vals for d, s, *vals in B.stream_idle(gaps, mine)}
    got = rows.groupby(["device", "stream"])[CAUSES].sum()
    assert set(got.index) == set(want)
    for key, vals in want.items():
        assert list(got.loc[key]) == pytest.approx(vals[:3], abs=1e-6), key
