"""One chunk through the C scanner: the columns `Builder._digest` would append.

The scanner (``scan.c``) writes numbers and per-chunk local codes of strings
and raw JSON values into preallocated arrays; here each DISTINCT local value
is decoded once and given its global code in the builder's interners, in the
order in which the pure-Python path would have met it (first appearance
among the rows that path interns), and the columns are assembled with numpy.

`Digester.digest` returns False, having changed nothing, whenever the
scanner refuses the chunk or a value fails to decode here; the builder then
digests that chunk the pure-Python way.
"""

from __future__ import annotations

import ctypes
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import repeat
from types import ModuleType
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from .. import categories as K

# The parser's builder and interners (typed loosely: the parser is not imported here).
Builder = Any
Interner = Any

#: The scanner's result codes (``scan.c``), by name, for the refusal counts.
REASONS = {
    1: "syntax",
    2: "type",
    3: "duplicate key",
    4: "integer range",
    5: "depth",
    6: "utf-8",
    7: "phase",
    8: "capacity",
    9: "escaped key",
    10: "number",
    11: "not an object",
}
_CAPACITY = 8

# (name, dtype, which capacity) in the order of scan.c's column enum.
_EV, _STR, _RAW, _SSLOTS, _RSLOTS = range(5)
_X = [
    ("x_name", np.int32), ("x_cat", np.int32), ("x_pid", np.int64), ("x_tid", np.int64),
    ("x_ts", np.float64), ("x_dur", np.float64), ("x_ext", np.int64), ("x_corr", np.int64),
    ("x_device", np.int64), ("x_stream", np.int64), ("x_bytes", np.float64),
    ("x_registers", np.float64), ("x_shared", np.float64), ("x_occupancy", np.float64),
    ("x_bps", np.float64), ("x_wps", np.float64), ("x_grid", np.int32), ("x_block", np.int32),
    ("x_dims", np.int32), ("x_types", np.int32), ("x_conc", np.int32), ("x_kf", np.int32),
    ("x_cs", np.int32), ("x_mh", np.int32), ("x_pyid", np.int64), ("x_pypid", np.int64),
    ("x_seq", np.int64),
    ("x_flags", np.uint8), ("x_pid_s", np.int32), ("x_tid_s", np.int32), ("x_stream_s", np.int32),
]  # fmt: skip
_M = [
    ("m_name", np.int32), ("m_ts", np.float64), ("m_pid", np.int64), ("m_tid", np.int64),
    ("m_bytes", np.float64), ("m_alloc", np.float64), ("m_res", np.float64), ("m_dtype", np.int64),
    ("m_did", np.int64), ("m_flags", np.uint8), ("m_pid_s", np.int32), ("m_tid_s", np.int32),
]  # fmt: skip
_F = [
    ("f_cat", np.int32), ("f_id", np.int64), ("f_start", np.uint8), ("f_pid", np.int64),
    ("f_tid", np.int64), ("f_ts", np.float64), ("f_flags", np.uint8), ("f_pid_s", np.int32),
    ("f_tid_s", np.int32), ("md_raw", np.int64),
]  # fmt: skip
COLUMNS = [(n, t, _EV) for n, t in _X + _M + _F] + [
    ("s_off", np.int64, _STR),
    ("s_len", np.int64, _STR),
    ("s_esc", np.uint8, _STR),
    ("r_off", np.int64, _RAW),
    ("r_len", np.int64, _RAW),
    ("s_slots", np.int32, _SSLOTS),
    ("r_slots", np.int32, _RSLOTS),
]
C_X, C_MEM, C_FLOW, C_META, C_STR, C_RAW, C_UNREAD, C_ERRPOS = range(8)

#: Chunks digested natively, and refused by reason (for tests and benchmarks).
STATS: Counter[str] = Counter()

_STRING = msgspec.json.Decoder(str)
_MEMORY_NAME = "[memory]"


class _Refused(Exception):
    """A value the scanner accepted that does not decode here: the chunk goes the Python way."""


