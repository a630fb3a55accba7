"""Traces where they live: fsspec URLs (``s3://``, ``gs://``, ``http(s)://``, ``memory://``...).

A URL is told from a path by its scheme (`is_url`); a plain path never
comes here, so loading a local file imports nothing of fsspec.

A trace at a URL is copied, as it streams in, to a private temporary file
(`fetched`) and parsed from there like any local file: the reader's checks
(gzip told by its magic number, the size limit, an empty or truncated file)
and the parser's later re-reads of the file (launch flows on demand) then
work unchanged, and the trace is never held whole in memory on its way in.
The copy is abandoned as soon as it passes the trace size limit
(`reader.default_max_bytes`); only what the store calls a file is read.
A ``file://`` URL is a local path (`local_path`) and is loaded as one. Device traces written beside a Kineto trace
(XPlane, Neuron) are read from local folders only.

Nothing is ever written to the store: the table cache a run folder keeps
beside its trace is written for local run folders only.

A rank folder at a URL is listed with the same rules as a local folder
(`files.find_traces`), one directory listing per level looked at. An
``http(s)://`` URL names one file (a web server's index page is not a
folder listing fsspec can be trusted with).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import weakref
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ..errors import TraceError

if TYPE_CHECKING:  # pragma: no cover
    from .parser import TraceData

#: ``scheme://`` at the start, or fsspec's chained form ``simplecache::s3://``.
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*(::[A-Za-z][A-Za-z0-9+.\-]*)*://")

#: The package each common protocol needs besides fsspec (what the error tells to install).
_PACKAGES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "http": "aiohttp",
    "https": "aiohttp",
    "az": "adlfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "hf": "huggingface_hub",
}

#: Bytes copied at a time from the store.
_PIECE = 8 * 1024 * 1024


def is_url(path: Any) -> bool:
    """Whether ``path`` is a URL (a string with a scheme), not a local path; `Path` objects never are."""
    return isinstance(path, str) and _URL.match(path) is not None


def local_path(url: str) -> Path | None:
    """The local path a ``file://`` URL names (read as any path is, fsspec not needed); None for other URLs."""
    from urllib.parse import unquote, urlsplit
    from urllib.request import url2pathname

    if not url.lower().startswith("file://"):
        return None
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise TraceError(url, f"a file:// URL of another host ({parts.netloc}) cannot be read here")
    return Path(url2pathname(unquote(parts.path)))


def _protocol(url: str) -> str:
    return url.split("://", 1)[0].split("::")[-1].lower()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first[:200]}" if first else type(exc).__name__


def filesystem(url: str, storage_options: dict[str, Any] | None = None) -> tuple[Any, str]:
    """The fsspec file system of ``url`` and the path within it.

    Raises
    ------
    TraceError
        fsspec, or the package the protocol needs, is not installed (the
        line says what to ``pip install``), or the protocol is unknown.
    """
    try:
        import fsspec.core
    except ImportError:
        pkg = _PACKAGES.get(_protocol(url))
        need = f"fsspec {pkg}" if pkg else "fsspec"
        raise TraceError(url, f"loading a URL needs fsspec: pip install {need}") from None
    try:
        return fsspec.core.url_to_fs(url, **(storage_options or {}))
    except ImportError as exc:
        proto = _protocol(url)
        pkg = _PACKAGES.get(proto)
        if pkg:
            raise TraceError(url, f"loading {proto}:// URLs needs {pkg}: pip install {pkg}") from None
        raise TraceError(url, f"cannot open {proto}:// URLs ({_one_line(exc)})") from None
    except ValueError as exc:  # an unknown protocol, or storage options it does not take
        raise TraceError(url, f"cannot open this URL ({_one_line(exc)})") from None
    except TypeError as exc:  # storage options the file system does not take
        raise TraceError(url, f"storage options not taken ({_one_line(exc)})") from None


def _store_error(url: str, exc: Exception) -> TraceError:
    """The store's exception (botocore's, aiohttp's, an OSError...) as one line naming the URL."""
    if isinstance(exc, FileNotFoundError):
        return TraceError(url, "no such file or folder")
    if isinstance(exc, PermissionError):
        return TraceError(url, "permission denied by the store")
    return TraceError(url, f"cannot be read ({_one_line(exc)})")


