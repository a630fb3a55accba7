"""`Profile`: the result of a run or of a loaded trace, as pandas DataFrames.

A Profile is built from `TraceData` only, whether the trace was captured a
second ago or loaded from a colleague's file. Every table is computed on first
access and cached; analysis functions are pure, so the Profile is just the
place that wires them together.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..analysis import achieved as achieved_mod
from ..analysis import breakdown as breakdown_mod
from ..analysis import flops as flops_mod
from ..analysis import hardware as hardware_mod
from ..analysis import kernels as kernels_mod
from ..analysis import links as links_mod
from ..analysis import modules as modules_mod
from ..analysis import notes as notes_mod
from ..analysis import ops as ops_mod
from ..analysis import steps as steps_mod
from ..analysis import tree as tree_mod
from ..columns import sort_column
from ..trace import categories as K
from ..trace.files import parse_trace
from ..trace.pages import table_memory
from ..trace.parser import TraceData, TraceMeta, read_flows

if TYPE_CHECKING:  # pragma: no cover
    from .profile_diff import ProfileDiff


@dataclass
class CaptureInfo:
    """How a live run was captured (absent for loaded traces).

    Attributes
    ----------
    device
        Device spec that was profiled (``cuda:0``, ``cpu`` ...).
    device_kind
        Backend kind (``cuda``, ``rocm``, ``xpu``, ``mps``, ``cpu`` ...).
    warmup, steps
        Unprofiled and profiled repetitions of the cell.
    options
        The profiler switches (record_shapes, memory, stack, flops, modules).
    cell
        Source of the profiled cell.
    started, wall_s
        Wall-clock start (epoch seconds) and duration of the whole run.
    parse_s
        Seconds spent turning the trace into tables.
    step_cpu_us
        The CPU time the code took in each recorded step, in step order, as
        the capture measured it (`capture.runner.own_cpu_us`; the trace
        holds wall times only); empty when not measured.
    phases
        Wall seconds per phase of the run, in the order they ran: set-up,
        the capture's (`capture.runner.PHASES`), parse, store, tables,
        view. What a first run in a fresh kernel spends besides its steps.
    """

    device: str = "cpu"
    device_kind: str = "cpu"
    warmup: int = 0
    steps: int = 0
    options: dict[str, bool] = field(default_factory=dict)
    cell: str = ""
    started: float = 0.0
    wall_s: float = 0.0
    parse_s: float = 0.0
    compile_s: float | None = None
    step_cpu_us: list[float] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)


def _table(method: Any) -> Any:
    """``method`` (of a `Profile`) computed inside `trace.pages.table_memory`, sized by the profile's events."""

    @functools.wraps(method)
    def inner(self: Any, *args: Any, **kwargs: Any) -> Any:
        # From the instance only: a CachedProfile parses its trace on first
        # reading `_data`, which a table answered from its cache never needs.
        events = getattr(self.__dict__.get("_data"), "events", None)
        with table_memory(len(events) if events is not None else 0):
            return method(self, *args, **kwargs)

    return inner