class Digester:
    """The scanner's buffers (one set per builder: the scan runs without the GIL).

    ``parser`` is the parser module: its rules (`parser._ids` ...) and
    constants are used as they are, passed in rather than imported so that
    the parser, which creates digesters, is not imported back from here.
    """

    def __init__(self, lib: Any, parser: ModuleType) -> None:
        self.lib = lib
        self.P = parser
        self.caps = np.zeros(5, dtype=np.int64)
        self.counts = np.zeros(8, dtype=np.int64)
        self.cols: dict[str, np.ndarray] = {}
        self.ptrs: Any = None

    def _allocate(self, ev: int, strs: int, raws: int) -> None:
        slots = [1 << (2 * strs + 2).bit_length(), 1 << (2 * raws + 2).bit_length()]
        self.caps[:] = [ev, strs, raws, *slots]
        self.cols = {name: np.empty(int(self.caps[cap]), dtype=dt) for name, dt, cap in COLUMNS}
        self.ptrs = (ctypes.c_void_p * len(COLUMNS))(*[a.ctypes.data for a in self.cols.values()])

    def scan(
        self, chunk: bytes | memoryview, read_flows: bool, read_events: bool = True, bare: bool = False
    ) -> int:
        """Run the scanner over one chunk (``bare``: without the array's brackets); 0 when it read every event."""
        data = np.frombuffer(chunk, dtype=np.uint8)
        n = len(data)
        ev = max(int(self.caps[0]), n // 128 + 64)
        strs, raws = max(int(self.caps[1]), ev), max(int(self.caps[2]), ev)
        for _ in range(8):
            if ev > self.caps[0] or strs > self.caps[1] or raws > self.caps[2]:
                self._allocate(ev, strs, raws)
            rc = self.lib.tp_scan(
                data.ctypes.data,
                n,
                int(read_flows) | int(read_events) << 1 | int(bare) << 2,
                self.ptrs,
                self.caps.ctypes.data,
                self.counts.ctypes.data,
            )
            if rc != _CAPACITY:
                return rc
            c, caps = self.counts, self.caps
            if max(c[C_X], c[C_MEM], c[C_FLOW], c[C_META]) >= caps[0]:
                ev = min(4 * ev, n // 8 + 64)
            if c[C_STR] >= caps[1] or 2 * c[C_STR] >= caps[3] - 1:
                strs *= 4
            if c[C_RAW] >= caps[2] or 2 * c[C_RAW] >= caps[4] - 1:
                raws *= 4
        return _CAPACITY

    def digest(self, b: Builder, chunk: bytes | memoryview, bare: bool = False) -> bool:
        """Digest ``chunk`` into builder ``b`` natively; False (nothing changed) if refused."""
        rc = self.scan(chunk, b.read_flows or b.flows_aside is not None, b.read_events, bare)
        if rc:
            STATS["refused: " + REASONS.get(rc, str(rc))] += 1
            return False
        try:
            tables = self._tables(b, chunk)
        except _Refused as exc:
            STATS[f"refused: {exc}"] += 1
            return False
        self._commit(b, *tables)
        STATS["native"] += 1
        return True

    # -- what may still refuse: decoding the distinct values -------------- #

    def _tables(self, b: Builder, chunk: bytes | memoryview) -> tuple[list[str], list[bytes], list[Any]]:
        cnt, col = self.counts, self.cols
        n_str, n_raw = int(cnt[C_STR]), int(cnt[C_RAW])
        if (n_raw + 1) ** 3 >= 1 << 62:
            raise _Refused("tables too large")
        view = memoryview(chunk)
        strs: list[str] = []
        try:
            for o, n, esc in zip(
                col["s_off"][:n_str].tolist(),
                col["s_len"][:n_str].tolist(),
                col["s_esc"][:n_str].tolist(),
                strict=True,
            ):
                part = view[o : o + n]
                strs.append(_STRING.decode(b"".join((b'"', part, b'"'))) if esc else str(part, "utf-8"))
        except (UnicodeDecodeError, msgspec.DecodeError, msgspec.ValidationError):
            raise _Refused("string decode") from None
        raws = [
            bytes(view[o : o + n])
            for o, n in zip(col["r_off"][:n_raw].tolist(), col["r_len"][:n_raw].tolist(), strict=True)
        ]
        metas: list[Any] = []
        n_meta = int(cnt[C_META])
        if n_meta:
            codes = col["md_raw"][:n_meta]
            text = b"".join((b"[", b",".join(raws[k] for k in codes[_first_and_last(codes)].tolist()), b"]"))
            try:
                metas = list(b.decoder.decode(text))
            except (msgspec.DecodeError, msgspec.ValidationError):
                raise _Refused("metadata") from None
        return strs, raws, metas

    # -- committing (no refusal past this point) ---------------------------- #

    def _commit(self, b: Builder, strs: list[str], raws: list[bytes], metas: list[Any]) -> None:
        P = self.P
        if metas:
            P._apply_metadata_events(metas, b.meta)
        self._commit_memory(b, strs)
        if b.read_flows:
            self._commit_flows(b, strs, b.flows)
        elif b.flows_aside is not None:
            # Read all the same (see `Builder.flows_aside`): every one counts as unread.
            b.flows_unread += int(self.counts[C_FLOW])
            self._commit_flows(b, strs, b.flows_aside)
        else:
            b.flows_unread += int(self.counts[C_UNREAD])
        n = int(self.counts[C_X])
        if n:
            _commit_x(P, b, {k: v[:n] for k, v in self.cols.items() if k.startswith("x_")}, strs, raws)

    def _commit_memory(self, b: Builder, strs: list[str]) -> None:
        n = int(self.counts[C_MEM])
        if not n:
            return
        P = self.P
        is_memory = np.array([s == _MEMORY_NAME for s in strs] + [False], dtype=bool)
        rows = np.flatnonzero(is_memory[self.cols["m_name"][:n]])
        if not len(rows):
            return
        c = {k: v[rows] for k, v in self.cols.items() if k.startswith("m_")}
        b._append(
            b.memory,
            ts=c["m_ts"],
            pid=_ids(c["m_pid"], c["m_flags"] & 1, c["m_pid_s"], strs, P._ids),
            tid=_ids(c["m_tid"], c["m_flags"] & 2, c["m_tid_s"], strs, P._ids),
            bytes=c["m_bytes"],
            total_allocated=c["m_alloc"],
            total_reserved=c["m_res"],
            device_type=c["m_dtype"],
            device_id=c["m_did"],
        )

    def _commit_flows(self, b: Builder, strs: list[str], store: dict[str, list[np.ndarray]]) -> None:
        n = int(self.counts[C_FLOW])
        if not n:
            return
        P = self.P
        launch = P._LAUNCH_FLOW
        cat = self.cols["f_cat"][:n]
        # Only the categories flows have are looked up (a chunk has thousands of strings).
        is_launch = np.zeros(len(strs) + 1, dtype=bool)
        for k in np.unique(cat).tolist():
            is_launch[k] = k >= 0 and strs[k] in launch
        rows = np.flatnonzero(is_launch[cat])
        if not len(rows):
            return
        c = {k: v[rows] for k, v in self.cols.items() if k.startswith("f_")}
        b._append(
            store,
            id=c["f_id"],
            is_start=c["f_start"].astype(bool),
            pid=_ids(c["f_pid"], c["f_flags"] & 1, c["f_pid_s"], strs, P._ids),
            tid=_ids(c["f_tid"], c["f_flags"] & 2, c["f_tid_s"], strs, P._ids),
            ts=c["f_ts"],
        )


def _first_and_last(codes: np.ndarray) -> np.ndarray:
    """Positions of the first and the last occurrence of each distinct code, in order.

    Enough of a chunk's metadata events to apply: applying them (dict
    assignments, `parser._apply_metadata_events`) gives the same dicts as
    applying all of them, keys in the same order (each key's first event is
    kept) with the same values (each key's last event is kept).
    """
    _, first = np.unique(codes, return_index=True)
    _, from_end = np.unique(codes[::-1], return_index=True)
    return np.union1d(first, len(codes) - 1 - from_end)


def _ids(
    values: np.ndarray,
    is_str: np.ndarray,
    codes: np.ndarray,
    strs: list[str],
    rule: Callable[[list], np.ndarray],
) -> np.ndarray:
    """An id column; where some values were strings, the pure path's ``rule`` on the Python values."""
    if not is_str.any():
        return values
    objs: list[Any] = values.tolist()
    for i in np.flatnonzero(is_str).tolist():
        k = int(codes[i])
        objs[i] = strs[k] if k >= 0 else ""
    return rule(objs)


def _map_values(interner: Interner, local: np.ndarray, values: Sequence[Any]) -> np.ndarray:
    """Global codes for local codes into ``values`` (-1: absent), new values interned in order of first appearance."""
    index = interner.index
    lut = np.fromiter((index.get(v, -2) for v in values), np.int32, count=len(values))
    lut = np.append(lut, np.int32(-1))
    out = lut[local]
    missing = out == -2
    if missing.any():
        # pandas' factorize hashes, and lists the new codes in order of first appearance.
        _, firsts = pd.factorize(local[missing])
        for k in firsts.tolist():
            v = values[k]
            if v not in index:
                index[v] = len(interner.values)
                interner.values.append(v)
            lut[k] = index[v]
        out = lut[local]
    return out


def _map_keys(
    interner: Interner, parts: list[tuple[np.ndarray, int]], table: list[Any], make: Callable[..., Any]
) -> np.ndarray:
    """Global codes of keys made from several local codes per row, interned in order.

    A row's key is ``make((table[c1], table[c2], ...))`` of its local codes;
    ``table`` ends with what code -1 (absent) stands for, so that
    ``table[-1]`` is it.
    """
    combo = np.zeros(len(parts[0][0]), dtype=np.int64)
    for codes, size in parts:
        combo = combo * (size + 1) + (codes.astype(np.int64) + 1)
    inverse, uniq = pd.factorize(combo)  # distinct combinations in order of first appearance
    # The local codes of each distinct combination, taken apart again (vectorised).
    columns = []
    rest = uniq.astype(np.int64)
    for _, size in reversed(parts):
        rest, rem = np.divmod(rest, size + 1)
        columns.append((rem - 1).tolist())
    # map() and zip() in C: one Python-level call per distinct key (make), not three.
    keys = list(map(make, zip(*(map(table.__getitem__, col) for col in reversed(columns)), strict=True)))
    index, values = interner.index, interner.values
    out = np.fromiter(map(index.get, keys, repeat(-2)), np.int32, count=len(keys))
    if (out == -2).any():
        for j in np.flatnonzero(out == -2).tolist():
            k = keys[j]
            code = index.get(k)
            if code is None:
                code = index[k] = len(values)
                values.append(k)
            out[j] = code
    return out[inverse]


def _lut(kind_codes: np.ndarray) -> np.ndarray:
    """Per kind code: whether it is one of ``kind_codes`` (a lookup, faster than ``np.isin``)."""
    lut = np.zeros(len(K.KINDS), dtype=bool)
    lut[kind_codes] = True
    return lut


def _group(m: int, rows: np.ndarray, codes: np.ndarray | None) -> np.ndarray:
    out = np.full(m, -1, dtype=np.int32)
    if codes is not None and len(rows):
        out[rows] = codes
    return out


def _commit_x(
    P: ModuleType, b: Builder, c: dict[str, np.ndarray], strs: list[str], raws: list[bytes]
) -> None:
    """The X rows of one chunk, as `Builder._digest` + `_digest_x` would append them."""
    cat = _map_values(b.cat, c["x_cat"], strs)
    spans = cat == b.cat.code("Trace")
    keep = np.flatnonzero(~spans) if spans.any() else None
    # The scanner's buffers are reused by the next chunk: the columns kept as
    # they are are copied out by the column store, before the next chunk.
    c = {k: (v[keep] if keep is not None else v) for k, v in c.items()}
    if keep is not None:
        cat = cat[keep]
    m = len(cat)
    if not m:
        return
    kind = b._kinds(cat)
    flags = c["x_flags"]
    pid = _ids(c["x_pid"], flags & 1, c["x_pid_s"], strs, P._ids)
    tid = _ids(c["x_tid"], flags & 2, c["x_tid_s"], strs, P._ids)
    out: dict[str, np.ndarray] = {
        "name": _map_values(b.names, c["x_name"], strs),
        "cat": cat,
        "kind": kind,
        "pid": pid,
        "tid": tid,
        "ts": c["x_ts"],
        "dur": c["x_dur"],
        "external_id": c["x_ext"],
        "correlation": np.where(_lut(P._CORRELATED_KIND_CODES)[kind], c["x_corr"], -1),
    }
    is_dev = _lut(P._DEVICE_KIND_CODES)[kind]
    dev = np.flatnonzero(is_dev)
    device = c["x_device"][dev]
    stream = _ids(c["x_stream"][dev], (flags & 4)[dev], c["x_stream_s"][dev], strs, P._ints_of)
    out["device"] = P._scatter(m, dev, np.where(device >= 0, device, pid[dev]), -1)
    out["stream"] = P._scatter(m, dev, np.where(stream >= 0, stream, tid[dev]), -1)
    for column, local in zip(
        P._DEVICE_NUMBERS,
        ("x_bytes", "x_registers", "x_shared", "x_occupancy", "x_bps", "x_wps"),
        strict=True,
    ):
        out[column] = np.where(is_dev, c[local], np.nan)
    out["launch"] = _group(m, dev, _launch_codes(b, c, dev, raws, P._SEP))
    kf = c["x_kf"][dev]
    out["kernel_file"] = _group(
        m, dev, _map_values(b.groups["kernel_file"], kf, strs) if (kf >= 0).any() else None
    )
    ops = np.flatnonzero(kind == P._KIND_CODE[K.CPU_OP])
    out["shapes"] = _group(m, ops, _shape_codes(b, c, ops, raws, P._SEP))
    out["python"] = _group(m, ops, _python_codes(b, c, ops, strs))
    out["sequence"] = P._scatter(m, ops, c["x_seq"][ops], -1)
    is_py = kind == P._KIND_CODE[K.PYTHON_FUNCTION]
    out["python_id"] = np.where(is_py, c["x_pyid"], -1)
    out["python_parent_id"] = np.where(is_py, c["x_pypid"], -1)
    b._append_events(out)
    if b.flows_aside is not None:
        _keep_flows_aside(P, b, kind, out["correlation"])


def _keep_flows_aside(P: ModuleType, b: Builder, kind: np.ndarray, correlation: np.ndarray) -> None:
    """Stop keeping flows aside at the first chunk with device work whose links all have correlation ids.

    Where the ids link everything (every CUDA trace) the flows are seldom
    needed, and keeping them costs a few per cent; once some link lacks its
    id (the MTIA trace's device events) they are kept to the end. Either way
    the result is the same: without them, flows the links turn out to need
    are read in a second pass (`parser._finish`).
    """
    linked = _lut(P._FLOW_LINKED_KIND_CODES)[kind]
    if (correlation[linked] < 0).any():
        b.flows_wanted = True
    elif not b.flows_wanted and _lut(P._LAUNCHED_KIND_CODES)[kind].any():
        b.flows_aside = None


def _launch_codes(
    b: Builder, c: dict[str, np.ndarray], dev: np.ndarray, raws: list[bytes], sep: bytes
) -> np.ndarray | None:
    grid, block = c["x_grid"][dev], c["x_block"][dev]
    if not ((grid >= 0).any() or (block >= 0).any()):
        return None
    n = len(raws)
    return _map_keys(b.groups["launch"], [(grid, n), (block, n)], [*raws, b""], sep.join)


def _shape_codes(
    b: Builder, c: dict[str, np.ndarray], ops: np.ndarray, raws: list[bytes], sep: bytes
) -> np.ndarray | None:
    dims, types, conc = c["x_dims"][ops], c["x_types"][ops], c["x_conc"][ops]
    n = len(raws)
    has_conc = bool((conc >= 0).any())
    if (dims >= 0).any() or (types >= 0).any():
        if not has_conc:
            return _map_keys(b.groups["shapes"], [(dims, n), (types, n)], [*raws, b""], sep.join)
    elif not has_conc:
        return None
    return _map_keys(b.groups["shapes"], [(dims, n), (types, n), (conc, n)], [*raws, b""], sep.join)


def _python_codes(
    b: Builder, c: dict[str, np.ndarray], ops: np.ndarray, strs: list[str]
) -> np.ndarray | None:
    stack, module = c["x_cs"][ops], c["x_mh"][ops]
    if not ((stack >= 0).any() or (module >= 0).any()):
        return None
    n = len(strs)
    return _map_keys(b.groups["python"], [(stack, n), (module, n)], [*strs, ""], tuple)
