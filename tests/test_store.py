"""The run store: placeholders, damaged runs, safe lookups, the size cap, --load kept."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tracefiles import real_trace

from jupyter_torchprof import load
from jupyter_torchprof.runs.store import (
    RUN_FILE,
    RunStore,
    is_run_id,
    new_run_id,
    wait_for_compression,
    write_json_atomic,
)

SETUP = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
x = torch.randn(16, 32)
"""


def fake_run(store: RunStore, created: float, nbytes: int, name: str = "run") -> str:
    """A finished run whose trace is ``nbytes`` of incompressible bytes."""
    run_id = new_run_id(created)
    run_dir = store.create(run_id)
    (run_dir / "trace.json.gz").write_bytes(os.urandom(nbytes))
    store.write_info(run_dir, {"name": name, "created": created})
    return run_id


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


# --------------------------------------------------------------------------- ids


@pytest.mark.parametrize(
    "text",
    ["..", ".", "", "../x", "/etc", "20260101-120000-abcdef/..", "20260101-120000-ABCDEF", "a" * 30, None],
)
def test_bad_run_ids_are_refused(tmp_path, text):
    assert not is_run_id(text)
    store = RunStore(tmp_path / "runs")
    with pytest.raises(LookupError):
        store.locate(text)
    if text:  # (an empty id asks create() for a new one)
        with pytest.raises(ValueError):
            store.create(text)


def test_new_ids_are_valid_and_sort_by_time():
    a = new_run_id(1_700_000_000)
    b = new_run_id(1_700_000_100)
    assert is_run_id(a) and is_run_id(b) and a < b


# ----------------------------------------------------------- placeholders and damage


def test_run_in_progress_then_finished(tmp_path):
    store = RunStore(tmp_path / "runs")
    run_dir = store.create()
    info = store.read_info(run_dir.name)
    assert info["running"] is True and info["damaged"] is False
    store.write_info(run_dir, {"name": "done", "created": time.time()})
    info = store.read_info(run_dir.name)
    assert info["name"] == "done" and not info.get("running") and info["damaged"] is False


def test_killed_writer_leaves_a_run_listed_as_damaged(tmp_path):
    """A process killed mid-run (as a kernel would be) leaves a readable, damaged entry."""
    root = tmp_path / "runs"
    script = (
        "import os, signal, sys\n"
        "from jupyter_torchprof.runs.store import RunStore\n"
        f"d = RunStore({str(root)!r}).create()\n"
        "(d / 'trace.json').write_text('{\"traceEvents\": [')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -9
    store = RunStore(root)
    good = fake_run(store, time.time(), 10, name="good")
    runs = store.list()
    assert len(runs) == 2
    damaged = [r for r in runs if r["damaged"]]
    assert len(damaged) == 1 and "interrupted" in damaged[0]["problem"]
    assert [r["id"] for r in runs if not r["damaged"]] == [good]


def test_unreadable_and_missing_run_json_are_listed_not_fatal(tmp_path):
    store = RunStore(tmp_path / "runs")
    good = fake_run(store, time.time() - 10, 10, name="good")
    broken = store.create(new_run_id(time.time() - 20))
    (broken / RUN_FILE).write_text('{"name": "half a fi')
    missing = store.create(new_run_id(time.time() - 30))
    (missing / RUN_FILE).unlink()
    listed = {r["id"]: r for r in store.list()}
    assert set(listed) == {good, broken.name, missing.name}
    assert listed[good]["damaged"] is False
    assert listed[broken.name]["damaged"] and "unreadable" in listed[broken.name]["problem"]
    assert listed[missing.name]["damaged"] and "missing" in listed[missing.name]["problem"]


def test_a_failed_write_keeps_the_previous_run_json(tmp_path):
    store = RunStore(tmp_path / "runs")
    run_id = fake_run(store, time.time(), 10, name="first")
    with pytest.raises(TypeError):
        store.write_info(store.run_dir(run_id), {"name": object()})
    assert store.read_info(run_id)["name"] == "first"
    assert [p.name for p in store.run_dir(run_id).iterdir() if p.name.startswith(".")] == []


def test_atomic_write_replaces_whole_file(tmp_path):
    path = tmp_path / "x.json"
    write_json_atomic(path, {"a": 1, "nan": float("nan")})
    assert json.loads(path.read_text()) == {"a": 1, "nan": None}


def test_listing_ignores_foreign_folders_and_symlinks(tmp_path):
    store = RunStore(tmp_path / "runs")
    run_id = fake_run(store, time.time(), 10)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / RUN_FILE).write_text(json.dumps({"name": "outside"}))
    (store.root / new_run_id()).symlink_to(outside, target_is_directory=True)
    (store.root / "notes").mkdir()
    assert [r["id"] for r in store.list()] == [run_id]


