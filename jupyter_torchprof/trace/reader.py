"""Turn a trace file into a decoded JSON document, or one clear error.

Reading is kept apart from parsing so that the parser can be fed documents that
never touched the disk (a live capture hands over bytes it just wrote, tests hand
over mutated documents).
"""

from __future__ import annotations

import gc
import os
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from ..errors import TraceError

#: Refuse to inflate a file beyond this many bytes: a gzip bomb (or a trace that
#: cannot possibly fit in memory) should be an error, not a frozen kernel.
MAX_TRACE_BYTES = int(os.environ.get("TORCHPROF_MAX_TRACE_BYTES", 8 * 1024**3))

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 16 * 1024 * 1024


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


def read_trace_bytes(path: str | Path, max_bytes: int = MAX_TRACE_BYTES) -> bytes:
    """Return the JSON bytes of a ``.json`` or ``.json.gz`` trace file.

    Gzip is recognised by its magic number, not by the suffix, because traces
    are often renamed. Raises `TraceError` for a missing, empty, truncated or
    oversized file.
    """
    p = Path(path)
    if not p.exists():
        raise TraceError(p, "no such file")
    if p.is_dir():
        raise TraceError(p, "is a folder; jupyter_torchprof.load() opens the traces inside it")
    try:
        with open(p, "rb") as fh:
            head = fh.read(2)
            fh.seek(0)
            if head == _GZIP_MAGIC:
                data = _inflate(fh, p, max_bytes)
            else:
                size = os.fstat(fh.fileno()).st_size
                if size > max_bytes:
                    raise TraceError(
                        p, f"file is {size / 1e9:.1f} GB, over the {max_bytes / 1e9:.1f} GB limit"
                    )
                data = fh.read()
    except OSError as exc:
        raise TraceError(p, f"cannot be read ({exc.strerror or exc})") from None
    if not data.strip():
        raise TraceError(p, "file is empty")
    return data


def _inflate(fh: Any, path: Path, max_bytes: int) -> bytes:
    # zlib with wbits=47 reads gzip (and zlib) headers; reading in chunks lets us
    # stop a bomb early and tell a truncated file from a corrupt one.
    inflater = zlib.decompressobj(47)
    parts: list[bytes] = []
    total = 0
    try:
        while True:
            chunk = fh.read(_CHUNK)
            if not chunk:
                break
            out = inflater.decompress(chunk, max(1, max_bytes + 1 - total))
            total += len(out)
            parts.append(out)
            if total > max_bytes or inflater.unconsumed_tail:
                raise TraceError(path, f"inflates to more than {max_bytes / 1e9:.1f} GB; refusing to read it")
            # A gzip file may hold several members back to back.
            while inflater.eof and inflater.unused_data:
                rest = inflater.unused_data
                inflater = zlib.decompressobj(47)
                out = inflater.decompress(rest, max(1, max_bytes + 1 - total))
                total += len(out)
                parts.append(out)
        tail = inflater.flush()
        parts.append(tail)
    except zlib.error as exc:
        raise TraceError(path, f"corrupt gzip data ({exc})") from None
    if not inflater.eof:
        raise TraceError(path, "gzip stream is truncated (the file was cut short)")
    return b"".join(parts)


def decode_json(data: bytes, path: str | Path | None = None) -> Any:
    """Decode JSON bytes with orjson, the garbage collector paused.

    Invalid UTF-8 inside strings (seen in traces whose op names came from C
    strings) is replaced rather than fatal, with a warning.
    """
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


def read_trace(path: str | Path, max_bytes: int = MAX_TRACE_BYTES) -> Any:
    """Read and decode a trace file into its JSON document."""
    return decode_json(read_trace_bytes(path, max_bytes), path)
