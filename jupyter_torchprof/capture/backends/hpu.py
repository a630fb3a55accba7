"""Intel Gaudi (HPU): the habana plugin's Kineto activity; device events in ``hpu_op``.

Gaudi runs lazily-built graphs: the first runs compile them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import Backend


class HpuBackend(Backend):
    """Intel Gaudi: traced through the HPU activity; three warm-up runs."""

    device_type = "hpu"
    label = "Intel Gaudi"
    activity = "HPU"
    min_warmup = 3

    def synchronizer(self, torch: Any, index: int | None) -> Callable[[], None] | None:
        """See `Backend.synchronizer`."""
        mod = getattr(torch, "hpu", None)
        return getattr(mod, "synchronize", None)


BACKEND = HpuBackend
