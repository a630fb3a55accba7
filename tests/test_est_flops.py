"""Our FLOP estimates (issue 24 item 10): each formula against a hand count, each call chain counted once,
and equal to torch's own FLOPs (key_averages) wherever torch counts them, on varied captured workloads."""

from __future__ import annotations

import pytest

from jupyter_torchprof.analysis.flops import estimate_call
from tests.workloads import WORKLOADS

F = ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar"]


def flops(name, dims, concrete=(), types=None):
    est = estimate_call(name, [list(d) for d in dims], list(concrete), types or ["float"] * len(dims))
    return None if est is None else est.flops


# --------------------------------------------------------------------------- #
# formulas against hand counts (the arithmetic is written out)


def test_conv1d_grouped_strided_dilated():
    # x [2, 4, 20], w [6, 2, 3] (groups 2: 4 in / 2 = 2 per group), stride 2, padding 1, dilation 2:
    # L_out = (20 + 2·1 − 2·(3 − 1) − 1) // 2 + 1 = 17 // 2 + 1 = 9
    # FLOPs = 2 · N · C_out · L_out · (C_in / g) · k = 2 · 2 · 6 · 9 · 2 · 3 = 1296
    got = flops(
        "aten::conv1d", [[2, 4, 20], [6, 2, 3], [], [], [], [], []], ["", "", "", "[2]", "[1]", "[2]", "2"]
    )
    assert got == 2 * 2 * 6 * 9 * 2 * 3 == 1296


def test_conv2d_grouped_strided():
    # x [1, 8, 10, 12], w [16, 2, 3, 3] (groups 4), stride (2, 3), padding (1, 0), dilation 1:
    # H_out = (10 + 2 − 2 − 1) // 2 + 1 = 5, W_out = (12 + 0 − 2 − 1) // 3 + 1 = 4
    # FLOPs = 2 · 1 · 16 · 5 · 4 · 2 · 3 · 3 = 11520
    got = flops(
        "aten::conv2d",
        [[1, 8, 10, 12], [16, 2, 3, 3]] + [[]] * 5,
        ["", "", "", "[2, 3]", "[1, 0]", "[1, 1]", "4"],
    )
    assert got == 2 * 1 * 16 * 5 * 4 * 2 * 3 * 3 == 11520


def test_conv3d_strided():
    # x [1, 2, 5, 6, 7], w [4, 2, 2, 2, 2], stride (1, 2, 1): out = (4, 3, 6)
    # FLOPs = 2 · 1 · 4 · (4·3·6) · 2 · (2·2·2) = 9216
    got = flops(
        "aten::conv3d", [[1, 2, 5, 6, 7], [4, 2, 2, 2, 2]] + [[]] * 5,
        ["", "", "", "[1, 2, 1]", "[0, 0, 0]", "[1, 1, 1]", "1"],
    )  # fmt: skip
    assert got == 2 * 1 * 4 * (4 * 3 * 6) * 2 * 8 == 9216


@pytest.mark.parametrize(
    ("name", "x", "w", "groups", "hand"),
    [
        # conv_transpose1d: x [2, 4, 9], w [4, 3, 3] (C_in 4, C_out/g 3, k 3): 2 · 2 · 9 · 4 · 3 · 3 = 1296
        ("aten::conv_transpose1d", [2, 4, 9], [4, 3, 3], 1, 2 * 2 * 9 * 4 * 3 * 3),
        # conv_transpose2d: x [2, 4, 9, 9], w [4, 3, 3, 3]: 2 · 2 · 81 · 4 · 3 · 9 = 34992
        ("aten::conv_transpose2d", [2, 4, 9, 9], [4, 3, 3, 3], 1, 2 * 2 * 81 * 4 * 3 * 9),
        # grouped conv_transpose3d: x [1, 4, 3, 3, 3], w [4, 1, 2, 2, 2] (groups 2): 2 · 1 · 27 · 4 · 1 · 8 = 1728
        ("aten::conv_transpose3d", [1, 4, 3, 3, 3], [4, 1, 2, 2, 2], 2, 2 * 1 * 27 * 4 * 1 * 8),
    ],
)
def test_transposed_conv_costs_its_forward_conv(name, x, w, groups, hand):
    rank = len(w) - 2
    ones = str([1] * rank)
    got = flops(
        name, [x, w] + [[]] * 6, ["", "", "", str([2] * rank), ones, str([0] * rank), str(groups), ones]
    )
    assert got == hand
    # The same work as the forward convolution it is the gradient of: that conv maps the transposed
    # conv's output back to its input (C_out·g channels → C_in), stride 2, padding 1.
    out = [(s - 1) * 2 - 2 + (k - 1) + 1 for s, k in zip(x[2:], w[2:], strict=True)]
    forward = flops(
        f"aten::conv{rank}d", [[x[0], w[1] * groups, *out], w] + [[]] * 5,
        ["", "", "", str([2] * rank), ones, ones, str(groups)],
    )  # fmt: skip
    assert forward == hand


