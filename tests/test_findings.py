"""Findings on the real traces, each number checked against the raw trace events.

Every rule gets a trace where it should fire and one where it should not. The
oracle is the trace file read with the json module (tracefiles.raw_events) and
small, obviously correct interval sweeps written here, never the code under
test.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import json
import re
import statistics
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracefiles import REAL_TRACES, raw_events, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis.findings import (
    SEVERITIES,
    THRESHOLDS,
    Finding,
    find,
    findings_frame,
    inputs_from_profile,
)
from jupyter_torchprof.results.ranks import RankSet
from jupyter_torchprof.views.findings import findings_html, findings_text

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
DEVICE_RULES = {"overhead", "idle_gaps", "launch", "sync", "copies", "precision", "variance", "communication"}
STEP = re.compile(r"^ProfilerStep#\d+$")


# --------------------------------------------------------------------------- #
# oracle: the raw events and plain interval sweeps


@functools.cache
def profile(name: str):
    return load(str(real_trace(name)))


@functools.cache
def raw(name: str) -> list[dict]:
    return [e for e in raw_events(real_trace(name)) if e.get("ph") == "X" and e.get("cat") != "Trace"]


def findings(name: str, rule: str | None = None):
    f = profile(name).findings
    return f if rule is None else f[f["rule"] == rule]


def steps_of(ev: list[dict]) -> list[tuple[float, float]]:
    """(start, end) of each ProfilerStep range on the host."""
    return sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in ev
        if e.get("cat") == "user_annotation" and STEP.match(e["name"])
    )


def in_windows(e: dict, windows: list[tuple[float, float]]) -> bool:
    return any(lo <= e["ts"] < hi for lo, hi in windows)


def counted_windows(ev: list[dict]) -> list[tuple[float, float]]:
    """The step windows the findings use: a step range on a thread without ops that lies
    mostly outside the other events is left out; with none left, the recording window."""
    others = [e for e in ev if not (e.get("cat") == "user_annotation" and STEP.match(e["name"]))]
    rec_lo = min(e["ts"] for e in others)
    rec_hi = max(e["ts"] + e["dur"] for e in others)
    op_lanes = {(e["pid"], e["tid"]) for e in ev if e["cat"] == "cpu_op"}
    out = []
    for e in ev:
        if e.get("cat") == "user_annotation" and STEP.match(e["name"]):
            lo, hi = e["ts"], e["ts"] + e["dur"]
            inside = max(0.0, min(hi, rec_hi) - max(lo, rec_lo))
            if not op_lanes or (e["pid"], e["tid"]) in op_lanes or (hi - lo) - inside <= inside:
                out.append((lo, hi))
    return sorted(out) or [(rec_lo, rec_hi)]


def launched_in_steps(ev: list[dict], device: list[dict]) -> list[dict]:
    """The device events whose launch starts inside a step range.

    The launch is the runtime call with the same correlation id, else the one
    op with the same External id; work with neither counts where it starts,
    unless its correlation id is below the first runtime call's: queued before
    the trace started, it is in no step.
    """
    windows = steps_of(ev)
    calls = {
        e["args"]["correlation"]: e
        for e in ev
        if e["cat"] in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    first = min(calls, default=None)
    device = [
        d
        for d in device
        if first is None
        or d["args"].get("correlation") in calls
        or not 0 <= d["args"].get("correlation", -1) < first
    ]
    ops: dict = {}
    for e in ev:
        if e["cat"] == "cpu_op" and "External id" in e.get("args", {}):
            ops.setdefault(e["args"]["External id"], []).append(e)

    def launch(d: dict) -> dict:
        if (c := calls.get(d["args"].get("correlation"))) is not None:
            return c
        same = ops.get(d["args"].get("External id"), [])
        return same[0] if len(same) == 1 else d

    return [d for d in device if in_windows(launch(d), windows)]


def union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Merged, sorted blocks."""
    out: list[list[float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(a, b) for a, b in out]


def clip(intervals, lo, hi):
    return [(max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi]


def largest_gap(intervals, windows) -> float:
    """Largest idle stretch inside any window (edges count)."""
    best = 0.0
    for lo, hi in windows:
        t = lo
        for s, e in union(clip(intervals, lo, hi)):
            best = max(best, s - t)
            t = max(t, e)
        best = max(best, hi - t)
    return best


def time_where(a, b, lo, hi) -> float:
    """Time inside [lo, hi] covered by some interval of ``a`` and none of ``b`` (a sweep)."""
    points = []
    for s, e in clip(a, lo, hi):
        points += [(s, 0, 1), (e, 0, -1)]
    for s, e in clip(b, lo, hi):
        points += [(s, 1, 1), (e, 1, -1)]
    points.sort()
    count = [0, 0]
    total, last = 0.0, lo
    for t, which, delta in points:
        if count[0] > 0 and count[1] == 0:
            total += t - last
        count[which] += delta
        last = t
    return total


def device_id(e: dict) -> int:
    return int(e.get("args", {}).get("device", e.get("pid")))


def rows_by_severity(f) -> list[str]:
    return f["severity"].tolist()


# --------------------------------------------------------------------------- #
# the table itself


@pytest.mark.parametrize(
    "name",
    [
        "a100_nccl_rank0.pt.trace.json.gz",
        "gp100_sgd_step_user_annotation.pt.trace.json.gz",
        "diff_pair/test.pt.trace.json.gz",
    ],
)
def test_columns_order_and_links(name):
    p = profile(name)
    f = p.findings
    assert list(f.columns[:4]) == ["severity", "title", "detail", "evidence"]
    assert {"rule", "impact_us", "event_rows", "ops", "kernels"} <= set(f.columns)
    # most severe first, then the most time at stake
    ranks = [SEVERITIES.index(s) for s in f["severity"]]
    assert ranks == sorted(ranks)
    for sev in set(f["severity"]):
        impacts = f.loc[f["severity"] == sev, "impact_us"].tolist()
        assert impacts == sorted(impacts, reverse=True)
    n = len(p.events)
    op_names = set(p.ops["name"])
    kernel_names = set(p.kernels["name"])
    for r in f.itertuples():
        assert all(0 <= x < n for x in r.event_rows)
        assert set(r.ops) <= op_names, r.title
        assert set(r.kernels) <= kernel_names, r.title
        if r.severity != "not checked":
            assert r.event_rows or r.ops or r.kernels, r.title


@pytest.mark.parametrize("name", REAL_TRACES)
def test_every_rule_runs_on_every_real_trace(name):
    f = findings(name)
    failed = [r.title for r in f.itertuples() if isinstance(r.evidence, dict) and "error" in r.evidence]
    assert not failed
    assert set(f["severity"]) <= set(SEVERITIES)
    text, page = findings_text(f), findings_html(f)
    assert (text == "") == (page == "") == f.empty


def test_cpu_only_trace_claims_no_device_finding():
    f = findings("cpu_only.pt.trace.json.gz")
    device_rows = f[f["rule"].isin(DEVICE_RULES)]
    assert set(device_rows["rule"]) == DEVICE_RULES
    assert set(device_rows["severity"]) == {"not checked"}
    assert all("no device activity" in d for d in device_rows["detail"])
    # The one thing a CPU rule can say: the step ran outside any op, mostly inside the
    # gloo:all_reduce ranges; both figures from the file.
    checked = f[f["severity"] != "not checked"]
    assert checked["rule"].tolist() == ["outside_ops"]
    ev = raw("cpu_only.pt.trace.json.gz")
    ((lo, hi),) = steps_of(ev)
    ops = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["cat"] == "cpu_op"]
    covered = sum(b - a for a, b in union(clip(ops, lo, hi)))
    row = checked.iloc[0]
    assert row["impact_us"] == pytest.approx(hi - lo - covered, rel=1e-9)
    gloo = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"] == "gloo:all_reduce"]
    in_gloo = sum(b - a for a, b in union(clip(gloo, lo, hi)))
    assert row["evidence"]["ranges_over_outside_pct"]["gloo:all_reduce"] == pytest.approx(
        100 * in_gloo / (hi - lo - covered), rel=1e-6
    )
    assert "gloo:all_reduce" in row["detail"]


def test_text_and_static_html_start_with_the_findings():
    p = profile("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    text = p.table()
    lines = text.splitlines()
    assert lines[1] == "Findings:"
    top = p.findings.iloc[0]
    assert top["title"] in lines[2] and lines[2].strip().startswith(top["severity"].upper())
    page = p._repr_mimebundle_()["text/html"]
    assert 0 < page.index("jp-TorchProf-findings") < page.index("<table")
    assert "Findings:" not in p.table(findings=False)


def test_not_checked_rows_group_by_reason():
    f = findings("cpu_only.pt.trace.json.gz")
    (reason,) = {e["reason"] for e in f[f["rule"].isin(DEVICE_RULES)]["evidence"]}
    same = f[[isinstance(e, dict) and e.get("reason") == reason for e in f["evidence"]]]
    assert set(DEVICE_RULES) <= set(same["rule"])
    labels = [t.split(" not checked")[0] for t in same["title"]]
    sentence = reason[0].upper() + reason[1:]
    text = findings_text(f)
    lines = [ln for ln in text.splitlines() if sentence in ln]
    assert len(lines) == 1 and text.count(reason[1:]) == 1  # the reason once
    for label in labels:
        assert lines[0].count(label) == 1, label  # each rule named once
    assert f"{len(labels)} rules:" in lines[0]
    # HTML: the line (its tooltip) and its detail say the reason once each, not once per rule
    page = findings_html(f)
    assert page.count(html.escape(reason[1:], quote=True)) == 3  # title attribute, line, detail
    assert page.count("Not checked because") == len({e["reason"] for e in f["evidence"] if "reason" in e})


def test_long_lines_end_in_an_ellipsis_and_open_in_full():
    page = findings_html(findings("cpu_only.pt.trace.json.gz"))
    css = page[page.index("<style>") : page.index("</style>")]
    summary = re.search(r"\.jp-TorchProf-findings summary \{([^}]*)\}", css).group(1)
    assert "text-overflow: ellipsis" in summary and "white-space: nowrap" in summary
    assert "overflow: hidden" in summary
    assert re.search(r"details\[open\] > summary \{ white-space: normal; \}", css)


def _soup(page: str):
    from bs4 import BeautifulSoup

    return BeautifulSoup(page, "html.parser")


def test_every_finding_opens_to_its_remedy_and_the_rest_are_one_click_away():
    from jupyter_torchprof.format import fmt_time

    f = findings("diff_pair/test.pt.trace.json.gz")
    checked = f[f["severity"] != "not checked"]
    assert len(checked) > 5
    soup = _soup(findings_html(f, limit=5))
    box = soup.select_one("div.jp-TorchProf-findings")
    first = box.find("ul", recursive=False).find_all("li", recursive=False)
    more = box.select_one("details.jp-TorchProf-more")
    hidden = more.find("ul").find_all("li", recursive=False)
    assert len(first) == 5 and len(hidden) == len(checked) - 5
    assert more.summary.get_text() == f"{len(checked) - 5} more findings (click to show)"
    assert "in Profile.findings" not in box.get_text()
    items = first + hidden
    assert [li.select_one(".jp-TorchProf-finding-title").get_text() for li in items] == checked[
        "title"
    ].tolist()
    for li, r in zip(items, checked.itertuples(), strict=True):
        assert li.details.summary is not None
        assert li.select_one(".jp-TorchProf-finding-detail").get_text() == r.detail
        stake = li.select_one(".jp-TorchProf-finding-stake").get_text()
        assert stake.startswith(f"At stake: {fmt_time(r.impact_us)} per step, ")
        assert f"{r.evidence['impact_step_pct']:.1f}% of the step" in stake
        assert li["data-rules"] == r.rule


def test_widget_findings_box_holds_every_finding(tmp_path):
    from jupyter_torchprof.views.widget import ProfileView

    p = profile("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    checked = p.findings[p.findings["severity"] != "not checked"]
    view = ProfileView(p)
    try:
        assert view.findings.layout.display is None  # shown; its width is the column's (view.css)
        soup = _soup(view.findings.value)
        titles = [t.get_text() for t in soup.select("li .jp-TorchProf-finding-title")]
        assert titles[: len(checked)] == checked["title"].tolist()  # all of them, the rest behind "more"
        assert len(soup.select("details.jp-TorchProf-more li")) == max(len(checked) - 5, 0)
        assert all(li.details is not None for li in soup.select("li.jp-TorchProf-finding"))
    finally:
        view.close()


def _allowed(pct: float) -> str:
    hi, mid = THRESHOLDS.severity_high_step_pct, THRESHOLDS.severity_medium_step_pct
    return "high" if pct >= hi else "medium" if pct >= mid else "info"


@pytest.mark.parametrize("name", REAL_TRACES)
def test_severity_never_above_what_the_impact_allows(name):
    # the counted steps' mean wall (checked against the file in test_per_step / _bounds)
    step = profile(name).summary["wall_per_step_us"]
    f = findings(name)
    for r in f[f["severity"] != "not checked"].itertuples():
        if r.rule == "compile":
            continue
        pct = 100 * r.impact_us / step
        assert SEVERITIES.index(r.severity) >= SEVERITIES.index(_allowed(pct)), r.title
        assert r.evidence["impact_step_pct"] == pytest.approx(pct, rel=1e-6)


def test_a_medium_rule_worth_a_microsecond_is_info():
    # gp100: the copies rule calls pageable copies medium; they cost 1 µs of a 10 ms trace.
    f = findings("gp100_sgd_step_user_annotation.pt.trace.json.gz", "copies")
    (row,) = f[f["title"].str.contains("pageable")].to_dict("records")
    pageable = [e for e in raw("gp100_sgd_step_user_annotation.pt.trace.json.gz") if "Pageable" in e["name"]]
    assert row["impact_us"] == pytest.approx(sum(e["dur"] for e in pageable))
    assert row["severity"] == "info" and row["evidence"]["rule_severity"] == "medium"
    # this trace has no steps: the share is of the trace, and no "per step" is claimed
    assert "the rule said medium, the share of the trace makes it info" in findings_html(f)
    assert "µs per step" not in findings_html(f)


def test_html_escapes_trace_strings():
    frame = findings_frame(
        [
            Finding(
                rule="sync",
                severity="medium",
                title='Sync: <script>alert("x")</script> → cudaStreamSynchronize',
                detail="<img src=x onerror=alert(1)>",
            )
        ]
    )
    page = findings_html(frame)
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;" in page and "&lt;img" in page


# --------------------------------------------------------------------------- #
# 1. overhead-bound


def test_overhead_fires_with_the_device_busy_share_from_the_file():
    name = "a100_nccl_rank0.pt.trace.json.gz"
    ev = raw(name)
    windows = steps_of(ev)
    dev = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["cat"] in DEVICE_CATS]
    busy = sum(sum(e - s for s, e in union(clip(dev, lo, hi))) for lo, hi in windows)
    wall = sum(hi - lo for lo, hi in windows)
    f = findings(name, "overhead")
    assert len(f) == 1 and f.iloc[0]["severity"] == "high"
    evidence = f.iloc[0]["evidence"]
    assert evidence["device_busy_per_step_us"] == pytest.approx(busy / len(windows), rel=1e-6)
    assert evidence["device_idle_pct"] == pytest.approx(100 - 100 * busy / wall, rel=1e-6)
    assert evidence["kind"] == "overhead"
    assert "CUDA graph" in f.iloc[0]["detail"] and "torch.compile" in f.iloc[0]["detail"]


def test_overhead_quiet_when_the_device_is_busy():
    name = "v100_ddp_ns_timestamps.pt.trace.json.gz"
    ev = raw(name)
    windows = steps_of(ev)
    dev = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["cat"] in DEVICE_CATS]
    busy = sum(sum(e - s for s, e in union(clip(dev, lo, hi))) for lo, hi in windows)
    assert busy / sum(hi - lo for lo, hi in windows) > THRESHOLDS.overhead_device_busy_max_pct / 100
    assert findings(name, "overhead").empty


# --------------------------------------------------------------------------- #
# 2. idle gaps


# A100 DDP: the gap lies between kernels; Triton: its one step range is 13 s long on a
# thread without ops, so the gap is measured over the recording window (1.5 ms).
@pytest.mark.parametrize("name", ["a100_nccl_rank0.pt.trace.json.gz", "triton_kernel.pt.trace.json.gz"])
def test_largest_idle_gap_matches_the_file(name):
    ev = raw(name)
    windows = counted_windows(ev)
    dev = [e for e in ev if e["cat"] in DEVICE_CATS and device_id(e) == 0]
    expected = largest_gap([(e["ts"], e["ts"] + e["dur"]) for e in dev], windows)
    f = findings(name, "idle_gaps")
    assert not f.empty
    got = max(e["gap_us"] for e in f["evidence"])
    assert got == pytest.approx(expected, rel=1e-6)
    # every stream's own largest gap, too
    per_stream = f.iloc[0]["evidence"]["largest_gap_per_stream_us"]
    for stream in {e["args"]["stream"] for e in dev}:
        mine = [(e["ts"], e["ts"] + e["dur"]) for e in dev if e["args"]["stream"] == stream]
        assert per_stream[str(stream)] == pytest.approx(largest_gap(mine, windows), rel=1e-6)
    # and what the host was doing meanwhile: its ops' coverage of the gap, from the file
    top = f.iloc[0]
    gap = top["evidence"]
    t0 = min(e["ts"] for e in ev)
    lo, hi = gap["start_us"] + t0, gap["end_us"] + t0
    host = [
        (e["ts"], e["ts"] + e["dur"])
        for e in ev
        if e["cat"] in ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "python_function")
        and not STEP.match(e["name"])
    ]
    covered = sum(b - a for a, b in union(clip(host, lo, hi)))
    assert gap["host_covered_pct"] == pytest.approx(100 * covered / (hi - lo), abs=0.01)
    if gap["host_chain"]:
        assert gap["host_chain"][-1] in top["title"]
    else:
        assert "no single op" in top["title"]