def test_symlinked_traces_are_not_offered(tmp_path):
    store = RunStore(tmp_path / "runs")
    run_dir = store.create()
    secret = tmp_path / "secret.json.gz"
    secret.write_bytes(b"not yours")
    (run_dir / "trace.json.gz").symlink_to(secret)
    assert store.locate_traces(run_dir.name) == []


def test_delete_refuses_symlinked_runs(tmp_path):
    store = RunStore(tmp_path / "runs")
    fake_run(store, time.time(), 10)
    outside = tmp_path / "outside"
    outside.mkdir()
    link = store.root / new_run_id()
    link.symlink_to(outside, target_is_directory=True)
    with pytest.raises(LookupError):
        store.delete(link.name)
    assert outside.is_dir()


# ------------------------------------------------------------------- size cap


def test_cap_removes_oldest_first_and_spares_kept_and_running(tmp_path):
    store = RunStore(tmp_path / "runs")
    now = time.time()
    ids = [fake_run(store, now - 100 + i, 100_000, name=f"r{i}") for i in range(5)]
    running = store.create(new_run_id(now - 200))  # oldest of all, but its writer (us) is alive
    (running / "trace.json").write_bytes(os.urandom(100_000))
    sizes = {i: folder_bytes(store.run_dir(i)) for i in [*ids, running.name]}
    cap = sizes[ids[3]] + sizes[ids[4]] + sizes[running.name] + 10
    removed = store.enforce_cap(cap, keep={ids[0]})
    # r0 is kept on request, the running run is spared, then oldest first until it fits
    left = [i for i in ids if store.run_dir(i).exists()]
    total = sum(sizes[i] for i in left) + sizes[running.name]
    assert removed == ids[1 : 1 + len(removed)]
    assert ids[0] in left and running.exists()
    assert total <= cap or left == [ids[0], ids[4]]
    assert removed  # something had to go
    assert store.enforce_cap(0) == []  # 0 = no cap


def test_cap_is_user_controlled_through_the_magic(shell, tmp_path):
    """``%config TorchProf.max_store_mb`` deletes the oldest runs after a new one."""
    store = RunStore(tmp_path / "runs")
    now = time.time()
    oldest = fake_run(store, now - 3600, 700_000, name="oldest")
    older = fake_run(store, now - 1800, 700_000, name="older")
    shell.run_cell(SETUP)
    shell.run_line_magic("config", "TorchProf.max_store_mb = 0")
    assert shell.run_cell("%%torchprof --steps 1 -q\nmodel(x)").error_in_exec is None
    assert store.run_dir(oldest).exists() and store.run_dir(older).exists()  # 0 = never
    shell.run_line_magic("config", "TorchProf.max_store_mb = 1")
    assert shell.run_cell("%%torchprof --steps 1 -q --name newest\nmodel(x)").error_in_exec is None
    wait_for_compression()
    names = [r["name"] for r in store.list()]
    assert "newest" in names
    assert not store.run_dir(oldest).exists()  # oldest goes first
    assert folder_bytes(store.root) <= 2**20 or names == ["newest"]


