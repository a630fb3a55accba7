"""The column catalog: what each table's columns are called, in every renderer.

Every view (text, static HTML, the report, the bokeh tables, the sidebar
through the server, which sends these specs next to the rows) takes titles,
units, formats and tooltips from here; so do the default sort rule
(`default_sort`), the sort keys a user may type (`sort_column`) and the
gone / new labels of a diff (`STATUS_LABELS`). A renderer may show a subset
of a table's columns (`pick`), never its own titles.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .format import fixed, fmt_bytes, fmt_calls, fmt_count, fmt_flops, fmt_pct, fmt_time

#: Sort keys a user may type (``--sort``, ``Profile.table(sort=)``) and the op-table column each names.
SORT_ALIASES = {
    "self_cpu": "self_cpu_us",
    "cpu_total": "cpu_total_us",
    "cpu": "cpu_total_us",
    "self_device": "self_device_us",
    "device_total": "device_total_us",
    "device": "device_total_us",
    "self_cuda": "self_device_us",
    "cuda_total": "device_total_us",
    "calls": "calls",
    "count": "calls",
    "flops": "flops",
    "self_cpu_memory": "self_cpu_mem_bytes",
    "self_device_memory": "self_device_mem_bytes",
}


def sort_column(key: str, columns: Iterable[str]) -> str:
    """The op-table column a sort key names (``self_cpu``, ``device_total``, a column name...).

    Raises ValueError naming the keys to choose from when ``columns`` lacks it.
    """
    k = key.strip().lower().replace("-", "_").replace(" ", "_")
    for suffix in ("_time_total",):
        if k.endswith(suffix):
            k = k[: -len(suffix)]
    col = SORT_ALIASES.get(k, k)
    if col not in set(columns):
        choices = ", ".join(sorted(set(SORT_ALIASES)))
        raise ValueError(f"cannot sort by {key!r}; choose one of: {choices}")
    return col


# --------------------------------------------------------------------------- #
# the catalog

#: How a column's values are shown; every renderer knows these and no other.
#: ``name``: a name from the trace (cut with an ellipsis where room is short,
#: the whole text on hover); ``text``: other text; ``status``: a diff row's
#: side, shown with `STATUS_LABELS`; ``count``: a whole number; ``calls``: a
#: count per step (may be fractional); ``time``: µs; ``delta``: signed µs;
#: ``pct``: a percentage (drawn as a bar where the renderer can); ``bytes``;
#: ``flops``: a FLOP count, or a rate where the column's unit is ``FLOP/s``
#: (SI prefixes, ``–`` where nothing was counted); ``number``: a plain
#: decimal; ``ratio``: ``2.00×``.
KINDS = (
    "name",
    "text",
    "status",
    "count",
    "calls",
    "time",
    "delta",
    "pct",
    "bytes",
    "flops",
    "number",
    "ratio",
)
TEXT_KINDS = frozenset({"name", "text", "status"})

#: The unit each kind's raw value is in (what a JSON reader multiplies by).
KIND_UNITS = {"time": "µs", "delta": "µs", "pct": "%", "bytes": "B", "flops": "FLOP"}

#: A column's `Column.role`, `Column.plain` and `Column.when` choices.
ROLES = ("", "self", "total")
PLAIN = ("all", "text", "none")
WHEN = ("", "nonzero", "any")

#: A diff row's ``status`` as a reader says it: gone (only in a), new (only in b).
STATUS_LABELS = {"both": "both", "only_a": "gone", "only_b": "new"}


@dataclass(frozen=True)
class Column:
    """One column of a table, as every renderer shows it.

    Attributes
    ----------
    key
        Column of the frame (``self_cpu_us``).
    title
        Header text.
    kind
        One of `KINDS`: how values are formatted, aligned and first sorted.
    width
        Width hint in pixels (the bokeh tables; others size to content).
    tip
        Header tooltip ("" for none).
    unit
        Unit of the raw value; empty means the kind's (`KIND_UNITS`).
    title_key
        Column whose value is a cell's tooltip (the full kernel name behind
        a short one).
    device
        Shown only when the run traced a device.
    when
        ``""``: shown whenever the frame has it; ``"nonzero"``: only when
        some value is not 0 (device memory of a CPU run says nothing);
        ``"any"``: only when some value is known (optional kernel fields).
    role
        ``"self"`` or ``"total"``: the op widget shows it in that mode only
        (its Self / Total switch); ``""``: in both. A diff column has the
        role of the column it compares.
    plain
        Which plain renderers show it: ``"all"`` the text table
        (`Profile.table()`) and the static ``text/html``; ``"text"`` the
        text table only (the static view is the short one); ``"none"``
        neither (the interactive views, the report and the sidebar still
        do). Every renderer shows a new column unless it says otherwise.
    diff
        A diff of its table (`ProfileDiff.ops`, `ProfileDiff.kernels`)
        compares it per step, side A, side B and the change: additive
        columns only (`diff_ops`, `diff_kernels`).
    diff_title
        What its diff columns are called (``Device`` gives ``Device A`` and
        ``Δ device``) where its own title would not read well beside the
        sides' names; empty: its title.
    group
        The op-table grouping whose key this column is (``shape``,
        ``stack``, ``module``): the widget shows it while grouped by it, the
        report and the static view fold it into the name or leave it out.
    """

    key: str
    title: str
    kind: str
    width: int = 90
    tip: str = ""
    unit: str = ""
    title_key: str | None = None
    device: bool = False
    when: str = ""
    role: str = ""
    plain: str = "all"
    diff: bool = False
    diff_title: str = ""
    group: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"column {self.key!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        for attr, allowed in (("role", ROLES), ("plain", PLAIN), ("when", WHEN)):
            if getattr(self, attr) not in allowed:
                raise ValueError(
                    f"column {self.key!r}: {attr} {getattr(self, attr)!r} is not one of {allowed}"
                )

    @property
    def field(self) -> str:
        """The frame column (the name bokeh's ``TableColumn`` uses)."""
        return self.key

    @property
    def numeric(self) -> bool:
        """Whether values are numbers (right-aligned, largest first on the first sort)."""
        return self.kind not in TEXT_KINDS

    def to_json(self) -> dict[str, Any]:
        """The spec as the server sends it next to a table's rows."""
        out: dict[str, Any] = {
            "key": self.key,
            "title": self.title,
            "kind": self.kind,
            "unit": self.unit or KIND_UNITS.get(self.kind, ""),
            "tip": self.tip,
            "width": self.width,
            "device": self.device,
        }
        if self.title_key:
            out["title_key"] = self.title_key
        if self.kind == "status":
            out["labels"] = dict(STATUS_LABELS)
        return out


def _known(value: Any) -> bool:
    """Whether a cell holds a value: not None, "", NaN, NaT or pandas' NA (pandas is not imported here)."""
    if value is None or (isinstance(value, str) and not value):
        return False
    try:
        return not bool(value != value)  # only the missing markers differ from themselves
    except TypeError:  # pandas.NA refuses to be a bool
        return False
    except ValueError:  # an array: a value
        return True


def _has_values(column: Column, values: Iterable[Any]) -> bool:
    if column.when == "nonzero":
        return any(_known(v) and v != 0 for v in values)
    if column.when == "any":
        return any(_known(v) for v in values)
    return True


def shown(columns: Iterable[Column], frame: Any, device: bool = True) -> list[Column]:
    """The columns of ``columns`` a table of ``frame`` shows.

    A column is shown when ``frame`` (a DataFrame) has it, the device was
    traced or the column is not a device one, and its ``when`` holds on the
    frame's values.
    """
    names = set(map(str, frame.columns))
    out = []
    for c in columns:
        if c.key not in names or (c.device and not device):
            continue
        if c.when and not _has_values(c, frame[c.key].tolist()):
            continue
        out.append(c)
    return out


def shown_in_rows(
    columns: Iterable[Column], names: list[str], rows: list[list[Any]], device: bool
) -> list[Column]:
    """`shown` for a table already turned into JSON (``columns`` names and ``rows``)."""
    index = {n: i for i, n in enumerate(names)}
    return [
        c
        for c in columns
        if c.key in index
        and (device or not c.device)
        and (not c.when or _has_values(c, (r[index[c.key]] for r in rows)))
    ]


def pick(columns: Iterable[Column], keys: Iterable[str]) -> list[Column]:
    """The columns named by ``keys``, in that order (a renderer's subset of a table)."""
    by_key = {c.key: c for c in columns}
    return [by_key[k] for k in keys]


def default_sort(device: bool, columns: Iterable[str] | None = None) -> str:
    """The op-table column rows are sorted by unless the user chose one.

    Self device time when the device was traced (and the table has it),
    else self CPU time.
    """
    if device and (columns is None or "self_device_us" in set(columns)):
        return "self_device_us"
    return "self_cpu_us"


def op_sort(sort: str | None, device: bool, columns: Iterable[str]) -> str:
    """The column a user's sort key names, else `default_sort` (an unknown key falls back too)."""
    columns = list(columns)
    if sort:
        try:
            return sort_column(sort, columns)
        except ValueError:
            pass
    return default_sort(device, columns)


# -- formatting -------------------------------------------------------------


def _signed_time(x: float) -> str:
    if not math.isfinite(x):
        return "–"
    if x == 0:
        return "0"
    return ("+" if x > 0 else "−") + fmt_time(abs(x))


def _ratio(x: float) -> str:
    if math.isinf(x):
        return "new" if x > 0 else "–"
    return f"{fixed(x, 2)}×"


def _number(x: float) -> str:
    return fixed(x, 1, sep=True) if math.isfinite(x) else "–"


#: How each numeric kind reads; the sidebar's `formatCell` (labextension/src/runs.ts) and the bokeh
#: tables' `views.tables.KIND_JS` print the same (tests/data/format_cases/kinds.json holds all three).
_FORMAT: dict[str, Callable[[float], str]] = {
    "count": fmt_count,
    "calls": fmt_calls,
    "time": fmt_time,
    "delta": _signed_time,
    "pct": fmt_pct,
    "bytes": fmt_bytes,
    "flops": fmt_flops,
    "number": _number,
    "ratio": _ratio,
}


def number(value: Any) -> float | None:
    """``value`` as a float, None when it is not a number (or NaN)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def format_cell(column: Column, value: Any) -> str:
    """One cell as text: numbers by the column's kind (``–`` when unknown), text as is."""
    if column.kind in TEXT_KINDS:
        if not _known(value):
            return ""
        text = str(value)
        return STATUS_LABELS.get(text, text) if column.kind == "status" else text
    x = number(value)
    if x is None:
        return "–"
    if column.kind == "flops":
        # A count (FLOP) or a rate (FLOP/s): the column's unit says which.
        return fmt_flops(x, column.unit or KIND_UNITS["flops"])
    return _FORMAT[column.kind](x)


# -- the tables -------------------------------------------------------------

_TIP_SELF_CPU = "time in the op itself, on the host (children excluded)"
_TIP_CPU_TOTAL = "time in the op and everything it called"
_TIP_SELF_DEVICE = "device time of the kernels this op launched itself"
_TIP_DEVICE_TOTAL = "device time of every kernel below the op"
_TIP_NOTE = "what the trace says about this row and why it is there (select the row for the explanation)"

_TIP_EST_FLOPS = (
    "our estimate from the input shapes (needs record_shapes): torch's formulas where it counts, plus SDPA, "
    "conv1d/3d, transposed convolutions and linear; held by one op per call chain (the outermost with a "
    "formula; linear defers to its GEMM), so it sums once"
)
_TIP_EST_FLOPS_KERNEL = (
    "the estimated FLOPs of the op holding them, shared among the kernels below it in proportion to their "
    "device time: its GEMM, convolution and attention kernels when it has any (addmm's bias copy gets "
    "none), else all; copies and memsets get none"
)
_TIP_EST_RATE_OP = "Est. FLOPs ÷ the op's device total time (CPU total time when no device was traced)"
_TIP_EST_RATE_KERNEL = "the kernel's share of Est. FLOPs ÷ its device time"
_TIP_EST_GBPS = (
    "estimated bytes (every tensor input read once, the output written once, from the shapes) ÷ the same time"
)
_TIP_INTENSITY = "arithmetic intensity: Est. FLOPs ÷ estimated bytes moved (the roofline's x axis)"
_TIP_PEAK_PRECISION = (
    "the precision whose peak % of peak uses: from the kernel name (sgemm, s16816: TF32...) when it tells, "
    "else from the op's input types"
)
_TIP_PEAK_PCT = (
    "Est. FLOP/s as a share of the device's dense peak in that precision (analysis/hardware.py); "
    "blank when the device or the precision is not in the table"
)

#: The op table (`Profile.ops`, `Profile.op_table`), in the order shown.
OPS: tuple[Column, ...] = (
    Column("name", "Name", "name", 340),
    # Grouping keys: the text table lists them after the numbers; the static view folds the shapes into the name.
    Column("input_shapes", "Input shapes", "text", 220, plain="text", group="shape"),
    Column("stack", "Stack", "text", 220, plain="text", group="stack"),
    Column("module", "Module", "text", 220, plain="text", group="module"),
    Column("calls", "Calls", "count", 70, diff=True),
    Column("self_cpu_us", "Self CPU", "time", tip=_TIP_SELF_CPU, role="self", diff=True),
    Column("self_cpu_pct", "Self CPU %", "pct", 110, "share of all self CPU time", role="self"),
    Column("cpu_total_us", "CPU total", "time", tip=_TIP_CPU_TOTAL, role="total", diff=True),
    # Shares of inclusive time and inclusive memory: the interactive views' (key_averages has neither).
    Column(
        "cpu_total_pct", "CPU total %", "pct", 110, "CPU total as a share of all self CPU time", role="total",
        plain="none",
    ),
    Column("cpu_mean_us", "CPU avg", "time", tip="CPU total per call", role="total"),
    Column("self_device_us", "Self device", "time", tip=_TIP_SELF_DEVICE, device=True, role="self", diff=True),
    Column(
        "self_device_pct", "Self device %", "pct", 120, "share of all self device time", device=True, role="self"
    ),
    Column(
        "device_total_us", "Device total", "time", tip=_TIP_DEVICE_TOTAL, device=True, role="total", diff=True
    ),
    Column(
        "device_total_pct", "Device total %", "pct", 120, "device total as a share of all device time", device=True,
        role="total", plain="none",
    ),
    Column("device_mean_us", "Device avg", "time", tip="device total per call", device=True, role="total"),
    Column(
        "self_cpu_mem_bytes", "Self CPU mem", "bytes", 100, "host memory the op allocated itself", when="nonzero",
        role="self",
    ),
    Column(
        "cpu_mem_bytes", "CPU mem", "bytes", 100, "host memory of the op and its children", when="nonzero",
        role="total", plain="none",
    ),
    Column(
        "self_device_mem_bytes", "Self device mem", "bytes", 110, "device memory the op allocated itself",
        when="nonzero", role="self",
    ),
    Column(
        "device_mem_bytes", "Device mem", "bytes", 100, "device memory of the op and its children", when="nonzero",
        role="total", plain="none",
    ),
    Column("flops", "FLOPs", "flops", 90, "floating-point operations (recorded with --flops)"),
    Column(
        "flops_per_s", "FLOP/s", "flops", 90,
        "FLOPs ÷ the op's device total time when the device was traced, else ÷ its CPU total time "
        "(total, not self: a convolution's FLOPs sit on aten::conv2d, its kernels under its children)",
        unit="FLOP/s", when="any",
    ),
    Column("est_flops", "Est. FLOPs", "flops", 100, _TIP_EST_FLOPS, when="nonzero"),
    Column("est_flops_per_s", "Est. FLOP/s", "flops", 100, _TIP_EST_RATE_OP, unit="FLOP/s", when="any"),
    Column("est_gbps", "Est. GB/s", "number", 80, _TIP_EST_GBPS, "GB/s", when="any"),
    Column("peak_precision", "Peak of", "text", 130, _TIP_PEAK_PRECISION, when="any", plain="text"),
    Column("peak_pct", "% of peak", "number", 80, _TIP_PEAK_PCT, "%", device=True, when="any"),
    Column("note", "Note", "text", 220, _TIP_NOTE, when="any"),
)  # fmt: skip

#: The kernel table (`Profile.kernels`: kernels, copies and memsets by name).
KERNELS: tuple[Column, ...] = (
    Column("short_name", "Kernel", "name", 340, title_key="name"),
    # The launch details and estimates are the interactive views' (the text table is nvprof's summary).
    Column("kind", "Kind", "text", 70, plain="none"),
    Column("calls", "Calls", "count", 70, diff=True),
    # A diff's sides are named after the runs ("Total A" reads as a run's total, not a kernel's time).
    Column("total_us", "Total", "time", diff=True, diff_title="Device"),
    Column("pct", "Share", "pct", 110, "share of all device time"),
    Column("launched_by", "Launched by", "text", 160, "the op whose call launched it", when="any", plain="none"),
    Column("mean_us", "Mean", "time", 80),
    # The spread is in the text table; the static view is the short one.
    Column("min_us", "Min", "time", 80, plain="text"),
    Column("median_us", "Median", "time", 80, plain="text"),
    Column("max_us", "Max", "time", 80, plain="text"),
    Column("grid", "Grid", "text", 90, "launch grid", when="any", plain="none"),
    Column("block", "Block", "text", 90, "thread block", when="any", plain="none"),
    Column("registers", "Registers", "count", 80, "registers per thread", when="any", plain="none"),
    Column("shared_memory", "Shared mem", "bytes", 90, "shared memory per block", when="any", plain="none"),
    Column(
        "occupancy", "Occupancy %", "number", 90,
        "estimated achieved occupancy (– where Kineto could not estimate it: over 48 KiB shared memory per block)",
        unit="%", when="any", plain="none",
    ),
    Column(
        "tensor_cores", "Tensor cores", "text", 90,
        "whether the kernel's name says it runs on tensor (matrix) cores: yes, no, or blank where it does not tell",
        when="any", plain="none",
    ),
    Column(
        "bandwidth_gbps", "GB/s", "number", 70, "memory bandwidth of copies and memsets", "GB/s", when="any",
        plain="none",
    ),
    Column(
        "launch_delay_us", "Launch delay", "time", 100, "mean time from the launch call to the kernel start",
        when="any", plain="none",
    ),
    Column("est_flops", "Est. FLOPs", "flops", 100, _TIP_EST_FLOPS_KERNEL, when="nonzero", plain="none"),
    Column(
        "est_flops_per_s", "Est. FLOP/s", "flops", 100, _TIP_EST_RATE_KERNEL, unit="FLOP/s", when="any",
        plain="none",
    ),
    Column("est_gbps", "Est. GB/s", "number", 80, _TIP_EST_GBPS, "GB/s", when="any", plain="none"),
    Column("intensity", "FLOP/byte", "number", 80, _TIP_INTENSITY, when="any", plain="none"),
    Column("peak_precision", "Peak of", "text", 130, _TIP_PEAK_PRECISION, when="any", plain="none"),
    Column("peak_pct", "% of peak", "number", 80, _TIP_PEAK_PCT, "%", when="any", plain="none"),
    Column("note", "Note", "text", 220, _TIP_NOTE, when="any"),
)  # fmt: skip

#: Profiler steps (`Profile.steps`).
STEPS: tuple[Column, ...] = (
    Column("step", "Step", "count", 60),
    Column("wall_us", "Wall", "time"),
    Column("cpu_busy_us", "CPU busy", "time"),
    Column(
        "device_busy_us", "Device busy", "time", tip="union over time of the device work the step launched",
        device=True,
    ),
    Column(
        "device_idle_us", "Device idle", "time", tip="gaps inside the step's own device work (span minus busy)",
        device=True,
    ),
    Column("device_busy_in_window_us", "Busy in window", "time", tip="device busy inside the host range", device=True),
    Column("kernel_us", "Kernels", "time", device=True),
    Column("comm_us", "Communication", "time", device=True),
    Column("memcpy_us", "Copies", "time", device=True),
    Column("memset_us", "Memsets", "time", device=True),
)  # fmt: skip

#: Device streams (`Profile.streams`).
STREAMS: tuple[Column, ...] = (
    Column("device", "Device", "text"),
    Column("stream", "Stream", "text"),
    Column("kernels", "Kernels", "count"),
    Column("busy_us", "Busy", "time"),
    Column("idle_in_window_us", "Idle in window", "time", tip="window minus busy"),
    Column("idle_between_kernels_us", "Idle between kernels", "time", tip="HTA: gaps between consecutive kernels"),
    Column("utilization_pct", "Utilisation", "pct"),
)  # fmt: skip

#: Device busy time per kernel family and step (`Profile.kernel_families`).
KERNEL_FAMILIES: tuple[Column, ...] = (
    Column("label", "Step", "text", 130),
    Column("gemm_us", "GEMM", "time"),
    Column("attention_us", "Attention", "time"),
    Column("convolution_us", "Convolution", "time"),
    Column("normalization_us", "Normalization", "time"),
    Column("reduction_us", "Reduction", "time", tip="reductions, softmax, pooling, sorts and scans"),
    Column("elementwise_us", "Elementwise", "time", tip="pointwise kernels, copies and fills on the device"),
    Column("triton_fused_us", "Triton fused", "time", tip="Inductor's generated Triton kernels"),
    Column("other_kernel_us", "Other kernels", "time"),
    Column("communication_us", "Communication", "time", tip="NCCL/RCCL collectives"),
    Column("memcpy_us", "Copies", "time"),
    Column("memset_us", "Memsets", "time"),
    Column(
        "busy_us", "Device busy", "time",
        tip="union over time of the step's device work; overlapping work shares its time equally",
    ),
)  # fmt: skip

#: Device idle time per step by Holistic Trace Analysis's causes (`Profile.idle_breakdown`).
IDLE_BREAKDOWN: tuple[Column, ...] = (
    Column("label", "Step", "text", 130),
    Column("host_wait_us", "Host wait", "time", tip="the work after the gap was launched after the gap began"),
    Column("kernel_wait_us", "Kernel wait", "time", tip="already launched, gap under 30 µs: launch overhead"),
    Column("other_idle_us", "Other idle", "time", tip="already launched, a longer gap: waiting on something else"),
    Column("idle_us", "Device idle", "time", tip="the step's device span minus its busy time"),
)  # fmt: skip

#: The memory view's ops (the op table's memory columns).
MEMORY_OPS: tuple[Column, ...] = (
    Column("name", "Op", "name", 340),
    Column("calls", "Calls", "count", 70),
    *(c for c in OPS if c.kind == "bytes"),
)

#: Peak memory per device (`analysis.memory.memory_peaks`).
MEMORY_PEAKS: tuple[Column, ...] = (
    Column("device", "Memory of", "text", 120),
    Column(
        "peak_bytes", "Peak allocated", "bytes", 110,
        "CPU: counted from the start of profiling; a device: its allocator's total",
    ),
    Column("allocated_bytes", "Allocated", "bytes", 100, "sum of the allocations"),
    Column("allocations", "Allocations", "count", 90),
    Column("frees", "Frees", "count", 70),
)  # fmt: skip

#: The cross-rank table (`RankSet.table`); ``vs_median`` is shown with the work ratio beside it.
RANKS: tuple[Column, ...] = (
    Column("rank", "Rank", "count", 60),
    Column("steps", "Steps", "count", 60),
    Column("wall_per_step_us", "Wall/step", "time"),
    Column("device_busy_per_step_us", "Device busy/step", "time"),
    Column("device_busy_pct", "Busy %", "pct", tip="device busy as a share of the wall time"),
    Column("comm_per_step_us", "Comm/step", "time", tip="collectives (NCCL, RCCL...) per step"),
    Column("work_per_step_us", "Work/step", "time", tip="device busy minus communication"),
    Column("vs_median", "vs median", "ratio", 160, "step time and work against the median rank"),
)

#: Per-step headline of a diff (`ProfileDiff.headline`), sides named A and B.
HEADLINE: tuple[Column, ...] = (
    Column("metric", "Per step", "text", 160),
    Column("a_us", "A", "time", tip="mean per step"),
    Column("a_min_us", "A min", "time"),
    Column("a_max_us", "A max", "time"),
    Column("b_us", "B", "time", tip="mean per step"),
    Column("b_min_us", "B min", "time"),
    Column("b_max_us", "B max", "time"),
    Column("delta_us", "B − A", "delta"),
    Column("speedup", "Speed-up (A / B)", "ratio", 120),
    Column("speedup_low", "90% low", "ratio", tip="bootstrap interval of the speed-up"),
    Column("speedup_high", "90% high", "ratio", tip="bootstrap interval of the speed-up"),
    Column(
        "verdict", "Verdict", "text", 110,
        "faster/slower only when the runs differ beyond their noise by 5% or more; busier machine: "
        "wall time moved but this process's CPU time did not",
    ),
    Column(
        "evidence", "Evidence", "text", 110,
        "interleaved: the two sides ran alternately (drift hits both); separate runs: two runs one after "
        "the other, a host-side change must beat their drift",
    ),
    Column("reason", "Why", "text", 420, "the verdict in words, with the evidence it rests on"),
)  # fmt: skip


def _status(a: str, b: str) -> Column:
    return Column("status", "Status", "status", 70, f"gone: {a} only · new: {b} only · both")


#: The ratio of a diff row, absent (``–``) where the op is new or gone: the status says which.
_RATIO_TIP = "{b} / {a}{what}; – where one side has none (the status says new or gone)"

#: The kernel-table column a kernel diff is sorted by (its largest change first) and its ratio compares.
KERNEL_DIFF_SORT = "total_us"


def diff_metrics(table: Iterable[Column] | None = None) -> tuple[str, ...]:
    """The columns of ``table`` (the op table's by default) a diff compares (`Column.diff`), in order."""
    return tuple(c.key for c in (OPS if table is None else table) if c.diff)


def _delta_title(title: str) -> str:
    # "Self CPU" -> "Δ self CPU"; an acronym ("CPU total") keeps its capitals.
    first = title.split(" ", 1)[0]
    return "Δ " + (title if first.isupper() else title[:1].lower() + title[1:])


def _compared(c: Column, a: str, b: str) -> list[Column]:
    """The diff columns of one compared column: side a, side b, and (but for counts) the change."""
    title = c.diff_title or c.title
    if c.kind == "count":
        # Calls per step can be fractional; their change says little beside the times'.
        return [
            Column(f"{c.key}_a", f"{title} {a}", "calls", 80, device=c.device, role=c.role),
            Column(f"{c.key}_b", f"{title} {b}", "calls", 90, device=c.device, role=c.role),
        ]
    delta = "delta" if c.kind == "time" else c.kind
    return [
        Column(f"{c.key}_a", f"{title} {a}", c.kind, 100, device=c.device, role=c.role, unit=c.unit),
        Column(f"{c.key}_b", f"{title} {b}", c.kind, 110, device=c.device, role=c.role, unit=c.unit),
        Column(f"{c.key}_delta", _delta_title(title), delta, 100, device=c.device, role=c.role, unit=c.unit),
    ]


def _diff_name(table: Iterable[Column]) -> Column:
    """A diff's ``name`` column, titled as the table's name column ("Name", "Kernel")."""
    shown = next(c for c in table if c.kind == "name")
    return Column("name", shown.title, "name", shown.width)


def _diff_sides(table: Iterable[Column], a: str, b: str, what: str) -> list[Column]:
    """The compared columns of ``table`` (`Column.diff`: side a, side b, the change), then the ratio."""
    cols = [col for c in table if c.diff for col in _compared(c, a, b)]
    cols.append(Column("ratio", f"{b} / {a}", "ratio", 100, _RATIO_TIP.format(a=a, b=b, what=what)))
    return cols


def diff_ops(a: str = "A", b: str = "B") -> list[Column]:
    """The op diff table (`ProfileDiff.ops`), sides titled ``a`` and ``b`` (eager / compiled).

    Each op column marked `Column.diff` gives side a, side b and the change
    (`diff_metrics`). ``label`` (shown when some op has one) reads the names
    torch.compile makes: ``compiled graph f3a9c0de`` for
    ``## Call CompiledFxGraph … ##``.
    """
    return [
        _diff_name(OPS),
        Column("label", "Reads as", "text", 220, "what a name torch.compile made stands for", when="any"),
        _status(a, b),
        *_diff_sides(OPS, a, b, " of the sorted metric"),
    ]


def diff_kernels(a: str = "A", b: str = "B") -> list[Column]:
    """The kernel diff table (`ProfileDiff.kernels`), sides titled ``a`` and ``b``.

    Each kernel column marked `Column.diff` gives side a, side b and the
    change (``diff_metrics(KERNELS)``), titled by its `Column.diff_title`.
    """
    return [_diff_name(KERNELS), _status(a, b), *_diff_sides(KERNELS, a, b, " of the device time")]
