"""The native column builder (``scan.c``), call-tree walk (``nest.c``) and table loops (``tables.c``, ``steps.c``), loaded with ctypes.

Nothing here runs at import time: the library is found, or compiled, the
first time a trace is parsed (`library`). Where it comes from, first match
wins:

1. ``_scan-<tag>.so`` next to ``scan.c``: what the wheel's build hook
   (``hatch_build.py``) compiles into an installed package;
2. the same file in a cache folder (``$TORCHPROF_NATIVE_CACHE``, else
   ``$XDG_CACHE_HOME/jupyter_torchprof/native``, else ``~/.cache/...``),
   compiled there on first use with the C compiler (``$CC``, ``cc`` or
   ``gcc``) and moved into place with an atomic rename, so concurrent
   processes never load a half-written file. This is how a source checkout
   (tests run from it) gets the library without an install step.

``<tag>`` is a hash of the sources, the compiler flags and the platform, so a
changed C file is never served by a stale library. Without a compiler,
or with ``TORCHPROF_NATIVE=0``, `library` returns None and the parser takes
its pure-Python path, which gives the same results.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).with_name("scan.c")
#: Every C file of the library.
SOURCES = (
    SOURCE,
    Path(__file__).with_name("nest.c"),
    Path(__file__).with_name("tables.c"),
    Path(__file__).with_name("steps.c"),
)
#: Flags the library is compiled with (part of its tag).
#: -O3 over -O2: the scan of the 1M-event trace 282 vs 291 ms, nine rotated rounds (same
#: IEEE arithmetic: neither enables -ffast-math).
CFLAGS = ("-O3", "-std=c99", "-fPIC", "-shared", "-fvisibility=default")
#: The layout `scan.c` was written for (its ``tp_abi()``): columns, counts, capacities.
ABI = 60 * 1000 + 8 * 100 + 5
#: The functions and arguments of `nest.c` (its ``tp_nest_abi()``).
NEST_ABI = 5
#: Whether the native path runs when ``TORCHPROF_NATIVE`` is not set.
DEFAULT_ON = True

_state: dict[str, Any] = {}


def wanted() -> bool:
    """Whether the native path is asked for (``TORCHPROF_NATIVE``: ``0`` off, ``1`` on)."""
    value = os.environ.get("TORCHPROF_NATIVE", "").strip()
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    return DEFAULT_ON


def tag() -> str:
    """Hash of what the library is built from (source, flags, platform)."""
    import hashlib
    import platform

    h = hashlib.sha256()
    for source in SOURCES:
        h.update(source.read_bytes())
    h.update(" ".join(CFLAGS).encode())
    h.update(f"{sys.platform}-{platform.machine()}".encode())
    return h.hexdigest()[:16]


def library_name(tag_: str | None = None) -> str:
    """File name of the compiled library for this source."""
    suffix = ".dylib" if sys.platform == "darwin" else ".so"
    return f"_scan-{tag_ or tag()}{suffix}"


def compiler() -> str | None:
    """The C compiler to use, or None when there is none."""
    import shutil

    for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


def build(dest_dir: Path, tag_: str | None = None) -> Path | None:
    """Compile ``scan.c`` into ``dest_dir`` (atomically); the library's path, or None."""
    import subprocess
    import tempfile

    cc = compiler()
    if cc is None or sys.platform == "win32":
        return None
    dest_dir.mkdir(parents=True, exist_ok=True)
    final = dest_dir / library_name(tag_)
    fd, tmp = tempfile.mkstemp(prefix=".scan-", suffix=".so", dir=dest_dir)
    os.close(fd)
    try:
        done = subprocess.run(
            [cc, *CFLAGS, "-o", tmp, *map(str, SOURCES)], capture_output=True, timeout=120, check=False
        )
        if done.returncode != 0:
            return None
        os.replace(tmp, final)
        return final
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def cache_dir() -> Path:
    """Where libraries compiled on first use are kept."""
    from ...safe_files import user_cache_dir

    env = os.environ.get("TORCHPROF_NATIVE_CACHE")
    return Path(env) if env else user_cache_dir("native")


def _candidates(tag_: str) -> list[Path]:
    name = library_name(tag_)
    return [SOURCE.with_name(name), cache_dir() / name]