class Profile:
    """One profiled run: its events and every table derived from them.

    Parameters
    ----------
    data
        The parsed trace.
    name
        Label shown in views and the run list.
    capture
        How the run was captured, when it was live.
    notes
        Things the user must know about this profile (e.g. "MPS kernels
        cannot be traced; CPU side only").
    partial
        True when the run was interrupted (exception, Ctrl-C) and the
        profile holds only the steps that completed.
    error
        One-line description of what interrupted the run.
    run_dir
        Folder of the run store holding this run, if any.
    """

    #: The process's CPU time per step as the run's record in the store kept
    #: it, for a run reopened from its trace (a live run has it in `capture`);
    #: set by whoever opens the run folder (`runs`), which this layer never reads.
    recorded_step_cpu_us: tuple[float, ...] = ()

    # Each table is computed with numpy's huge-page advice off
    # (`trace.pages.small_pages`): the compaction it triggers on fresh arrays
    # made the 1M-event op table swing between 156 and 281 ms of CPU; and, on
    # profiles of `trace.pages.HEAP_FROM_ROWS` events or more, with large
    # blocks reused from the heap (`trace.pages.reused_heap`): a
    # fresh mapping per 80 MB temporary, faulted in page by page, was a third
    # of the steps and findings of the 4 GB trace.

    def __init__(
        self,
        data: TraceData,
        name: str | None = None,
        capture: CaptureInfo | None = None,
        notes: list[str] | None = None,
        partial: bool = False,
        error: str | None = None,
        run_dir: str | Path | None = None,
    ) -> None:
        self._data = data
        self.meta: TraceMeta = data.meta
        self.name = name or (Path(data.meta.path).name if data.meta.path else "profile")
        self.capture = capture
        self._notes: list[str] = list(notes or []) + list(data.meta.warnings)
        self._step_notes_added = False
        self.partial = partial
        self.error = error
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.row_limit = 20
        self.sort: str | None = None

    # ------------------------------------------------------------------ #
    # construction

    @classmethod
    def from_file(cls, path: str | Path, name: str | None = None) -> Profile:
        """Load a Kineto trace file (``.json`` or ``.json.gz``)."""
        return cls(parse_trace(path), name=name)

    @property
    def trace_path(self) -> Path | None:
        """The trace file this profile was built from."""
        return Path(self.meta.path) if self.meta.path else None

    # ------------------------------------------------------------------ #
    # derived structure (cached)

    @cached_property
    @_table
    def _tree(self) -> pd.DataFrame:
        return tree_mod.host_tree(self._data.events, self.meta.time_precision_us)

    @property
    def parsed_events(self) -> pd.DataFrame:
        """The events as parsed (see `TraceData`), before the call tree and links are added."""
        return self._data.events

    @cached_property
    @_table
    def _links(self) -> pd.DataFrame:
        tree = self._tree
        return links_mod.link_device_events(
            self._data.events, tree["parent"].to_numpy(), tree["depth"].to_numpy(), self._data.flows
        )

    @cached_property
    @_table
    def _device_traced(self) -> bool:
        """Whether the trace holds device work (`summary`'s ``device_traced``, read from the events).

        The op table's notes need this one flag, and the summary needs the
        steps (a tenth of a large trace's op table otherwise).
        """
        return bool(K.kind_mask(self._data.events, K.DEVICE_ACTIVITY).any())

    @cached_property
    @_table
    def _memory_owner(self) -> np.ndarray:
        mem = self._data.memory
        return links_mod.attribute_points(
            self._data.events,
            mem["pid"].to_numpy(),
            mem["tid"].to_numpy(),
            mem["ts"].to_numpy(),
            self.meta.time_precision_us,
        )

    @cached_property
    @_table
    def _costs(self) -> pd.DataFrame:
        tree = self._tree
        return ops_mod.event_costs(
            self._data.events,
            tree["parent"].to_numpy(),
            tree["depth"].to_numpy(),
            self._links["op"].to_numpy(),
            # No memory owner: torch's rule counts a record in every interval
            # it lies in, and finding owners costs a tenth of the op table.
            self._data.memory,
        )

    # ------------------------------------------------------------------ #
    # public tables

    @cached_property
    @_table
    def events(self) -> pd.DataFrame:
        """Every complete event, with its place in the call tree and its links.

        The parsed columns (see `TraceData`) plus ``parent`` and ``depth``
        (host call tree), ``device_depth`` (nesting on a device stream),
        ``launch`` and ``op`` (for device work: row of the launch and of the
        launching op), ``launch_delay_us`` and the per-event costs
        ``self_cpu_us``, ``self_device_us``, ``device_total_us``.
        """
        return self._events_frame(device_depth=True)

    @property
    def _findings_events(self) -> pd.DataFrame:
        """`events` once made; until then the same frame less ``device_depth``, which no finding reads.

        (Its nesting walk of the device streams was 0.12 s of the findings of a 9M-event trace.)
        """
        made = self.__dict__.get("events")
        return made if made is not None else self._events_frame(device_depth=False)

    def _events_frame(self, device_depth: bool) -> pd.DataFrame:
        events = self._data.events
        cols: dict[str, Any] = {c: events[c].array for c in events.columns}
        for frame in (self._tree, self._links, self._costs):
            cols.update({c: frame[c].array for c in frame.columns})
        if device_depth:
            cols["device_depth"] = tree_mod.device_depth(events, self.meta.time_precision_us)
        # One constructor call: adding columns one by one to a frame this
        # wide re-checks (and may copy) it every time.
        return pd.DataFrame(cols, index=events.index, copy=False)

    @property
    def memory_events(self) -> pd.DataFrame:
        """``[memory]`` events (allocations and frees) with the op that made them."""
        mem = self._data.memory.copy()
        mem["op"] = self._memory_owner if len(mem) else np.array([], dtype=np.int64)
        return mem

    @property
    def flows(self) -> pd.DataFrame:
        """Launch flow events (``ac2g`` / ``async_cpu_to_gpu``): ``id``, ``is_start``, ``pid``, ``tid``, ``ts``.

        Loading leaves them in the file when correlation ids link every
        launch without them (a quarter of a GPU trace's events, for nothing
        the tables use); the first access reads them from the file.
        """
        data = self._data
        if data.meta.flows_unread:
            data.flows = read_flows(data.meta.path, data.meta.t0_us)
            data.meta.flows_unread = 0
        return data.flows

    @_table
    def op_table(
        self,
        group_by: str = "name",
        flops: bool | None = None,
        include_python: bool = False,
        per_step: bool = False,
    ) -> pd.DataFrame:
        """The op table, grouped by ``name``, ``shape``, ``stack`` or ``module``.

        See `analysis.ops.op_table` for the columns. ``flops`` defaults to on
        when the capture asked for FLOPs and shapes were recorded. Times,
        calls, memory and FLOPs are totals over the profiled steps (as in
        ``key_averages()``); ``per_step=True`` divides them by `step_count`.
        """
        if flops is None:
            flops = self._wants_flops
        key = (group_by, flops, include_python)
        cache = self.__dict__.setdefault("_op_tables", {})
        if key not in cache:
            table = ops_mod.op_table(
                self._data.events,
                self._costs_with_estimates if flops else self._costs,
                group_by=group_by,
                flops=flops,
                include_python=include_python,
                group_values=self.module_of if group_by == "module" else None,
            )
            if flops and "est_flops" in table:
                table = achieved_mod.add_op_rates(
                    table,
                    self._op_precisions(),
                    self._device_traced,
                    self._peaks_noted(table["est_flops"].sum() > 0),
                )
            cache[key] = self._with_notes(table, notes_mod.OPS)
        return ops_mod.per_step(cache[key], self.step_count) if per_step else cache[key]

    @cached_property
    @_table
    def _estimates(self) -> pd.DataFrame:
        """Our FLOPs and bytes per event (`analysis.flops.own_estimates`)."""
        return flops_mod.own_estimates(self._data.events, self._tree["parent"].to_numpy())

    @property
    def _costs_with_estimates(self) -> pd.DataFrame:
        est = self._estimates
        return self._costs.assign(
            est_flops=est["est_flops"].to_numpy(), est_bytes=est["est_bytes"].to_numpy()
        )

    @cached_property
    @_table
    def peaks(self) -> hardware_mod.DevicePeaks | None:
        """The traced device's peak FLOP/s per precision and memory bandwidth (`analysis.hardware`), None when unknown.

        The device that ran the most kernel time when the trace names several.
        """
        return self._device_peaks(self.kernels)

    def _device_peaks(self, kernels: pd.DataFrame) -> hardware_mod.DevicePeaks | None:
        # From the kernel table, not the events: a profile reopened from its
        # table cache has the one and not the other (no parse to open a page).
        busiest = None
        if len(kernels) and "devices" in kernels:
            first = pd.to_numeric(kernels["devices"].astype(str).str.split(",").str[0], errors="coerce")
            time = kernels["total_us"].groupby(first.to_numpy()).sum()
            busiest = int(time.idxmax()) if len(time) else None
        return hardware_mod.device_peaks(self.meta.device_properties, busiest)

    @cached_property
    @_table
    def _kernel_shares(self) -> pd.DataFrame:
        return achieved_mod.kernel_shares(
            self._data.events, self._tree["parent"].to_numpy(), self._links["op"].to_numpy(), self._estimates
        )

    def _op_precisions(self) -> dict[str, str]:
        """Per op name, the precision whose peak applies (`analysis.achieved.op_precisions`)."""
        shares = self._kernel_shares
        kernel_precision: dict[str, str] = {}
        if len(shares) and "precision" in self.kernels:
            k = self.kernels
            kernel_precision = dict(
                zip(k["name"].astype(str), k["precision"].fillna("").astype(str), strict=True)
            )
        return achieved_mod.op_precisions(self._data.events, self._estimates, shares, kernel_precision)

    def _peaks_noted(
        self, estimated: bool, kernels: pd.DataFrame | None = None
    ) -> hardware_mod.DevicePeaks | None:
        """`peaks` (of ``kernels`` while the kernel table is being made); an unknown device with estimates gets a note, once."""
        peaks = self.peaks if kernels is None else self._device_peaks(kernels)
        if peaks is None and estimated and self._device_traced and self.meta.device_properties:
            note = achieved_mod.peak_note(str(self.meta.device_properties[0].get("name") or ""))
            if note not in self._notes:
                self._notes.append(note)
        return peaks

    def kernel_table(self, per_step: bool = False) -> pd.DataFrame:
        """`kernels`, or with ``per_step=True`` its calls, time and bytes per step."""
        return ops_mod.per_step(self.kernels, self.step_count) if per_step else self.kernels

    @cached_property
    @_table
    def module_of(self) -> pd.Series:
        """The module each event ran in (labels aligned with `events`; empty where none).

        See `analysis.modules.module_of`: the innermost ``nn.Module`` range
        around the event, else TorchScript's module hierarchy.
        """
        tree = self._tree
        return modules_mod.module_of(self._data.events, tree["parent"].to_numpy(), tree["depth"].to_numpy())

    @cached_property
    @_table
    def modules(self) -> pd.DataFrame:
        """One row per ``nn.Module`` (``--modules``, ``with_stack`` or TorchScript): calls, time, ops, kernels.

        See `analysis.modules.module_table`; empty when the trace records no modules.
        """
        tree = self._tree
        return modules_mod.module_table(
            self._data.events,
            tree["parent"].to_numpy(),
            tree["depth"].to_numpy(),
            self._costs,
            self._links["op"].to_numpy(),
        )

    @_table
    def module_kernels(self, module: str) -> pd.DataFrame:
        """The kernel table of the device work launched inside ``module`` (a label of `modules`)."""
        tree = self._tree
        rows = modules_mod.device_rows_of_module(
            self._data.events, tree["parent"].to_numpy(), self._links["op"].to_numpy(), module
        )
        mask = np.zeros(len(self._data.events), dtype=bool)
        mask[rows] = True
        return kernels_mod.kernel_table(self._data.events.loc[mask], self._links.loc[mask])

    @property
    def step_count(self) -> int:
        """Steps the op and kernel totals are summed over (1 for a trace without steps)."""
        return max(int(self.summary["steps"]), 1)

    @property
    def _wants_flops(self) -> bool:
        asked = self.meta.options.get("with_flops") or (
            self.capture is not None and self.capture.options.get("flops")
        )
        return bool(asked) and self._data.events["input_dims"].notna().any()

    @property
    def ops(self) -> pd.DataFrame:
        """One row per op name: calls, self/total CPU and device time, shares (totals over the steps)."""
        return self.op_table("name")

    @cached_property
    @_table
    def kernels(self) -> pd.DataFrame:
        """One row per device kernel/copy/memset name (see `analysis.kernels.kernel_table`).

        Calls and times are totals over the profiled steps: the work the
        counted steps launched, as in `steps` (all of it without a counted
        step); `kernel_table` gives them per step.
        """
        keep = steps_mod.counted_work(self.steps, self._device_steps)
        table = kernels_mod.kernel_table(self._data.events, self._links, keep)
        shares = self._kernel_shares
        if len(shares) and len(table):
            rows = kernels_mod.activity_rows(self._data.events)
            achieved_mod.add_kernel_rates(
                table,
                self._data.events,
                shares,
                None if keep is None else rows[keep],
                self._peaks_noted(True, table),
            )
        return self._with_notes(table, notes_mod.KERNELS)

    @cached_property
    @_table
    def annotations(self) -> pd.DataFrame:
        """Every note on an op or kernel row, with its explanation and the event that showed it.

        One row per (``table``, ``key``, ``id``): ``note`` is the text on the
        row, ``why`` the explanation, ``event`` the row in `events` of the
        triggering event (-1 where none). See `analysis.notes`.
        """
        return notes_mod.annotate(
            notes_mod.NoteContext(
                self._data.events,
                self._tree["parent"].to_numpy(),
                self._links["op"].to_numpy(),
                self._links["launch"].to_numpy(),
                self._device_traced,
            )
        )

    def _with_notes(self, table: pd.DataFrame, which: str) -> pd.DataFrame:
        """``table`` with its ``note`` and ``note_ids`` columns (`analysis.notes.note_columns`)."""
        if "name" not in table.columns:
            return table
        table["note"], table["note_ids"] = notes_mod.note_columns(table["name"], self.annotations, which)
        return table

    @property
    def notes(self) -> list[str]:
        """Things the user must know about this profile.

        The capture's and the parser's notes, then what the steps need said
        (left-out steps, device work launched outside them; see
        `analysis.steps.step_notes`), added on first access.
        """
        if not self._step_notes_added:
            self._step_notes_added = True
            extra = steps_mod.step_notes(self.steps, self.summary)
            self._notes.extend(n for n in extra if n not in self._notes)
        return self._notes

    @notes.setter
    def notes(self, value: list[str]) -> None:
        self._notes = list(value)

    @cached_property
    @_table
    def _device_steps(self) -> np.ndarray:
        """Step (position in `steps`) that launched each device activity, -1 for none."""
        return steps_mod.device_steps(self._data.events, self._links)

    @cached_property
    @_table
    def steps(self) -> pd.DataFrame:
        """One row per ``ProfilerStep#k`` (see `analysis.steps.step_table`).

        Device figures are those of the work each step launched, wherever it
        ran; ``..._in_window_us`` columns are the host range's time window.
        In a partial run the steps after the completed ones are ``truncated``.
        """
        completed = self.capture.steps if self.partial and self.capture is not None else None
        events = self._data.events
        # The step ranges, found once for the launching steps and the table;
        # their threads are numbered among themselves (`steps.step_ranges`),
        # not every event's (80 MB and 0.11 s on ten million events).
        ranges = steps_mod.step_ranges(events)
        if "_device_steps" not in self.__dict__:
            self.__dict__["_device_steps"] = steps_mod.device_steps(events, self._links, ranges)
        return steps_mod.step_table(
            events,
            self._links,
            completed,
            self._device_steps,
            None,
            ranges,
            self._tree["parent"].to_numpy(),
            self._start_order,
        )

    @cached_property
    @_table
    def _start_order(self) -> np.ndarray:
        """The device activities by start (`analysis.kernels.start_order`): one sort for the steps, summary and findings."""
        return kernels_mod.start_order(self._data.events)

    @cached_property
    @_table
    def streams(self) -> pd.DataFrame:
        """Busy and idle time per device stream and per device (see `analysis.kernels.stream_table`).

        With counted steps: the work they launched, over the time from the
        first step's start until the last of that work (or step) ended.
        Without: every device activity, over the recording window (that of
        `summary`: first event's start to last event's end).
        """
        steps = self.steps
        window = steps_mod.device_window(steps)
        if window is None:
            s = self.summary
            return kernels_mod.stream_table(self._data.events, (s["window_start_us"], s["window_end_us"]))
        act = kernels_mod.activity_rows(self._data.events)
        mine = np.isin(self._device_steps, np.flatnonzero(steps["counted"].to_numpy(bool)))
        return kernels_mod.stream_table(self._data.events, window, act[mine])

    @cached_property
    @_table
    def kernel_families(self) -> pd.DataFrame:
        """Device busy time per kernel family, one row per step (see `analysis.breakdown`).

        The families (``gemm_us`` ... ``memset_us``) sum to ``busy_us``, which is
        ``steps.device_busy_us``; overlapping work shares its time equally.
        Without a counted step, one more row (step -1) for the whole recording.
        """
        return breakdown_mod.kernel_families(self._data.events, self.steps, self._device_steps)

    @cached_property
    @_table
    def idle_breakdown(self) -> pd.DataFrame:
        """Device idle time per step by HTA's causes: host wait, kernel wait, other (see `analysis.breakdown`).

        The causes sum to ``idle_us``, which is ``steps.device_idle_us``.
        """
        return breakdown_mod.idle_breakdown(self._data.events, self._links, self.steps, self._device_steps)

    @cached_property
    @_table
    def idle_by_stream(self) -> pd.DataFrame:
        """HTA's idle time breakdown per step and stream (`analysis.breakdown.idle_by_stream`)."""
        return breakdown_mod.idle_by_stream(self._data.events, self._links, self.steps, self._device_steps)

    @cached_property
    @_table
    def memcpy(self) -> pd.DataFrame:
        """Copies and memsets with bytes and bandwidth."""
        return kernels_mod.memcpy_table(self._data.events)

    @property
    def gpu_annotations(self) -> pd.DataFrame:
        """``record_function`` ranges as mirrored on device streams."""
        ev = self._data.events
        sel = ev.loc[ev["kind"].to_numpy() == K.GPU_ANNOTATION, ["name", "device", "stream", "ts", "dur"]]
        return sel.reset_index(drop=True)

    @cached_property
    @_table
    def launches(self) -> pd.DataFrame:
        """One row per kernel/copy/memset: its launch, launching op and launch delay.

        See `analysis.links.launch_table`; ``row``, ``launch_row`` and
        ``op_row`` are positions in `events`.
        """
        return links_mod.launch_table(self._data.events, self._links)

    @cached_property
    @_table
    def launch_summary(self) -> pd.DataFrame:
        """Launch overhead per runtime call and over all (see `analysis.links.launch_summary`)."""
        return links_mod.launch_summary(self.launches)

    @cached_property
    @_table
    def summary(self) -> dict[str, Any]:
        """Headline numbers: device, steps, wall/CPU/device time per step."""
        out = steps_mod.summarize(
            self.meta, self._data.events, self.steps, self._device_steps, self._links, self._start_order
        )
        out["name"] = self.name
        if self.capture is not None:
            out["device_spec"] = self.capture.device
            out["device_kind"] = self.capture.device_kind
            out["warmup"] = self.capture.warmup
            if self.capture.compile_s is not None:
                out["compile_s"] = self.capture.compile_s
        out["partial"] = self.partial
        if self.error:
            out["error"] = self.error
        out["notes"] = list(self._notes) + [
            n for n in steps_mod.step_notes(self.steps, out) if n not in self._notes
        ]
        return out

    @cached_property
    @_table
    def findings(self) -> pd.DataFrame:
        """What an expert would point at in this trace (see `analysis.findings`).

        Columns ``severity`` (high, medium, info, not checked), ``title``,
        ``detail``, ``evidence`` (dict), ``rule``, ``impact_us`` (time per
        step at stake), ``event_rows`` (positions in `events`), ``ops`` and
        ``kernels`` (names in the op and kernel tables); most severe first.
        """
        from ..analysis.findings import find, inputs_from_profile

        return find(inputs_from_profile(self))

    def export(self, path: str | Path, force: bool = False, table: str = "ops") -> Any:
        """Write the trace, a table, the text tables or a standalone HTML report.

        The format comes from the suffix of ``path`` (``.json``, ``.json.gz``,
        ``.csv``, ``.parquet``, ``.html``, ``.txt``); a folder gets all of
        them. Existing files are kept unless ``force``. Returns an
        `export.ExportResult` (the files written, and what to know about them);
        see `export.export`.
        """
        from .. import presentation  # a presentation hook (see `presentation`)

        return presentation.export_profile(self, path, force, table)

    def diff(self, other: Profile, labels: tuple[str, str] | None = None) -> ProfileDiff:
        """Compare this profile (baseline) with ``other``, per op, per kernel, per step."""
        from .profile_diff import ProfileDiff

        return ProfileDiff(self, other, labels)

    # ------------------------------------------------------------------ #
    # rendering

    def sorted_ops(self, sort: str | None = None) -> pd.DataFrame:
        """The op table sorted by ``sort`` (else the profile's `sort`; unsorted when neither is set)."""
        table = self.ops
        key = sort or self.sort
        if key:
            col = sort_column(key, table.columns)
            table = table.sort_values(col, ascending=False, kind="stable")
        return table

    def table(
        self,
        sort: str | None = None,
        row_limit: int | None = None,
        kernels: bool = True,
        findings: bool = True,
        width: int | None = None,
    ) -> str:
        """The op table (and kernel table) as text, like ``key_averages().table()``, as wide as the terminal.

        Parameters
        ----------
        sort
            Column to sort by (``self_cpu``, ``cpu_total``, ``self_device``,
            ``device_total``, ``calls`` or a full column name).
        row_limit
            Rows to show (0 or None for the profile's default, -1 for all).
        kernels
            Append the kernel table when the device was traced.
        findings
            Start with the findings (see `findings`), one line each.
        width
            The most characters a line takes; None: the terminal's width
            (no limit where no terminal is attached), 0: no limit. Names
            are shortened first (with an ellipsis); the columns that are
            not times are hidden from the right next, and times (from the
            right, never the sort column) only when they still do not fit.
        """
        from .. import presentation  # a presentation hook (see `presentation`)

        return presentation.profile_text(self, sort, row_limit, kernels, findings, width)

    def __repr__(self) -> str:
        s = self.summary
        return f"<Profile {self.name!r}: {s['device']}, {s['steps']} steps, {s['events']} events>"

    def _repr_html_static(self) -> str:
        from .. import presentation  # a presentation hook (see `presentation`)

        return presentation.profile_static_html(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from .. import presentation  # a presentation hook (see `presentation`)

        return presentation.profile_bundle(self, include, exclude)

    def _display_(self) -> Any:
        # marimo's hook (it has no ipykernel): the interactive view as one anywidget.
        from .. import presentation  # a presentation hook (see `presentation`)

        return presentation.hosted_profile(self)

    def view(self, max_glyphs: int = 100_000, all_frames: bool = False) -> Any:
        """The interactive view (one widget with bokeh figures): tables, timeline, memory.

        Display it in a notebook cell; ``%%torchprof`` shows it by itself.

        Parameters
        ----------
        max_glyphs
            Most timeline glyphs sent to the browser for any window.
        all_frames
            With ``--stack``, also draw the Python frames of the kernel
            machinery (ipykernel, tornado, IPython, torchprof's own threads),
            hidden by default so the cell's own frames show.
        """
        from .. import presentation  # a presentation hook (see `presentation`)

        return presentation.profile_widget(self, max_glyphs, all_frames)