# --------------------------------------------------------------- --load is kept


def test_load_keeps_a_copy_in_the_store(shell, tmp_path):
    src = real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    res = shell.run_cell(f"%torchprof --load {src} -q --name gp100")
    assert res.error_in_exec is None
    wait_for_compression()
    store = RunStore(tmp_path / "runs")
    runs = store.list()
    assert len(runs) == 1
    info = runs[0]
    assert info["kind"] == "load" and info["name"] == "gp100" and not info["damaged"]
    assert info["source"] == str(src.resolve()) and info["device"] == "Quadro GP100"
    kept = store.locate_traces(info["id"])
    assert [p.name for p in kept] == [src.name] and kept[0].read_bytes() == src.read_bytes()
    assert shell.user_ns["_torchprof"].run_dir == store.run_dir(info["id"])
    # opening the kept copy again does not make a second run
    res = shell.run_cell(f"%torchprof --load {kept[0]} -q")
    assert res.error_in_exec is None and len(store.list()) == 1


def test_load_of_raw_json_is_kept_gzipped(shell, tmp_path):
    src = real_trace("cpu_only.pt.trace.json.gz")
    raw = tmp_path / "mine.pt.trace.json"
    raw.write_bytes(gzip.decompress(src.read_bytes()))
    assert shell.run_cell(f"%torchprof --load {raw} -q").error_in_exec is None
    wait_for_compression()
    store = RunStore(tmp_path / "runs")
    (info,) = store.list()
    (kept,) = store.locate_traces(info["id"])
    assert kept.name == "mine.pt.trace.json.gz"
    assert gzip.decompress(kept.read_bytes()) == raw.read_bytes()
    assert raw.exists()  # the user's file is left alone
    again = load(str(kept))
    assert again.summary["events"] == shell.user_ns["_torchprof"].summary["events"]


def test_load_of_a_folder_keeps_every_rank(shell, tmp_path):
    folder = tmp_path / "ranks"
    folder.mkdir()
    for name in ("a100_nccl_rank0.pt.trace.json.gz", "v100_ddp_ns_timestamps.pt.trace.json.gz"):
        (folder / name).write_bytes(real_trace(name).read_bytes())
    assert shell.run_cell(f"%torchprof --load {folder} -q").error_in_exec is None
    store = RunStore(tmp_path / "runs")
    (info,) = store.list()
    assert info["ranks"] == 2 and sorted(info["traces"]) == sorted(p.name for p in folder.iterdir())
    assert sorted(p.name for p in store.locate_traces(info["id"])) == sorted(info["traces"])


def test_failed_capture_leaves_no_empty_run(shell, tmp_path):
    """A cell that fails before the profiler produced a trace keeps nothing."""
    shell.run_cell(SETUP)
    shell.run_cell("%%torchprof --warmup 1\nraise ValueError('before any step')")
    assert RunStore(tmp_path / "runs").list() == []


# ------------------------------------------------------------ faults in the store

#: run.json contents that once emptied the whole listing (or hung it), and the
#: words the listing must give as the reason instead.
BAD_RUN_JSON = {
    "created is a word": (b'{"name": "x", "created": "yesterday"}', "'created' is not"),
    "name is a number": (b'{"name": 5, "created": 1.0}', "'name' is not"),
    "top op without a name": (b'{"name": "x", "top_ops": [{"self_us": 1}]}', "top_ops"),
    "a list": (b"[1, 2]", "not an object"),
    "a string": (b'"run"', "not an object"),
    "nested bomb": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "object bomb": (b'{"a":' * 50_000, "unreadable"),
    "4,400-digit number": (b'{"created": ' + b"9" * 4400 + b"}", "not valid JSON"),
    "NaN created": (b'{"name": "x", "created": NaN}', "not a finite number"),
    "not UTF-8": (b'{"name": "\xff\xfe"}', "not valid JSON"),
    "too large": (b'{"cell": "' + b"x" * (5 << 20) + b'"}', "too large"),
}


