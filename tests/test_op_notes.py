"""Notes on op rows (issue 24 items 1, 2, 4, 6, 8, 9), each on a capture built to show it and one built not to.

CPU captures are made here with torch.profiler (host only: what they show
is read from the call tree); the device-side patterns are read from the
real GPU traces in tests/data/kineto and, where none holds them, from the
constructed traces in tests/data/constructed (marked so). The oracle is the
trace file read with the json module and plain Python here: which op
encloses which, by time on one thread; never the code under test.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile, schedule
from tracefiles import encloses, innermost_around, raw_events, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.format import fmt_bytes

CONSTRUCTED = Path(__file__).resolve().parent / "data" / "constructed"
STEPS = 2


# --------------------------------------------------------------------------- #
# capture and oracle


def capture(step, folder: Path, name: str, shapes: bool = True):
    """``step`` run under torch.profiler (one warm-up, two recorded steps, shapes on), loaded."""
    torch.manual_seed(0)
    step()
    path = folder / f"{name}.pt.trace.json"
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=shapes,
        schedule=schedule(wait=0, warmup=1, active=STEPS),
        on_trace_ready=lambda prof: prof.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(1 + STEPS):
            step()
            prof.step()
    return load(str(path))


def x_events(path) -> list[dict]:
    return [e for e in raw_events(Path(path)) if e.get("ph") == "X" and e.get("cat") != "Trace"]


def children_of(e: dict, ops: list[dict]) -> list[dict]:
    return [c for c in ops if innermost_around(c, ops) is e]


def cpu_ops(path) -> list[dict]:
    return [e for e in x_events(path) if e["cat"] == "cpu_op"]


def notes_of(p, name: str) -> dict[str, str]:
    """The notes on op row ``name``: id -> text (from the long table), checked against the row's columns."""
    hits = p.annotations
    mine = hits[(hits["table"] == "ops") & (hits["key"] == name)]
    row = p.ops[p.ops["name"] == name]
    if len(row):
        assert row["note_ids"].iat[0] == ",".join(mine["id"])
    return dict(zip(mine["id"], mine["note"], strict=True))


def ids_anywhere(p) -> set[str]:
    return set(p.annotations["id"])


# --------------------------------------------------------------------------- #
# the CPU captures, made once for the module


def _views():
    a = torch.randn(32, 16)

    def step():
        _ = a.t()
        _ = a.view(-1)
        _ = a.t().reshape(-1)  # not contiguous: reshape copies (clone -> copy_)

    return step


def _linear(bias: bool, copy: bool = False):
    model = nn.Sequential(nn.Linear(16, 32, bias=bias), nn.ReLU(), nn.Linear(32, 4, bias=bias))
    x = torch.randn(8, 16)
    xt = torch.randn(32, 32).t()

    def step():
        with torch.no_grad():
            model(x)
            if copy:
                _ = xt.contiguous()

    return step


def _sdpa(backend: SDPBackend | None, length: int = 16, keys: int = 16, mixed: bool = False):
    q = torch.randn(2, 4, length, 8)
    kv = torch.randn(2, 4, keys, 8)

    def call():
        nn.functional.scaled_dot_product_attention(q, kv, kv)

    def step():
        with torch.no_grad():
            if backend is None or mixed:
                call()
            if backend is not None:
                with sdpa_kernel(backend):
                    call()

    return step


def _handwritten(length: int, keys: int):
    q, k, v = torch.randn(2, 4, length, 8), torch.randn(2, 4, keys, 8), torch.randn(2, 4, keys, 8)

    def step():
        with torch.no_grad():
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(8)
            _ = scores.softmax(dim=-1) @ v

    return step


def _classifier():
    model = nn.Linear(16, 10)
    x = torch.randn(8, 16)

    def step():
        with torch.no_grad():
            model(x).softmax(dim=-1).argmax(dim=-1)

    return step


def _masked_fill(grad: bool, inplace: bool = False):
    mask = torch.rand(16, 16) > 0.5
    a = torch.randn(16, 16, requires_grad=grad)
    b = torch.randn(16, 16)

    def step():
        if grad:
            a.masked_fill(mask, 0.0).sum().backward()
            a.grad = None
            return
        with torch.no_grad():
            if inplace:
                b.clone().masked_fill_(mask, 0.0)
            else:
                b.masked_fill(mask, 0.0)
            _ = b + b
            _ = b * 2

    return step