def _open(path: Path) -> Any:
    """The library at ``path`` with its signatures set, or None if it cannot be used."""
    import ctypes

    try:
        lib = ctypes.CDLL(str(path))
        lib.tp_abi.restype = ctypes.c_int
        if lib.tp_abi() != ABI:
            return None
        lib.tp_scan.restype = ctypes.c_int
        lib.tp_nest_abi.restype = ctypes.c_int
        if lib.tp_nest_abi() != NEST_ABI:
            return None
        lib.tp_group_sum  # noqa: B018 - a library without it is another version's
        lib.tp_outermost  # noqa: B018
    except (OSError, AttributeError):  # not a library for this machine, or another one's
        return None
    lib.tp_scan.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int] + [ctypes.c_void_p] * 3
    lib.tp_nest_ordered.restype = None
    lib.tp_nest_ordered.argtypes = (
        [ctypes.c_void_p] * 4 + [ctypes.c_int64, ctypes.c_double] + [ctypes.c_void_p] * 4
    )
    lib.tp_group_sum.restype = ctypes.c_int64
    lib.tp_group_sum.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 2
    lib.tp_subtree_sums.restype = ctypes.c_int64
    lib.tp_subtree_sums.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int64] * 2 + [ctypes.c_void_p] * 6
    lib.tp_folded_into.restype = ctypes.c_int64
    lib.tp_folded_into.argtypes = (
        [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_int64] + [ctypes.c_void_p] * 3
    )
    lib.tp_mark_up.restype = ctypes.c_int64
    lib.tp_mark_up.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_void_p,
    ]
    lib.tp_self_values.restype = ctypes.c_int64
    lib.tp_self_values.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_void_p]
    lib.tp_group_keys.restype = ctypes.c_int64
    lib.tp_group_keys.argtypes = (
        [ctypes.c_void_p]
        + [ctypes.c_int64] * 3
        + [ctypes.c_void_p] * 6
        + [ctypes.c_int64]
        + [ctypes.c_void_p] * 3
    )
    lib.tp_count_before.restype = ctypes.c_int64
    lib.tp_count_before.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64] + [
        ctypes.c_int,
        ctypes.c_void_p,
    ]
    lib.tp_code_order.restype = ctypes.c_int64
    lib.tp_code_order.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_int64] + [
        ctypes.c_void_p
    ] * 2
    lib.tp_outermost.restype = ctypes.c_int64
    lib.tp_outermost.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64, ctypes.c_void_p]
    return lib


def _build_dirs() -> list[Path]:
    import tempfile

    uid = getattr(os, "getuid", lambda: 0)()
    return [cache_dir(), Path(tempfile.gettempdir()) / f"jupyter_torchprof-{uid}"]


def _find_or_build() -> Any:
    t = tag()
    for path in _candidates(t):
        if path.exists():
            lib = _open(path)
            if lib is not None:
                return lib
    for dest in _build_dirs():
        try:
            built = build(dest, t)
        except OSError:  # a folder that cannot be written: try the next
            continue
        if built is not None:
            return _open(built)
    return None


def library() -> Any:
    """The loaded scanner (a ``ctypes.CDLL``), or None when native parsing is off or unavailable.

    Found or built at most once per process; a failed build is not retried.
    """
    if not wanted():
        return None
    if "lib" not in _state:
        try:
            _state["lib"] = _find_or_build()
        except OSError:  # the source unreadable, no home folder ...: pure Python
            _state["lib"] = None
    return _state["lib"]


def digester(parser: Any) -> Any:
    """A fresh `digest.Digester` (its own buffers) for ``parser`` (the module), or None for pure Python."""
    lib = library()
    if lib is None:
        return None
    from .digest import Digester

    return Digester(lib, parser)


def dense_numbers(values: Any, span: int) -> tuple[Any, int, Any] | None:
    """`analysis.ops._dense_numbers` in C: (number of each row, how many, first row of each), or None without the library.

    ``values``: integers in ``[0, span)``; numbers count from 0 in order of
    first appearance. `group_keys` over every row with this one key
    (which would also take -1, as a missing code: refused here).
    """
    import numpy as np

    values = np.ascontiguousarray(values, dtype=np.int64)
    if len(values) and int(values.min()) < 0:
        raise ValueError(f"a value outside [0, {span})")
    return group_keys(None, len(values), [(values, None, int(span))], int(span) + 1)


