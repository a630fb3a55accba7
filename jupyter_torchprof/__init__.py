"""jupyter_torchprof: profile PyTorch from a notebook cell.

``%load_ext jupyter_torchprof`` registers the ``%%torchprof`` magic;
``jupyter_torchprof.profile(fn, *args, steps=3, ...)`` and ``with
jupyter_torchprof.profiling() as run:`` do the same without magics (scripts,
marimo); ``jupyter_torchprof.load(path)`` opens any saved Kineto trace.

Importing this package is cheap: torch, pandas' heavy parts, bokeh and IPython
are imported only when a function that needs them runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import TorchProfError, TraceError

if TYPE_CHECKING:  # pragma: no cover
    from .api import profile, profiling
    from .results.comparison import Comparison
    from .results.profile import Profile
    from .results.profile_diff import ProfileDiff
    from .results.ranks import RankSet

#: Public names imported only when first used (module, attribute): torch,
#: pandas, bokeh and IPython come with them, never with the package.
_LAZY = {
    "profile": ("api", "profile"),
    "profiling": ("api", "profiling"),
    "Profile": ("results.profile", "Profile"),
    "RankSet": ("results.ranks", "RankSet"),
    "Comparison": ("results.comparison", "Comparison"),
    "ProfileDiff": ("results.profile_diff", "ProfileDiff"),
}

__all__ = [
    "__version__",
    "load",
    "profile",
    "profiling",
    "load_ipython_extension",
    "unload_ipython_extension",
    "Profile",
    "RankSet",
    "Comparison",
    "ProfileDiff",
    "TraceError",
    "TorchProfError",
]


def load(
    path: str,
    name: str | None = None,
    client: Any = None,
    workers: int | None = None,
    progress: bool = True,
    storage_options: dict[str, Any] | None = None,
) -> Profile | RankSet:
    """Open a saved Kineto trace (``.json``/``.json.gz``) or a folder of them, from a path or a URL.

    A file gives a `Profile`. A folder (one trace per rank, or the layout
    ``tensorboard_trace_handler`` writes) gives a `RankSet` when it holds
    several traces, or the `Profile` of its only trace. The ranks of a
    folder are parsed in parallel: on ``client`` (a Dask distributed
    ``Client``) when given, else in ``workers`` processes here (default:
    one per core). A read that takes more than a second shows how far it
    has got (bytes inflated and parsed) in the notebook, or on a terminal's
    stderr; ``progress=False`` shows nothing.

    ``path`` may be an fsspec URL (``s3://bucket/job/``, ``gs://``,
    ``https://``, ``file://``) of a file or a folder; ``storage_options``
    (``endpoint_url``, ``anon``, ``key`` ...) go to its file system. The
    ranks of a folder at a URL are fetched where they are parsed (on a Dask
    cluster, each worker reads its own); nothing is written to the store.
    """
    from .runs.load import load as _load

    if not progress:
        return _load(path, name=name, client=client, workers=workers, storage_options=storage_options)
    from .views.progress import showing_trace_progress

    with showing_trace_progress():
        return _load(path, name=name, client=client, workers=workers, storage_options=storage_options)


def load_ipython_extension(ipython: Any) -> None:
    """Register the ``%torchprof`` / ``%%torchprof`` magics (``%load_ext``) and import what they use.

    The imports every profile needs are made here, once, so that a
    session's first profile is as quick as the next (`magics.preload`).
    """
    from .magics import TorchProf, preload

    ipython.register_magics(TorchProf)
    preload()


def unload_ipython_extension(ipython: Any) -> None:
    """Nothing to undo beyond what IPython does itself."""


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyter-torchprof"}]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "jupyter_torchprof.server"}]


def __getattr__(name: str) -> Any:
    # The classes and profile()/profiling() (which bring IPython) are
    # imported when first asked for, so that importing the package stays cheap.
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'jupyter_torchprof' has no attribute {name!r}")
    module, attr = where
    return getattr(importlib.import_module(f".{module}", __name__), attr)


def __dir__() -> list[str]:
    # What a user may use, not the module's plumbing (Any, TYPE_CHECKING, importlib...).
    return sorted(__all__)
