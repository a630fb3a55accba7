"""Notes on torch.compile's rows (issue 24 item 7), on a real Inductor CPU capture and an eager one.

Inductor compiles on the CPU here (slowly), so each capture is made once for
the module. The oracle is the trace file read with the json module, and the
Inductor cache directory on disk for where the compiled graph's code is.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch
from test_op_notes import capture, ids_anywhere, notes_of, x_events

from jupyter_torchprof.format import fmt_time

COMPILE_IDS = {"compiled-region", "dynamo-guards", "aot-wrapper", "compiled-graph"}


def _f(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ x.T).sum(dim=0).softmax(dim=0)


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    folder = tmp_path_factory.mktemp("op_notes_compiled")
    cache = tmp_path_factory.mktemp("inductor_cache")
    old = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    try:
        torch._dynamo.reset()
        compiled = torch.compile(_f)
        x = torch.randn(32, 32)
        out = {
            "compiled": capture(lambda: compiled(x), folder, "compiled"),
            "eager": capture(lambda: _f(x), folder, "eager"),
        }
    finally:
        torch._dynamo.reset()
        if old is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = old
    return out, cache


def _durations(path, name: str) -> list[float]:
    return [float(e["dur"]) for e in x_events(path) if e["name"] == name]


def test_region_guard_and_wrapper_notes(captured):
    (caps, _) = captured
    p = caps["compiled"]
    (region,) = {e["name"] for e in x_events(p.trace_path) if e["name"].startswith("Torch-Compiled Region")}
    frame, compile_ = re.match(r"Torch-Compiled Region: (\d+)/(\d+)", region).groups()
    assert notes_of(p, region) == {
        "compiled-region": f"torch.compile'd code (frame {frame}, compile {compile_})"
    }
    for name, label, note_id in (
        ("TorchDynamo Cache Lookup", "Dynamo's guard check", "dynamo-guards"),
        ("AOTDispatcher Runtime Wrapper Prologue", "AOTAutograd's runtime wrapper", "aot-wrapper"),
    ):
        durs = _durations(p.trace_path, name)
        assert len(durs) == 2  # one per recorded step
        mean = sum(durs) / len(durs)
        assert notes_of(p, name) == {note_id: f"{label}: {fmt_time(mean)} per call ({len(durs)} calls)"}


def test_graph_call_names_its_code_in_the_cache(captured):
    (caps, cache) = captured
    p = caps["compiled"]
    (graph,) = {e["name"] for e in x_events(p.trace_path) if "CompiledFxGraph" in e["name"]}
    key = re.fullmatch(r"## Call CompiledFxGraph (\w+) ##", graph).group(1)
    note = notes_of(p, graph)["compiled-graph"]
    where = note.split("code in Inductor's cache dir: ")[1]
    assert where == f"fxgraph/{key[1:3]}/{key}/"
    assert note.startswith(f"compiled graph {key[:9]}; ")
    # the folder is really there, holding the compiled graph Inductor saved
    folder = Path(cache) / where
    assert folder.is_dir() and any(folder.iterdir())


def test_eager_run_gets_no_compile_notes(captured):
    (caps, _) = captured
    p = caps["eager"]
    names = {e["name"] for e in x_events(p.trace_path)}
    assert not any("Compiled" in n or "TorchDynamo" in n for n in names)
    assert not COMPILE_IDS & ids_anywhere(p)


def test_graph_note_quotes_a_kernel_file_under_it():
    """Where an event under the graph call names its generated source, the note quotes that file.

    Real Triton traces name it on the kernel's op row (``args.kernel_file``,
    tests/data/kineto/triton_kernel.pt.trace.json.gz); the parser keeps it on
    device rows only for now, so the rule is checked on a hand-built context.
    """
    import numpy as np
    import pandas as pd

    from jupyter_torchprof.analysis.notes import NoteContext
    from jupyter_torchprof.analysis.notes.ops_compiled import compiled_graphs

    key = "fab12cdef34567890abcdefghijklmnopqrstuvwxyz012345678"
    source = "/tmp/torchinductor_user/qa/cqaokwf2bph4egogzevc22vluasiyuui4i54zpemp6knbsggfbuu.py"
    events = pd.DataFrame(
        {
            "name": pd.Categorical(
                [
                    "Torch-Compiled Region: 0/0",
                    f"## Call CompiledFxGraph {key} ##",
                    "triton_poi_fused_add_cos_sin_0",
                ]
            ),
            "cat": pd.Categorical(["cpu_op", "user_annotation", "cpu_op"]),
            "kind": pd.Categorical(["cpu_op", "user_annotation", "cpu_op"]),
            "tid": [1, 1, 1],
            "ts": [0.0, 10.0, 20.0],
            "dur": [100.0, 80.0, 30.0],
            "kernel_file": pd.Categorical([None, None, source]),
        }
    )
    ctx = NoteContext(events, np.array([-1, 0, 1]), np.full(3, -1), np.full(3, -1), False)
    (hit,) = compiled_graphs(ctx)
    assert hit.id == "compiled-graph" and hit.event == 1
    assert hit.text == f"compiled graph {key[:9]}; a kernel's code: {source}"
