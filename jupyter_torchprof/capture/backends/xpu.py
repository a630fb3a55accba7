"""Intel XPU: XPUPTI through Kineto (``xpu_runtime`` launches, kernels on SYCL / Level Zero queues)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import Backend


class XpuBackend(Backend):
    """Intel XPU (XPUPTI through Kineto)."""

    device_type = "xpu"
    label = "Intel XPU"
    activity = "XPU"

    def synchronizer(self, torch: Any, index: int | None) -> Callable[[], None] | None:
        """See `Backend.synchronizer`."""
        if index is None:
            return torch.xpu.synchronize
        return lambda: torch.xpu.synchronize(index)


BACKEND = XpuBackend