def stack_walk_ordered(
    order: Any, lane: Any, start: Any, end: Any, tolerance: float
) -> tuple[Any, Any] | None:
    """`analysis.tree.nest_stack` over lanes at once, in C, the intervals taken in ``order`` (a permutation sorting them by lane, start, -end); None without the library.

    Returns (parent, depth) at each interval's own position; parents are
    input positions, -1 for none.
    """
    import numpy as np

    lib = library()
    if lib is None:
        return None
    order = np.ascontiguousarray(order, dtype=np.int64)
    lane = np.ascontiguousarray(lane, dtype=np.int64)
    start = np.ascontiguousarray(start, dtype=np.float64)
    end = np.ascontiguousarray(end, dtype=np.float64)
    n = len(order)
    if not (len(lane) == len(start) == len(end) == n):
        raise ValueError("order, lane, start and end differ in length")
    # C reads at these positions unchecked: each must lie inside.
    if n and (int(order.min()) < 0 or int(order.max()) >= n):
        raise ValueError("order holds a position outside the intervals")
    par = np.empty(n, dtype=np.int64)
    dep = np.empty(n, dtype=np.int32)
    stack_pos = np.empty(max(n, 1), dtype=np.int64)
    stack_end = np.empty(max(n, 1), dtype=np.float64)
    lib.tp_nest_ordered(
        order.ctypes.data, lane.ctypes.data, start.ctypes.data, end.ctypes.data, n, float(tolerance),
        par.ctypes.data, dep.ctypes.data, stack_pos.ctypes.data, stack_end.ctypes.data,
    )  # fmt: skip
    return par, dep


def group_sums(group: Any, values: Any, groups: int, at: Any = None) -> Any:
    """The grouped float sum of pandas' Cython kernel (``DataFrame.groupby(group, sort=False).sum()`` where ``group`` is not sorted) of one column, in C (same bits).

    ``group``: each row's group number in ``[0, groups)``; ``values``:
    float64, one per row, or read at positions ``at`` (one per row; the
    sums of ``values[at]`` without that copy). Returns the sums; None
    without the library, or where ``group`` never decreases (pandas then
    sums each run by ``np.add.reduceat``, which adds in another order).
    """
    import numpy as np

    lib = library()
    if lib is None:
        return None
    group = np.ascontiguousarray(group, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.float64)
    if at is not None:
        at = np.ascontiguousarray(at, dtype=np.int64)
    if len(group) != (len(values) if at is None else len(at)):
        raise ValueError("group and values differ in length")
    out = np.zeros(max(int(groups), 0), dtype=np.float64)
    comp = np.zeros_like(out)
    done = lib.tp_group_sum(
        group.ctypes.data, None if at is None else at.ctypes.data, values.ctypes.data,
        len(group), len(values), len(out), out.ctypes.data, comp.ctypes.data,
    )  # fmt: skip
    if done < 0:
        raise ValueError(f"a group outside [0, {groups}) or a position outside the values")
    return None if done == 1 else out


def code_order(codes: Any, ncodes: int) -> tuple[Any, Any] | None:
    """``np.argsort(codes, kind="stable")`` of codes in ``[-1, ncodes)`` and where each code's rows start (``ncodes + 1`` bounds, code -1's rows first), in C; None without the library."""
    import numpy as np

    lib = library()
    if lib is None:
        return None
    codes = np.ascontiguousarray(codes)
    if codes.dtype not in (np.int8, np.int16, np.int32, np.int64):
        codes = codes.astype(np.int64)
    order = np.empty(len(codes), dtype=np.int64)
    bounds = np.empty(max(int(ncodes), 0) + 1, dtype=np.int64)
    done = lib.tp_code_order(
        codes.ctypes.data,
        codes.dtype.itemsize,
        len(codes),
        len(bounds) - 1,
        order.ctypes.data,
        bounds.ctypes.data,
    )
    if done < 0:
        raise ValueError(f"a code outside [-1, {ncodes})")
    return order, bounds