CASES = {
    "views": _views,
    "linear": lambda: _linear(True),
    "linear_no_bias": lambda: _linear(False),
    "linear_and_copy": lambda: _linear(True, copy=True),
    "sdpa_default": lambda: _sdpa(None),
    "sdpa_math": lambda: _sdpa(SDPBackend.MATH),
    "sdpa_math_long": lambda: _sdpa(SDPBackend.MATH, 64, 64),
    "sdpa_math_cross": lambda: _sdpa(SDPBackend.MATH, 16, 48),
    "sdpa_mixed": lambda: _sdpa(SDPBackend.MATH, mixed=True),
    "handwritten": lambda: _handwritten(16, 48),
    "classifier": _classifier,
    "masked_fill": lambda: _masked_fill(False),
    "masked_fill_inplace": lambda: _masked_fill(False, inplace=True),
    "masked_fill_grad": lambda: _masked_fill(True),
}


@pytest.fixture(scope="module")
def cap(tmp_path_factory):
    folder = tmp_path_factory.mktemp("op_notes")
    out = {name: capture(make(), folder, name) for name, make in CASES.items()}
    out["handwritten_no_shapes"] = capture(
        _handwritten(16, 48), folder, "handwritten_no_shapes", shapes=False
    )
    return out


# --------------------------------------------------------------------------- #
# 1. metadata-only views on a host-only run


def test_views_on_a_host_only_run_say_no_copy(cap):
    p = cap["views"]
    assert not p.summary["device_traced"]
    for view in ("aten::t", "aten::view", "aten::transpose"):
        assert notes_of(p, view) == {"metadata-only-host": "metadata only: no copy"}, view
    # no claim about device work on a run that did not trace the device
    assert "metadata-only" not in ids_anywhere(p)
    # the reshape of a transposed tensor copied in every call: no note
    ops = cpu_ops(p.trace_path)
    reshapes = [o for o in ops if o["name"] == "aten::reshape"]
    assert reshapes and all(any(c["name"] == "aten::clone" for c in children_of(r, ops)) for r in reshapes)
    assert notes_of(p, "aten::reshape") == {}
    # every call of a noted view ran no op but views under it (the file's call tree)
    for view in ("aten::t", "aten::view"):
        for call in (o for o in ops if o["name"] == view):
            kids = {c["name"] for c in children_of(call, ops)}
            assert kids <= {"aten::transpose", "aten::as_strided"}, (view, kids)


# --------------------------------------------------------------------------- #
# 2. nn.Linear: the bias in the GEMM, the copy that seeds it


def _seed_copies(path) -> tuple[int, int]:
    """(copy_ calls directly under a bias GEMM, all copy_ calls), from the file."""
    ops = cpu_ops(path)
    copies = [o for o in ops if o["name"] == "aten::copy_"]
    seeds = [c for c in copies if (innermost_around(c, ops) or {}).get("name") == "aten::addmm"]
    return len(seeds), len(copies)


def test_linear_bias_notes(cap):
    p = cap["linear"]
    assert notes_of(p, "aten::addmm") == {
        "bias-in-gemm": "bias folded into the GEMM (no separate add kernel)"
    }
    seeds, copies = _seed_copies(p.trace_path)
    assert seeds == copies == 2 * STEPS  # two layers, each seeding its output once per step
    assert notes_of(p, "aten::copy_") == {"bias-seed-copy": "seeds the GEMM's output with the bias"}


def test_linear_without_bias_has_no_bias_notes(cap):
    p = cap["linear_no_bias"]
    names = {o["name"] for o in cpu_ops(p.trace_path)}
    assert "aten::addmm" not in names and "aten::mm" in names
    assert not {"bias-in-gemm", "bias-seed-copy"} & ids_anywhere(p)


def test_bias_copy_note_counts_its_calls_beside_other_copies(cap):
    p = cap["linear_and_copy"]
    seeds, copies = _seed_copies(p.trace_path)
    assert 0 < seeds < copies
    assert notes_of(p, "aten::copy_") == {
        "bias-seed-copy": f"seeds the GEMM's output with the bias (in {seeds} of {copies} calls)"
    }