def kind_of(url: str, storage_options: dict[str, Any] | None = None) -> str:
    """``"file"`` or ``"directory"``: what ``url`` names in its store.

    Raises `TraceError` for anything else (a pipe or a device a store may
    expose would block or never end).
    """
    fs, path = filesystem(url, storage_options)
    try:
        kind = fs.info(path).get("type")
    except Exception as exc:  # any store's error: one line, never a traceback of its client
        raise _store_error(url, exc) from None
    if kind not in ("file", "directory"):
        raise TraceError(url, "is not a regular file (a pipe or a device); refusing to read it")
    return kind


@dataclass(frozen=True, order=True)
class _StorePath:
    """A file or folder of a store, with the few `Path` methods `files.find_traces` uses."""

    path: str
    kind: str  # "file", "directory", or what else the store says (never read)
    fs: Any = field(compare=False, repr=False)

    @property
    def name(self) -> str:
        return PurePosixPath(self.path.rstrip("/")).name

    def is_file(self) -> bool:
        return self.kind == "file"

    def is_dir(self) -> bool:
        return self.kind == "directory"

    def iterdir(self) -> Iterator[_StorePath]:
        try:
            entries = self.fs.ls(self.path, detail=True)
        except Exception as exc:  # find_traces skips a folder it cannot list (OSError)
            raise OSError(_one_line(exc)) from None
        here = self.path.rstrip("/")
        for e in entries:
            name = str(e.get("name", "")).rstrip("/")
            if name and name != here:
                yield _StorePath(name, str(e.get("type")), self.fs)


def folder_urls(
    url: str, storage_options: dict[str, Any] | None = None, skip: Collection[str] = ()
) -> list[str]:
    """The URLs of the traces in the folder at ``url``, by the rules of a local folder (`files.find_traces`, ``skip``)."""
    from .files import find_traces

    fs, root = filesystem(url, storage_options)
    root = root.rstrip("/")
    found = find_traces(_StorePath(root, "directory", fs), skip=skip)  # type: ignore[arg-type]
    base = url.rstrip("/")
    return [f"{base}/{f.path[len(root) :].lstrip('/')}" for f in found]


def _local_name(url: str) -> str:
    """A safe file name for the local copy: the URL's last part, else a plain trace name."""
    name = PurePosixPath(url.split("://", 1)[-1].split("?", 1)[0].rstrip("/")).name
    if name in ("", ".", "..") or "\x00" in name or "\\" in name or len(name.encode()) > 200:
        return "trace.json"
    return name


def _copy_limited(src: Any, dst: Any, url: str, limit: int) -> None:
    copied = 0
    while piece := src.read(_PIECE):
        copied += len(piece)
        if copied > limit:
            raise TraceError(url, f"is over the {limit / 1e9:.2f} GB trace limit (TORCHPROF_MAX_TRACE_BYTES)")
        dst.write(piece)


@contextmanager
def fetched(url: str, storage_options: dict[str, Any] | None = None) -> Iterator[Path]:
    """A local copy of the trace at ``url``, in a private temporary folder removed on exit.

    The copy keeps the URL's file name (the profile's name and the rank
    table's ``worker`` and ``file`` come from it).

    Raises
    ------
    TraceError
        The URL cannot be opened or read, or its object is over the trace size limit.
    """
    folder = Path(tempfile.mkdtemp(prefix="torchprof-url-"))
    try:
        yield _fetch_into(url, storage_options, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _fetch_into(url: str, storage_options: dict[str, Any] | None, folder: Path) -> Path:
    from .reader import default_max_bytes

    fs, path = filesystem(url, storage_options)
    limit = default_max_bytes()
    local = folder / _local_name(url)
    try:
        size = fs.size(path)
        if size is not None and size > limit:
            raise TraceError(
                url,
                f"is {size / 1e9:.2f} GB, over the {limit / 1e9:.2f} GB trace limit (TORCHPROF_MAX_TRACE_BYTES)",
            )
        with fs.open(path, "rb") as src, open(local, "xb") as dst:
            _copy_limited(src, dst, url, limit)
    except TraceError:
        raise
    except Exception as exc:  # any store's error: one line, never a traceback of its client
        raise _store_error(url, exc) from None
    return local


def parse_url(url: str, storage_options: dict[str, Any] | None = None) -> TraceData:
    """The trace at ``url``, parsed from a local copy kept as long as the parsed trace is.

    The copy stays while the returned `TraceData` lives (its launch flows are
    read from the file when first asked for), then is removed.
    """
    from .files import parse_with_device

    folder = Path(tempfile.mkdtemp(prefix="torchprof-url-"))
    try:
        td = parse_with_device(_fetch_into(url, storage_options, folder))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    weakref.finalize(td, shutil.rmtree, folder, ignore_errors=True)
    return td
