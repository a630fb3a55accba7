"""Device busy time per kernel family and step (`Profile.kernel_families`).

Held on every real trace: the families sum to the steps' device busy time
(within 0.1 %; without a counted step, to the union of the recording's device
work summed straight from the trace JSON); on a trace whose work never
overlaps, each family's time is the sum of its activities' durations in the
kernel table; the overlap rule (each moment shared equally among the work
running then) on intervals where the answer is known by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
from tracefiles import REAL_TRACES, raw_events, real_trace, union_length

from jupyter_torchprof.analysis import breakdown as B
from jupyter_torchprof.analysis import categories as C
from jupyter_torchprof.results.profile import Profile

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
FAMILY_COLS = list(B.FAMILY_COLUMNS.values())


@pytest.fixture(scope="module")
def profiles():
    return {name: Profile.from_file(real_trace(name)) for name in REAL_TRACES}


@pytest.mark.parametrize("name", REAL_TRACES)
def test_families_sum_to_the_steps_device_busy(profiles, name):
    p = profiles[name]
    fam = p.kernel_families
    assert np.allclose(fam[FAMILY_COLS].sum(axis=1), fam["busy_us"], rtol=1e-9, atol=1e-6)
    assert (fam[FAMILY_COLS].to_numpy() >= -1e-9).all()
    steps = fam[fam["step"] != B.WHOLE_TRACE]
    assert steps["step"].tolist() == p.steps["step"].tolist()
    want = p.steps["device_busy_us"].to_numpy()
    assert np.allclose(steps["busy_us"], want, rtol=1e-3, atol=1e-6), (steps["busy_us"].tolist(), want)


@pytest.mark.parametrize("name", REAL_TRACES)
def test_without_a_counted_step_the_whole_recording_is_one_row(profiles, name):
    p = profiles[name]
    whole = p.kernel_families[p.kernel_families["step"] == B.WHOLE_TRACE]
    counted = bool(len(p.steps)) and bool(p.steps["counted"].any())
    assert len(whole) == (0 if counted else 1)
    if not counted:
        spans = [
            (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
            for e in raw_events(real_trace(name))
            if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS
        ]
        assert whole["busy_us"].iloc[0] == pytest.approx(union_length(spans), rel=1e-3, abs=1e-6)


def _family_of_kernel_row(family: str) -> str:
    # The kernel table names Inductor's Triton kernels with their kind (``triton pointwise``).
    return C.TRITON if family.startswith("triton ") else family


@pytest.mark.parametrize(
    "name", ["gp100_sgd_step_user_annotation.pt.trace.json.gz", "mi250_rocm_train.pt.trace.json.gz"]
)
def test_without_overlap_a_family_is_its_kernels_total(profiles, name):
    """One stream, nothing overlaps: each family's time is the kernel table's total for it."""
    p = profiles[name]
    fam = p.kernel_families
    rows = fam[fam["counted"]]
    k = p.kernels
    totals = k.groupby(k["family"].map(_family_of_kernel_row))["total_us"].sum()
    assert len(totals) >= 3
    for family, col in B.FAMILY_COLUMNS.items():
        assert rows[col].sum() == pytest.approx(totals.get(family, 0.0), rel=1e-9, abs=1e-6), family


def test_the_kernel_table_family_is_the_timeline_category():
    """One rule table: every real kernel's family in the kernel table is the timeline's category."""
    for name in REAL_TRACES:
        p = Profile.from_file(real_trace(name))
        for n, family in zip(p.kernels["name"], p.kernels["family"], strict=True):
            if not family.startswith("triton "):
                assert family == C.name_family(n), (n, family)


def test_overlapping_work_shares_each_moment_equally():
    # GEMM [0, 10), elementwise [5, 15), a copy [6, 8) inside both, a gap, memset [20, 22).
    start = np.array([0.0, 5.0, 6.0, 20.0])
    end = np.array([10.0, 15.0, 8.0, 22.0])
    share = B.busy_shares(start, end)
    # [0,5) GEMM alone; [5,6) and [8,10) two ways; [6,8) three ways; [10,15) elementwise alone.
    assert share.tolist() == pytest.approx([5 + 0.5 + 2 / 3 + 1, 0.5 + 2 / 3 + 1 + 5, 2 / 3, 2])
    assert share.sum() == pytest.approx(union_length(list(zip(start, end, strict=True))))


def test_zero_length_and_identical_intervals():
    share = B.busy_shares(np.array([1.0, 1.0, 3.0]), np.array([2.0, 2.0, 3.0]))
    assert share.tolist() == pytest.approx([0.5, 0.5, 0.0])
    assert B.busy_shares(np.array([]), np.array([])).tolist() == []


def test_overlapping_streams_split_busy_time_between_families(profiles):
    """The A100 NCCL trace runs collectives beside compute: communication gets less than its
    kernels' total, and the families still sum to the union."""
    p = profiles["a100_nccl_rank0.pt.trace.json.gz"]
    fam = p.kernel_families
    k = p.kernels
    comm_total = k.loc[k["family"] == C.COMMUNICATION, "total_us"].sum()
    assert 0 < fam.loc[fam["counted"], "communication_us"].sum() < comm_total


def _titles(view):
    return [view.tabs.get_title(i) for i in range(len(view.tabs.children))]


def test_steps_tab_is_built_when_first_shown_and_only_for_a_device(profiles):
    from jupyter_torchprof.views.widget import ProfileView

    cpu = ProfileView(profiles["cpu_only.pt.trace.json.gz"])
    assert "Steps" not in _titles(cpu)
    gpu = ProfileView(profiles["v100_ddp_ns_timestamps.pt.trace.json.gz"])
    assert "Steps" in _titles(gpu) and "Steps" not in gpu.built_pages()
    gpu.tabs.fill(_titles(gpu).index("Steps"))
    assert "Steps" in gpu.built_pages()
    gpu.close()
    cpu.close()


def test_step_chart_stacks_the_tables_parts(profiles):
    """The figure's bars: one per counted step, a part per family used and idle cause, the tables' values."""
    from jupyter_torchprof.views.breakdown_chart import build_step_chart

    p = profiles["v100_ddp_ns_timestamps.pt.trace.json.gz"]
    fig = build_step_chart(p)
    fam, idle = p.kernel_families, p.idle_breakdown
    assert list(fig.x_range.factors) == fam.loc[fam["counted"], "label"].tolist()
    bars = [r for r in fig.renderers if type(r.glyph).__name__ == "VBar"]
    data = bars[0].data_source.data
    for r in bars:
        table = fam if r.name in fam else idle
        assert list(data[r.name]) == pytest.approx(table.loc[table["counted"], r.name].tolist())
    assert {r.name for r in bars} == {c for c in FAMILY_COLS if fam[c].sum() > 0} | {
        c for c in B.IDLE_CAUSES.values() if idle[c].sum() > 0
    }
