"""The runs REST API with a bad store: every fault is a clear answer, and the server keeps serving.

Each bad request is sent while ``/api/status`` is polled: the event loop must
stay free the whole time (a FIFO opened on the loop once stalled every
endpoint). "Free" is counted in the loop thread's CPU time, not on the wall
clock, so a busy machine cannot fail it. A small load test lists runs while
uncached timelines are built, and prints the listing's p50/p99.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import shutil
import signal
import socket
import statistics
import time
from pathlib import Path

import pytest
from tracefiles import real_trace

from jupyter_torchprof.errors import TraceError
from jupyter_torchprof.runs.store import RUN_FILE, RunStore, compress_trace, new_run_id
from jupyter_torchprof.trace.files import parse_trace

pytest_plugins = ("pytest_jupyter.jupyter_server",)

#: The loop thread's CPU time one /api/status round trip (and 10 ms pause) may take meanwhile.
#: 4-20 ms as a rule; 0.2-0.25 s at times on 2 cores at load 14 (one step of a request
#: handler, CPU time stretched by the contention). Blocking work on the loop takes far
#: more, or never ends (then `no_hang` fails the test).
LOOP_CPU_S = 1.0


def _trace_doc(n: int = 40) -> bytes:
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 0.0,
            "dur": 10.0 * n,
        }
    ]
    events += [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"aten::op{i % 5}",
            "pid": 1,
            "tid": 1,
            "ts": 10.0 * i,
            "dur": 5.0,
        }
        for i in range(n)
    ]
    return json.dumps({"traceEvents": events}).encode()


def _run(store: RunStore, name: str, created: float, trace: bytes | None = None) -> Path:
    run_dir = store.create(new_run_id(created))
    if trace is not None:
        src = run_dir / "trace.json"
        src.write_bytes(trace)
        compress_trace(src, run_dir / "trace.json.gz")
    store.write_info(run_dir, {"name": name, "created": created, "status": "done"})
    return run_dir


@pytest.fixture
def run_root(tmp_path, monkeypatch):
    root = tmp_path / "store" / "runs"
    store = RunStore(root)
    _run(store, "good", time.time() - 100, _trace_doc())
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(root))
    return root


@pytest.fixture(autouse=True)
def no_hang():
    """A blocked event loop would hang the test (client and server share it): fail instead."""

    def fail(signum, frame):
        raise AssertionError("the request hung the event loop")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


async def responsive(jp_fetch, *parts, method="GET", params=None):
    """Send one request while polling /api/status; (code, body) of the request.

    Client, server and event loop share this thread: work the server does on
    the loop (a bomb parsed there instead of on its pools) is CPU time of this
    thread while a status request waits for its answer, however busy the
    machine. A loaded machine only stretches the wall clock, which is why the
    wall clock is not what we bound. A loop blocked for good (a FIFO opened on
    it) is caught by `no_hang`.
    """
    task = asyncio.ensure_future(
        jp_fetch("jupyter-torchprof", *parts, method=method, params=params, raise_error=False)
    )
    spent = []
    while not task.done() or len(spent) < 3:
        # Sampled only when this coroutine runs: the loop's CPU time is cut
        # into back-to-back pieces, and work that holds the loop lies whole
        # inside one of them (the pause included).
        t = time.thread_time()
        await jp_fetch("api", "status")
        await asyncio.sleep(0.01)
        spent.append(time.thread_time() - t)
    assert max(spent) < LOOP_CPU_S, f"/api/status took {max(spent) * 1e3:.0f} ms of the loop's CPU meanwhile"
    resp = task.result()
    return resp.code, json.loads(resp.body) if resp.body else None


async def test_work_done_on_the_loop_is_caught(jp_fetch, store, monkeypatch):
    """`responsive` can fail: a store read moved onto the event loop, with 1.2 s of CPU work, is caught."""
    from jupyter_torchprof.server.runs import RunsBase

    async def on_the_loop(self, fn):
        t = time.thread_time()
        while time.thread_time() - t < 1.2 * LOOP_CPU_S:  # CPU time, so a busy machine cannot shorten it
            pass
        return fn()

    def patient(*parts, **kwargs):
        # On a busy machine 1.2 s of CPU can take more wall time than the client's 20 s.
        return jp_fetch(*parts, request_timeout=110, **kwargs)

    monkeypatch.setattr(RunsBase, "in_store", on_the_loop)
    with pytest.raises(AssertionError, match="of the loop's CPU"):
        await responsive(patient, "runs")


def listed(body: dict) -> dict[str, dict]:
    return {r["id"]: r for r in body["runs"]}


# ---------------------------------------------------------------- bad run.json

BAD_RUN_JSON = {
    "created is a word": (b'{"created": "yesterday"}', "'created' is not"),
    "nested bomb": (b"[" * 100_000, "unreadable"),
    "object bomb": (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nested too deeply"),
    "name is a list": (b'{"name": ["a"], "created": 1.0}', "'name' is not"),
    "not an object": (b"[]", "not an object"),
    "truncated": (b'{"name": "half', "not valid JSON"),
    "5,000-digit created": (b'{"created": ' + b"1" * 5000 + b"}", "not valid JSON"),
    "Infinity created": (b'{"created": Infinity}', "not a finite number"),
    "huge pid, running": (
        json.dumps({"status": "running", "pid": 10**30, "host": socket.gethostname()}).encode(),
        "interrupted",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_RUN_JSON))
async def test_a_bad_run_json_is_listed_damaged_and_can_be_deleted(jp_fetch, store, case):
    content, reason = BAD_RUN_JSON[case]
    good = next(iter(store.ids()))
    bad = store.create(new_run_id(time.time() - 200))
    (bad / RUN_FILE).write_bytes(content)

    code, body = await responsive(jp_fetch, "runs")
    assert code == 200
    runs = listed(body)
    assert runs[good]["damaged"] is False and runs[good]["name"] == "good"
    assert runs[bad.name]["damaged"] is True and reason in runs[bad.name]["problem"]

    code, info = await responsive(jp_fetch, "runs", bad.name)
    assert code == 200 and info["damaged"] is True and reason in info["problem"]

    code, _ = await responsive(jp_fetch, "runs", bad.name, method="DELETE")
    assert code == 204 and not bad.exists()
    code, body = await responsive(jp_fetch, "runs")
    assert list(listed(body)) == [good]


def _fifo(path: Path) -> Path:
    if path.exists() or path.is_symlink():
        path.unlink()
    os.mkfifo(path)
    return path


async def test_a_fifo_run_json_does_not_stall_the_server(jp_fetch, store):
    run = store.create(new_run_id(time.time() - 300))
    _fifo(run / RUN_FILE)  # nothing will ever write to it
    code, body = await responsive(jp_fetch, "runs")
    assert code == 200 and "not a regular file" in listed(body)[run.name]["problem"]
    code, info = await responsive(jp_fetch, "runs", run.name)
    assert code == 200 and info["damaged"] is True
    code, _ = await responsive(jp_fetch, "runs", run.name, method="DELETE")
    assert code == 204 and not run.exists()


async def test_a_fifo_trace_is_never_opened(jp_fetch, store):
    run = _run(store, "fifo", time.time() - 50)
    _fifo(run / "trace.json.gz")
    for endpoint in ("trace", "tables", "timeline"):
        code, body = await responsive(jp_fetch, "runs", run.name, endpoint)
        assert code == 404 and "no trace" in body["message"], (endpoint, body)
    code, info = await responsive(jp_fetch, "runs", run.name)
    assert code == 200 and info["traces"] == []


async def test_symlinks_to_dev_zero_are_refused(jp_fetch, store):
    run = store.create(new_run_id(time.time() - 300))
    (run / RUN_FILE).unlink()
    (run / RUN_FILE).symlink_to("/dev/zero")
    (run / "trace.json.gz").symlink_to("/dev/zero")
    code, body = await responsive(jp_fetch, "runs")
    assert code == 200 and "symlink" in listed(body)[run.name]["problem"]
    code, body = await responsive(jp_fetch, "runs", run.name, "trace")
    assert code == 404
    code, _ = await responsive(jp_fetch, "runs", run.name, method="DELETE")
    assert code == 204


async def test_a_run_json_symlinked_outside_is_not_served(jp_fetch, store, tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"name": "secret-name", "cell": "token = 'hunter2'", "created": 1.0}))
    run = store.create(new_run_id(time.time() - 300))
    (run / RUN_FILE).unlink()
    (run / RUN_FILE).symlink_to(secret)
    code, body = await responsive(jp_fetch, "runs")
    assert code == 200 and "symlink" in listed(body)[run.name]["problem"]
    code, info = await responsive(jp_fetch, "runs", run.name)
    assert code == 200 and info["damaged"] is True
    assert "hunter2" not in json.dumps(body) + json.dumps(info) and "secret-name" not in json.dumps(info)


# ------------------------------------------------------------ query parameters

HUGE = "9" * 4400


@pytest.mark.parametrize(
    ("endpoint", "param", "value"),
    [
        ("tables", "limit", "²"),
        ("tables", "limit", HUGE),
        ("tables", "limit", "-1"),
        ("tables", "trace", "²"),
        ("tables", "trace", HUGE),
        ("timeline", "max_glyphs", "²"),
        ("timeline", "max_glyphs", HUGE),
        ("trace", "trace", "٣"),  # an Arabic-Indic three: isdigit() says yes
    ],
)
async def test_bad_numbers_are_400_naming_the_parameter(jp_fetch, store, endpoint, param, value):
    good = next(iter(store.ids()))
    code, body = await responsive(jp_fetch, "runs", good, endpoint, params={param: value})
    assert code == 400, body
    assert body["message"].startswith(param), body["message"]


async def test_compare_with_a_bad_limit_is_400(jp_fetch, store):
    good = next(iter(store.ids()))
    other = _run(store, "other", time.time() - 10, _trace_doc(20)).name
    code, body = await responsive(jp_fetch, "compare", params={"a": good, "b": other, "limit": "²"})
    assert code == 400 and body["message"].startswith("limit")
    code, body = await responsive(jp_fetch, "compare", params={"a": good, "b": other, "limit": "5"})
    assert code == 200 and len(body["ops"]["rows"]) <= 5


# ------------------------------------------------------------- malformed traces

MALFORMED = {
    "nested bomb": b'{"traceEvents":[' + b"[" * 100_000,
    "deep args": b'{"traceEvents":[{"ph":"X","name":"a","ts":1,"x":' + b"[" * 50_000 + b"]" * 50_000 + b"}]}",
    "cut short": _trace_doc()[:-40],
    "not a trace": b'{"hello": "world"}',
    "binary": bytes(range(256)) * 4,
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
async def test_a_malformed_trace_is_422_with_the_trace_error(jp_fetch, store, case, tmp_path):
    run = _run(store, case, time.time() - 30, MALFORMED[case])
    path = run / "trace.json.gz"
    with pytest.raises(TraceError) as expected:
        parse_trace(path)  # the line the API must send, computed here directly
    for endpoint in ("tables", "timeline"):
        code, body = await responsive(jp_fetch, "runs", run.name, endpoint)
        if code == 501:  # no timeline view in this build
            continue
        assert code == 422, (endpoint, body)
        assert body["message"] == str(expected.value)
    code, _ = await responsive(jp_fetch, "runs")
    assert code == 200


async def test_hostile_but_readable_traces_are_served(jp_fetch, store):
    bad = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": float("nan"), "dur": 1.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": [1], "tid": 1, "ts": 3.0, "dur": 1.0},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#99999999999999999999", "pid": 1, "tid": 1,
         "ts": 0.0, "dur": 9.0},
    ]  # fmt: skip
    doc = json.loads(_trace_doc(10))
    data = b"\xef\xbb\xbf" + json.dumps({"traceEvents": doc["traceEvents"] + bad}).encode()
    run = _run(store, "hostile", time.time() - 5, data)
    code, body = await responsive(jp_fetch, "runs", run.name, "tables")
    assert code == 200, body
    ops = {row[0]: row for row in body["ops"]["rows"]}
    assert {f"aten::op{i}" for i in range(5)} <= set(ops)
    assert [row[0] for row in body["steps"]["rows"]] == [1]


async def test_a_trace_cut_short_by_a_full_disk_says_so(jp_fetch, store, monkeypatch):
    run = _run(store, "cut", time.time() - 5, _trace_doc())
    path = run / "trace.json.gz"
    path.write_bytes(path.read_bytes()[:-20])
    real = os.statvfs(run)
    # The OS's own account of free space says: full (f_bavail = 0).
    monkeypatch.setattr(os, "statvfs", lambda p: os.statvfs_result((*real[:4], 0, *real[5:])))
    code, body = await responsive(jp_fetch, "runs", run.name, "tables")
    assert code == 422
    assert "no space left on /" in body["message"] and "cut short" in body["message"]
    assert "\n" not in body["message"]


async def test_downloaded_gzip_names_the_trace(jp_fetch, store):
    good = next(iter(store.ids()))
    resp = await jp_fetch("jupyter-torchprof", "runs", good, "trace")
    data = resp.body
    assert data[:2] == b"\x1f\x8b" and data[3] & 0x08  # FNAME present
    assert data[10 : data.index(b"\x00", 10)] == b"trace.json"
    assert gzip.decompress(data) == _trace_doc()


# ------------------------------------------------------------------ load test


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def test_listing_stays_fast_while_timelines_are_built(jp_fetch, store, capsys):
    """``GET runs`` under six concurrent uncached timeline (or table) builds of a real GPU trace."""
    source = real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz")
    now = time.time()
    for i in range(40):
        _run(store, f"listed {i}", now - 1000 - i)
    heavy = []
    for i in range(6):
        run = store.create(new_run_id(now - 500 - i))
        shutil.copyfile(source, run / "trace.json.gz")
        os.utime(run / "trace.json.gz", ns=(i + 1, i + 1))  # distinct cache keys: every build is cold
        store.write_info(run, {"name": f"heavy {i}", "created": now - 500 - i})
        heavy.append(run.name)
    try:
        from jupyter_torchprof.views.timeline import build_timeline  # noqa: F401

        endpoint = "timeline"
    except ImportError:
        endpoint = "tables"

    idle = []
    for _ in range(10):
        t = time.perf_counter()
        await jp_fetch("jupyter-torchprof", "runs")
        idle.append(time.perf_counter() - t)

    builds = [  # a busy machine may take longer than the client's default 20 s over six cold builds
        asyncio.ensure_future(jp_fetch("jupyter-torchprof", "runs", r, endpoint, request_timeout=110))
        for r in heavy
    ]
    loaded, status, status_cpu, finished = [], [], [], []
    started = time.perf_counter()
    while not all(b.done() for b in builds) or len(loaded) < 10:
        t = time.perf_counter()
        resp = await jp_fetch("jupyter-torchprof", "runs")
        loaded.append(time.perf_counter() - t)
        finished.append(sum(b.done() for b in builds))  # builds over when this listing came back
        assert len(json.loads(resp.body)["runs"]) == 47
        t, cpu = time.perf_counter(), time.thread_time()
        await jp_fetch("api", "status")
        status.append(time.perf_counter() - t)
        status_cpu.append(time.thread_time() - cpu)
    busy_s = time.perf_counter() - started
    assert all(b.result().code == 200 for b in builds)
    figures = {
        "endpoint": endpoint,
        "builds": len(builds),
        "builds_wall_s": round(busy_s, 2),
        "list_idle_p50_ms": round(statistics.median(idle) * 1e3, 1),
        "list_loaded_p50_ms": round(statistics.median(loaded) * 1e3, 1),
        "list_loaded_p99_ms": round(_percentile(loaded, 0.99) * 1e3, 1),
        "list_requests": len(loaded),
        "status_p99_ms": round(_percentile(status, 0.99) * 1e3, 1),
        "lists_before_a_build_ended": finished.count(0),
    }
    with capsys.disabled():
        print(f"\nload test: {json.dumps(figures)}")
    # The wall-clock figures above are printed, not asserted: a busy machine
    # stretches them all. On one shared pool the listing queued behind the
    # builds (p50 1.8 s, p99 2.8 s): only the first came back before a build
    # ended (then 19 s for the next). On its own pool it waits only for the
    # GIL, and comes back many times meanwhile (60 times, process stopped 60%).
    assert finished.count(0) >= 3, figures
    # Six builds hold the GIL in turns: the loop itself must not do their work.
    assert max(status_cpu) < LOOP_CPU_S, figures