def test_gemms():
    # mm [32, 64] x [64, 16]: 2 · 32 · 64 · 16 = 65536; addmm adds the bias without counting it
    assert flops("aten::mm", [[32, 64], [64, 16]]) == 2 * 32 * 64 * 16 == 65536
    assert flops("aten::addmm", [[16], [32, 64], [64, 16], [], []]) == 65536
    # bmm [4, 5, 6] x [4, 6, 7]: 2 · 4 · 5 · 6 · 7 = 1680; baddbmm the same
    assert flops("aten::bmm", [[4, 5, 6], [4, 6, 7]]) == 1680
    assert flops("aten::baddbmm", [[4, 5, 7], [4, 5, 6], [4, 6, 7], [], []]) == 1680
    # linear x [3, 4, 8], W [5, 8]: 2 · 12 · 8 · 5 = 960
    assert flops("aten::linear", [[3, 4, 8], [5, 8], [5]]) == 960


@pytest.mark.parametrize(
    ("b", "h", "seq_l", "seq_s", "e"), [(2, 3, 16, 12, 8), (4, 16, 1024, 1024, 64), (1, 8, 77, 300, 40)]
)
def test_sdpa_is_4_b_h_l_s_e_within_1_percent(b, h, seq_l, seq_s, e):
    hand = 4 * b * h * seq_l * seq_s * e
    for op in ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_efficient_attention"):
        got = flops(op, [[b, h, seq_l, e], [b, h, seq_s, e], [b, h, seq_s, e]])
        assert got == pytest.approx(hand, rel=0.01)


def test_unrecorded_arguments_give_no_estimate_not_a_wrong_one():
    # padding="same" is recorded as "" (a string argument): no estimate on conv1d, the convolution below holds it
    assert (
        flops("aten::conv1d", [[2, 4, 20], [6, 4, 3]] + [[]] * 5, ["", "", "", "[1]", "", "[1]", "1"]) is None
    )
    assert flops("aten::mm", [[2, 3]]) is None
    assert flops("aten::relu", [[2, 3]]) is None


# --------------------------------------------------------------------------- #
# captured: where the FLOPs sit, each chain once


def _cells():
    import torch
    import torch.nn.functional as fn

    torch.manual_seed(0)
    x1, w1 = torch.randn(2, 4, 20), torch.randn(6, 2, 3)
    x2, w2 = torch.randn(2, 4, 9, 9), torch.randn(4, 3, 3, 3)
    q, k, v = torch.randn(2, 3, 16, 8), torch.randn(2, 3, 12, 8), torch.randn(2, 3, 12, 8)
    a, b = torch.randn(4, 5, 6), torch.randn(4, 6, 7)
    lin = torch.nn.Linear(8, 5)
    xl = torch.randn(3, 4, 8)

    def step():
        fn.conv1d(x1, w1, stride=2, padding=1, dilation=2, groups=2)  # 1296
        fn.conv_transpose2d(x2, w2, stride=2, padding=1, output_padding=1)  # 34992
        fn.scaled_dot_product_attention(q, k, v)  # 4·2·3·16·12·8 = 36864
        torch.einsum("bij,bjk->bik", a, b)  # bmm leaf: 1680
        torch.matmul(a, b)  # bmm leaf: 1680
        lin(xl)  # addmm below linear: 960

    return step


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    from torch.profiler import ProfilerActivity, profile

    from jupyter_torchprof import load

    step = _cells()
    step()
    path = tmp_path_factory.mktemp("est") / "t.json"
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        step()
    prof.export_chrome_trace(str(path))
    return load(str(path))


def test_each_chain_counted_once_where_documented(captured):
    t = captured.op_table(flops=True).set_index("name")
    est = t["est_flops"]
    assert est["aten::conv1d"] == 1296 and est["aten::conv_transpose2d"] == 34992
    assert est["aten::convolution"] == 0 and est["aten::_convolution"] == 0
    assert est["aten::scaled_dot_product_attention"] == 36864
    assert est["aten::_scaled_dot_product_flash_attention_for_cpu"] == 0
    assert est["aten::bmm"] == 2 * 1680 and est["aten::einsum"] == 0 and est["aten::matmul"] == 0
    assert est["aten::addmm"] == 960 and est["aten::linear"] == 0
    assert est.sum() == 1296 + 34992 + 36864 + 2 * 1680 + 960
    # torch counts none of the convolutions or the attention here
    assert t.loc["aten::conv1d", "flops"] == 0 and t.loc["aten::scaled_dot_product_attention", "flops"] == 0


# --------------------------------------------------------------------------- #
# equal to torch's own FLOPs where torch counts, on varied workloads

TORCH_COUNTS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::conv2d"}


@pytest.mark.parametrize(
    "name", ["mlp_sum", "cnn_batchnorm", "transformer_sdpa", "no_grad_inference", "double_backward"]
)
def test_est_flops_equal_key_averages_where_torch_counts(tmp_path, name):
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from jupyter_torchprof import load

    torch.manual_seed(0)
    step = WORKLOADS[name]()
    step()
    got = {}

    def ready(prof):
        got["theirs"] = {e.key: e.flops for e in prof.key_averages() if e.flops and not e.is_user_annotation}
        prof.export_chrome_trace(str(tmp_path / "t.json"))

    with profile(
        activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True,
        schedule=schedule(wait=0, warmup=1, active=2), on_trace_ready=ready,
    ) as prof:  # fmt: skip
        for _ in range(3):
            step()
            prof.step()
    table = load(str(tmp_path / "t.json")).op_table(flops=True)
    table = table[table["kind"] == "cpu_op"].set_index("name")
    checked = [k for k in got["theirs"] if k in TORCH_COUNTS]
    assert checked, "the workload has ops torch counts"
    for key in checked:
        assert table.loc[key, "est_flops"] == pytest.approx(got["theirs"][key], rel=1e-9), key
