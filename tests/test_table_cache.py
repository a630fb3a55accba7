"""Reopening a run without parsing its trace: the table cache beside the trace (runs.cache).

Reference path: `Profile.from_file` of the same trace, parsed and analysed
fresh. The cached tables must equal it exactly on every real trace; a cache
that is absent, older, corrupted, truncated, stale or hostile must fall back
to parsing (a `CacheWarning`, never an error); and the server and `load()`
must answer from a current cache without calling the parser.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tracefiles import REAL_TRACES, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis.memory import memory_peaks
from jupyter_torchprof.results.profile import Profile
from jupyter_torchprof.runs import cache
from jupyter_torchprof.runs.store import RUN_FILE, TRACE_NAME, RunStore, wait_for_compression

TABLES = ("ops", "kernels", "steps", "findings")


def run_folder(tmp_path: Path, src: Path) -> Path:
    """A run folder as the store makes one for a loaded trace: run.json and the trace."""
    store = RunStore(tmp_path / "runs")
    folder = store.create()
    shutil.copyfile(src, folder / TRACE_NAME)
    store.write_info(folder, {"name": "loaded", "kind": "load", "status": "done"})
    return folder


def same_json(a: object, b: object) -> bool:
    """Equal, NaN included (NaN != NaN as floats; both dump as ``NaN``)."""
    return json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True, default=repr)


def assert_same_tables(cached: Profile, fresh: Profile) -> None:
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(cached, name), getattr(fresh, name), check_exact=True)
    pd.testing.assert_frame_equal(
        cache.memory_peaks_of(cached), memory_peaks(fresh.memory_events), check_exact=True
    )
    assert same_json(cached.summary, fresh.summary)
    assert cached.notes == fresh.notes
    assert cached.meta == fresh.meta


def no_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every way of parsing a trace fail loudly."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the trace was parsed")

    import jupyter_torchprof.results.profile as profile_mod
    import jupyter_torchprof.runs.load as load_mod
    import jupyter_torchprof.trace.files as files_mod

    for mod, attr in (
        (files_mod, "parse_with_device"),
        (files_mod, "parse_trace"),
        (load_mod, "parse_with_device"),
        (profile_mod, "parse_trace"),
        (cache, "parse_with_device"),
    ):
        monkeypatch.setattr(mod, attr, refuse)


# ------------------------------------------------------------ equal to the reference


@pytest.mark.parametrize("name", REAL_TRACES)
def test_cached_tables_equal_fresh_ones_on_real_traces(name, tmp_path, monkeypatch):
    folder = run_folder(tmp_path, real_trace(name))
    trace = folder / TRACE_NAME
    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.CacheWarning)
        first = load(folder)  # parses, and keeps the tables beside the trace
    assert type(first) is Profile and cache.tables_path(trace).is_file()
    fresh = Profile.from_file(trace)
    with monkeypatch.context() as mp:
        no_parse(mp)
        again = load(folder)
        assert isinstance(again, cache.CachedProfile)
        assert_same_tables(again, fresh)
        pd.testing.assert_frame_equal(again.op_table(per_step=True), fresh.op_table(per_step=True))
    # anything beyond the cache parses the trace, once, and agrees with the fresh profile
    pd.testing.assert_frame_equal(again.streams, fresh.streams)
    assert len(again.events) == len(fresh.events)


def test_load_of_a_folder_that_is_not_a_run_writes_nothing(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copyfile(real_trace("cpu_only.pt.trace.json.gz"), folder / "a.pt.trace.json.gz")
    before = sorted(p.name for p in folder.iterdir())
    assert type(load(folder)) is Profile
    assert sorted(p.name for p in folder.iterdir()) == before


def test_a_cache_with_other_name_keeps_its_trace_path(tmp_path, monkeypatch):
    """A store copied elsewhere (copytree keeps times): the cache still applies, paths are the new ones."""
    folder = run_folder(tmp_path, real_trace("cpu_only.pt.trace.json.gz"))
    load(folder)
    moved = tmp_path / "elsewhere" / folder.name
    shutil.copytree(folder, moved)
    no_parse(monkeypatch)
    again = load(moved)
    assert isinstance(again, cache.CachedProfile)
    assert again.trace_path == moved / TRACE_NAME


# ------------------------------------------------------------------- fallbacks


def cached_folder(tmp_path: Path) -> tuple[Path, Path]:
    folder = run_folder(tmp_path, real_trace("triton_kernel.pt.trace.json.gz"))
    load(folder)
    path = cache.tables_path(folder / TRACE_NAME)
    assert path.is_file()
    return folder, path


def rewrite_meta(path: Path, change) -> None:
    """Rewrite a cache's ``__meta__`` with ``change(meta)`` applied, arrays kept."""
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    change(meta)
    np.savez(path, __meta__=np.array(json.dumps(meta)), **arrays)


