"""Turn a trace file into a decoded JSON document, or one clear error.

Reading is kept apart from parsing so that the parser can be fed documents that
never touched the disk (a live capture hands over bytes it just wrote, tests hand
over mutated documents).
"""

from __future__ import annotations

import contextvars
import ctypes
import gc
import os
import queue
import re
import stat
import threading
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from ..errors import TraceError, mount_point
from .progress import report

#: What `default_max_bytes` allows of the memory available when no limit is set.
#: Parsing holds the JSON text plus its columns and a decoded chunk; about
#: three times the text at its peak, so a quarter of what is free leaves room.
MEMORY_FRACTION = 0.25
_FALLBACK_LIMIT = 8 * 1024**3

_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_CHUNK = 16 * 1024 * 1024
#: Bytes read (or inflated) first, to tell a file that is not JSON at all
#: before reading the rest of it (a 2 GiB file of zeros was read whole: 94 s).
_HEAD = 64 * 1024
#: Anything but JSON whitespace: tells an empty file from a trace without copying it.
_NOT_BLANK = re.compile(rb"[^ \t\r\n]")


def available_memory() -> int | None:
    """Bytes of memory this process can still use, or None when unknown.

    ``MemAvailable`` of ``/proc/meminfo``, capped by the cgroup's limit
    (a container sees the host's memory there but may use only its share).
    """
    avail = None
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            return None
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            with open(limit_file, "rb") as fh:
                limit = int(fh.read().strip())
            with open(usage_file, "rb") as fh:
                used = int(fh.read().strip())
        except (OSError, ValueError):
            continue  # "max" (no limit), or no such cgroup version
        avail = min(avail, max(limit - used, 0))
        break
    return avail


def default_max_bytes() -> int:
    """How many bytes of JSON a trace may hold (``$TORCHPROF_MAX_TRACE_BYTES`` overrides).

    A fraction (`MEMORY_FRACTION`) of the memory available now, so that a
    gzip bomb, or a trace that cannot fit, is an error naming the limit
    instead of a kernel killed by the out-of-memory killer.
    """
    env = os.environ.get("TORCHPROF_MAX_TRACE_BYTES", "").strip()
    if env.isdigit() and len(env) < 20:
        return int(env)
    avail = available_memory()
    if avail is None:
        return _FALLBACK_LIMIT
    return max(int(avail * MEMORY_FRACTION), 64 * 1024**2)


#: The limit when this module was imported (`default_max_bytes` is asked anew at each read).
MAX_TRACE_BYTES = default_max_bytes()


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n < 10e9 else f"{n / 1e9:.1f} GB"


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector.

    Decoding a trace allocates millions of small dicts; each allocation burst
    triggers a full-generation scan that finds nothing to free. Pausing the
    collector roughly halves the decode time of a large trace.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_trace_bytes(path: str | Path, max_bytes: int | None = None) -> bytes | bytearray:
    """Return the JSON bytes of a ``.json`` or ``.json.gz`` trace file.

    Gzip is recognised by its magic number, not by the suffix, because traces
    are often renamed. A UTF-8 byte order mark is dropped. ``max_bytes``
    (default `default_max_bytes`) bounds the JSON text; a gzip file is
    inflated in bounded pieces and abandoned as soon as it passes the limit.

    Raises `TraceError` for a missing, empty, truncated or oversized file,
    and for anything that is not a regular file (a FIFO or a device would
    block or never end).
    """
    p = Path(path)
    try:
        with _opened(p) as (fh, gzipped, size):
            if gzipped:
                data = _inflate(fh, p, _limit(max_bytes))
            else:
                _check_size(p, size, _limit(max_bytes))
                data = fh.read()
    except OSError as exc:
        raise TraceError(p, f"cannot be read ({exc.strerror or exc})") from None
    except MemoryError:
        raise TraceError(p, "does not fit in the memory left; refusing to read it") from None
    if _NOT_BLANK.search(data) is None:
        raise TraceError(p, full_disk(p, "the trace is empty") or "file is empty")
    return data


def iter_trace_bytes(
    path: str | Path, max_bytes: int | None = None, phase: str = "inflating"
) -> Iterator[bytes]:
    """The JSON bytes of a trace file in pieces of up to `_CHUNK` bytes, never all at once.

    The same checks as `read_trace_bytes` (regular file, size limit, gzip
    errors, a dropped byte order mark, an empty file), raised when the piece
    that shows them is reached. Progress goes to `trace.progress` under
    ``phase``, as bytes of the file read.
    """
    p = Path(path)
    limit = _limit(max_bytes)
    seen = False
    try:
        with _opened(p) as (fh, gzipped, size):
            if gzipped:
                pieces = _without_bom(_checked_head(_inflated_pieces(fh, p, limit, size, phase), p))
            else:
                pieces = _plain_pieces(fh, p, limit, size, phase)
            for piece in pieces:
                seen = seen or _NOT_BLANK.search(piece) is not None
                yield piece
    except OSError as exc:
        raise TraceError(p, f"cannot be read ({exc.strerror or exc})") from None
    if not seen:
        raise TraceError(p, full_disk(p, "the trace is empty") or "file is empty")