@pytest.mark.parametrize("case", sorted(BAD_RUN_JSON))
def test_a_bad_run_json_is_listed_damaged_and_deletable(tmp_path, case):
    content, reason = BAD_RUN_JSON[case]
    store = RunStore(tmp_path / "runs")
    good = fake_run(store, time.time() - 10, 10, name="good")
    bad = store.create(new_run_id(time.time() - 20))
    (bad / RUN_FILE).write_bytes(content)
    listed = {r["id"]: r for r in store.list()}
    assert set(listed) == {good, bad.name}
    assert listed[good]["damaged"] is False
    assert listed[bad.name]["damaged"] is True
    assert reason in listed[bad.name]["problem"], listed[bad.name]["problem"]
    assert "\n" not in listed[bad.name]["problem"]
    assert isinstance(listed[bad.name]["created"], float)  # sortable, from the folder
    store.delete(bad.name)
    assert [r["id"] for r in store.list()] == [good]


def test_a_huge_pid_is_not_an_overflow(tmp_path):
    import socket

    store = RunStore(tmp_path / "runs")
    run_dir = store.create()
    info = {"status": "running", "pid": 10**30, "host": socket.gethostname(), "created": time.time()}
    (run_dir / RUN_FILE).write_text(json.dumps(info))
    listed = store.read_info(run_dir.name)
    assert listed["damaged"] is True and "interrupted" in listed["problem"]
    info["pid"] = 2**31 + 5  # fits os.kill's C int on some systems, not a pid on any
    (run_dir / RUN_FILE).write_text(json.dumps(info))
    assert store.read_info(run_dir.name)["damaged"] is True


def test_special_files_as_run_json_are_not_opened(tmp_path):
    store = RunStore(tmp_path / "runs")
    fifo_run = store.create(new_run_id(time.time() - 10))
    (fifo_run / RUN_FILE).unlink()
    os.mkfifo(fifo_run / RUN_FILE)
    zero_run = store.create(new_run_id(time.time() - 20))
    (zero_run / RUN_FILE).unlink()
    (zero_run / RUN_FILE).symlink_to("/dev/zero")
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"name": "secret from outside", "created": 1.0}))
    out_run = store.create(new_run_id(time.time() - 30))
    (out_run / RUN_FILE).unlink()
    (out_run / RUN_FILE).symlink_to(outside)
    started = time.monotonic()
    listed = {r["id"]: r for r in store.list()}  # a FIFO would block here until written to
    assert time.monotonic() - started < 5
    assert "not a regular file" in listed[fifo_run.name]["problem"]
    assert "symlink" in listed[zero_run.name]["problem"]
    assert "symlink" in listed[out_run.name]["problem"]
    assert "secret" not in json.dumps(listed)
    fifo_trace = store.create()
    os.mkfifo(fifo_trace / "trace.json.gz")
    assert store.locate_traces(fifo_trace.name) == []
    for run in (fifo_run, zero_run, out_run, fifo_trace):
        store.delete(run.name)
    assert store.list() == [] and outside.exists()


# ------------------------------------------------------------------- full disk


def _gzip_fname(path: Path) -> bytes | None:
    """FNAME of a gzip header (RFC 1952), read by hand."""
    head = path.read_bytes()[:512]
    assert head[:2] == b"\x1f\x8b"
    if not head[3] & 0x08:
        return None
    pos = 10
    if head[3] & 0x04:  # FEXTRA
        pos += 2 + int.from_bytes(head[10:12], "little")
    return head[pos : head.index(b"\x00", pos)]