def test_idle_gap_threshold_is_the_boundary():
    name = "a100_nccl_rank0.pt.trace.json.gz"
    ev = raw(name)
    dev = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["cat"] in DEVICE_CATS]
    biggest = largest_gap(dev, steps_of(ev))
    inputs = inputs_from_profile(profile(name))
    above = dataclasses.replace(THRESHOLDS, gap_min_us=biggest * 1.001)
    below = dataclasses.replace(THRESHOLDS, gap_min_us=biggest * 0.999, gaps_reported=10)
    assert find(inputs, above, rules=["idle_gaps"]).empty
    assert len(find(inputs, below, rules=["idle_gaps"])) == 1


def test_idle_gap_severity_follows_the_share_of_the_step():
    # MI250: one gap takes most of step 1 (a stall); V100 DDP: the device is busy.
    assert "high" in set(findings("mi250_rocm_train.pt.trace.json.gz", "idle_gaps")["severity"])
    name = "v100_ddp_ns_timestamps.pt.trace.json.gz"
    ev = raw(name)
    dev = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["cat"] in DEVICE_CATS]
    for lo, hi in steps_of(ev):
        assert largest_gap(dev, [(lo, hi)]) < THRESHOLDS.gap_medium_step_pct / 100 * (hi - lo)
    assert set(findings(name, "idle_gaps")["severity"]) <= {"info"}