def _without_bom(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """``pieces`` with a byte order mark at the very start dropped (however the first bytes are cut)."""
    head: bytes | None = b""
    for piece in pieces:
        if head is not None:
            head += piece
            if len(head) < 3:
                continue
            piece, head = (head[3:] if head[:3] == _BOM else head), None
        yield piece
    if head:
        yield head


def _limit(max_bytes: int | None) -> int:
    return default_max_bytes() if max_bytes is None else max_bytes


def _check_size(path: Path, size: int, limit: int) -> None:
    if size > limit:
        raise TraceError(path, f"file is {_gb(size)}, over the {_gb(limit)} limit{_HOW_TO_RAISE}")


@contextmanager
def _opened(p: Path) -> Iterator[tuple[Any, bool, int]]:
    """``(file, gzipped, size)`` of a regular trace file, positioned after a byte order mark."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise TraceError(p, full_disk(p, "the trace was not written") or "no such file") from None
    except IsADirectoryError:
        raise TraceError(p, "is a folder; jupyter_torchprof.load() opens the traces inside it") from None
    except OSError as exc:
        raise TraceError(p, f"cannot be read ({exc.strerror or exc})") from None
    with open(fd, "rb", closefd=True) as fh:
        st = os.fstat(fh.fileno())
        if stat.S_ISDIR(st.st_mode):
            raise TraceError(p, "is a folder; jupyter_torchprof.load() opens the traces inside it")
        if not stat.S_ISREG(st.st_mode):
            raise TraceError(p, "is not a regular file (a pipe or a device); refusing to read it")
        head = fh.read(_HEAD)
        gzipped = head[:2] == _GZIP_MAGIC
        if not gzipped:
            _check_head(p, head)
        fh.seek(3 if head[:3] == _BOM and not gzipped else 0)
        yield fh, gzipped, st.st_size


#: First bytes of the JSON values that are neither objects nor arrays.
_OTHER_JSON_VALUES = frozenset(bytes([c]) for c in b'"-0123456789tfn')


def _opening(head: bytes | bytearray) -> int | None:
    """Where the first non-blank byte of ``head`` is (after a byte order mark), or None."""
    skip = 3 if head[:3] == _BOM else 0
    first = _NOT_BLANK.search(head, skip)
    return None if first is None else first.start()


def _check_head(path: Path, head: bytes | bytearray) -> None:
    """Refuse text that cannot be a trace from its first bytes: a trace is a JSON object or array.

    A head of blanks decides nothing (the rest is read as before). Only the
    opening byte is judged: a bad event further on costs that event alone.
    """
    at = _opening(head)
    if at is None or head[at : at + 1] in (b"{", b"["):
        return
    start = bytes(head[at : at + 12])
    if head[at : at + 1] in _OTHER_JSON_VALUES:
        # Perhaps JSON (a number, a string, true ...), but no trace: say that, not "invalid".
        raise TraceError(path, f"not a trace: the top level is not a JSON object (it begins {start!r})")
    raise TraceError(path, f"not valid JSON: it begins {start!r}, where a trace begins with '{{' or '['")


def _checked_head(pieces: Iterator[bytes], path: Path) -> Iterator[bytes]:
    """``pieces`` of inflated text, refused by `_check_head` as soon as their opening byte shows."""
    head: bytes | None = b""
    for piece in pieces:
        if head is not None and piece:
            head += piece[:_HEAD]
            if _opening(head) is not None or len(head) >= _HEAD:
                _check_head(path, head)
                head = None
        yield piece


def _plain_pieces(fh: Any, path: Path, limit: int, size: int, phase: str) -> Iterator[bytes]:
    _check_size(path, size, limit)
    while piece := fh.read(_CHUNK):
        report(phase, fh.tell(), size)
        yield piece


#: Free space below which a missing, empty or cut-short trace is blamed on a full disk.
FULL_DISK_BYTES = 1 << 20


def full_disk(path: str | Path, what: str) -> str | None:
    """Say ``no space left on <mount>: <what>`` when the file system holding ``path`` is full, else None.

    A profiler that runs out of space while exporting leaves no file, an
    empty one or half of one; saying so beats "no such file".
    """
    try:
        st = os.statvfs(mount_point(path))
    except OSError:
        return None
    if st.f_bavail * st.f_frsize >= FULL_DISK_BYTES:
        return None
    return f"no space left on {mount_point(path)}: {what}"


_HOW_TO_RAISE = " (set TORCHPROF_MAX_TRACE_BYTES to raise it)"


def _inflate(fh: Any, path: Path, max_bytes: int) -> bytearray:
    """The inflated content of a gzip file, never more than ``max_bytes`` of it.

    The pieces of `_inflated_pieces` go into one growing bytearray (grown in
    place: large buffers are remapped, not copied), so the peak stays near
    the content's size plus one piece.
    """
    out = bytearray()
    pieces = _inflated_pieces(fh, path, max_bytes, os.fstat(fh.fileno()).st_size, "inflating")
    for piece in _checked_head(pieces, path):
        out += piece
    if out[:3] == _BOM:
        del out[:3]
    return out


def _inflated_pieces(fh: Any, path: Path, max_bytes: int, size: int, phase: str) -> Iterator[bytes]:
    """A gzip file inflated in pieces of at most `_CHUNK` bytes, never more than ``max_bytes`` in all.

    zlib with wbits=47 reads gzip (and zlib) headers. A bomb stops one piece
    past the limit, and reading in pieces also tells a truncated file from a
    corrupt one. A byte order mark is left for the caller to drop.
    """
    inflater = zlib.decompressobj(47)
    total = 0
    # A small first read and piece: a file that is not JSON is refused on its first bytes.
    step = _HEAD
    try:
        while True:
            chunk = fh.read(step)
            if not chunk:
                break
            report(phase, fh.tell(), size)
            while chunk:
                piece = inflater.decompress(chunk, step)
                step = _CHUNK
                total += len(piece)
                if total > max_bytes:
                    raise TraceError(
                        path,
                        f"inflates to more than {_gb(max_bytes)}, the limit for this machine"
                        f"{_HOW_TO_RAISE}; refusing to read it",
                    )
                yield piece
                chunk = inflater.unconsumed_tail
                # A gzip file may hold several members back to back.
                if inflater.eof and inflater.unused_data:
                    chunk = inflater.unused_data
                    inflater = zlib.decompressobj(47)
        yield inflater.flush()
    except zlib.error as exc:
        raise TraceError(path, f"corrupt gzip data ({exc})") from None
    if not inflater.eof:
        raise TraceError(
            path,
            full_disk(path, "the trace was cut short") or "gzip stream is truncated (the file was cut short)",
        )


def decode_json(data: bytes | bytearray, path: str | Path | None = None) -> Any:
    """Decode JSON bytes with orjson, the garbage collector paused.

    Invalid UTF-8 inside strings (seen in traces whose op names came from C
    strings) is replaced rather than fatal, with a warning. A byte order
    mark is dropped.
    """
    if data[:3] == _BOM:
        data = data[3:]
    with gc_paused():
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            msg = str(exc)
            if "utf-8" not in msg.lower() and "utf8" not in msg.lower():
                raise TraceError(path, f"not valid JSON ({_short(msg)})") from None
        text = data.decode("utf-8", errors="replace")
        bad = text.count("\ufffd") - data.count("\xef\xbf\xbd".encode("latin-1"))
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise TraceError(path, f"not valid JSON ({_short(str(exc))})") from None
    warnings.warn(
        f"{path or 'trace'}: {max(bad, 1)} invalid UTF-8 byte sequence(s) replaced with U+FFFD",
        stacklevel=3,
    )
    return doc


def _short(msg: str, limit: int = 160) -> str:
    return msg if len(msg) <= limit else msg[: limit - 1] + "…"


def read_trace(path: str | Path, max_bytes: int | None = None) -> Any:
    """Read and decode a trace file into its JSON document."""
    return decode_json(read_trace_bytes(path, max_bytes), path)


def read_ahead(pieces: Iterator[bytes], depth: int = 2) -> Iterator[bytes]:
    """``pieces``, produced up to ``depth`` ahead in a thread of their own.

    Reading and inflating release the GIL, so the next piece inflates
    while this one is parsed. Whatever the producer raises is raised here,
    at the piece it stood for; leaving early (an error in the parse, a
    Ctrl-C) stops the producer and closes the file. The producer runs in a
    copy of the caller's context, so its progress reports reach the caller's sink.
    """
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for piece in pieces:
                if not put(piece):
                    return
            put(end)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            put(_Raised(exc))
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(produce,), name="torchprof-read-ahead", daemon=True
    )
    thread.start()
    try:
        while True:
            item = q.get()
            if item is end:
                return
            if isinstance(item, _Raised):
                raise item.exc
            yield item
    finally:
        stop.set()
        thread.join(timeout=10)


class _Raised:
    """An exception the read-ahead thread met, carried to the consumer."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def give_back_memory(parsed_bytes: int | None = None) -> None:
    """Return the memory a parse freed to the system (glibc only; nothing elsewhere).

    Decoding a chunk makes and frees millions of small objects; glibc keeps
    what they used in its arenas, so a process that parsed 300 MB of JSON
    stayed at its peak (360 MB for 90 MB of columns) until the tables
    needed more. ``malloc_trim`` hands it back (about 10 ms). ``parsed_bytes``
    is what the parse decoded that way (chunks the native scanner reads make
    no such objects): under `TRIM_FROM_BYTES` there is little to hand back,
    and the trim (2 ms on a 15 MB trace, 15 ms after a native parse of 1M
    events, whose pages the tables then fault in again) costs more than it frees.
    """
    if parsed_bytes is not None and parsed_bytes < TRIM_FROM_BYTES:
        return
    global _trim
    if _trim is None:
        try:
            _trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _trim = False
    if _trim:
        _trim(0)


_trim: Any = None
#: JSON bytes from which a parse is followed by `give_back_memory`'s trim.
TRIM_FROM_BYTES = 64 << 20
