"""The category rule table (`analysis.categories`) on the kernel names of the real traces.

Each family the rule table names is found on the traces that hold such
kernels; what is left as "other kernel" holds none of the words a rule is
written for; and the per-kind categories agree with counts read straight
from the trace JSON.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from tracefiles import GPU_TRACES, raw_events, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis import categories as C

#: Words that name a family; a kernel left in "other kernel" must hold none.
#: Written apart from the rule table (plain words, no order), so a rule that
#: stops matching shows up here. ``fbgemm`` is a library, not a GEMM.
FAMILY_WORDS = re.compile(
    r"(?<!fb)gemm|gemv|conv|nccl|rccl|reduce|softmax|elementwise|triton_|copy|fill|layer_?norm|"
    r"batch_?norm|flash|fmha|attention|cublas|cudnn::bn|multi_tensor"
)


def _kernel_names(trace: str) -> Counter:
    return Counter(
        e["name"] for e in raw_events(real_trace(trace)) if e.get("ph") == "X" and e.get("cat") == "kernel"
    )


@pytest.fixture(scope="module")
def families() -> dict[str, Counter]:
    """Kernel calls per family, per real GPU trace."""
    out = {}
    for trace in GPU_TRACES:
        fam: Counter = Counter()
        for name, calls in _kernel_names(trace).items():
            fam[C.kernel_family(name)] += calls
        out[trace] = fam
    return out


@pytest.mark.parametrize(
    ("trace", "family"),
    [
        ("a100_nccl_rank0.pt.trace.json.gz", C.GEMM),
        ("a100_nccl_rank0.pt.trace.json.gz", C.CONV),
        ("a100_nccl_rank0.pt.trace.json.gz", C.NORM),
        ("a100_nccl_rank0.pt.trace.json.gz", C.REDUCTION),
        ("a100_nccl_rank0.pt.trace.json.gz", C.ELEMENTWISE),
        ("a100_nccl_rank0.pt.trace.json.gz", C.COMMUNICATION),
        ("mi250_rocm_train.pt.trace.json.gz", C.GEMM),  # ROCm Tensile Cijk_...
        ("gp100_sgd_step_user_annotation.pt.trace.json.gz", C.GEMM),  # cuBLAS gemv / gemmk1
        ("triton_kernel.pt.trace.json.gz", C.TRITON),
        ("v100_ddp_ns_timestamps.pt.trace.json.gz", C.NORM),
    ],
)
def test_each_family_is_found_where_the_trace_has_it(families, trace, family):
    assert families[trace][family] > 0, families[trace]


def test_every_kernel_family_but_attention_occurs_in_the_real_traces(families):
    seen = set()
    for fam in families.values():
        seen |= {f for f, n in fam.items() if n}
    # No real trace here runs attention kernels: those are checked on names below.
    kernel_families = {C.GEMM, C.CONV, C.NORM, C.REDUCTION, C.ELEMENTWISE, C.TRITON, C.COMMUNICATION}
    assert kernel_families <= seen, kernel_families - seen


def test_nothing_left_in_other_that_a_rule_should_catch():
    other = set()
    for trace in GPU_TRACES:
        other |= {n for n in _kernel_names(trace) if C.kernel_family(n) == C.OTHER_KERNEL}
    caught = sorted(n[:120] for n in other if FAMILY_WORDS.search(n.lower()))
    assert caught == []


@pytest.mark.parametrize(
    ("name", "family"),
    [
        # torch's SDPA backends and the FlashAttention / xFormers kernels.
        (
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4>, true>(Flash_fwd_params)",
            C.ATTENTION,
        ),
        (
            "fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t>::Params)",
            C.ATTENTION,
        ),
        (
            "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_3_64x64x64_4x1x1_kernel0_0",
            C.ATTENTION,
        ),
        (
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
            C.GEMM,
        ),
        ("triton_red_fused__log_softmax_nll_loss_forward_2", C.TRITON),
        (
            "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*)",
            C.NORM,
        ),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", C.COMMUNICATION),
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>(float*, float const*, int)",
            C.REDUCTION,
        ),
    ],
)
def test_names_outside_the_real_traces(name, family):
    assert C.kernel_family(name) == family


def test_event_categories_agree_with_the_trace_json():
    """Per-kind categories counted against the raw events (what the timeline colours by)."""
    trace = "a100_nccl_rank0.pt.trace.json.gz"
    raw = Counter(e.get("cat") for e in raw_events(real_trace(trace)) if e.get("ph") == "X")
    profile = load(real_trace(trace))
    got = Counter(C.CATEGORIES[i] for i in C.event_categories(profile.events).tolist())
    assert got[C.MEMCPY] == raw["gpu_memcpy"]
    assert got[C.MEMSET] == raw["gpu_memset"]
    assert got[C.RUNTIME] == raw["cuda_runtime"]
    assert got[C.USER_RANGE] == raw["user_annotation"] + raw["gpu_user_annotation"]
    kernels = sum(got[f] for f in C.CATEGORIES[: C.CATEGORIES.index(C.COMMUNICATION) + 1])
    assert kernels == raw["kernel"]
    assert got[C.COMMUNICATION] == sum(n for k, n in _kernel_names(trace).items() if "nccl" in k.lower())