def falls_back(folder: Path, match: str) -> Profile:
    """``load(folder)`` parses again, with a CacheWarning saying ``match``, and leaves a current cache."""
    with pytest.warns(cache.CacheWarning, match=match):
        p = load(folder)
    assert type(p) is Profile
    assert_same_tables(p, Profile.from_file(folder / TRACE_NAME))
    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.CacheWarning)
        assert isinstance(load(folder), cache.CachedProfile)  # the cache was made anew
    return p


def test_older_schema_falls_back(tmp_path):
    folder, path = cached_folder(tmp_path)
    rewrite_meta(path, lambda m: m.update(schema=cache.SCHEMA_VERSION - 1))
    falls_back(folder, "schema")


def _add_column(mp: pytest.MonkeyPatch) -> str:
    from jupyter_torchprof import columns

    mp.setattr(columns, "OPS", (*columns.OPS, columns.Column("new_us", "New", "time")))
    return "new_us"


def _add_rule(mp: pytest.MonkeyPatch) -> str:
    from jupyter_torchprof.analysis import findings

    def new_rule(inputs, thresholds):
        return [findings.Finding(rule="new_rule", severity="info", title="a new rule", detail="")]

    mp.setattr(findings, "RULES", [*findings.RULES, ("new_rule", "A new rule", False, new_rule)])
    return "new_rule"


@pytest.mark.parametrize("change", [_add_column, _add_rule], ids=["column", "rule"])
def test_a_new_column_or_finding_rule_makes_the_cache_stale(tmp_path, monkeypatch, change):
    """Same schema version, same trace: a cache made before a column or a rule was added is not used."""
    folder, _ = cached_folder(tmp_path)
    added = change(monkeypatch)
    p = falls_back(folder, "columns or finding rules")
    if added == "new_rule":  # the reopened run has what the new code computes
        assert "new_rule" in set(p.findings["rule"])
    monkeypatch.undo()
    # back to the code that made the first cache: the one kept now is stale for it
    with pytest.warns(cache.CacheWarning, match="columns or finding rules"):
        assert type(load(folder)) is Profile


def test_the_code_fingerprint_is_the_same_in_another_process_and_moves_with_the_catalog(monkeypatch):
    import subprocess
    import sys

    here = cache.code_fingerprint()
    with monkeypatch.context() as mp:
        _add_column(mp)
        with_column = cache.code_fingerprint()
    with monkeypatch.context() as mp:
        _add_rule(mp)
        with_rule = cache.code_fingerprint()
    assert len({here, with_column, with_rule}) == 3 and cache.code_fingerprint() == here
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from jupyter_torchprof.runs import cache; print(cache.code_fingerprint())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == here


def test_a_changed_trace_falls_back(tmp_path):
    folder, path = cached_folder(tmp_path)
    trace = folder / TRACE_NAME
    st = trace.stat()
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    falls_back(folder, "another version of the trace")


def test_corrupted_cache_falls_back(tmp_path):
    folder, path = cached_folder(tmp_path)
    path.write_bytes(os.urandom(4096))
    falls_back(folder, "not an .npz")


def test_truncated_cache_falls_back(tmp_path):
    folder, path = cached_folder(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    falls_back(folder, path.name)


def test_cache_missing_a_column_falls_back(tmp_path):
    folder, path = cached_folder(tmp_path)
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files if k != "kernels/0/0"}
    np.savez(path, **arrays)
    falls_back(folder, "lacks column")


# --------------------------------------------------------------------- hostile files