# --------------------------------------------------------------------------- #
# 3. launch-bound


def test_launch_bound_fires_with_medians_from_the_file():
    name = "gp100_sgd_step_user_annotation.pt.trace.json.gz"
    ev = raw(name)
    kernels = [e for e in ev if e["cat"] == "kernel"]
    corr = {e["args"]["correlation"] for e in kernels}
    launches = [e for e in ev if e["cat"] == "cuda_runtime" and e["args"].get("correlation") in corr]
    f = findings(name, "launch")
    assert len(f) == 1
    evidence = f.iloc[0]["evidence"]
    assert evidence["median_kernel_us"] == pytest.approx(statistics.median(e["dur"] for e in kernels))
    assert evidence["median_launch_us"] == pytest.approx(statistics.median(e["dur"] for e in launches))
    assert evidence["kernels_per_step"] == len(kernels)  # no ProfilerStep: the whole trace is one
    assert evidence["median_kernel_us"] < evidence["median_launch_us"]


def test_launch_bound_quiet_for_long_kernels():
    name = "v100_ddp_ns_timestamps.pt.trace.json.gz"
    ev = raw(name)
    kernels = [e for e in ev if e["cat"] == "kernel"]
    launches = [e for e in ev if e["name"] == "cudaLaunchKernel"]
    assert statistics.median(e["dur"] for e in kernels) > statistics.median(e["dur"] for e in launches)
    assert findings(name, "launch").empty