LINEAR_SETUP = (
    "import torch\n"
    "torch.manual_seed(0)\n"
    "model = torch.nn.Sequential(torch.nn.Linear(2, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 4))\n"
    "x = torch.randn(2048, 2)\n"
)


def test_plain_linear_model_gets_the_notes_and_no_copy_finding(shell):
    """With the clean-capture recipe: the bias copies are a large share of the step, named, never a finding."""
    shell.run_cell(LINEAR_SETUP)
    res = shell.run_cell("%%torchprof --steps 2 -q\nwith torch.no_grad():\n    y = model(x)\n")
    assert res.error_in_exec is None, res.error_in_exec
    p = shell.user_ns["_torchprof"]
    seeds, copies = _seed_copies(p.trace_path)
    assert seeds == copies > 0
    f = p.findings
    real = f[f["severity"] != "not checked"]
    assert real[real["rule"].isin(["host_copies", "copies"])].empty
    assert notes_of(p, "aten::copy_") == {"bias-seed-copy": "seeds the GEMM's output with the bias"}
    assert "bias-in-gemm" in notes_of(p, "aten::addmm")


# --------------------------------------------------------------------------- #
# 4. SDPA backend and the math path's score matrix


def _dispatched(path) -> list[str]:
    """The op directly under each SDPA call, from the file."""
    ops = cpu_ops(path)
    out = []
    for call in (o for o in ops if o["name"] == "aten::scaled_dot_product_attention"):
        (kid,) = children_of(call, ops)
        out.append(kid["name"])
    return out


def test_sdpa_backend_default_cpu_flash_vs_forced_math(cap):
    default, math_ = cap["sdpa_default"], cap["sdpa_math"]
    assert set(_dispatched(default.trace_path)) == {"aten::_scaled_dot_product_flash_attention_for_cpu"}
    assert set(_dispatched(math_.trace_path)) == {"aten::_scaled_dot_product_attention_math"}
    assert notes_of(default, "aten::scaled_dot_product_attention") == {
        "sdpa-backend": "SDPA backend: CPU flash"
    }
    assert notes_of(math_, "aten::scaled_dot_product_attention")["sdpa-backend"] == "SDPA backend: math"


def test_sdpa_backends_counted_when_calls_differ(cap):
    p = cap["sdpa_mixed"]
    got = _dispatched(p.trace_path)
    n = len(got)
    flash = got.count("aten::_scaled_dot_product_flash_attention_for_cpu")
    text = notes_of(p, "aten::scaled_dot_product_attention")["sdpa-backend"]
    assert f"CPU flash in {flash} of {n} calls" in text and f"math in {n - flash} of {n} calls" in text
    # the score size speaks for the math calls only
    scores = notes_of(p, "aten::scaled_dot_product_attention")["attention-scores"]
    assert scores == f"math path: {_expected_scores(16, 16)} (in {n - flash} of {n} calls)"


def _expected_scores(length: int, keys: int, batch_heads: int = 2 * 4, itemsize: int = 4) -> str:
    per_head = length * keys * itemsize
    return f"[{length}, {keys}] attention scores: {fmt_bytes(per_head)} per head, {fmt_bytes(batch_heads * per_head)} in all"


@pytest.mark.parametrize(
    ("case", "length", "keys"),
    [("sdpa_math", 16, 16), ("sdpa_math_long", 64, 64), ("sdpa_math_cross", 16, 48)],
)
def test_math_path_scores_size(cap, case, length, keys):
    p = cap[case]
    # the file's softmax input is the [B, H, L, S] score matrix
    softmax = [o for o in cpu_ops(p.trace_path) if o["name"] == "aten::_safe_softmax"]
    assert softmax and all(o["args"]["Input Dims"][0] == [2, 4, length, keys] for o in softmax)
    note = notes_of(p, "aten::scaled_dot_product_attention")["attention-scores"]
    assert note == "math path: " + _expected_scores(length, keys)


def test_scores_grow_with_length_times_keys(cap):
    short = notes_of(cap["sdpa_math"], "aten::scaled_dot_product_attention")["attention-scores"]
    long = notes_of(cap["sdpa_math_long"], "aten::scaled_dot_product_attention")["attention-scores"]
    # 16x16 float: 1 KiB per head; 64x64: 16 KiB, 16 times as much for 4 times the length
    assert "1 KiB per head" in short and "16 KiB per head" in long


