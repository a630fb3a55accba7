"""Exceptions that jupyter_torchprof raises on purpose.

Each one carries a message meant to be read by a person in one line: the magic
prints it as a ``UsageError`` and the loader raises it as is.
"""

from __future__ import annotations

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
