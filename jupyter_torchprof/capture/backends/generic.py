"""Backends whose device work torch.profiler writes into the Kineto JSON itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import Backend


class CudaBackend(Backend):
    """NVIDIA CUDA and AMD ROCm (HIP speaks the CUDA API): CUPTI / roctracer through Kineto."""

    device_type = "cuda"
    label = "CUDA"
    activity = "CUDA"

    def synchronizer(self, torch: Any, index: int | None) -> Callable[[], None] | None:
        """See `Backend.synchronizer`."""
        if index is None:
            return torch.cuda.synchronize
        return lambda: torch.cuda.synchronize(index)


BACKEND = CudaBackend


class GenericBackend(Backend):
    """A device type without a module of its own (any PrivateUse1 backend, or an untraced one)."""

    def __init__(self, device_type: str, privateuse1: bool = False) -> None:
        self.device_type = device_type  # type: ignore[misc]
        self.label = device_type
        self.activity = "PrivateUse1" if privateuse1 else None  # type: ignore[misc]
