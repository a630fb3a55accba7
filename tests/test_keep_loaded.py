"""`runs.keep.keep_loaded`: a loaded trace kept once as a run, a half-made copy never left behind."""

from __future__ import annotations

import contextlib
import shutil

import pytest
from tracefiles import real_trace

from jupyter_torchprof.runs import RUN_FILE, RunStore, wait_for_compression
from jupyter_torchprof.runs.keep import keep_loaded
from jupyter_torchprof.runs.load import load


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("src")
    src = folder / "cpu.pt.trace.json.gz"
    shutil.copyfile(real_trace("cpu_only.pt.trace.json.gz"), src)
    return src, load(src)


def test_a_trace_is_kept_once_and_its_run_found_again(tmp_path, loaded):
    src, profile = loaded
    store = RunStore(tmp_path / "runs")
    first = keep_loaded(store, [profile], name="cpu", source=str(src))
    assert first is not None and first.new and first.trace == first.run_dir / src.name
    assert (first.run_dir / RUN_FILE).is_file() and first.trace.is_file()
    (info,) = store.list()
    assert (info["kind"], info["name"], info["trace"], info["ranks"]) == ("load", "cpu", src.name, 1)
    again = keep_loaded(store, [profile], name="cpu", source=str(src))
    assert again is not None and not again.new and again.run_dir == first.run_dir
    assert len(store.list()) == 1
    # A trace that lives in the store already is not copied into it.
    inside = load(first.trace)
    assert keep_loaded(store, [inside], name="cpu", source=str(first.trace)) is None
    wait_for_compression()


def test_an_interrupted_copy_is_removed_under_the_callers_hold_and_raised(tmp_path, loaded, monkeypatch):
    src, profile = loaded
    store = RunStore(tmp_path / "runs")
    holds = []

    @contextlib.contextmanager
    def held():
        holds.append("held")
        yield

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(RunStore, "add_trace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        keep_loaded(store, [profile], name="cpu", source=str(src), held=held)
    assert holds == ["held"]
    assert store.list() == [] and list(store.root.iterdir()) == []