# --------------------------------------------------------------------------- #
# 4. synchronisation points


def _inside(ev: list[dict], inner: dict, name: str) -> bool:
    """Whether a host event named ``name`` on the same thread encloses ``inner``."""
    return any(
        e["name"] == name
        and e["tid"] == inner["tid"]
        and e["ts"] <= inner["ts"]
        and inner["ts"] + inner["dur"] <= e["ts"] + e["dur"]
        for e in ev
        if e["cat"] == "cpu_op"
    )


def test_syncs_with_their_causing_ops_match_the_file():
    name = "diff_pair/control.pt.trace.json.gz"
    ev = raw(name)
    windows = steps_of(ev)
    syncs = [e for e in ev if e["name"] == "cudaStreamSynchronize" and in_windows(e, windows)]
    by_item = [e for e in syncs if _inside(ev, e, "aten::item")]
    by_to = [e for e in syncs if _inside(ev, e, "aten::to")]
    f = findings(name, "sync")
    stream_sync = f[[e["call"] == "cudaStreamSynchronize" for e in f["evidence"]]]
    assert sum(e["count"] for e in stream_sync["evidence"]) == len(syncs)
    assert sum(e["blocked_us"] for e in stream_sync["evidence"]) == pytest.approx(
        sum(e["dur"] for e in syncs)
    )
    item = [e for e in stream_sync["evidence"] if e["cause"].startswith("aten::item")]
    assert sum(e["count"] for e in item) == len(by_item) > 0
    to = [e for e in stream_sync["evidence"] if e["cause"] == "aten::to"]
    assert sum(e["count"] for e in to) == len(by_to) > 0
    # the host waited only µs per step here: worth knowing, not urgent
    for r in stream_sync.itertuples():
        pct = 100 * r.evidence["blocked_per_step_us"] / profile(name).summary["wall_per_step_us"]
        assert r.severity == ("medium" if pct >= THRESHOLDS.sync_medium_step_pct else "info")
    assert any("DtoH" in e["copy_directions"] for e in to)
    # each finding links to its sync calls in the timeline
    events = profile(name).events
    for r in stream_sync.itertuples():
        linked = events.loc[r.event_rows, "name"].astype(str)
        assert (linked == "cudaStreamSynchronize").sum() == r.evidence["count"]


