"""Which device a cell runs on, how to profile it, how to wait for it.

This module and `capture.backends` (one small class per backend: activity,
profiler config, synchronisation, warm-up, device-trace checks) are the only
code that knows device backends apart. Everything decided is recorded in a
`DeviceTarget` that the runner uses and the Profile carries (for the notes a
user reads when something cannot be measured).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import DeviceError
from .backends import Backend, backend_for


@dataclass
class DeviceTarget:
    """A resolved device and how to profile it.

    Attributes
    ----------
    spec
        Normalised device string (``cuda:0``, ``xpu``, ``cpu`` ...).
    kind
        Backend: ``cuda``, ``rocm`` (CUDA API on AMD), ``xpu``, ``mtia``,
        ``hpu``, ``mps``, the PrivateUse1 name (``tpu``, ``neuron`` ...) or ``cpu``.
    index
        Device index, or None for the current one.
    label
        Readable name (``NVIDIA H200``) when the backend reports it.
    activities
        `torch.profiler.ProfilerActivity` members to record.
    traced
        Whether device-side work will appear in the trace.
    notes
        What the user must be told (e.g. MPS kernels are not traced).
    backend
        The backend's profiling recipe (`capture.backends.Backend`): its
        ``experimental_config``, trace export and device-trace checks.
    min_warmup
        Warm-up runs the backend needs at least (compile-heavy backends: 3; 0 = no advice).
    """

    spec: str
    kind: str
    index: int | None = None
    label: str = ""
    activities: list[Any] = field(default_factory=list)
    traced: bool = False
    notes: list[str] = field(default_factory=list)
    backend: Backend | None = None
    min_warmup: int = 0
    _sync: Callable[[], None] | None = None

    def synchronize(self) -> None:
        """Wait until the device has finished all queued work."""
        if self._sync is not None:
            self._sync()


def _privateuse1_name(torch: Any) -> str | None:
    try:
        name = torch._C._get_privateuse1_backend_name()
    except Exception:  # pragma: no cover - very old torch
        return None
    return None if name == "privateuseone" else name


def _current_accelerator(torch: Any) -> str | None:
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "current_accelerator"):
        try:
            if acc.is_available():
                dev = acc.current_accelerator()
                return dev.type if dev is not None else None
        except Exception:
            return None
        return None
    # torch < 2.6: probe the common backends.
    for name in ("cuda", "xpu", "mtia", "hpu", "mps"):
        mod = getattr(torch, name, None)
        try:
            if mod is not None and mod.is_available():
                return name
        except Exception:
            continue
    return None


def _backend_module(torch: Any, kind: str) -> Any:
    return getattr(torch, kind, None)


def _is_available(torch: Any, kind: str) -> bool:
    if kind == "cpu":
        return True
    mod = _backend_module(torch, kind)
    if mod is not None and hasattr(mod, "is_available"):
        try:
            return bool(mod.is_available())
        except Exception:
            return False
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "current_accelerator"):
        try:
            cur = acc.current_accelerator()
            return acc.is_available() and cur is not None and cur.type == kind
        except Exception:
            return False
    return False


def resolve_device(spec: str | None = "auto") -> DeviceTarget:
    """Resolve ``--device`` into a `DeviceTarget`.

    ``auto`` picks ``torch.accelerator``'s current device, or the CPU when
    there is none. An explicit device that does not exist raises
    `DeviceError` with a one-line reason.
    """
    import torch
    from torch.profiler import ProfilerActivity, supported_activities

    text = (spec or "auto").strip().lower()
    if text in ("", "auto"):
        kind = _current_accelerator(torch) or "cpu"
        index = None
    else:
        try:
            dev = torch.device(text)
        except (RuntimeError, ValueError) as exc:
            raise DeviceError(f"unknown device {spec!r} ({str(exc).splitlines()[0]})") from None
        kind, index = dev.type, dev.index

    if kind == "cpu":
        return DeviceTarget(spec="cpu", kind="cpu", label="CPU", activities=[ProfilerActivity.CPU])

    if not _is_available(torch, kind):
        raise DeviceError(f"--device {spec}: no {kind} device is available in this Python process")

    mod = _backend_module(torch, kind)
    if index is not None:
        count = _device_count(torch, mod)
        if count is not None and index >= count:
            raise DeviceError(f"--device {spec}: only {count} {kind} device(s) here (indices 0..{count - 1})")
    resolved_index = index if index is not None else _current_index(mod)
    spec_out = f"{kind}:{resolved_index}" if resolved_index is not None else kind

    backend_kind = kind
    if kind == "cuda" and getattr(torch.version, "hip", None):
        backend_kind = "rocm"

    supported = set(supported_activities())
    activities = [ProfilerActivity.CPU]
    backend = backend_for(kind, _privateuse1_name(torch))
    notes: list[str] = list(backend.setup_notes())
    activity_name = backend.activity
    activity = getattr(ProfilerActivity, activity_name, None) if activity_name else None
    traced = False
    if activity is not None and activity in supported:
        activities.append(activity)
        traced = True
    elif kind == "mps":
        notes.append(
            "MPS work cannot be traced by torch.profiler: device columns are not measured; "
            "the CPU side is profiled and each step is synchronised."
        )
    else:
        notes.append(
            f"torch.profiler cannot trace {kind} activity in this build: "
            "device columns are not measured; the CPU side is profiled."
        )

    label = _device_name(mod, resolved_index) or spec_out
    target = DeviceTarget(
        spec=spec_out,
        kind=backend_kind,
        index=resolved_index,
        label=label,
        activities=activities,
        traced=traced,
        notes=notes,
        backend=backend,
        min_warmup=backend.min_warmup,
        _sync=backend.synchronizer(torch, resolved_index) or _synchronizer(torch, kind, mod, resolved_index),
    )
    return target


def _device_count(torch: Any, mod: Any) -> int | None:
    if mod is not None and hasattr(mod, "device_count"):
        try:
            return int(mod.device_count())
        except Exception:
            return None
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "device_count"):
        return int(acc.device_count())
    return None


def _current_index(mod: Any) -> int | None:
    if mod is not None and hasattr(mod, "current_device"):
        try:
            return int(mod.current_device())
        except Exception:
            return None
    return None


def _device_name(mod: Any, index: int | None) -> str:
    if mod is not None and hasattr(mod, "get_device_name"):
        try:
            return str(mod.get_device_name(index if index is not None else 0))
        except Exception:
            return ""
    return ""


def _synchronizer(torch: Any, kind: str, mod: Any, index: int | None) -> Callable[[], None] | None:
    if mod is not None and hasattr(mod, "synchronize"):
        if index is not None and kind in ("cuda", "xpu"):
            return lambda: mod.synchronize(index)
        return mod.synchronize
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "synchronize"):
        return acc.synchronize
    return None
