"""Meta MTIA: its Kineto activity (``mtia_runtime`` launches, ``mtia_ccp_events`` device work)."""

from __future__ import annotations

from .base import Backend


class MtiaBackend(Backend):
    """Meta MTIA: traced through the MTIA activity."""

    device_type = "mtia"
    label = "MTIA"
    activity = "MTIA"


BACKEND = MtiaBackend