def outermost(kind: Any, member: Any, parent: Any, ts: Any, dur: Any) -> Any:
    """`analysis.steps._outermost` over every event of the member kinds, in C (steps.c): their rows, or None without the library.

    ``kind``: int8 kind codes; ``member``: 256 flags indexed by a code as an
    unsigned byte (-1 reads the last); ``parent``: the host tree's parents.
    """
    import numpy as np

    lib = library()
    if lib is None:
        return None
    kind = np.ascontiguousarray(kind, dtype=np.int8)
    member = np.ascontiguousarray(member, dtype=np.uint8)
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    ts = np.ascontiguousarray(ts, dtype=np.float64)
    dur = np.ascontiguousarray(dur, dtype=np.float64)
    n = len(kind)
    if len(member) != 256:
        raise ValueError("member needs one flag per byte value (256)")
    if not (len(parent) == len(ts) == len(dur) == n):
        raise ValueError("kind, parent, ts and dur differ in length")
    out = np.empty(n, dtype=np.int64)
    count = lib.tp_outermost(
        kind.ctypes.data,
        member.ctypes.data,
        parent.ctypes.data,
        ts.ctypes.data,
        dur.ctypes.data,
        n,
        out.ctypes.data,
    )
    if count < 0:
        raise ValueError("a parent outside the events")
    return out[:count]


def subtree_sums(parent: Any, depth: Any, own: Any) -> Any:
    """`analysis.tree.subtree_sums` in C (the same additions, same bits), or None without the library."""
    import numpy as np

    lib = library()
    if lib is None:
        return None
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    depth = np.ascontiguousarray(depth, dtype=np.int32)
    total = np.array(own, dtype=np.float64)  # a copy: summed in place
    n = len(parent)
    if not (len(depth) == len(total) == n):
        raise ValueError("parent, depth and own differ in length")
    levels = max(int(depth.max(initial=0)), 0) + 1
    starts = np.zeros(levels + 1, dtype=np.int64)
    # Scratch bound to names: an array made inside the call's arguments
    # would be freed before C reads it. acc and mark are zeroed lazily by
    # the system: only the parents' pages are touched.
    order, acc = np.empty(n, dtype=np.int64), np.zeros(n)
    mark, touched = np.zeros(n, dtype=np.uint8), np.empty(n, dtype=np.int64)
    done = lib.tp_subtree_sums(
        parent.ctypes.data, depth.ctypes.data, n, levels, total.ctypes.data,
        order.ctypes.data, starts.ctypes.data, acc.ctypes.data, mark.ctypes.data, touched.ctypes.data,
    )  # fmt: skip
    if done < 0:
        raise ValueError("a parent outside the tree")
    return total


def folded_into(parent: Any, depth: Any, codes: Any) -> Any:
    """`analysis.tree.folded_into` in C (the host tree's nodes: ``parent >= 0``, ``depth >= 0``), or None without the library."""
    import numpy as np

    lib = library()
    if lib is None:
        return None
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    depth = np.ascontiguousarray(depth, dtype=np.int32)
    codes = np.ascontiguousarray(codes)
    if codes.dtype not in (np.int8, np.int16, np.int32, np.int64):
        codes = codes.astype(np.int64)
    n = len(parent)
    if not (len(depth) == len(codes) == n):
        raise ValueError("parent, depth and codes differ in length")
    out = np.empty(n, dtype=np.int64)
    # (scratch bound to names, alive through the call; zeroed lazily by the system)
    children, folded = np.zeros(n, dtype=np.int32), np.zeros(n, dtype=np.uint8)
    done = lib.tp_folded_into(
        parent.ctypes.data, depth.ctypes.data, codes.ctypes.data, codes.dtype.itemsize, n,
        children.ctypes.data, folded.ctypes.data, out.ctypes.data,
    )  # fmt: skip
    if done < 0:
        raise ValueError("a parent outside the tree, or parents in a loop")
    return out


def mark_up(parent: Any, rows: Any) -> Any:
    """Per node: True at each of ``rows`` and at every ancestor of one (a bool array), in C; None without the library."""
    import numpy as np

    lib = library()
    if lib is None:
        return None
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    out = np.zeros(len(parent), dtype=np.uint8)
    if lib.tp_mark_up(parent.ctypes.data, len(parent), rows.ctypes.data, len(rows), out.ctypes.data) < 0:
        raise ValueError("a row or a parent outside the tree")
    return out.view(bool)