def test_pageable_copy_sync_names_aten_to():
    name = "gp100_sgd_step_user_annotation.pt.trace.json.gz"
    ev = raw(name)
    syncs = [e for e in ev if e["name"] == "cudaStreamSynchronize"]
    f = findings(name, "sync")
    assert len(f) == 1
    evidence = f.iloc[0]["evidence"]
    assert evidence["count"] == len(syncs) and evidence["cause"] == "aten::to"
    assert "pin" in f.iloc[0]["detail"]


def test_driver_sync_records_are_reported():
    name = "cuda_event_sync_multi_stream.pt.trace.json.gz"
    ev = raw(name)
    records = Counter(e["name"] for e in ev if e["cat"] == "cuda_sync")
    f = findings(name, "sync")
    seen = Counter()
    for e in f["evidence"]:
        for rec in e["sync_records"]:
            seen[rec] += e["count"]
    assert seen["Event Sync"] == records["Event Sync"]
    assert seen["Stream Wait Event"] == records["Stream Wait Event"]
    # the cudaDeviceSynchronize that ends the trace, with nothing after it, is not a finding
    assert not any(e["call"] == "cudaDeviceSynchronize" for e in f["evidence"])


def test_no_sync_findings_without_syncs_in_the_steps():
    name = "v100_ddp_ns_timestamps.pt.trace.json.gz"
    ev = raw(name)
    windows = steps_of(ev)
    assert not [e for e in ev if "Synchronize" in e["name"] and in_windows(e, windows)]
    assert findings(name, "sync").empty


