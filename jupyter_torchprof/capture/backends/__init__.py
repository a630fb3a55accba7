"""One small class per device backend: how torch.profiler must be set up for it.

A `Backend` says which `ProfilerActivity` traces the device, which
``experimental_config`` its profiler takes (and where that makes it write
its own device trace, inside the run's folder), how to wait for the device,
how many warm-up runs it needs, and what to report when its device trace
did not arrive. `backend_for` picks the one for a device type.

Adding a backend is one file in this package: a module that defines a
`Backend` subclass named ``BACKEND`` (found by `registry`, no list to edit).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from .base import Backend

__all__ = ["Backend", "backend_for", "registry"]


@cache
def registry() -> dict[str, type[Backend]]:
    """``{device type: Backend class}`` of every module in this package."""
    out: dict[str, type[Backend]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        cls = getattr(module, "BACKEND", None)
        if isinstance(cls, type) and issubclass(cls, Backend) and cls.device_type:
            out[cls.device_type] = cls
    return out


def backend_for(device_type: str, privateuse1_name: str | None = None) -> Backend:
    """The `Backend` of a device type.

    A type without a module of its own gets the generic one: traced through
    ``PrivateUse1`` when it is this process's PrivateUse1 backend, else not at all.
    """
    cls = registry().get(device_type)
    if cls is not None:
        return cls()
    from .generic import GenericBackend

    return GenericBackend(device_type, privateuse1=device_type == privateuse1_name)
