"""One profiler range per ``nn.Module`` call, named after the module.

torch.profiler's ``with_modules`` only works for TorchScript. For eager models
we register global forward hooks for the duration of the profiled steps; each
module call becomes a ``record_function`` range called
``nn.Module: <path> (<Class>)`` where ``<path>`` is the attribute path from a
variable of the user's namespace (``model.layers.0.attn``) when we know it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..analysis.modules import MODULE_PREFIX  # the prefix analysis finds module ranges by


def module_paths(namespace: dict[str, Any], limit: int = 50_000) -> dict[int, str]:
    """Map ``id(module)`` → dotted path for the modules reachable from a namespace."""
    import torch

    paths: dict[int, str] = {}
    for var, value in list(namespace.items()):
        if var.startswith("_") or not isinstance(value, torch.nn.Module):
            continue
        for sub_name, sub in value.named_modules():
            if len(paths) >= limit:
                return paths
            paths.setdefault(id(sub), f"{var}.{sub_name}" if sub_name else var)
    return paths


def range_name(module: Any, paths: dict[int, str]) -> str:
    """The range label for one module call."""
    cls = type(module).__name__
    path = paths.get(id(module))
    return f"{MODULE_PREFIX}{path} ({cls})" if path else f"{MODULE_PREFIX}{cls}"


@contextmanager
def module_annotations(enabled: bool, paths: dict[int, str] | None = None) -> Iterator[None]:
    """While active, every ``nn.Module`` forward call is a profiler range."""
    if not enabled:
        yield
        return
    import torch
    from torch.autograd.profiler import record_function

    paths = paths or {}
    open_ranges: list[Any] = []

    def pre_hook(module: Any, args: Any) -> None:
        rf = record_function(range_name(module, paths))
        rf.__enter__()
        open_ranges.append(rf)

    def post_hook(module: Any, args: Any, output: Any) -> None:
        if open_ranges:
            open_ranges.pop().__exit__(None, None, None)

    hooks = torch.nn.modules.module
    pre = hooks.register_module_forward_pre_hook(pre_hook)
    post = hooks.register_module_forward_hook(post_hook)
    try:
        yield
    finally:
        pre.remove()
        post.remove()
        # A forward that raised never reached its post-hook: close its range.
        while open_ranges:
            open_ranges.pop().__exit__(None, None, None)