# --------------------------------------------------------------------------- #
# 5. copies


def test_pageable_copies_counted_from_the_file():
    name = "gp100_sgd_step_user_annotation.pt.trace.json.gz"
    ev = raw(name)
    pageable = [e for e in ev if e["cat"] == "gpu_memcpy" and "Pageable" in e["name"]]
    f = findings(name, "copies")
    row = f[f["title"].str.contains("pageable")]
    assert len(row) == 1
    evidence = row.iloc[0]["evidence"]
    assert evidence["count"] == len(pageable) > 0
    assert evidence["bytes"] == pytest.approx(sum(e["args"]["bytes"] for e in pageable))
    assert set(row.iloc[0]["kernels"]) == {e["name"] for e in pageable}


def test_device_to_device_copies_counted_from_the_file():
    name = "diff_pair/test.pt.trace.json.gz"
    ev = raw(name)
    # the copies the steps launched (correlation id -> runtime call inside a step range)
    dtod = launched_in_steps(ev, [e for e in ev if e["cat"] == "gpu_memcpy" and "DtoD" in e["name"]])
    f = findings(name, "copies")
    row = f[f["title"].str.startswith("Device→device")]
    assert len(row) == 1
    evidence = row.iloc[0]["evidence"]
    assert evidence["count"] == len(dtod)
    assert evidence["bytes"] == pytest.approx(sum(e["args"]["bytes"] for e in dtod))
    assert evidence["time_us"] == pytest.approx(sum(e["dur"] for e in dtod))
    assert row.iloc[0]["severity"] == "medium"  # 13% of device busy time


@pytest.mark.parametrize(
    "name", ["triton_kernel.pt.trace.json.gz", "cuda_event_sync_multi_stream.pt.trace.json.gz"]
)
def test_no_copy_findings_without_copies(name):
    assert not [e for e in raw(name) if e["cat"] == "gpu_memcpy"]
    assert findings(name, "copies").empty


# --------------------------------------------------------------------------- #
# 6. precision


def test_fp32_gemm_on_tensor_core_device():
    name = "v100_ddp_ns_timestamps.pt.trace.json.gz"
    assert min(d["computeMajor"] for d in _props(name)) >= 7  # Volta has tensor cores
    ev = raw(name)
    f = findings(name, "precision")
    assert len(f) == 1 and f.iloc[0]["severity"] == "high"
    flagged = set(f.iloc[0]["kernels"])
    assert all(re.search(r"sgemm|scudnn|<float", k) for k in flagged)
    assert "volta_sgemm_64x64_nt" in flagged
    total = sum(e["dur"] for e in ev if e["cat"] in DEVICE_CATS)
    share = 100 * sum(e["dur"] for e in ev if e["cat"] == "kernel" and e["name"] in flagged) / total
    assert f.iloc[0]["evidence"]["share_pct"] == pytest.approx(share, rel=1e-9)
    assert "float16" in f.iloc[0]["detail"]  # Volta: fp16 tensor cores, no TF32/bf16


def _props(name: str) -> list[dict]:
    import gzip

    with gzip.open(real_trace(name), "rt") as fh:
        return json.load(fh)["deviceProperties"]


def test_no_precision_finding_without_tensor_cores():
    name = "gp100_sgd_step_user_annotation.pt.trace.json.gz"
    assert max(d["computeMajor"] for d in _props(name)) < 7
    assert findings(name, "precision").empty
    assert findings("triton_kernel.pt.trace.json.gz", "precision").empty


def test_tf32_tensor_core_gemms_are_only_info():
    f = findings("a100_nccl_rank0.pt.trace.json.gz", "precision")
    assert set(f["severity"]) == {"info"}
    assert all("tf32" in k.lower() or "s1688" in k for k in f.iloc[0]["kernels"])
    assert "bf16" in f.iloc[0]["detail"]


def test_thresholds_change_the_outcome():
    inputs = inputs_from_profile(profile("v100_ddp_ns_timestamps.pt.trace.json.gz"))
    share = findings("v100_ddp_ns_timestamps.pt.trace.json.gz", "precision").iloc[0]["evidence"]["share_pct"]
    stricter = dataclasses.replace(THRESHOLDS, precision_min_share_pct=share + 1)
    assert find(inputs, stricter, rules=["precision"]).empty


# --------------------------------------------------------------------------- #
# 7. variance and cold start


