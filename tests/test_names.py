"""Readable kernel names: real names from the shared traces and from the libraries."""

from __future__ import annotations

import pytest
from tracefiles import GPU_TRACES, raw_events, real_trace

from jupyter_torchprof.analysis.names import describe_kernel

#: The families of `analysis.categories` (its one rule table), and Inductor's C++ kernels.
FAMILIES = {
    "GEMM", "convolution", "communication", "elementwise", "reduction", "normalization",
    "attention", "Triton fused", "other kernel", "memcpy", "memset", "inductor cpp",
}  # fmt: skip

SIGMOID = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)"
    "::{lambda()#2}::operator()() const::{lambda()#3}::operator()() const::{lambda(float)#1}, "
    "at::detail::Array<char*, 2> >(int, at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}"
    "::operator()() const::{lambda()#3}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)"
)
MUL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, "
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
    "at::detail::Array<char*, 3>)"
)
SUM = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
    "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
    "unsigned int, float, 4>)"
)
CUTLASS = (
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4>"
    "(cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4::Params)"
)


def test_lambda_kernels_read_as_their_op():
    d = describe_kernel(SIGMOID)
    assert d.short == "vectorized_elementwise_kernel<sigmoid_kernel_cuda>"
    assert d.op == "sigmoid_kernel_cuda"
    assert d.family == "elementwise"
    for noise in ("lambda", "operator()", "at::", "Array"):
        assert noise not in d.short


def test_functor_kernels_name_the_innermost_functor():
    assert describe_kernel(MUL).short == "vectorized_elementwise_kernel<MulFunctor>"
    d = describe_kernel(SUM)
    assert d.short == "reduce_kernel<sum_functor>"
    assert d.family == "reduction"


@pytest.mark.parametrize(
    ("name", "kind", "ops"),
    [
        ("triton_poi_fused_gelu_mul_0", "pointwise", ("gelu", "mul")),
        ("triton_red_fused__softmax_1", "reduction", ("softmax",)),
        ("triton_per_fused_add_mean_pow_3", "persistent reduction", ("add", "mean", "pow")),
        ("triton_poi_fused_add_cos_sin_0", "pointwise", ("add", "cos", "sin")),
    ],
)
def test_triton_kind_and_fused_ops(name, kind, ops):
    d = describe_kernel(name)
    assert d.family == f"triton {kind}"
    assert d.fused_ops == ops


@pytest.mark.parametrize(
    ("name", "short", "precision", "tile", "layout", "arch"),
    [
        ("ampere_sgemm_128x64_nn", "sgemm 128x64 nn", "fp32", "128x64", "nn", "sm80"),
        ("volta_sgemm_32x32_sliced1x4_tn", "sgemm 32x32 sliced1x4 tn", "fp32", "32x32", "tn", "sm70"),
        (
            "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_64x3_nt",
            None,
            "fp16",
            "128x128",
            "nt",
            "sm80",
        ),
        (CUTLASS, "cutlass tensorop s1688gemm 256x64 16x4 nt", "tf32", "256x64", "nt", "sm80"),
        (
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_kernel",
            None,
            "bf16",
            "128x128x64",
            "tn",
            "sm90",
        ),
    ],
)
def test_gemm_tile_and_layout(name, short, precision, tile, layout, arch):
    d = describe_kernel(name)
    assert d.family == "GEMM"
    if short is not None:
        assert d.short == short
    assert (d.precision, d.tile, d.layout, d.arch) == (precision, tile, layout, arch)


def test_rocm_tensile_gemm():
    name = (
        "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_"
        "CADS0_EPS0_GRVWA2_GRVWB2_GSUAMB_ISA90a_IU1_K1_LBSPPA128"
    )
    d = describe_kernel(name)
    assert d.family == "GEMM"
    assert d.tile == "64x16x32"
    assert d.precision == "fp32"
    assert len(d.short) < 40


def test_convolutions_and_lookalikes():
    assert describe_kernel("cudnn_infer_volta_scudnn_128x64_relu_xregs_large_nn_v1").family == "convolution"
    mangled = (
        "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22"
        "ImplicitGemmMultistageINS_4gemm9GemmShapeILi128ELi128ELi32EEE"
    )
    d = describe_kernel(mangled)
    assert d.family == "convolution"
    assert "ImplicitGemmConvolution" in d.short and not d.short[0].isdigit()
    # fbgemm's namespace is not a GEMM
    assert (
        describe_kernel("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*)").family
        != "GEMM"
    )


def test_communication_and_copies():
    d = describe_kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)")
    assert d.family == "communication"
    assert d.short == "ncclKernel_AllReduce_RING_LL_Sum_float"
    assert describe_kernel("Memcpy HtoD (Pageable -> Device)").short == "Memcpy HtoD (Pageable -> Device)"
    assert describe_kernel("Memset (Device)").family == "memset"


def _kernel_names():
    names = set()
    for name in GPU_TRACES:
        for e in raw_events(real_trace(name)):
            if e.get("ph") == "X" and e.get("cat") == "kernel":
                names.add(e["name"])
    return sorted(names)


def test_every_real_kernel_name_reads_well():
    names = _kernel_names()
    assert len(names) > 100
    for n in names:
        d = describe_kernel(n)
        assert 0 < len(d.short) <= 80, n
        assert d.family in FAMILIES or d.family.startswith("triton "), (n, d.family)
        for noise in ("(anonymous namespace)", "{lambda", "operator()", "void "):
            assert noise not in d.short, (n, d.short)
        if (
            len(n) <= 80
            and "(" not in n
            and "<" not in n
            and "::" not in n
            and not n.startswith(("_Z", "Cijk"))
        ):
            # short library names stay recognisable
            assert d.short.split()[0] in n or d.short == n
