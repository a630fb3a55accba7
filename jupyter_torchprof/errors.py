"""Exceptions that jupyter_torchprof raises on purpose.

Each one carries a message meant to be read by a person in one line: the magic
prints it as a ``UsageError`` and the loader raises it as is.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


class TorchProfError(Exception):
    """Base class of every error this package raises deliberately."""


class TraceError(TorchProfError):
    """A trace file that cannot be read, with the file and the problem named.

    Parameters
    ----------
    path
        The file (or folder) that was being read.
    problem
        What is wrong with it, in a few words.
    """

    def __init__(self, path: str | Path | None, problem: str) -> None:
        self.path = str(path) if path is not None else None
        self.problem = problem
        where = f"{self.path}: " if self.path else ""
        super().__init__(f"{where}{problem}")


class DeviceError(TorchProfError):
    """The requested device does not exist here or cannot be profiled."""


class CaptureError(TorchProfError):
    """A profile could not be captured (profiler busy, nested run, bad cell)."""


# --------------------------------------------------------------------------- #
# disk errors, said in one line (the store, export and the reader share these)


def mount_point(path: str | os.PathLike[str]) -> str:
    """The mount point of the file system holding ``path`` (or its nearest existing parent)."""
    p = os.path.abspath(path)
    while not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    while not os.path.ismount(p):
        p = os.path.dirname(p)
    return p


def disk_error(exc: OSError, path: str | os.PathLike[str]) -> OSError:
    """``exc`` as an OSError whose ``strerror`` is one line a person can act on.

    A full disk (or quota) says which file system: "no space left on /home
    (writing …/trace.json.gz)". Other errors keep their errno and say which file.
    """
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        what = "no space left on" if exc.errno == errno.ENOSPC else "disk quota exceeded on"
        return OSError(exc.errno, f"{what} {mount_point(path)} (writing {path})")
    return OSError(exc.errno, f"{exc.strerror or exc} ({exc.filename or path})")