def test_kernel_variance_matches_the_file():
    name = "a100_nccl_rank0.pt.trace.json.gz"
    ev = raw(name)
    windows = steps_of(ev)
    f = findings(name, "variance")
    assert not f.empty
    for e in f["evidence"]:
        same = [
            k["dur"]
            for k in ev
            if k["cat"] == "kernel"
            and k["name"] == e["kernel"]
            and json.dumps(k["args"].get("grid"), separators=(",", ":")) == e["grid"]
            and json.dumps(k["args"].get("block"), separators=(",", ":")) == e["block"]
            and in_windows(k, windows)
        ]
        assert e["calls"] == len(same)
        assert e["median_us"] == pytest.approx(statistics.median(same))
        assert e["max_us"] == pytest.approx(max(same))
        assert max(same) >= THRESHOLDS.variance_max_over_median * statistics.median(same)


def test_no_variance_finding_for_uniform_kernels():
    name = "gp100_sgd_step_user_annotation.pt.trace.json.gz"
    durs: dict[str, list[float]] = {}
    for e in raw(name):
        if e["cat"] == "kernel":
            durs.setdefault(e["name"], []).append(e["dur"])
    assert all(max(d) - statistics.median(d) < THRESHOLDS.variance_min_spread_us for d in durs.values())
    assert findings(name, "variance").empty


def test_collectives_are_not_variance_findings():
    # NCCL kernels wait for the other ranks; their spread belongs to rule 9.
    f = findings("diff_pair/test.pt.trace.json.gz", "variance")
    assert not any("nccl" in e["kernel"].lower() for e in f["evidence"])


COLD_CELL = """%%torchprof --warmup 0 --steps 3 -q
calls.append(torch.autograd.profiler._is_profiler_enabled)
y = (x @ w).relu()
if calls[-1] and calls.count(True) == 1:  # the first run the profiler records
    time.sleep(0.2)  # far above the other steps however loaded the machine
"""


def test_cold_start_from_step_durations(shell):
    shell.run_cell("import time, torch\nx = torch.randn(64, 64)\nw = torch.randn(64, 64)\ncalls = []")
    assert shell.run_cell(COLD_CELL).error_in_exec is None
    p = shell.user_ns["_torchprof"]
    walls = [hi - lo for lo, hi in steps_of([e for e in raw_events(p.trace_path) if e.get("ph") == "X"])]
    assert len(walls) == 3 and walls[0] >= 200_000
    f = p.findings[p.findings["rule"] == "cold_start"]
    assert len(f) == 1
    evidence = f.iloc[0]["evidence"]
    assert evidence["first_wall_us"] == pytest.approx(walls[0], abs=0.5)
    assert evidence["rest_median_wall_us"] == pytest.approx(statistics.median(walls[1:]), abs=0.5)
    assert evidence["steps"] == 3
    name = "v100_ddp_ns_timestamps.pt.trace.json.gz"
    walls = [hi - lo for lo, hi in steps_of(raw(name))]
    assert walls[0] < THRESHOLDS.cold_start_ratio * statistics.median(walls[1:])
    assert findings(name, "cold_start").empty


def test_no_cold_start_against_an_empty_trailing_step():
    # MI250: ProfilerStep#2 holds no op and launched nothing (49 µs after the real step):
    # comparing the real step with it would read "189x slower".
    name = "mi250_rocm_train.pt.trace.json.gz"
    ev = raw(name)
    (last,) = [e for e in ev if e.get("cat") == "user_annotation" and e["name"] == "ProfilerStep#2"]
    lo, hi = last["ts"], last["ts"] + last["dur"]
    assert not [e for e in ev if e["cat"] in ("cpu_op", "cuda_runtime") and lo <= e["ts"] < hi]
    p = profile(name)
    assert p.steps["empty"].tolist() == [False, True]
    assert p.summary["steps"] == 1
    assert findings(name, "cold_start").empty
    assert any("ProfilerStep#2 is empty" in n for n in p.notes)


# --------------------------------------------------------------------------- #
# 8. compile


def test_compile_stats_become_findings_when_present():
    p = load(str(real_trace("triton_kernel.pt.trace.json.gz")))
    assert p.findings[p.findings["rule"] == "compile"].empty  # no stats: nothing, never "fine"
    p = load(str(real_trace("triton_kernel.pt.trace.json.gz")))
    p.compile_stats = {
        "graph_breaks": ["call_function print", "call_function print", "data-dependent branch"],
        "recompiles": {"size mismatch at index 0": 2},
    }
    f = p.findings[p.findings["rule"] == "compile"]
    titles = " ".join(f["title"])
    assert "3 graph breaks" in titles and "recompiled 2 times" in titles
    assert "call_function print" in " ".join(f["detail"])
    p = load(str(real_trace("triton_kernel.pt.trace.json.gz")))
    p.compile_stats = {"graph_breaks": 0, "recompiles": 0}
    assert p.findings[p.findings["rule"] == "compile"].empty
    p = load(str(real_trace("triton_kernel.pt.trace.json.gz")))
    p.compile_stats = object()  # unreadable: ignored, the other rules still run
    assert p.findings[p.findings["rule"] == "compile"].empty
    assert not p.findings.empty


# --------------------------------------------------------------------------- #
# 9. distributed