def test_a_symlinked_cache_is_not_followed(tmp_path):
    folder, path = cached_folder(tmp_path)
    outside = tmp_path / "outside.npz"
    path.rename(outside)
    path.symlink_to(outside)
    before = outside.read_bytes()
    with pytest.warns(cache.CacheWarning, match="symlink"):
        assert type(load(folder)) is Profile
    # the new cache replaced the link itself (os.replace), nothing was written through it
    assert path.is_file() and not path.is_symlink()
    assert outside.read_bytes() == before


def test_a_fifo_cache_does_not_block(tmp_path):
    folder, path = cached_folder(tmp_path)
    path.unlink()
    os.mkfifo(path)
    started = time.perf_counter()
    with pytest.warns(cache.CacheWarning, match="not a regular file"):
        assert cache.read_tables(folder / TRACE_NAME) is None
    assert time.perf_counter() - started < 5


def test_a_pickle_in_the_cache_is_never_loaded(tmp_path):
    folder, path = cached_folder(tmp_path)
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["ops/0/0"] = np.array([object()], dtype=object)
    np.savez(path, **arrays)  # numpy pickles object arrays
    with pytest.warns(cache.CacheWarning, match="Python objects"):
        assert cache.read_tables(folder / TRACE_NAME) is None


def test_an_array_claiming_more_than_it_holds_is_refused(tmp_path):
    folder, path = cached_folder(tmp_path)
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("huge.npy", buf.getvalue() + b"\0" * 64)
    with pytest.warns(cache.CacheWarning, match="declares more data"):
        assert cache.read_tables(folder / TRACE_NAME) is None


def test_a_column_type_the_arrays_do_not_have_is_refused(tmp_path):
    """A hostile dtype (here 1 GB per row) is never allocated: the arrays must already have it."""
    folder, path = cached_folder(tmp_path)

    def widen(meta):
        # A numeric column: its arrays are read as they are, the file's dtype only compared.
        numeric = [c for c in meta["tables"]["ops"]["columns"] if c["codec"] == "num"]
        numeric[-1]["dtype"] = "V1000000000"

    rewrite_meta(path, widen)
    falls_back(folder, "encoded as")


def test_deeply_nested_metadata_falls_back(tmp_path):
    folder, path = cached_folder(tmp_path)
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["__meta__"] = np.array("[" * 100_000 + "]" * 100_000)
    np.savez(path, **arrays)
    falls_back(folder, path.name)


def test_member_names_are_never_paths(tmp_path):
    """A member named like a path outside the folder is just a name: nothing is read or written there."""
    folder, path = cached_folder(tmp_path)
    target = tmp_path / "secret.npy"
    np.save(target, np.arange(3))
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("../../secret.npy", target.read_bytes())
    before = target.read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.CacheWarning)
        tables = cache.read_tables(folder / TRACE_NAME)  # the extra member is ignored
    assert tables is not None and target.read_bytes() == before


# ---------------------------------------------------------------- capture and server


@pytest.fixture
def captured_run(shell, tmp_path):
    shell.run_cell("import torch\nm = torch.nn.Linear(8, 4)\nx = torch.randn(2, 8)")
    res = shell.run_cell("%%torchprof --steps 2 -q --name cached\ny = m(x)")
    assert res.error_in_exec is None, res.error_in_exec
    wait_for_compression()
    store = RunStore(tmp_path / "runs")
    (run_id,) = store.ids()
    return store, run_id


def test_capture_keeps_the_tables_of_the_run(captured_run, monkeypatch):
    store, run_id = captured_run
    folder = store.run_dir(run_id)
    trace = folder / TRACE_NAME
    assert cache.tables_path(trace).is_file()
    live = json.loads((folder / RUN_FILE).read_text())
    with monkeypatch.context() as mp:
        no_parse(mp)
        again = load(folder)
        assert isinstance(again, cache.CachedProfile)
        assert again.name == "cached" == live["name"]
        assert again.summary["steps"] == live["steps"] == 2
        ops = dict(zip(again.ops["name"], again.ops["calls"], strict=True))
    # the same tables as parsing the trace anew (capture info aside: a fresh parse has none)
    fresh = Profile.from_file(trace)
    pd.testing.assert_frame_equal(again.ops, fresh.ops)
    pd.testing.assert_frame_equal(again.steps, fresh.steps)
    assert ops["aten::addmm"] == dict(zip(fresh.ops["name"], fresh.ops["calls"], strict=True))["aten::addmm"]
    # ... and the sidebar's timeline, for the glyph budget the server asks with
    from jupyter_torchprof.server.runs import TIMELINE_GLYPHS

    assert cache.SIDEBAR_GLYPHS == TIMELINE_GLYPHS
    kept = cache.read_timeline(trace, cache.timeline_stamp(TIMELINE_GLYPHS))
    assert kept is not None and json.loads(kept)["doc"]["roots"]


