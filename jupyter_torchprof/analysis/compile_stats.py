"""What torch.compile did, as data: graphs, breaks, and the generated kernels and compiled regions a profile shows.

`capture.compile` fills a `CompileStats` while it compiles a cell; the
functions here read a finished compiled profile's tables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .names import describe_kernel


@dataclass
class GraphBreak:
    """One graph break: where, and Dynamo's reason.

    ``location`` names a notebook cell as IPython's tracebacks do
    (``Cell In[5], line 3``, the line as the notebook shows it) when the
    break is in a cell, else Dynamo's ``file:line``; ``code`` is that
    line's source, when known.
    """

    location: str
    reason: str
    count: int = 1
    code: str = ""


@dataclass
class CompileStats:
    """What the compiler did during the compiled run's warm-up.

    Attributes
    ----------
    graphs
        Distinct graphs Dynamo compiled (``unique_graphs``).
    graph_breaks
        Each distinct break with its source location and reason.
    recompiles
        Reasons Dynamo gave for recompiling.
    first_call_s
        Wall time of the first compiled call (compilation plus one run).
    compile_s
        ``first_call_s`` minus one steady-state step: the compilation cost.
    error, traceback
        When compilation failed: one line, and the full traceback.
    kernels
        Generated (Inductor) kernels seen in the compiled profile.
    regions
        Compiled regions that ran in the profiled steps (see `compiled_regions`).
    """

    backend: str = "inductor"
    mode: str | None = None
    graphs: int = 0
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    recompiles: list[str] = field(default_factory=list)
    frames: int = 0
    first_call_s: float | None = None
    compile_s: float | None = None
    error: str | None = None
    traceback: str | None = None
    kernels: pd.DataFrame = field(default_factory=pd.DataFrame)
    regions: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def graph_break_count(self) -> int:
        """Total graph breaks (a break hit on several calls counts once per call)."""
        return sum(b.count for b in self.graph_breaks)

    def as_dict(self) -> dict[str, Any]:
        """Plain-data form (for the run's record in the store and the sidebar)."""
        return {
            "backend": self.backend,
            "mode": self.mode,
            "graphs": self.graphs,
            "graph_breaks": [b.__dict__ for b in self.graph_breaks],
            "recompiles": list(self.recompiles),
            "first_call_s": self.first_call_s,
            "compile_s": self.compile_s,
            "error": self.error,
            "generated_kernels": int(len(self.kernels)),
        }


_GRAPH_PREFIX = re.compile(r"^graph_\d+_")
_REGION = re.compile(r"^Torch-Compiled Region: (?P<frame>\d+)/(?P<compile>\d+)$")


def compiled_regions(ops: pd.DataFrame) -> pd.DataFrame:
    """The compiled regions that ran in a profile (``Torch-Compiled Region: frame/compile``).

    Each distinct region is one graph Dynamo produced and the profiled steps
    executed; a compile id above 0 is a recompilation of that frame.
    """
    rows = []
    for r in ops.itertuples(index=False):
        m = _REGION.match(str(r.name))
        if m:
            rows.append(
                (
                    str(r.name),
                    int(m.group("frame")),
                    int(m.group("compile")),
                    int(r.calls),
                    float(r.cpu_total_us),
                )
            )
    return pd.DataFrame(rows, columns=["name", "frame", "compile_id", "calls", "cpu_total_us"])


def generated_kernels(
    kernels: pd.DataFrame, events: pd.DataFrame, ops: pd.DataFrame, steps: int = 1
) -> pd.DataFrame:
    """The kernels Inductor generated, as seen in a compiled profile's kernel table, events and op table.

    Device kernels named ``triton_*`` (with ``args.kernel_file`` when the
    trace names the generated source) and CPU ranges named ``cpp_fused_*``.
    Columns: ``name, kind, fused_ops, calls, total_us, source``; ``calls``
    and ``total_us`` are per step (the tables' totals divided by ``steps``),
    as every figure beside them in a comparison is.
    """
    rows = []
    k = kernels
    if not k.empty:
        ev = events
        files = (
            ev.loc[ev["kernel_file"].notna(), ["name", "kernel_file"]]
            .astype(str)
            .drop_duplicates("name")
            .set_index("name")["kernel_file"]
        )
        for r in k.itertuples(index=False):
            d = describe_kernel(r.name)
            if d.family.startswith("triton"):
                rows.append(
                    (
                        r.name,
                        d.family.removeprefix("triton "),
                        ", ".join(d.fused_ops),
                        r.calls,
                        r.total_us,
                        files.get(r.name),
                    )
                )
    for r in ops.itertuples(index=False):
        base = _GRAPH_PREFIX.sub("", str(r.name))
        if base.startswith("cpp_fused_"):
            d = describe_kernel(base)
            rows.append((r.name, "cpp (CPU)", ", ".join(d.fused_ops), r.calls, r.cpu_total_us, None))
    out = pd.DataFrame(rows, columns=["name", "kind", "fused_ops", "calls", "total_us", "source"])
    per = max(int(steps), 1)
    out["calls"] = out["calls"].astype(np.float64) / per
    out["total_us"] = out["total_us"].astype(np.float64) / per
    return out