def test_exposed_communication_from_a_sweep_of_the_file():
    name = "a100_nccl_rank0.pt.trace.json.gz"
    ev = raw(name)
    windows = steps_of(ev)
    kernels = [e for e in ev if e["cat"] == "kernel" and device_id(e) == 0]
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in kernels if "nccl" in e["name"].lower()]
    compute = [(e["ts"], e["ts"] + e["dur"]) for e in kernels if "nccl" not in e["name"].lower()]
    exposed = sum(time_where(comm, compute, lo, hi) for lo, hi in windows) / len(windows)
    f = findings(name, "communication")
    assert len(f) == 1
    assert f.iloc[0]["evidence"]["exposed_per_step_us"] == pytest.approx(exposed, rel=1e-6)
    assert all("nccl" in k.lower() for k in f.iloc[0]["kernels"])


def test_no_communication_finding_without_collectives():
    name = "v100_ddp_ns_timestamps.pt.trace.json.gz"
    assert not [e for e in raw(name) if e["cat"] == "kernel" and "nccl" in e["name"].lower()]
    assert findings(name, "communication").empty


def test_straggler_across_loaded_ranks():
    ranks = load(str(real_trace("diff_pair/control.pt.trace.json.gz").parent))
    assert isinstance(ranks, RankSet)
    walls = {}
    for n in ("diff_pair/control.pt.trace.json.gz", "diff_pair/test.pt.trace.json.gz"):
        w = [hi - lo for lo, hi in steps_of(raw(n))]
        walls[n] = sum(w) / len(w)
    median = statistics.median(walls.values())
    slow = max(walls, key=walls.get)
    f = ranks.findings
    rows = f[f["rule"] == "stragglers"]
    assert len(rows) == 1 and rows.iloc[0]["severity"] != "not checked"
    evidence = rows.iloc[0]["evidence"]
    assert evidence["vs_median"] == pytest.approx(walls[slow] / median, rel=1e-6)
    assert evidence["rank"] == profile(slow).meta.rank == rows.iloc[0]["rank"]
    assert "straggler" in ranks.text()
    assert set(f["rank"]) == {0 if r is None else r for r in ranks.ranks}


def test_no_straggler_among_equal_ranks():
    path = real_trace("diff_pair/control.pt.trace.json.gz")
    ranks = RankSet([load(str(path)), load(str(path))])
    f = ranks.findings
    assert f[f["rule"] == "stragglers"].empty


# --------------------------------------------------------------------------- #
# a real %%torchprof run on the CPU


CELL = """%%torchprof --steps 3 --warmup 1 -q
y = (x @ w).relu()
total = y.sum().item()
for _ in range(2):
    y.mean().item()
"""


def test_cpu_run_names_item_calls_but_claims_no_device_finding(shell):
    shell.run_cell("import torch\nx = torch.randn(64, 64)\nw = torch.randn(64, 64)")
    res = shell.run_cell(CELL)
    assert res.error_in_exec is None
    p = shell.user_ns["_torchprof"]
    f = p.findings
    assert not p.summary["device_traced"]
    device_rows = f[f["rule"].isin(DEVICE_RULES)]
    assert set(device_rows["severity"]) == {"not checked"}
    assert set(device_rows["rule"]) == DEVICE_RULES
    assert all("CPU" in d for d in device_rows["detail"])
    # the .item() calls are named, counted as in the trace file (3 per step)
    ev = [e for e in raw_events(p.trace_path) if e.get("ph") == "X"]
    items = sum(1 for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::item")
    assert items == 3 * 3
    sync = f[f["rule"] == "sync"].iloc[0]
    assert sync["evidence"]["ops_that_would_sync"] == {"aten::item": items}
    assert "aten::item ×9" in p.table()
    events = p.events
    assert set(events.loc[sync["event_rows"], "name"].astype(str)) == {"aten::item"}


def test_mps_run_says_why_device_rules_were_not_checked():
    # An MPS run records only the CPU side (torch.profiler has no MPS activity).
    inputs = dataclasses.replace(inputs_from_profile(profile("cpu_only.pt.trace.json.gz")), device_kind="mps")
    f = find(inputs)
    rows = f[f["rule"].isin(DEVICE_RULES)]
    assert set(rows["severity"]) == {"not checked"} and set(rows["rule"]) == DEVICE_RULES
    assert all("MPS" in d for d in rows["detail"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**40), max_size=80), st.integers(0, 3))
def test_unique_rows_is_numpys_unique(values, spread):
    from jupyter_torchprof.analysis.findings.model import limit_rows, unique_rows

    rows = np.array([v % (10 ** (spread * 3) + 1) for v in values], dtype=np.int64)
    assert unique_rows(rows).tolist() == np.unique(rows).tolist()
    with_missing = np.concatenate([rows, -np.ones(3, dtype=np.int64)])
    assert limit_rows(with_missing, 5) == np.unique(rows)[:5].tolist()
    assert limit_rows(iter(with_missing.tolist()), -1) == np.unique(rows).tolist()
