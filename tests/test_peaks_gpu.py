"""% of peak on a live accelerator (marked ``gpu``: skipped without one; ``python -m pytest -m gpu``).

A bf16 GEMM, a half-precision SDPA and a convolution captured with shapes:
our estimates equal the hand counts (and torch's FLOPs on the GEMM), the
kernels' shares add up to the ops' estimates, the device is matched to its
row of the peak table (or, when the table lacks it, one note says so), and a
large GEMM's % of peak is above 0 and at most 100 (a peak too low, or the
wrong precision's, would put it above).
"""

from __future__ import annotations

import pytest
import torch

from jupyter_torchprof import load
from jupyter_torchprof.analysis import hardware

pytestmark = pytest.mark.gpu

N = 4096
B, H, L, E = 4, 16, 1024, 64


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from torch.profiler import ProfilerActivity, profile

    dev = torch.accelerator.current_accelerator()
    a = torch.randn(N, N, device=dev, dtype=torch.bfloat16)
    b = torch.randn(N, N, device=dev, dtype=torch.bfloat16)
    q, k, v = (torch.randn(B, H, L, E, device=dev, dtype=torch.float16) for _ in range(3))
    x, w = torch.randn(8, 64, 56, 56, device=dev), torch.randn(128, 64, 3, 3, device=dev)

    def step():
        torch.mm(a, b)
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
        torch.nn.functional.conv2d(x, w, padding=1)

    for _ in range(3):
        step()
    torch.accelerator.synchronize()
    path = tmp_path_factory.mktemp("gpu") / "t.json"
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True, with_flops=True
    ) as prof:
        for _ in range(3):
            step()
        torch.accelerator.synchronize()
    prof.export_chrome_trace(str(path))
    theirs = {e.key: e.flops for e in prof.key_averages() if e.flops}
    return load(str(path)), theirs


def test_estimates_on_device(live):
    profile, theirs = live
    ops = profile.op_table(flops=True).set_index("name")
    assert ops.loc["aten::mm", "est_flops"] == 3 * 2 * N**3 == theirs["aten::mm"]
    assert ops.loc["aten::scaled_dot_product_attention", "est_flops"] == pytest.approx(
        3 * 4 * B * H * L * L * E, rel=0.01
    )
    assert (
        ops.loc["aten::conv2d", "est_flops"] == 3 * 2 * 8 * 128 * 56 * 56 * 64 * 9 == theirs["aten::conv2d"]
    )
    # every estimated FLOP lands on some kernel (kernels' shares add up to the ops')
    kernels = profile.kernels
    assert kernels["est_flops"].sum() == pytest.approx(ops["est_flops"].sum(), rel=1e-9)


def test_pct_of_peak_on_device(live):
    profile, _ = live
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else ""
    known = hardware.match_device({"name": name, **(profile.meta.device_properties or [{}])[0]})
    ops = profile.op_table(flops=True).set_index("name")
    if known is None:
        assert ops["peak_pct"].isna().all()
        assert [n for n in profile.notes if n.startswith("% of peak")]
        return
    assert profile.peaks == known
    row = ops.loc["aten::mm"]
    assert row["peak_precision"].startswith("bf16")
    assert 0 < row["peak_pct"] <= 100, row["peak_pct"]