def test_no_scores_note_on_fused_backend(cap):
    assert "attention-scores" not in ids_anywhere(cap["sdpa_default"])


def test_handwritten_attention_scores_on_softmax(cap):
    p = cap["handwritten"]
    ops = cpu_ops(p.trace_path)
    soft = [o for o in ops if o["name"] == "aten::softmax"]
    assert soft and all(o["args"]["Input Dims"][0] == [2, 4, 16, 48] for o in soft)
    assert notes_of(p, "aten::softmax") == {"attention-scores": _expected_scores(16, 48)}


def test_no_scores_note_without_recorded_shapes(cap):
    p = cap["handwritten_no_shapes"]
    soft = [o for o in cpu_ops(p.trace_path) if o["name"] == "aten::softmax"]
    assert soft and not any("Input Dims" in o["args"] for o in soft)
    assert "attention-scores" not in ids_anywhere(p)


def test_classifier_softmax_gets_no_scores_note(cap):
    p = cap["classifier"]
    assert any(o["name"] == "aten::softmax" for o in cpu_ops(p.trace_path))
    assert "attention-scores" not in ids_anywhere(p)


# --------------------------------------------------------------------------- #
# 8. out-of-place ops that copy their input


def test_masked_fill_copy_and_in_place_advice_without_grad(cap):
    p = cap["masked_fill"]
    ops = cpu_ops(p.trace_path)
    calls = [o for o in ops if o["name"] == "aten::masked_fill"]
    for call in calls:
        kids = [c["name"] for c in children_of(call, ops)]
        assert kids == ["aten::clone", "aten::masked_fill_"], kids
        assert "Sequence number" not in call["args"]
    assert notes_of(p, "aten::masked_fill") == {
        "copies-input": "copies its input first (masked_fill_ would not)",
        "inplace-safe": "no autograd here: masked_fill_ would skip the copy",
    }
    # add and mul allocate their output: no copy under them, no note
    assert {o["name"] for o in ops} >= {"aten::add", "aten::mul"}
    assert notes_of(p, "aten::add") == {} and notes_of(p, "aten::mul") == {}


def test_in_place_masked_fill_gets_no_copy_note(cap):
    p = cap["masked_fill_inplace"]
    assert "aten::masked_fill" not in {o["name"] for o in cpu_ops(p.trace_path)}
    assert not {"copies-input", "inplace-safe"} & ids_anywhere(p)


def test_masked_fill_under_autograd_gets_no_in_place_advice(cap):
    p = cap["masked_fill_grad"]
    ev = x_events(p.trace_path)
    forward = [e for e in ev if e["name"] == "aten::masked_fill" and "Sequence number" in e["args"]]
    backward = {e["args"].get("Sequence number") for e in ev if e["name"] == "MaskedFillBackward0"}
    assert forward and {e["args"]["Sequence number"] for e in forward} <= backward
    got = notes_of(p, "aten::masked_fill")
    assert "copies-input" in got and "inplace-safe" not in got


# --------------------------------------------------------------------------- #
# 6. the profiler's own rows


def test_profiler_step_rows(cap):
    p = cap["linear"]
    assert notes_of(p, "ProfilerStep*") == {"profiler-step": "the profiler's step range, not your code"}


SYNC_TRACES = [
    "a100_nccl_rank0.pt.trace.json.gz",
    "v100_ddp_ns_timestamps.pt.trace.json.gz",
    "mi250_rocm_train.pt.trace.json.gz",
    "triton_kernel.pt.trace.json.gz",
    "cuda_event_sync_multi_stream.pt.trace.json.gz",
]


