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
