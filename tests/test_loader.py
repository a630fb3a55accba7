"""Loading traces: files, folders, the tensorboard_trace_handler layout, any device kind."""

from __future__ import annotations

import copy
import gzip
import json
import shutil
from collections import Counter

import pandas as pd
import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler
from tracefiles import GPU_TRACES, REAL_TRACES, raw_events, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.results.profile import Profile
from jupyter_torchprof.results.ranks import RankSet
from jupyter_torchprof.trace.files import find_traces, worker_of
from jupyter_torchprof.trace.parser import parse_document

TABLES = ("ops", "kernels", "steps", "streams", "memcpy", "launches", "launch_summary", "gpu_annotations")


def _model() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    return model, torch.randn(16, 32)


def _x_events(doc_events: list[dict]) -> list[dict]:
    return [e for e in doc_events if e.get("ph") == "X" and e.get("cat") != "Trace"]


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory):
    """A real CPU capture exported as .json, and the same bytes gzipped."""
    model, x = _model()
    folder = tmp_path_factory.mktemp("cpu")
    path = folder / "capture.pt.trace.json"
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for k in range(3):
            with record_function(f"ProfilerStep#{k}"):
                model(x).sum().backward()
    prof.export_chrome_trace(str(path))
    gz = folder / "capture_gz.pt.trace.json.gz"
    with open(path, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path, gz


def test_json_and_json_gz_give_the_same_tables(cpu_trace):
    path, gz = cpu_trace
    a, b = load(str(path)), load(str(gz))
    assert isinstance(a, Profile) and isinstance(b, Profile)
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), obj=table)
    raw = _x_events(raw_events(path))
    assert len(a.events) == len(raw)
    assert a.summary["steps"] == 3


@pytest.mark.parametrize("name", REAL_TRACES)
def test_real_trace_keeps_every_complete_event(name):
    """Every ``ph: X`` event of the file is a row, with the file's durations per category."""
    path = real_trace(name)
    raw = _x_events(raw_events(path))
    p = load(str(path))
    assert len(p.events) == len(raw)
    assert p.meta.skipped == 0
    expected = Counter()
    for e in raw:
        expected[e["cat"]] += float(e.get("dur", 0))
    got = p.events.groupby("cat", observed=True)["dur"].sum()
    assert set(got.index) == set(expected)
    for cat, total in expected.items():
        assert got[cat] == pytest.approx(total, rel=1e-9, abs=1e-6), cat


def test_rank_and_device_properties_come_from_the_file():
    path = real_trace("a100_nccl_rank0.pt.trace.json.gz")
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    p = load(str(path))
    assert p.meta.rank == doc["distributedInfo"]["rank"]
    assert p.meta.world_size == doc["distributedInfo"]["world_size"]
    assert [d["name"] for d in p.meta.device_properties] == [d["name"] for d in doc["deviceProperties"]]


# --------------------------------------------------------------------------- #
# tensorboard_trace_handler


@pytest.fixture(scope="module")
def tensorboard_dir(tmp_path_factory):
    """Two real captures written by torch's tensorboard_trace_handler into one folder.

    Worker ``w0`` records two cycles (two files, plain JSON); worker ``w1`` one
    cycle, gzipped: the layout the handler writes, with no rank information.
    """
    folder = tmp_path_factory.mktemp("tb")
    model, x = _model()
    for worker, cycles, gz in (("w0", 2, False), ("w1", 1, True)):
        sched = schedule(wait=1, warmup=1, active=2, repeat=cycles)
        handler = tensorboard_trace_handler(str(folder), worker_name=worker, use_gzip=gz)
        with profile(activities=[ProfilerActivity.CPU], schedule=sched, on_trace_ready=handler) as prof:
            for _ in range(4 * cycles):
                model(x).sum().backward()
                prof.step()
    return folder


def test_tensorboard_layout_loads_as_one_profile_per_file(tensorboard_dir):
    files = sorted(p for p in tensorboard_dir.iterdir() if ".pt.trace.json" in p.name)
    assert len(files) == 3
    assert find_traces(tensorboard_dir) == files
    assert sorted(worker_of(f) for f in files) == ["w0", "w0", "w1"]
    ranks = load(str(tensorboard_dir))
    assert isinstance(ranks, RankSet)
    assert len(ranks) == 3
    by_file = {p.trace_path.name: p for p in ranks}
    for f in files:
        raw = _x_events(raw_events(f))
        steps = [e for e in raw if e["name"].startswith("ProfilerStep#")]
        p = by_file[f.name]
        assert len(p.events) == len(raw)
        assert p.summary["steps"] == len(steps) == 2
        assert p.steps["wall_us"].sum() == pytest.approx(sum(e["dur"] for e in steps))
    table = ranks.table
    assert sorted(table["worker"]) == ["w0", "w0", "w1"]
    assert table["rank"].tolist() == sorted(table["rank"].tolist())


