"""The precision rule's word check before its regexes against the regexes alone.

`precision.classify` skips a pattern's search when an ASCII name holds none
of the words every match of it holds (issue 25: the searches were most of
the rule's time). Each test classifies names with the searches alone and
asks for the same answer: every kernel name of every real trace, made-up
names in mixed case, and non-ASCII names (always searched).
"""

from __future__ import annotations

import functools

import pytest
from tracefiles import GPU_TRACES, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis.findings import precision as P


def _plain(name: str) -> str | None:
    if P.TF32.search(name):
        return "tf32"
    if P.FP32_SIMT.search(name) or P.ROCM_FP32.search(name):
        return "fp32"
    return None


@functools.cache
def _names(trace):
    return load(str(real_trace(trace))).kernels["name"].astype(str).tolist()


@pytest.mark.parametrize("trace", GPU_TRACES)
def test_classify_equals_the_searches_on_real_kernels(trace):
    names = _names(trace)
    for n in names + [n.upper() for n in names] + [n.swapcase() for n in names]:
        assert P.classify(n) == _plain(n), n


MADE_UP = [
    "volta_SGEMM_128x64_nn", "Cudnn_Infer_SCUDNN_x", "void cudnn::detail::DGRAD2d_engine<float, 1>",
    "wgrad_alg0_engine<float>", "WINOGRAD_nonfused<float>", "xMMa_gemm_F32F32_f32f32_F32_x",
    "ampere_TF32_s1688gemm", "cutlass_TensorOp_S1688gemm", "sm80_xmma_gemm_s16816", "Cijk_Alik_Bljk_SB_MT64_MI16x16x1",
    "implicit_convolve_sgemm", "Explicit_Convolve_S", "aten::add", "", "xmma_gemm_f16f16",
    "ſgemm_kernel", "tf32_\u212a", "volta_\u017fcudnn_128",
]  # fmt: skip


@pytest.mark.parametrize("name", MADE_UP)
def test_classify_equals_the_searches_on_made_up_names(name):
    assert P.classify(name) == _plain(name)