def test_a_loaded_trace_kept_in_the_store_gets_its_cache(shell, tmp_path, monkeypatch):
    src = real_trace("mi250_rocm_train.pt.trace.json.gz")
    res = shell.run_cell(f"%torchprof --load {src} -q --name rocm")
    assert res.error_in_exec is None, res.error_in_exec
    wait_for_compression()
    store = RunStore(tmp_path / "runs")
    (run_id,) = store.ids()
    folder = store.run_dir(run_id)
    (trace,) = store.locate_traces(run_id)
    assert cache.tables_path(trace).is_file()
    fresh = Profile.from_file(trace)
    with monkeypatch.context() as mp:
        no_parse(mp)
        again = load(folder)
        assert isinstance(again, cache.CachedProfile) and again.name == "rocm"
        for name in TABLES:
            pd.testing.assert_frame_equal(getattr(again, name), getattr(fresh, name))


pytest_plugins = ("pytest_jupyter.jupyter_server",)


@pytest.fixture
def run_root(tmp_path, monkeypatch):
    """A store holding one real GPU trace, kept as a loaded run is (no cache yet)."""
    root = tmp_path / "store" / "runs"
    folder = run_folder(tmp_path / "store", real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz"))
    assert folder.parent == root
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(root))
    return root


def forget_in_memory(jp_serverapp) -> None:
    """A fresh in-memory cache: what a restarted server (or another one) starts with."""
    from jupyter_torchprof.server.runs import ProfileCache

    jp_serverapp.web_app.settings["torchprof_cache"] = ProfileCache()


async def fetch(jp_fetch, *parts):
    resp = await jp_fetch("jupyter-torchprof", *parts)
    assert resp.code == 200
    return json.loads(resp.body)


async def test_server_tables_come_from_the_cache_without_parsing(
    jp_fetch, jp_serverapp, run_root, monkeypatch
):
    (run_id,) = RunStore(run_root).ids()
    trace = run_root / run_id / TRACE_NAME
    cold = await fetch(jp_fetch, "runs", run_id, "tables")  # parses, and keeps the tables
    assert cache.tables_path(trace).is_file()
    forget_in_memory(jp_serverapp)
    with monkeypatch.context() as mp:
        no_parse(mp)
        warm = await fetch(jp_fetch, "runs", run_id, "tables")
    assert warm == cold
    # a bad cache is a re-parse, not an error, and the answer is the same
    cache.tables_path(trace).write_bytes(b"PK\x03\x04 not really")
    forget_in_memory(jp_serverapp)
    with pytest.warns(cache.CacheWarning):
        again = await fetch(jp_fetch, "runs", run_id, "tables")
    assert again == cold


async def test_server_timeline_comes_from_the_cache_without_parsing(
    jp_fetch, jp_serverapp, run_root, monkeypatch
):
    pytest.importorskip("bokeh")
    (run_id,) = RunStore(run_root).ids()
    trace = run_root / run_id / TRACE_NAME
    cold = await fetch(jp_fetch, "runs", run_id, "timeline")
    assert cache.timeline_path(trace).is_file()
    forget_in_memory(jp_serverapp)
    with monkeypatch.context() as mp:
        no_parse(mp)
        import jupyter_torchprof.views.timeline as timeline_mod

        mp.setattr(timeline_mod, "build_timeline", lambda *a, **k: pytest.fail("the timeline was rebuilt"))
        warm = await fetch(jp_fetch, "runs", run_id, "timeline")
    assert warm == cold
    # another glyph budget is another timeline: built, not taken from the cache
    forget_in_memory(jp_serverapp)
    other = await jp_fetch("jupyter-torchprof", "runs", run_id, "timeline", params={"max_glyphs": "50"})
    assert other.code == 200
