"""What a finding is, and the inputs every rule reads.

Rules are pure functions ``rule(inputs, thresholds) -> list[Finding]``.
`Inputs` bundles the already computed tables of a profile (events with their
call tree and links, steps, summary, kernel table, trace metadata) and derives,
once and lazily, the arrays several rules share (step windows, names, kinds).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from ...trace import categories as K
from ..coded import CodedNames, coded

HIGH = "high"
MEDIUM = "medium"
INFO = "info"
NOT_CHECKED = "not checked"
#: Severity levels, most urgent first (the sort order of the findings table).
SEVERITIES = (HIGH, MEDIUM, INFO, NOT_CHECKED)

#: Columns of the findings table, in order.
COLUMNS = ["severity", "title", "detail", "evidence", "rule", "impact_us", "event_rows", "ops", "kernels"]

_STEP_NAME = re.compile(r"^ProfilerStep#\d+$")


@dataclass
class Finding:
    """One thing an expert would point at in the trace.

    Attributes
    ----------
    rule
        Identifier of the rule that produced it (``overhead``, ``sync`` ...).
    severity
        One of `SEVERITIES`.
    title
        One line with the key number.
    detail
        What it means and what to try.
    evidence
        The numbers behind it (plain Python values, JSON-friendly).
    impact_us
        Time per step at stake (µs), used to order findings of one severity.
    event_rows
        Positions in ``Profile.events`` of the events that show it (for the
        timeline), at most ``Thresholds.max_event_rows``.
    ops, kernels
        Names of the op-table and kernel-table rows involved.
    """

    rule: str
    severity: str
    title: str
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)
    impact_us: float = 0.0
    event_rows: list[int] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)


def findings_frame(findings: Iterable[Finding]) -> pd.DataFrame:
    """Findings as a DataFrame with `COLUMNS`, most severe and costly first."""
    rows = [
        {
            "severity": f.severity,
            "title": f.title,
            "detail": f.detail,
            "evidence": f.evidence,
            "rule": f.rule,
            "impact_us": float(f.impact_us) if np.isfinite(f.impact_us) else 0.0,
            "event_rows": [int(r) for r in f.event_rows],
            "ops": list(f.ops),
            "kernels": list(f.kernels),
        }
        for f in findings
    ]
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=float if c == "impact_us" else object) for c in COLUMNS})
    frame = pd.DataFrame(rows, columns=COLUMNS)
    rank = frame["severity"].map({s: i for i, s in enumerate(SEVERITIES)}).fillna(len(SEVERITIES))
    frame = frame.assign(_rank=rank, _neg=-frame["impact_us"])
    frame = frame.sort_values(["_rank", "_neg"], kind="stable").drop(columns=["_rank", "_neg"])
    return frame.reset_index(drop=True)


#: Windows (steps) from which `Inputs.in_steps` and `step_of` search instead of comparing per window.
WINDOW_SEARCH_FROM = 16


@dataclass
class Inputs:
    """Everything a rule may read, already computed by the `Profile`.

    Parameters
    ----------
    events
        ``Profile.events``: parsed columns plus ``parent``, ``depth``,
        ``launch``, ``op`` (positions, -1 when none).
    steps
        The counted rows of ``Profile.steps`` (empty, truncated and suspicious
        steps left out; see `analysis.steps.counted_steps`).
    summary
        ``Profile.summary``.
    kernels
        ``Profile.kernels``.
    device_properties
        ``deviceProperties`` of the trace.
    world_size, rank
        From ``distributedInfo``.
    device_kind
        The backend a live run profiled (``cuda``, ``mps``, ``cpu`` ...), None
        for a loaded trace.
    compile_stats
        Graph breaks / recompiles of a ``--compile`` run, when the capture
        recorded them (any mapping or object; read defensively).
    launch_step
        One value per event: for device work, the position in ``steps`` of
        the step that launched it (-1: launched in none of them); -1 for
        other events. None: device work is placed by its start time instead.
    num_threads, cpu_cores
        torch's intra-op thread count (``torch.get_num_threads()``) and the
        cores this process may use, for a run profiled in this session; None
        for a loaded trace (the file does not record them).
    threads_source
        Where ``num_threads`` came from: ``"capture"`` (recorded while the
        cell ran) or ``"process after the run"``.
    activity_order
        `activity_rows` positions by start, ties in row order
        (`kernels.start_order`), where the profile has it; None: sorted here.
    """

    events: pd.DataFrame
    steps: pd.DataFrame
    summary: Mapping[str, Any]
    kernels: pd.DataFrame
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    world_size: int | None = None
    rank: int | None = None
    device_kind: str | None = None
    compile_stats: Any = None
    launch_step: np.ndarray | None = None
    activity_order: np.ndarray | None = None
    num_threads: int | None = None
    cpu_cores: int | None = None
    threads_source: str | None = None

    # ------------------------------------------------------------------ #
    # columns as arrays (shared by the rules)

    @cached_property
    def names(self) -> CodedNames:
        """Event names, indexed like an object array (``names[rows]``, ``names[row]``).

        Read through the categorical codes: only the rows asked for become
        strings, where an object array of every name cost a pass over
        millions of events before any rule ran.
        """
        codes, labels = self._name_codes
        return CodedNames(codes, labels)

    @cached_property
    def _name_codes(self) -> tuple[np.ndarray, np.ndarray]:
        return coded(self.events["name"])

    @property
    def name_codes(self) -> np.ndarray:
        """One integer per distinct event name (-1 for none).

        Rules group and match names through these codes: kernel names run to
        hundreds of characters, and turning them into a fixed-width string
        array would copy megabytes per rule.
        """
        return self._name_codes[0]

    def name_of_code(self, code: int) -> str:
        """The event name behind a `name_codes` value."""
        return str(self._name_codes[1][code]) if code >= 0 else ""

    def rows_named(self, wanted: Iterable[str], rows: np.ndarray | None = None) -> np.ndarray:
        """Rows (of ``rows``, default all) whose name is one of ``wanted``."""
        # A lookup per code (one more entry, False, for code -1): indexing it
        # is one pass, where np.isin sorted the rows' codes. Marked from the
        # wanted names' codes, not by testing every name of the trace.
        code_of = self._code_of_name
        hit = np.zeros(len(self._name_codes[1]) + 1, dtype=bool)
        hit[[code_of[n] for n in set(wanted) if n in code_of]] = True
        if rows is None:
            return np.flatnonzero(hit[self.name_codes])
        return rows[hit[self.name_codes[rows]]]

    @cached_property
    def _code_of_name(self) -> dict[Any, int]:
        return {name: code for code, name in enumerate(self._name_codes[1].tolist())}

    def codes_in(self, rows: np.ndarray) -> np.ndarray:
        """The distinct name codes among ``rows``, sorted, -1 (no name) first when present.

        What ``np.unique(name_codes[rows])`` gives, by counting per code.
        """
        codes = self.name_codes[rows]
        present = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(self._name_codes[1])))
        return np.concatenate([[-1], present]).astype(np.int64) if (codes < 0).any() else present

    def name_flags(self, rows: np.ndarray, test: Callable[[str], bool]) -> np.ndarray:
        """``test`` of each of ``rows``' names, run once per distinct name (``name_of_code``: "" for none)."""
        codes = self.name_codes[rows]
        # Indexed by code + 1, so code -1 (no name) has its own entry.
        flag = np.zeros(len(self._name_codes[1]) + 1, dtype=bool)
        for c in self.codes_in(rows).tolist():
            flag[c + 1] = bool(test(self.name_of_code(c)))
        return flag[codes + 1]

    def count_names(self, rows: np.ndarray, weights: np.ndarray | None = None) -> dict[str, float]:
        """Occurrences (or summed ``weights``) per name among ``rows``, largest first."""
        codes = self.name_codes[rows]
        ok = codes >= 0
        # Codes index the names directly: counting per code is one pass, where
        # np.unique sorted (or hashed) every row (seconds on ten million).
        codes = codes[ok]
        width = len(self._name_codes[1])
        uniq = np.flatnonzero(np.bincount(codes, minlength=width))
        counted = np.bincount(codes, weights=None if weights is None else weights[ok], minlength=width)
        sums = counted[uniq]
        order = np.argsort(-sums, kind="stable")
        return {self.name_of_code(int(uniq[i])): sums[i].item() for i in order}

    def is_kind(self, *kinds: str) -> np.ndarray:
        """Mask of the events whose kind is one of ``kinds``.

        From the categorical codes (`categories.kind_mask`): an object array
        of the kinds, one string per event, cost the rules seconds on a trace
        of ten million events. A new array each call, so callers may change it.
        """
        # Kept per set of kinds: the rules ask for the same few masks again
        # and again, and a copy is cheaper than matching the codes anew.
        key = tuple(sorted(set(kinds)))
        if key not in self._kind_masks:
            self._kind_masks[key] = K.kind_mask(self.events, kinds)
        return self._kind_masks[key].copy()

    @cached_property
    def _kind_masks(self) -> dict[tuple[str, ...], np.ndarray]:
        return {}

    @cached_property
    def _kind_codes(self) -> tuple[np.ndarray, np.ndarray]:
        return coded(self.events["kind"])

    def kind_of(self, row: int) -> str | None:
        """The kind of event ``row``."""
        codes, kinds = self._kind_codes
        code = codes[row]
        return kinds[code] if code >= 0 else None

    @cached_property
    def ts(self) -> np.ndarray:
        """Start times (µs)."""
        return self.events["ts"].to_numpy(np.float64)

    @cached_property
    def dur(self) -> np.ndarray:
        """Durations (µs)."""
        return self.events["dur"].to_numpy(np.float64)

    @cached_property
    def end(self) -> np.ndarray:
        """End times (µs)."""
        return self.ts + self.dur

    def column(self, name: str, fill: int = -1) -> np.ndarray:
        """An integer column of the events, or ``fill`` everywhere if absent."""
        if name in self.events:
            return self.events[name].to_numpy()
        return np.full(len(self.events), fill, dtype=np.int64)

    @cached_property
    def parent(self) -> np.ndarray:
        """Host call-tree parent of each event (-1 for none)."""
        return self.column("parent")

    @cached_property
    def is_step_range(self) -> np.ndarray:
        """True for the ``ProfilerStep#k`` ranges themselves."""
        out = np.zeros(len(self.events), dtype=bool)
        ann = np.flatnonzero(self.is_kind(K.USER_ANNOTATION))
        if len(ann):
            # Matched once per distinct name, not per range.
            out[ann] = self.name_flags(ann, lambda name: bool(_STEP_NAME.match(name)))
        return out

    # ------------------------------------------------------------------ #
    # steps

    @cached_property
    def device_traced(self) -> bool:
        """Whether the trace holds any device activity."""
        return bool(self.summary.get("device_traced"))

    @cached_property
    def n_steps(self) -> int:
        """Profiled steps (1 for a trace without ``ProfilerStep`` ranges)."""
        return max(int(self.summary.get("steps") or 0), 1)

    @cached_property
    def has_steps(self) -> bool:
        """Whether the trace has ``ProfilerStep`` ranges."""
        return not self.steps.empty

    @cached_property
    def windows(self) -> list[tuple[float, float]]:
        """(start, end) of each profiled step, or the whole trace as one."""
        if self.has_steps:
            lo = self.steps["start_us"].to_numpy(np.float64)
            hi = lo + self.steps["wall_us"].to_numpy(np.float64)
            return [(float(a), float(b)) for a, b in zip(lo, hi, strict=True)]
        # The recording window: a suspicious step range may reach far past it.
        lo = self.summary.get("window_start_us")
        hi = self.summary.get("window_end_us")
        if lo is None or hi is None:
            lo, hi = 0.0, float(self.summary.get("span_us") or (self.end.max() if len(self.events) else 0.0))
        return [(float(lo), float(hi))]

    @cached_property
    def unit(self) -> str:
        """``"step"``, or ``"trace"`` when the trace has no steps."""
        return "step" if self.has_steps else "trace"

    @cached_property
    def per(self) -> str:
        """``"/step"`` after a per-step figure, empty for a trace without steps."""
        return "/step" if self.has_steps else ""

    @cached_property
    def wall_per_step(self) -> float:
        """Wall time per step (µs)."""
        return float(self.summary.get("wall_per_step_us") or 0.0)

    def in_steps(self, rows: np.ndarray) -> np.ndarray:
        """Which of ``rows`` start inside a profiled step."""
        t = self.ts[rows]
        k = self._window_of(t)
        if k is not None:
            return k >= 0
        inside = np.zeros(len(rows), dtype=bool)
        for lo, hi in self.windows:
            inside |= (t >= lo) & (t < hi)
        return inside

    def _window_of(self, t: np.ndarray) -> np.ndarray | None:
        """Index of the window holding each time (-1: none), by one search; None where windows overlap.

        Sorted windows, each starting at or after the previous one ends,
        hold a time at most once, in the last one starting at or before it:
        one search instead of three comparisons of every time per window,
        from `WINDOW_SEARCH_FROM` windows on (5.6M times: 20 windows 43 vs
        66 ms; 5 windows 35 vs 17 ms, the comparisons win). A NaN time lies in none.
        """
        lo, hi = self._window_bounds
        if len(lo) <= WINDOW_SEARCH_FROM or not (np.all(lo[1:] >= lo[:-1]) and np.all(lo[1:] >= hi[:-1])):
            return None
        k = np.searchsorted(lo, t, side="right") - 1
        return np.where((k >= 0) & (t < hi[np.maximum(k, 0)]), k, -1)

    @cached_property
    def _window_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return (
            np.array([a for a, _ in self.windows], dtype=np.float64),
            np.array([b for _, b in self.windows], dtype=np.float64),
        )

    def launched_in_steps(self, rows: np.ndarray) -> np.ndarray:
        """Which of the device-work ``rows`` a counted step launched (all without steps)."""
        if not self.has_steps:
            return np.ones(len(rows), dtype=bool)
        if self.launch_step is None:
            return self.in_steps(rows)
        return self.launch_step[rows] >= 0

    def step_of(self, rows: np.ndarray) -> np.ndarray:
        """Index (into `windows`) of the step each row starts in, -1 outside."""
        t = self.ts[rows]
        k = self._window_of(t)
        if k is not None:
            return k.astype(np.int64, copy=False)
        out = np.full(len(rows), -1, dtype=np.int64)
        for i, (lo, hi) in enumerate(self.windows):
            out[(t >= lo) & (t < hi)] = i
        return out

    # ------------------------------------------------------------------ #
    # host call tree

    def chain(self, row: int) -> list[int]:
        """``row`` and its host ancestors, outermost first."""
        out = []
        parent = self.parent
        seen = 0
        while row >= 0 and seen < 512:  # depth guard against a corrupt tree
            out.append(int(row))
            row = int(parent[row])
            seen += 1
        return out[::-1]

    def op_chain(self, row: int) -> list[int]:
        """The ``cpu_op`` ancestors of ``row`` (itself included), outermost first."""
        # Kept per row: the rules ask for the same op's chain once per copy,
        # sync or launch it made.
        found = self._op_chains.get(row)
        if found is None:
            found = self._op_chains[row] = [r for r in self.chain(row) if self.kind_of(r) == K.CPU_OP]
        return list(found)

    @cached_property
    def _op_chains(self) -> dict[int, list[int]]:
        return {}

    def op_levels(self, rows: np.ndarray) -> np.ndarray:
        """The ``cpu_op`` rows of each of ``rows``' `chain`, one line per level (innermost first), -1 elsewhere.

        A (levels, len(rows)) array: column ``i`` read from the last line up,
        without the -1s, is ``op_chain(rows[i])``. One walk up the tree for
        all rows, where `op_chain` climbed once per row in Python.
        """
        cur = np.asarray(rows, dtype=np.int64)
        codes, kinds = self._kind_codes
        # Indexed by code + 1, so code -1 (no kind) has its own entry.
        is_op = np.array([False] + [k == K.CPU_OP for k in kinds.tolist()])
        levels = []
        for _ in range(512):  # the depth guard of `chain`
            live = cur >= 0
            if not live.any():
                break
            at = np.maximum(cur, 0)
            levels.append(np.where(live & is_op[codes[at].astype(np.int64) + 1], cur, -1))
            cur = np.where(live, self.parent[at], -1)
        return np.array(levels, dtype=np.int64).reshape(len(levels), len(cur))

    def name_text(self, rows: np.ndarray) -> list[str]:
        """`op_name` of each of ``rows`` (all >= 0): ``str`` of the name, "nan" where missing."""
        return self._name_text[self.name_codes[rows]].tolist()

    @cached_property
    def _name_text(self) -> np.ndarray:
        # Names are strings; code -1 indexes the last entry: str(NaN), as op_name reads a missing name.
        return np.append(self._name_codes[1], np.array(["nan"], dtype=object))

    def annotation_of(self, row: int) -> int:
        """Innermost ``record_function`` range around ``row`` (not a step), or -1."""
        for r in reversed(self.chain(row)):
            if self.kind_of(r) == K.USER_ANNOTATION and not self.is_step_range[r]:
                return r
        return -1

    def stack_of(self, rows: list[int]) -> str | None:
        """The first recorded Python stack among ``rows`` (outermost first)."""
        if "stack" not in self.events:
            return None
        col = self.events["stack"]
        for r in rows:
            v = col.iat[r]
            if isinstance(v, str) and v:
                return v
        return None

    # ------------------------------------------------------------------ #
    # device

    @cached_property
    def activity_rows(self) -> np.ndarray:
        """Rows of kernels, memcpys and memsets."""
        return np.flatnonzero(self.is_kind(*K.DEVICE_ACTIVITY))

    @cached_property
    def devices_used(self) -> list[int]:
        """Devices with any activity."""
        dev = self.column("device")[self.activity_rows]
        return sorted(int(d) for d in pd.unique(dev))

    def props_of(self, device: int) -> dict[str, Any]:
        """``deviceProperties`` entry of ``device`` (by id, else position)."""
        for p in self.device_properties:
            if p.get("id") == device:
                return p
        if 0 <= device < len(self.device_properties):
            return self.device_properties[device]
        return {}

    def op_name(self, row: int) -> str:
        """Name of event ``row`` (empty for -1)."""
        return str(self.names[row]) if row >= 0 else ""


