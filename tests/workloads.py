"""Varied CPU workloads for checking our tables against torch's ``key_averages()``.

Each workload is a function returning a no-argument ``step`` callable; the
step is what one ``ProfilerStep`` runs. They are chosen for the call-tree
shapes that torch's aggregation rules react to, not for realism: lone
same-name children (``aten::sum`` → ``aten::sum``), convolutions (FLOPs on
``aten::conv2d`` only), optimizers that loop or batch over parameters,
in-place ops, nested same-name ``record_function`` ranges, recurrent layers,
tensor-list arguments, double backward and a Python loop of tiny ops.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.profiler import record_function

Step = Callable[[], None]


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))


def mlp_sum() -> Step:
    """MLP trained on ``.sum()`` (``aten::sum`` wraps a lone ``aten::sum``)."""
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32)

    def step() -> None:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()

    return step


def mlp_mean() -> Step:
    """MLP trained on ``.mean()`` with SGD momentum."""
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(16, 32)

    def step() -> None:
        opt.zero_grad()
        model(x).mean().backward()
        opt.step()

    return step


def cnn_batchnorm() -> Step:
    """Convolutions (with stride, padding, groups) and BatchNorm, cross-entropy loss."""
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 3, 16, 16)
    target = torch.randint(0, 10, (4,))

    def step() -> None:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), target).backward()
        opt.step()

    return step


def transformer_sdpa() -> Step:
    """One Transformer encoder layer (scaled dot-product attention inside)."""
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
    opt = torch.optim.SGD(layer.parameters(), lr=0.01)
    x = torch.randn(2, 8, 32)

    def step() -> None:
        opt.zero_grad()
        out = layer(x)
        q = k = v = out.view(2, 8, 4, 8).transpose(1, 2)
        nn.functional.scaled_dot_product_attention(q, k, v).mean().backward()
        opt.step()

    return step


def lstm_gru() -> Step:
    """An LSTM feeding a GRU."""
    lstm = nn.LSTM(8, 16, batch_first=True)
    gru = nn.GRU(16, 8, batch_first=True)
    params = list(lstm.parameters()) + list(gru.parameters())
    opt = torch.optim.SGD(params, lr=0.01)
    x = torch.randn(2, 5, 8)

    def step() -> None:
        opt.zero_grad()
        h, _ = lstm(x)
        y, _ = gru(h)
        y.pow(2).mean().backward()
        opt.step()

    return step


def embeddings() -> Step:
    """Embedding and EmbeddingBag (mean mode) with offsets."""
    emb = nn.Embedding(100, 16)
    bag = nn.EmbeddingBag(100, 16, mode="mean")
    opt = torch.optim.SGD(list(emb.parameters()) + list(bag.parameters()), lr=0.1)
    idx = torch.randint(0, 100, (4, 6))
    flat = torch.randint(0, 100, (12,))
    offsets = torch.tensor([0, 3, 7])

    def step() -> None:
        opt.zero_grad()
        (emb(idx).sum() + bag(flat, offsets).sum()).backward()
        opt.step()

    return step


def adam_foreach() -> Step:
    """Adam with ``foreach=True`` (``_foreach_*`` list ops; ``aten::div_`` wraps ``aten::div_``)."""
    model = _mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    x = torch.randn(8, 32)

    def step() -> None:
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    return step


def adamw_for_loop() -> Step:
    """AdamW with ``foreach=False``: a Python loop over parameters."""
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False, weight_decay=0.01)
    x = torch.randn(8, 32)

    def step() -> None:
        opt.zero_grad()
        model(x).abs().sum().backward()
        opt.step()

    return step


def inplace_ops() -> Step:
    """In-place arithmetic, scalar ``add_``/``sub_``/``mul``, sort and ``torch.cat`` of a list."""
    a = torch.randn(64, 64)
    b = torch.randn(64, 64)

    def step() -> None:
        c = a.clone()
        c.add_(1.0).sub_(0.5).mul_(2.0).div_(3.0)
        c.add_(b, alpha=0.1)
        d = c * 2
        _ = torch.sort(d, dim=1)
        _ = torch.cat([c, d, b], dim=0)
        _ = torch.stack([c, d])

    return step


def no_grad_inference() -> Step:
    """Inference under ``torch.no_grad()``: GEMMs, softmax, argmax."""
    model = nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 16))
    x = torch.randn(32, 32)

    def step() -> None:
        with torch.no_grad():
            out = model(x).softmax(dim=-1)
            _ = out.argmax(dim=-1)
            _ = torch.bmm(out.view(4, 8, 16), out.view(4, 16, 8))

    return step


def nested_record_function() -> Step:
    """``record_function("block")`` inside ``record_function("block")`` and siblings of one name."""
    a = torch.randn(16, 16)

    def step() -> None:
        with record_function("block"):
            with record_function("block"):
                _ = a @ a
        with record_function("outer"):
            with record_function("inner"):
                _ = a + a
            with record_function("inner"):
                _ = a * a

    return step


def compiled_aot_eager() -> Step:
    """A function compiled with ``torch.compile(backend="aot_eager")``."""

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.relu(x @ x.T).sum(dim=0).softmax(dim=0)

    compiled = torch.compile(f, backend="aot_eager")
    x = torch.randn(16, 16)
    compiled(x)  # compile outside the profiler

    def step() -> None:
        compiled(x)

    return step


def tiny_ops_loop() -> Step:
    """A Python loop of many tiny ops (the overhead-bound shape)."""
    x = torch.zeros(4)

    def step() -> None:
        y = x
        for _ in range(50):
            y = y + 1
            y = y * 0.5
        _ = y.sum().item()

    return step


def double_backward() -> Step:
    """A gradient penalty: ``autograd.grad(create_graph=True)`` then backward through it."""
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    x = torch.randn(4, 8, requires_grad=True)

    def step() -> None:
        (g,) = torch.autograd.grad(model(x).sum(), x, create_graph=True)
        g.pow(2).sum().backward()
        model.zero_grad(set_to_none=True)
        x.grad = None

    return step


WORKLOADS: dict[str, Callable[[], Step]] = {
    f.__name__: f
    for f in (
        mlp_sum,
        mlp_mean,
        cnn_batchnorm,
        transformer_sdpa,
        lstm_gru,
        embeddings,
        adam_foreach,
        adamw_for_loop,
        inplace_ops,
        no_grad_inference,
        nested_record_function,
        compiled_aot_eager,
        tiny_ops_loop,
        double_backward,
    )
}
