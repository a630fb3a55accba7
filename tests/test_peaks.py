"""FLOP/s and % of peak (issue 24 item 11): the device table, matching a trace's device to a row,
and % of peak on a real A100 trace against a hand computation straight from the trace JSON."""

from __future__ import annotations

import bisect
import gzip
import json
import re
from pathlib import Path

import pytest

from jupyter_torchprof import load
from jupyter_torchprof.analysis import hardware
from tests.tracefiles import raw_events, real_trace

A100 = "diff_pair/control.pt.trace.json.gz"


def test_every_row_has_a_source_and_dense_figures():
    text = Path(hardware.__file__).read_text()
    for row in hardware.TABLE:
        assert row.memory_bytes_per_s > 0, row.name
        assert row.flops and set(row.flops) <= set(hardware.PRECISIONS), row.name
    # each row's assignment is preceded by a comment quoting a vendor page
    blocks = re.split(r"\n(?=[A-Z0-9_]+ = _peaks\()", text)
    for block in blocks[1:]:
        var = block.split(" ", 1)[0]
        before = text[: text.index(block)]
        comment = before[before.rstrip().rfind("\n\n") :]
        assert re.search(r"(nvidia\.com|amd\.com|cloud\.google\.com|awsdocs-neuron)", comment + block), var
    # dense, not 2:4 sparse: the H100 SXM datasheet's "1,979*" BF16 (with sparsity) is 989.5 dense
    assert hardware.H100_SXM.peak("bf16") == pytest.approx(989.5e12)
    assert hardware.A100_40GB_SXM.peak("tf32") == pytest.approx(156e12)


@pytest.mark.parametrize(
    ("props", "row"),
    [
        ({"name": "NVIDIA A100-PG509-200", "totalGlobalMem": 42297524224}, "A100 40GB SXM"),
        ({"name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85e9}, "A100 80GB SXM"),
        ({"name": "NVIDIA A100 80GB PCIe", "totalGlobalMem": 85e9}, "A100 80GB PCIe"),
        ({"name": "NVIDIA A100-PCIE-40GB", "totalGlobalMem": 42e9}, "A100 40GB PCIe"),
        ({"name": "NVIDIA H100 80GB HBM3"}, "H100 SXM"),
        ({"name": "NVIDIA H100 PCIe"}, "H100 PCIe"),
        ({"name": "NVIDIA H200"}, "H200 SXM"),
        ({"name": "NVIDIA B200"}, "B200 (HGX)"),
        ({"name": "Tesla V100-SXM2-32GB"}, "Tesla V100 SXM2"),
        ({"name": "Tesla V100-PCIE-16GB"}, "Tesla V100 PCIe"),
        ({"name": "AMD Instinct MI300X"}, "MI300X"),
        ({"name": "AMD Radeon Graphics", "numSms": 104, "warpSize": 64}, "MI250 (one GCD)"),
        ({"name": "AMD Radeon Graphics", "numSms": 110, "warpSize": 64}, "MI250X (one GCD)"),
        ({"name": "NVIDIA H100 NVL"}, None),
        ({"name": "Quadro GP100"}, None),
        ({}, None),
    ],
)
def test_device_names_match_rows(props, row):
    got = hardware.match_device(props)
    assert (got.name if got else None) == row


@pytest.mark.parametrize(
    ("trace", "row"),
    [
        (A100, "A100 40GB SXM"),
        ("diff_pair/test.pt.trace.json.gz", "Tesla V100 SXM2"),
        ("v100_ddp_ns_timestamps.pt.trace.json.gz", "Tesla V100 SXM2"),
        ("mi250_rocm_train.pt.trace.json.gz", "MI250 (one GCD)"),
        ("gp100_sgd_step_user_annotation.pt.trace.json.gz", None),
    ],
)
def test_real_traces_find_their_device(trace, row):
    peaks = load(str(real_trace(trace))).peaks
    assert (peaks.name if peaks else None) == row


# --------------------------------------------------------------------------- #
# % of peak on the A100 trace, by hand from the JSON


def _precision_of_kernel_name(name: str) -> str:
    if "s1688" in name or "s16816" in name:
        return "tf32"
    if "sgemm" in name:
        return "fp32"
    return ""


def _hand_by_call(path: Path, ops=("aten::mm", "aten::addmm", "aten::bmm")):
    """For each GEMM call in the trace: its FLOPs (2·M·K·N from Input Dims) and the device work its launches ran."""
    events = raw_events(path)
    # device work: kernels, and the memsets / copies an op's device total time holds too
    device = ("kernel", "gpu_memset", "gpu_memcpy")
    kernels = {e["args"]["correlation"]: e for e in events if e.get("cat") in device and e.get("ph") == "X"}
    launches: dict = {}
    for e in events:
        if e.get("cat") == "cuda_runtime" and e["args"].get("correlation") in kernels:
            launches.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["args"]["correlation"]))
    for runs in launches.values():
        runs.sort()
    calls = []
    for e in events:
        if e.get("cat") != "cpu_op" or e.get("name") not in ops:
            continue
        dims = e["args"]["Input Dims"]
        a, b = (dims[1], dims[2]) if e["name"] == "aten::addmm" else (dims[0], dims[1])
        f = 2 * a[0] * a[1] * b[1] if len(a) == 2 else 2 * a[0] * a[1] * a[2] * b[2]
        runs = launches.get((e["pid"], e["tid"]), [])
        lo = bisect.bisect_left(runs, (e["ts"], -1))
        hi = bisect.bisect_right(runs, (e["ts"] + e["dur"], float("inf")))
        inside = [kernels[c] for _, c in runs[lo:hi]]
        calls.append((e["name"], f, inside))
    return calls