def limit_rows(rows: Iterable[int], limit: int) -> list[int]:
    """Sorted unique event rows, cut to ``limit``."""
    if hasattr(rows, "__array__"):  # no Python int per row: rules pass millions
        arr = np.asarray(rows).astype(np.int64, copy=False)
    else:
        arr = np.fromiter((int(r) for r in rows), dtype=np.int64)
    arr = arr[arr >= 0]
    # Rows picked from a sorted selection are already sorted and distinct:
    # one comparison pass, where unique hashed millions of them.
    if len(arr) > 1 and not bool((arr[1:] > arr[:-1]).all()):
        arr = unique_rows(arr)
    return arr[:limit].tolist() if limit >= 0 else arr.tolist()


def unique_rows(rows: np.ndarray) -> np.ndarray:
    """The distinct values of non-negative row numbers, sorted (what ``np.unique`` gives).

    Marked in a mask as long as the event table: one pass, where numpy's
    unique took 1.4 s for the 1.9M launch rows of a ten-million-event trace.
    """
    rows = np.asarray(rows, dtype=np.int64)
    if not len(rows):
        return rows
    top = int(rows.max()) + 1
    if top > 8 * len(rows) + (1 << 20):  # few rows over a huge range: sorting is cheaper
        # Sorted and cut at the changes: np.unique hashed instead (0.2 s a call at ten million).
        ordered = np.sort(rows)
        return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])]
    seen = np.zeros(top, dtype=bool)
    seen[rows] = True
    return np.flatnonzero(seen)


def plural(n: float, word: str, many: str | None = None) -> str:
    """``1 copy``, ``3 copies``: count and noun."""
    n_int = int(round(n))
    return f"{n_int:,} {word if n_int == 1 else (many or word + 's')}"
