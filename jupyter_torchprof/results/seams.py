"""Where result objects reach the layers above them without importing them.

A `Profile` can show itself (``_repr_mimebundle_``, ``table()``, ``view()``)
and write itself (``export()``), but the code that renders (``views/``) and
writes (``export.py``) sits above ``results/`` and imports it, never the
other way round. So a result asks this module for the views or the exporter,
and the package's ``__init__`` (the one module that sees every layer) says
where they are when it is imported, which always happens first.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

_providers: dict[str, Callable[[], ModuleType]] = {}


def provide(role: str, module: Callable[[], ModuleType]) -> None:
    """Say which module plays ``role`` (``views`` or ``export``); ``module`` imports it when first asked."""
    _providers[role] = module


def _get(role: str) -> ModuleType:
    try:
        return _providers[role]()
    except KeyError:
        raise RuntimeError(
            f"jupyter_torchprof: nothing provides the {role}; import jupyter_torchprof"
        ) from None


def exporter() -> ModuleType:
    """`export`: every file a result writes."""
    return _get("export")