def test_tensorboard_layout_one_level_down(tensorboard_dir, tmp_path):
    """TensorBoard's own layout puts the files in plugins/profile/<run>/."""
    run = tmp_path / "logs" / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    for f in tensorboard_dir.iterdir():
        if f.name.startswith("w1."):
            (run / f.name).symlink_to(f)
    p = load(str(tmp_path / "logs"))
    assert isinstance(p, Profile)
    assert p.trace_path.parent == run


def test_magic_loads_a_tensorboard_folder(shell, tensorboard_dir):
    shell.run_line_magic("torchprof", f"--load {tensorboard_dir} --quiet")
    result = shell.user_ns["_torchprof"]
    assert isinstance(result, RankSet)
    assert len(result) == 3


# --------------------------------------------------------------------------- #
# other device kinds


#: How other backends name Kineto's categories (what their profiler plugins
#: write): runtime/driver calls after the backend, kernels as "kernel" (XPU,
#: PrivateUse1) or "mtia_ccp_events" (MTIA).
BACKENDS = {
    "xpu": {"cuda_runtime": "xpu_runtime", "cuda_driver": "xpu_driver"},
    "mtia": {"cuda_runtime": "mtia_runtime", "cuda_driver": "mtia_driver", "kernel": "mtia_ccp_events"},
    "privateuse1": {"cuda_runtime": "privateuse1_runtime", "cuda_driver": "privateuse1_driver"},
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("name", ["a100_nccl_rank0.pt.trace.json.gz", "mi250_rocm_train.pt.trace.json.gz"])
def test_other_device_kinds_give_the_same_tables(backend, name):
    """A real CUDA/ROCm trace, its categories renamed IN MEMORY as another backend writes them.

    We have no XPU, MTIA or PrivateUse1 trace; the shared traces are never
    edited or copied. The renamed document is parsed from memory and must
    give exactly the tables of the original: nothing after the parser may
    depend on the backend's category names.
    """
    path = real_trace(name)
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    renamed = copy.deepcopy(doc)
    mapping = BACKENDS[backend]
    hits = 0
    for e in renamed["traceEvents"]:
        if e.get("cat") in mapping:
            e["cat"] = mapping[e["cat"]]
            hits += 1
    assert hits > 0
    a = Profile(parse_document(doc, "original"))
    b = Profile(parse_document(renamed, "renamed"))
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), obj=table)
    sa, sb = dict(a.summary), dict(b.summary)
    for s in (sa, sb):
        s.pop("name")
    assert sa.keys() == sb.keys()
    for key, value in sa.items():
        if isinstance(value, float):
            assert sb[key] == pytest.approx(value, nan_ok=True), key
        else:
            assert sb[key] == value, key
    ev_a = a.events.drop(columns=["cat"])
    ev_b = b.events.drop(columns=["cat"])
    pd.testing.assert_frame_equal(ev_a, ev_b)
    assert b.summary["device_traced"]
    assert not b.kernels.empty


@pytest.mark.parametrize("name", GPU_TRACES)
def test_gpu_traces_have_device_work(name):
    p = load(str(real_trace(name)))
    assert p.summary["device_traced"]
    assert p.summary["kernels"] == sum(
        1 for e in raw_events(real_trace(name)) if e.get("ph") == "X" and e.get("cat") == "kernel"
    )


def _layouts(doc: dict) -> dict[str, bytes]:
    """The same trace written in layouts that defeat the loader's guess of where the events are.

    The parser locates ``traceEvents`` by pattern (first key, up to the
    file's last ``]``); each layout here makes that guess wrong.
    """
    events = doc["traceEvents"]
    rest = {k: v for k, v in doc.items() if k != "traceEvents"}
    decoy = {
        "ph": "X",
        "cat": "cpu_op",
        "name": "decoy::not_an_event",
        "pid": 1,
        "tid": 1,
        "ts": 1.0,
        "dur": 1.0,
    }
    return {
        # an array-valued key after the events: the last "]" is not theirs
        "array after": json.dumps({"traceEvents": events, **rest, "extra": [decoy]}).encode(),
        # the same key nested earlier: the first match is not the top-level key
        "nested key first": json.dumps(
            {"meta": {"traceEvents": [decoy]}, **rest, "traceEvents": events}
        ).encode(),
        # pretty-printed, with the device properties last
        "indented": json.dumps({"traceEvents": events, **rest}, indent=1).encode(),
    }


@pytest.mark.parametrize("layout", ["array after", "nested key first", "indented"])
def test_events_array_is_found_in_any_layout(layout, tmp_path):
    path = real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    file = tmp_path / "t.json"
    file.write_bytes(_layouts(doc)[layout])
    p = load(file)
    expected = _x_events(doc["traceEvents"])
    assert len(p.events) == len(expected)
    assert Counter(p.events["name"].astype(str)) == Counter(e["name"] for e in expected)
    assert p.meta.device_properties == doc["deviceProperties"]
    assert not p.meta.warnings
