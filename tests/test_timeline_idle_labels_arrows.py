"""What the timeline sends for reading it: device idle, lane heights, labels after a pan, launch arrows.

Idle time is checked against an independent sum from the trace JSON: per
device stream, busy (the union of its kernels, copies and memsets, in plain
Python) plus the idle gaps the timeline shades is the whole window.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from tracefiles import raw_events, real_trace, union_length

from jupyter_torchprof import load
from jupyter_torchprof.analysis.lod import idle_gaps
from jupyter_torchprof.views.timeline import Timeline
from jupyter_torchprof.views.timeline_lanes import device_row_scale

A100 = "a100_nccl_rank0.pt.trace.json.gz"
#: Traces in µs with device work (the ns-timestamp trace is read in its own unit by the loader).
IDLE_TRACES = [
    A100,
    "cuda_event_sync_multi_stream.pt.trace.json.gz",
    "gp100_sgd_step_user_annotation.pt.trace.json.gz",
    "mi250_rocm_train.pt.trace.json.gz",
    "triton_kernel.pt.trace.json.gz",
]


@pytest.fixture(scope="module")
def a100():
    return load(real_trace(A100))


def test_idle_gaps_count_overlaps_once():
    start = np.array([2.0, 3.0, 10.0, 11.0])
    end = np.array([6.0, 4.0, 12.0, 11.5])  # [3, 4] nested in [2, 6]; [11, 11.5] in [10, 12]
    gs, ge = idle_gaps(start, end, 0.0, 20.0)
    assert list(zip(gs.tolist(), ge.tolist(), strict=True)) == [(0.0, 2.0), (6.0, 10.0), (12.0, 20.0)]
    gs, ge = idle_gaps(np.array([]), np.array([]), 0.0, 5.0)
    assert (gs.tolist(), ge.tolist()) == ([0.0], [5.0])


@pytest.mark.parametrize("trace", IDLE_TRACES)
def test_device_busy_plus_idle_is_the_window_on_every_lane(trace):
    path = real_trace(trace)
    tl = Timeline(load(path))
    lo, hi = tl.span
    busy: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    work = [
        e
        for e in raw_events(path)
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    # Relative to the first start: absolute µs near 4e12 round every end by ~0.5 ns.
    base = min(float(e["ts"]) for e in work)
    for e in work:
        start = float(e["ts"]) - base
        busy[(int(e["args"]["device"]), int(e["args"]["stream"]))].append((start, start + float(e["dur"])))
    gs, ge, top, _ = tl.idle
    device_lanes = [ln for ln in tl.lanes if ln.side == "device"]
    assert device_lanes
    for ln in device_lanes:
        mine = np.abs(top - (ln.first - 0.45)) < 1e-9
        idle = float((ge[mine] - gs[mine]).sum())
        used = union_length(busy.get(ln.key, []))
        assert idle + used == pytest.approx(hi - lo, rel=1e-9, abs=1e-3), ln
        if used:
            assert idle < hi - lo


def test_idle_shading_is_sent_for_the_window_at_every_zoom(a100):
    tl = Timeline(a100)
    lo, hi = tl.span
    assert len(tl.idle_source.data["left"]) > 0
    gs, ge, _, _ = tl.idle
    widest = int(np.argmax(ge - gs))
    mid = (gs[widest] + ge[widest]) / 2
    for span in ((hi - lo) / 10, (hi - lo) / 1000):
        tl.fetch(mid - span / 2, mid + span / 2)
        left, right = tl.idle_source.data["left"], tl.idle_source.data["right"]
        assert ((left <= mid) & (right >= mid)).any(), span


def test_device_rows_are_never_thinner_and_taller_under_many_threads(a100):
    assert device_row_scale(host_rows=2, device_rows=2) == 1
    assert device_row_scale(host_rows=40, device_rows=2) == 3
    assert all(device_row_scale(h, d) >= 1 for h in range(0, 60) for d in range(1, 8))
    tl = Timeline(a100)
    host_rows = sum(ln.rows for ln in tl.lanes if ln.side != "device")
    dev = [ln for ln in tl.lanes if ln.side == "device"]
    assert tl.device_scale == device_row_scale(host_rows, sum(ln.levels for ln in dev)) >= 2
    # Every kernel sits on the first row of one of its lane's levels.
    rows = tl.row[tl._dev_rows]
    firsts = {ln.first + k * ln.scale for ln in dev for k in range(ln.levels)}
    assert set(np.unique(rows).tolist()) <= firsts


def test_labels_are_there_after_a_pan_that_asks_python_for_nothing(a100):
    tl = Timeline(a100)
    lo, hi = tl.span
    v = (hi - lo) / 40
    v0 = lo + 10 * v
    tl.fetch(v0, v0 + v)
    # Pan by one whole window: still inside the fetched detail, so no fetch.
    assert not tl.needs_fetch(v0 + v, v0 + 2 * v)
    x = tl.label_source.data["x"]
    text = tl.label_source.data["text"]
    newly = [t for xi, t in zip(x, text, strict=True) if v0 + v <= xi <= v0 + 2 * v and t]
    assert len(newly) > 0


def test_clicking_a_kernel_draws_one_arrow_from_its_launch(a100):
    tl = Timeline(a100)
    ev = a100.events
    d = tl.dev_source.data
    i = int(
        np.flatnonzero((d["k"] == 1) & (d["o"] >= 0))[0]
    )  # a kernel drawn as itself, with its launching op
    kernel = int(tl._dev_reps[i])
    tl.pick("device", i)
    arrows = tl.arrow_source.data
    assert len(arrows["x0"]) == 1
    launch = int(ev["launch"].iloc[kernel])
    # The launch is the runtime call with the kernel's correlation id (read from the events, not the link).
    assert ev["correlation"].iloc[launch] == ev["correlation"].iloc[kernel]
    assert "Launch" in str(ev["name"].iloc[launch])
    ts, dur = float(ev["ts"].iloc[launch]), float(ev["dur"].iloc[launch])
    assert ts <= arrows["x0"][0] <= ts + dur
    assert abs(arrows["y0"][0] - tl.row[launch]) <= 0.5
    assert arrows["x1"][0] == pytest.approx(float(ev["ts"].iloc[kernel]))
    assert abs(arrows["y1"][0] - tl.row[kernel]) <= 0.5
    # An op's selection draws one arrow per launched kernel drawn.
    op = int(ev["op"].iloc[kernel])
    tl.highlight(np.concatenate([[op], tl.linked(np.array([op]))]))
    assert len(tl.arrow_source.data["x0"]) >= 1


def test_legend_names_the_categories_drawn(a100):
    tl = Timeline(a100)
    legend = tl.figure.select_one({"name": "torchprof-legend"})
    labels = [item.label["value"] for item in legend.items]
    assert {"GEMM", "convolution", "communication", "memcpy", "host op", "device idle"} <= set(labels)
    assert "attention" not in labels  # none in this trace
