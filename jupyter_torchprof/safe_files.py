"""Reading small files someone else may have put there (a run's record, a kept table cache), and where our caches live.

The run store and the server read files in folders a user (or anything
else) can write to: a symlink out of the folder, a FIFO that never ends or a
file of gigabytes must cost one clear line, never a hang or a read outside.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path


def write_atomically(target: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` to a temporary file beside ``target``, then rename it into place.

    No reader ever sees half a file; a failure (a full disk, a Ctrl-C) leaves
    nothing behind, not even the temporary file.
    """
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.part")
    try:
        write(tmp)
        os.replace(tmp, target)
    except BaseException:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise


class UnfitFile(ValueError):
    """A file that is not read: a symlink, not a regular file, or too large."""


def read_small_file(path: Path, limit: int, what: str) -> bytes:
    """The bytes of a plain file, refusing symlinks, hard links, FIFOs, devices and files over ``limit``.

    Opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat``, so a
    FIFO can never block the caller (a server's event loop, a listing).

    Raises
    ------
    FileNotFoundError
        No such file.
    UnfitFile
        Anything else that makes the file unfit, in words.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise UnfitFile("is a symlink; not followed") from None
        raise UnfitFile(f"cannot be opened ({exc.strerror or exc})") from None
    with open(fd, "rb", closefd=True) as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UnfitFile("is not a regular file (a pipe, a device or a folder)")
        if st.st_nlink > 1:
            # The same file under another name, possibly outside the folder.
            raise UnfitFile("is a hard link (the file has other names); not read")
        if st.st_size > limit:
            raise UnfitFile(f"is {st.st_size / 2**20:.1f} MiB, too large to be {what}")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise UnfitFile(f"is over {limit / 2**20:.0f} MiB, too large to be {what}")
    return data


def user_cache_dir(name: str) -> Path:
    """``$XDG_CACHE_HOME/jupyter_torchprof/<name>``, else ``~/.cache/jupyter_torchprof/<name>``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jupyter_torchprof" / name