@pytest.mark.parametrize("trace", SYNC_TRACES)
def test_profilers_final_sync_on_real_traces(trace):
    path = real_trace(trace)
    ev = x_events(path)
    host = [e for e in ev if e["cat"] in ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")]
    (sync,) = [e for e in host if e["name"] in ("cudaDeviceSynchronize", "hipDeviceSynchronize")]
    # under no op, and nothing on its thread starts after it
    assert not any(encloses(o, sync) for o in host)
    assert not any(o["tid"] == sync["tid"] and o["ts"] > sync["ts"] for o in host)
    assert notes_of(load(path), sync["name"]) == {
        "profiler-final-sync": "the profiler's own final synchronisation"
    }


def test_step_closing_syncs_and_overhead_constructed():
    p = load(CONSTRUCTED / "profiler_rows_cuda.constructed.pt.trace.json.gz")
    assert notes_of(p, "cudaDeviceSynchronize") == {
        "profiler-final-sync": "the profiler's own final synchronisation (in 1 of 4 calls)",
        "step-end-sync": "the step's closing sync (waits for its device work) (in 2 of 4 calls)",
    }
    hits = p.annotations
    (overhead,) = hits[hits["key"] == "Activity Buffer Request"].itertuples()
    assert (
        overhead.id == "profiler-overhead"
        and p.events["name"].iat[overhead.event] == "Activity Buffer Request"
    )


def test_no_sync_note_on_a_cpu_trace(cap):
    assert not {"profiler-final-sync", "step-end-sync"} & ids_anywhere(cap["linear"])


# --------------------------------------------------------------------------- #
# 9. the library's occupancy query before a GEMM/conv launch


@pytest.mark.parametrize(
    "trace", ["a100_nccl_rank0.pt.trace.json.gz", "gp100_sgd_step_user_annotation.pt.trace.json.gz"]
)
def test_occupancy_queries_on_real_traces(trace):
    path = real_trace(trace)
    ev = x_events(path)
    ops = [e for e in ev if e["cat"] == "cpu_op"]
    p = load(path)
    queries = [e for e in ev if e["name"].startswith("cudaOccupancyMaxActiveBlocksPerMultiprocessor")]
    assert queries
    for name in {q["name"] for q in queries}:
        mine = [q for q in queries if q["name"] == name]
        owners = {innermost_around(q, ops)["name"] for q in mine}
        assert owners <= {"aten::mm", "aten::addmm", "aten::cudnn_convolution", "aten::convolution_backward"}
        note = notes_of(p, name)["occupancy-query"]
        assert note.startswith("library sizing a GEMM/conv launch (under ")
        assert "calls)" not in note  # every call of it sat under a GEMM or convolution
        named = note.removeprefix("library sizing a GEMM/conv launch (under ").removesuffix(")").split(", ")
        assert set(named) <= owners


def test_occupancy_query_outside_an_op_is_counted_constructed():
    p = load(CONSTRUCTED / "profiler_rows_cuda.constructed.pt.trace.json.gz")
    assert notes_of(p, "cudaOccupancyMaxActiveBlocksPerMultiprocessor") == {
        "occupancy-query": "library sizing a GEMM/conv launch (under aten::mm) (in 2 of 3 calls)"
    }


def test_no_occupancy_note_without_queries():
    p = load(real_trace("mi250_rocm_train.pt.trace.json.gz"))
    assert "occupancy-query" not in ids_anywhere(p)


# --------------------------------------------------------------------------- #
# 4 (device side). SDPA GPU backends on constructed traces


@pytest.mark.parametrize(
    ("name", "backend"),
    [
        ("sdpa_flash_cuda", "flash"),
        ("sdpa_efficient_cuda", "memory-efficient"),
        ("sdpa_cudnn_cuda", "cuDNN"),
        ("sdpa_kernels_only_cuda", "flash"),
    ],
)
def test_sdpa_gpu_backends_constructed(name, backend):
    path = CONSTRUCTED / f"{name}.constructed.pt.trace.json.gz"
    with gzip.open(path, "rt") as fh:
        assert "constructed" in json.load(fh)
    p = load(path)
    assert notes_of(p, "aten::scaled_dot_product_attention") == {"sdpa-backend": f"SDPA backend: {backend}"}
    # fused backends: no score matrix to report
    assert "attention-scores" not in ids_anywhere(p)


def test_constructed_traces_are_what_the_script_writes(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_op_note_traces", CONSTRUCTED / "make_op_note_traces.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = {
        p.name: gzip.decompress(p.read_bytes()) for p in CONSTRUCTED.glob("*.constructed.pt.trace.json.gz")
    }
    monkeypatch.setattr(module, "HERE", tmp_path)
    written = {p.name: gzip.decompress(p.read_bytes()) for p in module.main()}
    assert written == committed