def self_values(parent: Any, depth: Any, values: Any) -> Any:
    """Each host node's value minus its host children's, 0.0 off the host tree (``depth < 0``), in C; None without the library.

    The figures of ``values - children_sums(parent, where(depth >= 0, values, 0))``
    with 0.0 where ``depth < 0``: the same additions, one array made.
    """
    import numpy as np

    lib = library()
    if lib is None:
        return None
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    depth = np.ascontiguousarray(depth, dtype=np.int32)
    values = np.ascontiguousarray(values, dtype=np.float64)
    n = len(parent)
    if not (len(depth) == len(values) == n):
        raise ValueError("parent, depth and values differ in length")
    out = np.zeros(n)
    if lib.tp_self_values(parent.ctypes.data, depth.ctypes.data, values.ctypes.data, n, out.ctypes.data) < 0:
        raise ValueError("a parent outside the tree")
    return out


def group_keys(
    rows: Any, events: int, keys: list[tuple[Any, Any, int]], limit: int
) -> tuple[Any, int, Any] | None:
    """Groups of the tuples of keys at ``rows`` (None: every event), numbered by first appearance, in C: (number of each row, how many, each one's first row).

    ``keys``: per key (integer codes of every event, a remap or None, span):
    the value at a row is its code, through the remap where given (code -1
    reading its last entry), in ``[-1, span)``. None without the library,
    or where the tuples span more than ``limit`` slots.
    """
    import numpy as np

    lib = library()
    if lib is None:
        return None
    spans = np.array([int(span) for _, _, span in keys], dtype=np.int64)
    strides = np.ones(len(keys), dtype=np.int64)
    total = 1
    for j in range(len(keys) - 1, -1, -1):
        strides[j] = total
        total *= int(spans[j]) + 1
        if total > limit:
            return None
    if rows is not None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
    # The arrays stay bound (in `held`) while C reads them through their addresses.
    held = []
    for codes, remap, _ in keys:
        codes = np.ascontiguousarray(codes)
        if codes.dtype not in (np.int8, np.int16, np.int32, np.int64):
            codes = codes.astype(np.int64)
        held.append(codes)
        held.append(None if remap is None else np.ascontiguousarray(remap, dtype=np.int64))
    addresses = np.array([0 if a is None else a.ctypes.data for a in held], dtype=np.int64)
    widths = np.array([a.dtype.itemsize for a in held[0::2]], dtype=np.int32)
    remap_lens = np.array([0 if a is None else len(a) for a in held[1::2]], dtype=np.int64)
    code_addresses, remap_addresses = addresses[0::2].copy(), addresses[1::2].copy()
    n = int(events) if rows is None else len(rows)
    slot = np.empty(total, dtype=np.int64)
    number = np.empty(n, dtype=np.int64)
    first = np.empty(min(n, total), dtype=np.int64)
    count = lib.tp_group_keys(
        None if rows is None else rows.ctypes.data, n, int(events), len(keys), code_addresses.ctypes.data, widths.ctypes.data,
        remap_addresses.ctypes.data, remap_lens.ctypes.data, spans.ctypes.data, strides.ctypes.data,
        total, slot.ctypes.data, number.ctypes.data, first.ctypes.data,
    )  # fmt: skip
    del held
    if count < 0:
        raise ValueError("a row, code or key value outside its range")
    return number, int(count), first[:count]


def count_before(ordered: Any, wanted: Any, side: str) -> Any:
    """``np.searchsorted(ordered, wanted, side)`` in C (``ordered`` sorted as numpy sorts, NaN last), or None.

    Each search starts from the previous answer: wanted values in runs
    near each other cost a few steps each. None without the library, or
    where the wanted values lie in no such order (C stops once they cost
    more than 12 steps each: the caller's sort is cheaper then).
    """
    import numpy as np

    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', not {side!r}")
    lib = library()
    if lib is None:
        return None
    ordered = np.ascontiguousarray(ordered, dtype=np.float64)
    wanted = np.ascontiguousarray(wanted, dtype=np.float64)
    out = np.empty(len(wanted), dtype=np.intp)
    stopped = lib.tp_count_before(
        ordered.ctypes.data, len(ordered), wanted.ctypes.data, len(wanted), side == "right", out.ctypes.data
    )
    return None if stopped else out
