"""Notes on the rows torch.compile adds: the compiled region, its guard check, the graph call.

A call of a compiled function shows as ``TorchDynamo Cache Lookup`` (Dynamo
evaluating the guards of its cached code), then ``Torch-Compiled Region:
F/C`` (frame F's compile C running) with ``AOTDispatcher Runtime Wrapper
Prologue`` (AOTAutograd's runtime wrapper preparing the inputs) and
``## Call CompiledFxGraph <key> ##`` (Inductor calling the compiled graph)
under it. ``<key>`` is the FX graph cache key: Inductor keeps the graph's
files under ``<cache dir>/fxgraph/<key[1:3]>/<key>/``
(``torch._inductor.codecache.FxGraphCache``). A Triton kernel's op row
names its generated source (``kernel_file``), which the graph's note quotes.
"""

from __future__ import annotations

import re

import numpy as np

from ...format import fmt_time
from ...trace import categories as K
from ..names import readable_op
from .base import OPS, Annotation, Hit, NoteContext
from .ops_common import name_rows, owning

_REGION = re.compile(r"^Torch-Compiled Region: (?P<frame>\d+)/(?P<compile>\d+)$")
_GRAPH = re.compile(r"^## Call CompiledFxGraph (?P<key>\w+) ##$")
CACHE_LOOKUP = "TorchDynamo Cache Lookup"
AOT_PROLOGUE = "AOTDispatcher Runtime Wrapper Prologue"
_HOST = (K.CPU_OP, K.USER_ANNOTATION)

COMPILED_REGION = Annotation(
    "compiled-region",
    OPS,
    "torch.compile'd code (frame F, compile C)",
    "Torch-Compiled Region: F/C is one call of code torch.compile produced: frame F of your program, its C-th "
    "compilation (a recompile after a guard failed makes a new C). Everything under it ran from the compiled "
    "graph; its self time is Python glue around the graph call.",
)
GUARD_CHECK = Annotation(
    "dynamo-guards",
    OPS,
    "Dynamo's guard check: (mean per call)",
    "TorchDynamo Cache Lookup runs before every call of a compiled function: Dynamo evaluates the guards "
    "(input types, shapes, globals) of its cached code to pick the compiled version to run. It is paid on "
    "every call, so it matters for small, often-called functions; fewer guards (or one bigger compiled "
    "region) make it smaller.",
)
AOT_WRAPPER = Annotation(
    "aot-wrapper",
    OPS,
    "AOTAutograd's runtime wrapper: (mean per call)",
    "AOTDispatcher Runtime Wrapper Prologue is AOTAutograd preparing a compiled graph's inputs on every call "
    "(unwrapping tensor subclasses, handling mutated inputs, setting up autograd for the backward). Like "
    "the guard check, it is per-call overhead of compiled code, independent of the work inside the graph.",
)
FX_GRAPH = Annotation(
    "compiled-graph",
    OPS,
    "compiled graph (where its code is)",
    "'## Call CompiledFxGraph <key> ##' is Inductor running one compiled FX graph; <key> is its FX graph cache "
    "key. The generated code is kept in Inductor's cache dir (TORCHINDUCTOR_CACHE_DIR, by default "
    "torchinductor_<user> in the temp dir) under fxgraph/<key[1:3]>/<key>/; where a Triton kernel under it "
    "names its source file, the note names that file. TORCH_COMPILE_DEBUG=1 also writes the code beside "
    "your program.",
)


def _mean_us(ctx: NoteContext, rows: np.ndarray) -> float:
    return float(ctx.events["dur"].to_numpy()[rows].mean())


def compiled_regions(ctx: NoteContext) -> list[Hit]:
    """Compiled regions (frame and compile), guard checks and AOT wrappers with their mean cost per call."""
    hits = []
    regions = name_rows(ctx, _REGION.match, _HOST)
    for name in dict.fromkeys(ctx.names[regions].tolist()):
        m = _REGION.match(str(name))
        first = int(regions[ctx.names[regions] == name][0])
        text = f"torch.compile'd code (frame {m['frame']}, compile {m['compile']})"
        hits.append(Hit(OPS, str(name), COMPILED_REGION.id, text, first))
    for name, note, label in (
        (CACHE_LOOKUP, GUARD_CHECK, "Dynamo's guard check"),
        (AOT_PROLOGUE, AOT_WRAPPER, "AOTAutograd's runtime wrapper"),
    ):
        rows = name_rows(ctx, name.__eq__, _HOST)
        if len(rows):
            calls = f"{len(rows)} call" + ("s" if len(rows) != 1 else "")
            text = f"{label}: {fmt_time(_mean_us(ctx, rows))} per call ({calls})"
            hits.append(Hit(OPS, name, note.id, text, int(rows[0])))
    return hits


def _kernel_files(ctx: NoteContext, graphs: np.ndarray) -> dict[int, str]:
    """Per graph call: the first ``kernel_file`` named by an event under it."""
    if "kernel_file" not in ctx.events.columns:
        return {}
    files = ctx.events["kernel_file"]
    named = np.flatnonzero(files.notna().to_numpy() & (files.astype(str).to_numpy() != ""))
    named = named[np.isin(ctx.kinds[named], K.HOST_KINDS)]
    if not len(named):
        return {}
    owner = owning(ctx, named, graphs)
    out: dict[int, str] = {}
    for row, graph in zip(named.tolist(), owner.tolist(), strict=True):
        if graph >= 0:
            out.setdefault(graph, str(files.iat[row]))
    return out


def compiled_graphs(ctx: NoteContext) -> list[Hit]:
    """``## Call CompiledFxGraph <key> ##``: a readable name and where its code is."""
    graphs = name_rows(ctx, _GRAPH.match, _HOST)
    if not len(graphs):
        return []
    files = _kernel_files(ctx, graphs)
    hits = []
    for name in dict.fromkeys(ctx.names[graphs].tolist()):
        mine = graphs[ctx.names[graphs] == name]
        key = _GRAPH.match(str(name))["key"]
        label = readable_op(str(name))
        named = [files[g] for g in mine.tolist() if g in files]
        if named:
            text = f"{label}; a kernel's code: {named[0]}"
        elif key != "None":
            text = f"{label}; code in Inductor's cache dir: fxgraph/{key[1:3]}/{key}/"
        else:
            text = label
        hits.append(Hit(OPS, str(name), FX_GRAPH.id, text, int(mine[0])))
    return hits


COMPILED_ANNOTATIONS = (COMPILED_REGION, GUARD_CHECK, AOT_WRAPPER, FX_GRAPH)
COMPILED_RULES = (compiled_regions, compiled_graphs)
