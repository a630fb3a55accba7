"""Issue 23, item 4: the findings a person reads first, each captured on purpose.

* torch's own bias copy inside ``aten::addmm`` (``nn.Linear`` seeds its
  output with the bias) is no host-copy problem, while a real copy in the loop
  still is;
* a device idle the same size, for the same host reason, in several steps is
  one finding, not one per step;
* what could not be checked ranks below every real finding, marked as a note.

The oracle is the trace file read with the json module and plain Python here
(the enclosing op of each copy, the unions of intervals), never the code
under test.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest
from tracefiles import encloses, innermost_around, raw_events, union_in

from jupyter_torchprof.analysis.findings import THRESHOLDS, find, inputs_from_profile

STEP = re.compile(r"^ProfilerStep#\d+$")
COPY_OPS = {"aten::copy_", "aten::to", "aten::_to_copy", "aten::contiguous", "aten::clone"}
BIAS_SEED_OPS = {"aten::addmm", "aten::_addmm_activation", "aten::baddbmm", "aten::addbmm", "aten::addmv"}


# --------------------------------------------------------------------------- #
# oracle


def x_events(path) -> list[dict]:
    return [e for e in raw_events(path) if e.get("ph") == "X" and e.get("cat") != "Trace"]


def step_windows(ev: list[dict]) -> list[tuple[float, float]]:
    return sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in ev if e["cat"] == "user_annotation" and STEP.match(e["name"])
    )


def host_copies(ev: list[dict]) -> tuple[list[dict], list[dict]]:
    """(outermost copies in the steps that are not a bias seed, the bias seeds), from the file."""
    ops = [e for e in ev if e["cat"] == "cpu_op"]
    windows = step_windows(ev)
    copies = [e for e in ops if e["name"] in COPY_OPS and any(lo <= e["ts"] < hi for lo, hi in windows)]
    outer = [c for c in copies if not any(encloses(o, c) for o in copies)]
    seeds, rest = [], []
    for c in outer:
        parent = innermost_around(c, ops)
        is_seed = c["name"] == "aten::copy_" and parent is not None and parent["name"] in BIAS_SEED_OPS
        (seeds if is_seed else rest).append(c)
    return rest, seeds


def share_of_steps(ev: list[dict], rows: list[dict]) -> float:
    windows = step_windows(ev)
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in rows]
    return 100 * sum(union_in(spans, lo, hi) for lo, hi in windows) / sum(hi - lo for lo, hi in windows)


def rows(p, rule: str):
    f = p.findings
    return f[f["rule"] == rule]


def findings_with_copy_bar(p, share: float):
    """The profile's findings with the host-copy bar at half of ``share`` (or the default bar, if lower).

    A capture's share of the step is wall time: on a loaded machine the step
    stretches while the copies do not, and the share of a real 5 % copy can
    read 3 %. Setting the bar from the share measured in the file keeps what
    is tested (the rule's decision about copies that clearly pass the bar)
    away from the machine's load.
    """
    bar = min(THRESHOLDS.host_copy_min_step_pct, share / 2)
    return find(inputs_from_profile(p), replace(THRESHOLDS, host_copy_min_step_pct=bar))


def oracle_slack(ev: list[dict], spans: int) -> float:
    """How far the plain-Python sums may be from exact: each span end ``ts + dur`` is rounded to the float spacing of the clock."""
    return spans * math.ulp(max(e["ts"] + e["dur"] for e in ev))


# --------------------------------------------------------------------------- #
# 4c. the bias copy of nn.Linear is not a host copy

# A wide first layer on a narrow input: its addmm does almost no arithmetic,
# so the bias copy seeding its output is a large share of the step.
LINEAR_SETUP = (
    "import torch\n"
    "torch.manual_seed(0)\n"
    "model = torch.nn.Sequential(torch.nn.Linear(2, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 4))\n"
    "x = torch.randn(2048, 2)\n"
    "xt = torch.randn(1024, 1024).t()\n"
)
LINEAR_CELL = "%%torchprof --steps 2 -q\nwith torch.no_grad():\n    y = model(x)\n"
LINEAR_AND_COPY_CELL = LINEAR_CELL + "    for _ in range(3):\n        z = xt.contiguous()\n"


def _run(shell, cell: str):
    shell.run_cell(LINEAR_SETUP)
    res = shell.run_cell(cell)
    assert res.error_in_exec is None, res.error_in_exec
    return shell.user_ns["_torchprof"]


def test_linear_bias_copy_is_not_a_host_copy(shell):
    p = _run(shell, LINEAR_CELL)
    ev = x_events(p.trace_path)
    rest, seeds = host_copies(ev)
    # The capture does what it should: the copies are the bias seeds ...
    assert seeds and not rest
    assert len(seeds) == 2 * 2  # two Linear layers, two steps
    share = share_of_steps(ev, seeds)
    assert share > 0
    # ... and with the bar at half their share, still no host-copy finding fires,
    f = findings_with_copy_bar(p, share)
    assert f[f["rule"] == "host_copies"].empty, f[["rule", "title"]]
    # nor any copy finding at the default bars.
    assert rows(p, "host_copies").empty
    assert not any(
        "cop" in str(t).lower() and s != "not checked"
        for t, s in zip(p.findings["title"], p.findings["severity"], strict=True)
    )


def test_a_real_copy_beside_the_bias_copy_still_fires(shell):
    p = _run(shell, LINEAR_AND_COPY_CELL)
    ev = x_events(p.trace_path)
    rest, seeds = host_copies(ev)
    assert seeds and rest
    f = findings_with_copy_bar(p, share_of_steps(ev, rest))
    (row,) = f[f["rule"] == "host_copies"].to_dict("records")
    e = row["evidence"]
    # Every figure counts the real copies only; the seeds are named apart.
    n_steps = len(step_windows(ev))
    assert e["calls"] == len(rest) == 3 * n_steps
    assert set(e["calls_by_name"]) == {"aten::contiguous"}
    assert "aten::addmm" not in e["callers"]
    walls = sum(hi - lo for lo, hi in step_windows(ev))
    slack = oracle_slack(ev, len(rest) + 2 * n_steps)
    assert e["step_pct"] == pytest.approx(share_of_steps(ev, rest), rel=1e-6, abs=100 * slack / walls)
    assert e["bias_seed_copies"] == len(seeds)
    windows = step_windows(ev)
    spans = [(s["ts"], s["ts"] + s["dur"]) for s in seeds]
    seed_per_step = sum(union_in(spans, lo, hi) for lo, hi in windows) / n_steps
    slack = oracle_slack(ev, len(seeds) + 2 * n_steps) / n_steps
    assert e["bias_seed_time_per_step_us"] == pytest.approx(seed_per_step, rel=1e-6, abs=slack)
    assert ".contiguous()" in row["detail"] and "addmm" not in row["detail"]


# --------------------------------------------------------------------------- #
# 4b. a stall repeating in every step is one finding

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def largest_idle(intervals, lo: float, hi: float) -> float:
    """The longest stretch of [lo, hi] no interval covers (plain Python)."""
    best, end = 0.0, lo
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi):
        best = max(best, s - end)
        end = max(end, e)
    return max(best, hi - end)


def test_a100_idle_in_each_step_is_one_finding():
    from tracefiles import real_trace

    from jupyter_torchprof import load

    path = real_trace("a100_nccl_rank0.pt.trace.json.gz")
    ev = x_events(path)
    p = load(str(path))
    gaps = rows(p, "idle_gaps")
    (row,) = gaps.to_dict("records")
    e = row["evidence"]
    assert e["steps"] == [4, 5, 6] and e["device"] == 0
    assert "Device 0 idle ~15.5 ms in each of steps 4–6" in row["title"]
    # Each step's own gap, from the file: the longest stretch without device work.
    dev = [(x["ts"], x["ts"] + x["dur"]) for x in ev if x["cat"] in DEVICE_CATS and x["args"]["device"] == 0]
    steps = {int(x["name"].split("#")[1]): (x["ts"], x["ts"] + x["dur"]) for x in ev if STEP.match(x["name"])}
    expected = {k: largest_idle(dev, *steps[k]) for k in (4, 5, 6)}
    got = {s["step"]: s["gap_us"] for s in e["per_step"]}
    assert got == pytest.approx(expected, rel=1e-6)
    sizes = sorted(expected.values())
    assert e["gap_us_median"] == pytest.approx(sizes[1], rel=1e-6)
    assert e["spread_pct"] == pytest.approx(100 * (sizes[-1] - sizes[0]) / sizes[1], rel=1e-6)
    assert e["gap_us"] == pytest.approx(sizes[-1], rel=1e-6)  # the largest gap's own figures
    assert row["impact_us"] == pytest.approx(sum(sizes) / p.summary["steps"], rel=1e-6)
    for k in expected:
        assert f"step {k}: " in row["detail"]
    assert "aten::unflatten_dense_tensors" in row["title"]


def _stalls_trace(tmp_path, stalls: list[tuple[str, float]]):
    """Constructed: one step per (host op, gap µs); in each the device stalls for the gap while the op runs."""
    import json

    from jupyter_torchprof import load

    ev = []
    for k, (op, gap) in enumerate(stalls, start=1):
        lo = k * 20_000.0
        ev += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1, "tid": 1, "ts": lo, "dur": 10_000},
            {"ph": "X", "cat": "kernel", "name": "k_before", "pid": 0, "tid": 7, "ts": lo + 50, "dur": 950,
             "args": {"device": 0, "stream": 7}},
            {"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": lo + 1_000, "dur": gap},
            {"ph": "X", "cat": "kernel", "name": "k_after", "pid": 0, "tid": 7, "ts": lo + 1_000 + gap,
             "dur": 10_000 - 1_050 - gap, "args": {"device": 0, "stream": 7}},
        ]  # fmt: skip
    path = tmp_path / "stalls.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    return load(str(path))


def test_only_similar_stalls_behind_the_same_op_merge(tmp_path):
    import dataclasses

    from jupyter_torchprof.analysis.findings import find, inputs_from_profile

    stalls = [
        ("aten::work", 1_000.0),
        ("aten::work", 1_100.0),
        ("aten::work", 3_000.0),
        ("aten::other", 1_000.0),
    ]
    p = _stalls_trace(tmp_path, stalls)
    th = dataclasses.replace(THRESHOLDS, gaps_reported=10)
    got = find(inputs_from_profile(p), th, rules=["idle_gaps"])
    by_steps = {
        tuple(e.get("steps") or [e["step"]]): (t, e)
        for t, e in zip(got["title"], got["evidence"], strict=True)
    }
    # Steps 1 and 2 stall alike behind one op: one finding; step 3's stall is three
    # times longer and step 4's sits behind another op: each its own.
    assert set(by_steps) == {(1, 2), (3,), (4,)}
    title, e = by_steps[(1, 2)]
    assert "~1.05 ms in each of steps 1–2" in title and "aten::work" in title
    assert [s["gap_us"] for s in e["per_step"]] == pytest.approx([1_000.0, 1_100.0])
    assert e["spread_pct"] == pytest.approx(100 * 100 / 1_050)
    assert by_steps[(3,)][1]["gap_us"] == pytest.approx(3_000.0) and "in step 3 " in by_steps[(3,)][0]
    assert "aten::other" in by_steps[(4,)][0]
    # With the ratio tightened below 1.1 the two no longer merge.
    tight = dataclasses.replace(th, gap_merge_max_ratio=1.05)
    assert len(find(inputs_from_profile(p), tight, rules=["idle_gaps"])) == 4


# --------------------------------------------------------------------------- #
# 4a. what could not be checked is a note, below every finding


def _soup(page: str):
    from bs4 import BeautifulSoup

    return BeautifulSoup(page, "html.parser")


def test_not_checked_lines_are_notes_below_the_findings(shell):
    from jupyter_torchprof.views.findings import findings_html, findings_text

    # A CPU run with a real finding (the copies in the loop) and device rules it cannot check.
    p = _run(shell, LINEAR_AND_COPY_CELL)
    ev = x_events(p.trace_path)
    rest, _ = host_copies(ev)
    f = findings_with_copy_bar(p, share_of_steps(ev, rest))
    real = f[f["severity"] != "not checked"]
    # The copies fire; on a loaded machine a slow first step may add the cold-start finding.
    assert "host_copies" in set(real["rule"]) and set(real["rule"]) <= {"host_copies", "cold_start"}
    assert (f["severity"] == "not checked").sum() >= 9
    # The table: every real finding before every not-checked row.
    sev = f["severity"].tolist()
    assert sev.index("not checked") == len(real) and set(sev[len(real) :]) == {"not checked"}
    # Text: the finding is the first line; the not-checked rules come after, under
    # their own heading, each marked as a note.
    lines = findings_text(f).splitlines()
    # (its severity is the one the share earned: high on an idle machine, lower on a loaded one)
    assert lines[0] == "Findings:" and real.iloc[0]["title"] in lines[1]
    assert real.iloc[0]["severity"].upper() in lines[1].upper()
    notes_at = lines.index("Notes (not checked):")
    assert notes_at > 1
    assert all(ln.startswith("  note  ") for ln in lines[notes_at + 1 :])
    assert "This run used the CPU; no accelerator was profiled." in lines[notes_at + 1]
    assert not any("not checked" in ln.lower() for ln in lines[1:notes_at])
    # HTML: the first item is the finding; the notes sit in their own block after it.
    box = _soup(findings_html(f, limit=5)).select_one("div.jp-TorchProf-findings")
    items = box.select("li")
    assert "jp-TorchProf-note" not in items[0]["class"]
    assert items[0].select_one(".jp-TorchProf-finding-title").get_text() == real.iloc[0]["title"]
    notes = box.select_one("div.jp-TorchProf-notes")
    assert notes.p.get_text() == "Notes (not checked):"
    note_items = notes.select("li")
    assert note_items and all(li.select_one(".jp-TorchProf-sev").get_text() == "note" for li in note_items)
    assert items.index(note_items[0]) == len(real)


def test_with_nothing_found_the_first_line_says_so_not_a_note(shell):
    from jupyter_torchprof.views.findings import findings_html, findings_text

    p = _run(shell, LINEAR_CELL)
    # This run's notes without its findings: which timing rules fire on a
    # tiny CPU run depends on how busy the machine is (a loaded one once
    # raised a "medium"), so nothing-found is made from the run's own rows.
    f = p.findings[p.findings["severity"] == "not checked"].reset_index(drop=True)
    assert len(f) > 0
    lines = findings_text(f).splitlines()
    assert lines[:2] == ["Findings:", "  No findings: the rules that ran found nothing to point at."]
    assert lines[2] == "Notes (not checked):"
    box = _soup(findings_html(f)).select_one("div.jp-TorchProf-findings")
    first = box.find(["p", "li"])
    assert "jp-TorchProf-nofinding" in first["class"]


def test_device_copy_seeding_addmm_is_not_a_copy_finding(tmp_path):
    """Constructed (no real trace has one): addmm's bias seed copied on the device, beside a real clone."""
    import json

    from jupyter_torchprof import load

    def launch(corr: int, ts: float) -> list[dict]:
        return [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": ts, "dur": 4,
             "args": {"correlation": corr}},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 7,
             "ts": ts + 20, "dur": 40, "args": {"correlation": corr, "device": 0, "stream": 7, "bytes": 1 << 20}},
        ]  # fmt: skip

    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 400},
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 10, "dur": 60},
        {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 12, "dur": 20},
        *launch(1, 14),
        {"ph": "X", "cat": "cpu_op", "name": "aten::clone", "pid": 1, "tid": 1, "ts": 200, "dur": 40},
        {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 205, "dur": 20},
        *launch(2, 207),
    ]  # fmt: skip
    path = tmp_path / "seed.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    p = load(str(path))
    (row,) = rows(p, "copies").to_dict("records")
    assert row["title"].startswith("Device→device copies: 1/step, 1 MiB/step")
    assert row["evidence"]["count"] == 1 and row["evidence"]["causes"] == {"aten::copy_ in aten::clone": 1}
    assert "aten::addmm" not in row["ops"]