def _math(work: list[dict]) -> list[dict]:
    """The kernels that share a call's FLOPs: its GEMM kernels when it has any (addmm's bias copy,
    an elementwise copy, does no math), else all its kernels; copies and memsets never."""
    kernels = [k for k in work if k["cat"] == "kernel"]
    # cuBLAS: gemm / gemv kernels, split-K's reduction and cuBLASLt's epilogue (bias, activation)
    gemm = [k for k in kernels if re.search(r"gemm|gemv|splitKreduce|epilogue", k["name"], re.IGNORECASE)]
    # every kernel under these calls is a GEMM or the bias copy: the rule has nothing else to decide
    assert all(k in gemm or "direct_copy_kernel" in k["name"] for k in kernels)
    return gemm or kernels


@pytest.fixture(scope="module")
def a100():
    path = real_trace(A100)
    return load(str(path)), _hand_by_call(path)


def test_op_pct_of_peak_by_hand(a100):
    profile, calls = a100
    mm = [(f, ks) for name, f, ks in calls if name == "aten::mm"]
    flops = sum(f for f, _ in mm)
    device_us = sum(k["dur"] for _, ks in mm for k in ks)
    # the precision of most of mm's FLOPs, as their kernels' names tell
    by_precision: dict[str, float] = {}
    for f, work in mm:
        ks = _math(work)
        total = sum(k["dur"] for k in ks)
        for k in ks:
            p = _precision_of_kernel_name(k["name"])
            if p:
                by_precision[p] = by_precision.get(p, 0) + f * k["dur"] / total
    precision = max(by_precision, key=by_precision.get)
    assert precision == "tf32"  # cutlass s1688gemm kernels: fp32 inputs run as TF32
    peak = 156e12  # A100 datasheet: TF32 Tensor Core 156 TFLOPS dense
    row = profile.op_table(flops=True).set_index("name").loc["aten::mm"]
    assert row["est_flops"] == flops == row["flops"]
    assert row["device_total_us"] == pytest.approx(device_us, rel=1e-9)
    rate = flops / (device_us * 1e-6)
    assert row["est_flops_per_s"] == pytest.approx(rate, rel=1e-9)
    assert row["peak_precision"] == "tf32 (kernel name)"
    assert row["peak_pct"] == pytest.approx(100 * rate / peak, rel=1e-9)
    assert 0 < row["peak_pct"] < 100