def test_stored_gzip_names_the_trace_not_the_temporary_file(tmp_path):
    from jupyter_torchprof.runs.store import compress_trace

    src = tmp_path / "trace.json"
    src.write_bytes(json.dumps({"traceEvents": []}).encode())
    run_dir = RunStore(tmp_path / "runs").create()
    compress_trace(src, run_dir / "trace.json.gz", remove_source=False)
    assert _gzip_fname(run_dir / "trace.json.gz") == b"trace.json"
    kept = RunStore(tmp_path / "runs").add_trace(run_dir, src, name="rank-3.json")
    wait_for_compression()
    assert _gzip_fname(kept) == b"rank-3.json"
    assert gzip.decompress(kept.read_bytes()) == src.read_bytes()


@pytest.fixture
def full_fs(tmp_path):
    """A real 256 KiB tmpfs, filled to the brim (needs root and mount; skips otherwise)."""
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def _fill(mnt: Path) -> None:
    with pytest.raises(OSError) as info, open(mnt / "filler", "wb") as fh:
        while True:
            fh.write(b"x" * 65536)
            fh.flush()
    assert info.value.errno == 28  # ENOSPC, from the kernel


def test_full_disk_is_one_line_naming_the_file_system(full_fs):
    from jupyter_torchprof.runs.store import compress_trace

    store = RunStore(full_fs / "runs")
    run_dir = store.create()
    big = full_fs.parent / "big.json"
    big.write_bytes(os.urandom(400_000))  # does not fit the 256 KiB disk, even gzipped
    with pytest.raises(OSError) as info:
        compress_trace(big, run_dir / "trace.json.gz", remove_source=False)
    assert info.value.strerror.startswith(f"no space left on {full_fs} ")
    assert sorted(p.name for p in run_dir.iterdir()) == [RUN_FILE]  # no temporary file left
    _fill(full_fs)
    with pytest.raises(OSError) as info:
        store.create()
    assert info.value.strerror.startswith(f"no space left on {full_fs} ") and "\n" not in info.value.strerror
    assert [r["id"] for r in store.list()] == [run_dir.name]  # no empty folder left behind
    from jupyter_torchprof.errors import TraceError
    from jupyter_torchprof.trace.files import parse_trace

    with pytest.raises(TraceError, match=f"no space left on {full_fs}: the trace was not written"):
        parse_trace(run_dir / "trace.json")


def test_fsync_reporting_enospc_is_one_line(tmp_path, monkeypatch):
    """Where no small disk can be mounted: the OS call that reports a delayed ENOSPC."""
    import errno

    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    store = RunStore(tmp_path / "runs")
    run_id = fake_run(store, time.time(), 10, name="before")
    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError) as info:
        store.write_info(store.run_dir(run_id), {"name": "after"})
    assert info.value.strerror.startswith("no space left on /")
    assert str(store.run_dir(run_id) / RUN_FILE) in info.value.strerror
    assert [p.name for p in store.run_dir(run_id).iterdir() if p.name.startswith(".")] == []
    with pytest.raises(OSError, match="no space left on"):
        store.create()
    monkeypatch.undo()
    assert [r["name"] for r in store.list()] == ["before"]


def test_a_missing_trace_on_a_full_disk_says_so(tmp_path, monkeypatch):
    """statvfs (the OS's own account of free space) says the disk is full."""
    from jupyter_torchprof.errors import TraceError
    from jupyter_torchprof.trace.files import parse_trace

    real = os.statvfs(tmp_path)
    monkeypatch.setattr(os, "statvfs", lambda p: os.statvfs_result((*real[:4], 0, *real[5:])))
    (tmp_path / "empty.json").write_bytes(b"")
    (tmp_path / "cut.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X"}]}')[:-12])
    for name, what in [("trace.json", "not written"), ("empty.json", "empty"), ("cut.json.gz", "cut short")]:
        with pytest.raises(TraceError, match=f"no space left on /.*: the trace (was|is) {what}"):
            parse_trace(tmp_path / name)
    monkeypatch.undo()
    with pytest.raises(TraceError, match="no such file$"):
        parse_trace(tmp_path / "trace.json")


def test_a_fifo_named_like_the_gzip_does_not_hide_the_raw_trace(tmp_path):
    from jupyter_torchprof.runs.store import trace_file

    store = RunStore(tmp_path / "runs")
    run_dir = store.create()
    os.mkfifo(run_dir / "trace.json.gz")
    (run_dir / "trace.json").write_text('{"traceEvents": []}')
    os.mkfifo(run_dir / "rank-1.json")
    assert trace_file(run_dir) == run_dir / "trace.json"
    assert store.locate_traces(run_dir.name) == [run_dir / "trace.json"]


# ------------------------------------------------------- Ctrl-C inside create()


def _interrupt_at_line(targets: set, k: int) -> list[str]:
    """A tracer raising KeyboardInterrupt at the ``k``-th line (or return) of the ``targets`` code objects.

    An exception raised by a trace function is raised in the traced frame at
    that line, as a SIGINT's handler would be: every point of those
    functions can be hit, the os.fsync line included. Returns the hit
    (``["function:line:event"]``) once it happened.
    """
    seen = [0]
    hit: list[str] = []

    def local(frame, event, arg):
        if event in ("line", "return") and not hit:
            seen[0] += 1
            if seen[0] == k:
                hit.append(f"{frame.f_code.co_name}:{frame.f_lineno}:{event}")
                raise KeyboardInterrupt
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code in targets else None

    sys.settrace(tracer)
    return hit


def test_create_interrupted_at_any_point_leaves_nothing_listed(tmp_path):
    from jupyter_torchprof.runs import store as store_mod

    store = RunStore(tmp_path / "runs")
    targets = {RunStore.create.__code__, store_mod.write_json_atomic.__code__}
    hits = []
    for k in range(1, 500):
        hit = _interrupt_at_line(targets, k)
        try:
            store.create()
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        if not hit:  # create ran to its end without reaching the k-th point: all were tried
            break
        hits.append(hit[0])
        listed = store.list()
        if hit[0].startswith("create:") and _source_line(hit[0]).strip() == "return run_dir":
            # after the placeholder was written: the run is the caller's, and whole
            (run,) = listed
            assert run["running"] and not run["damaged"], run
            store.delete(run["id"])
            continue
        left = [p.name for p in store.root.iterdir()] if store.root.exists() else []
        assert (listed, left) == ([], []), (hit[0], _source_line(hit[0]))
    assert any("fsync" in _source_line(h) for h in hits), hits
    assert len(hits) > 10


def _source_line(hit: str) -> str:
    import linecache

    from jupyter_torchprof.runs import store as store_mod

    line = int(hit.split(":")[1])
    return linecache.getline(store_mod.__file__, line)


def test_a_folder_holding_only_a_placeholder_temp_file_is_not_a_damaged_run(tmp_path):
    """A kernel killed during create()'s fsync: not listed while young, removed once abandoned."""
    store = RunStore(tmp_path / "runs")
    kept = fake_run(store, time.time() - 60, 10, name="kept")
    # an hour: far longer than any create takes (the store's threshold is minutes)
    young, old = (store.root / new_run_id(time.time() - s) for s in (1, 3600))
    for folder in (young, old):
        folder.mkdir()
        (folder / ".run.json.0123abcd.tmp").write_text('{"schema": 1, "status": "runn')
    stale = time.time() - 3600
    os.utime(old / ".run.json.0123abcd.tmp", (stale, stale))
    # a folder with anything else in it is a run whose record is missing: still listed as damaged
    other = store.root / new_run_id(time.time() - 7200)
    other.mkdir()
    (other / ".run.json.0123abcd.tmp").write_text("{")
    (other / "trace.json.gz").write_bytes(b"x")
    os.utime(other / ".run.json.0123abcd.tmp", (stale, stale))
    listed = {r["id"]: r for r in store.list()}
    assert set(listed) == {kept, other.name}
    assert listed[other.name]["damaged"] and listed[other.name]["problem"] == "run.json is missing"
    assert young.is_dir() and not old.exists()  # a create may still be writing the young one