def test_kernel_pct_of_peak_by_hand(a100):
    profile, calls = a100
    name = "ampere_sgemm_128x128_tn"
    # each launching call's FLOPs shared among its math kernels by device time
    share = dur = 0.0
    for _, f, work in calls:
        ks = _math(work)
        total = sum(k["dur"] for k in ks)
        for k in ks:
            if k["name"] == name:
                share += f * k["dur"] / total
                dur += k["dur"]
    row = profile.kernels.set_index("name").loc[name]
    assert row["total_us"] == dur
    assert row["est_flops"] == pytest.approx(share, rel=1e-9)
    rate = share / (dur * 1e-6)
    assert row["est_flops_per_s"] == pytest.approx(rate, rel=1e-9)
    assert row["peak_precision"] == "fp32 (kernel name)"
    assert row["peak_pct"] == pytest.approx(100 * rate / 19.5e12, rel=1e-9)  # A100 FP32 19.5 TFLOPS


def test_unknown_device_has_no_pct_and_one_note(tmp_path):
    with gzip.open(real_trace(A100), "rt") as fh:
        doc = json.load(fh)
    for props in doc["deviceProperties"]:
        props["name"] = "Quadro GP100"
    path = tmp_path / "unknown.pt.trace.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)
    profile = load(str(path))
    assert profile.peaks is None
    ops = profile.op_table(flops=True)
    kernels = profile.kernels
    assert ops["est_flops_per_s"].notna().any() and kernels["est_flops_per_s"].notna().any()
    # never a 0 %: blank
    assert ops["peak_pct"].isna().all() and kernels["peak_pct"].isna().all()
    notes = [n for n in profile.notes if n.startswith("% of peak")]
    assert len(notes) == 1 and "Quadro GP100" in notes[0]


def test_cpu_run_has_no_pct_and_no_note():
    profile = load(str(real_trace("cpu_only.pt.trace.json.gz")))
    ops = profile.op_table(flops=True)
    assert "peak_pct" not in ops or ops["peak_pct"].isna().all()
    assert not [n for n in profile.notes if n.startswith("% of peak")]


def test_a_reopened_run_draws_its_roofline_without_parsing(tmp_path, monkeypatch):
    from test_table_cache import no_parse, run_folder

    from jupyter_torchprof.runs import cache
    from jupyter_torchprof.runs.store import TRACE_NAME
    from jupyter_torchprof.views.roofline import roofline_points, unavailable_reason

    folder = run_folder(tmp_path, real_trace(A100))
    load(folder)  # parses, and keeps the tables beside the trace
    fresh = load(str(folder / TRACE_NAME))
    with monkeypatch.context() as mp:
        no_parse(mp)
        again = load(folder)
        assert isinstance(again, cache.CachedProfile)
        assert again.peaks == fresh.peaks == hardware.A100_40GB_SXM
        assert unavailable_reason(again) == ""
        import pandas as pd

        pd.testing.assert_frame_equal(roofline_points(again), roofline_points(fresh))
    assert "_data" not in again.__dict__


def test_the_bias_copy_gets_no_flops_and_shares_add_up(a100):
    profile, calls = a100
    kernels = profile.kernels
    # addmm's bias copy runs under the GEMM ops but does none of their arithmetic
    copies = {k["name"] for _, _, work in calls for k in work if "direct_copy_kernel" in k["name"]}
    assert copies
    assert (kernels.set_index("name").loc[sorted(copies), "est_flops"] == 0).all()
    # every estimated FLOP of a call that ran a kernel lands on one of its kernels
    hand = sum(f for _, f, work in calls if any(k["cat"] == "kernel" for k in work))
    assert kernels["est_flops"].sum() == pytest.approx(hand, rel=1e-9)
