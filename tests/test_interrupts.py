"""Ctrl-C at every phase of a capture, and profilers started inside a profiled cell.

The first part sends real SIGINTs to a real IPython kernel (started with
jupyter_client, as a notebook starts one): during warm-up, in the middle of
a profiled step, while the profiler stops, while the trace is exported and
while it is parsed. The short phases are made long enough to hit with
``TORCHPROF_TEST_PAUSE`` (a sleep inside that phase, see
`capture.guards.pause_for_tests`), which also names a file created when the
phase begins, so each signal is sent at a known moment. After each one the
next ``%%torchprof`` works and no run is left "running".

The rest runs in this process: a SIGINT raised exactly where torch's stop was
broken (just after the native profiler stopped, before its Python flag is
cleared), the stale flag itself, nested profilers, top-level await.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from jupyter_torchprof.capture.guards import (
    NESTED_MESSAGE,
    clear_stale_profiler_flag,
    refuse_nested_profilers,
    sigint_held,
)
from jupyter_torchprof.runs.store import RunStore, wait_for_compression

ROOT = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------------------- #
# a real kernel


class Kernel:
    """An ipykernel subprocess, its client, and the folder its runs go to."""

    def __init__(self, folder: Path) -> None:
        from jupyter_client import KernelManager

        self.folder = folder
        self.mark = folder / "mark"
        self.runs = folder / "runs"
        self.km = KernelManager(kernel_name="python3")
        # The kernel runs this interpreter (the spec says "python", whatever PATH finds).
        self.km.kernel_spec.argv[0] = sys.executable
        env = dict(os.environ)
        env.update(
            TORCHPROF_RUN_DIR=str(self.runs),
            TORCHPROF_TEST_PAUSE_MARK=str(self.mark),
            TORCHPROF_WIDGETS="0",
            PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        )
        env.pop("TORCHPROF_TEST_PAUSE", None)
        self.km.start_kernel(env=env, cwd=str(folder))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def run(self, code: str, timeout: float = 60) -> dict:
        """Execute ``code``; the reply's content, plus the text it printed as ``out``."""
        out: list[str] = []

        def hook(msg: dict) -> None:
            content = msg["content"]
            if msg["msg_type"] == "stream":
                out.append(content["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(content["traceback"]))

        reply = self.kc.execute_interactive(code, timeout=timeout, output_hook=hook)
        content = dict(reply["content"])
        content["out"] = "".join(out)
        return content

    def run_interrupted(self, code: str, when: str = "mark", timeout: float = 60) -> dict:
        """Run ``code`` and send SIGINT to the kernel once ``self.mark`` appears."""
        self.mark.unlink(missing_ok=True)
        sent = threading.Event()

        def interrupt() -> None:
            deadline = time.monotonic() + timeout
            while not self.mark.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.2)  # well inside the phase's sleep, not at its edge
            self.km.interrupt_kernel()
            sent.set()

        thread = threading.Thread(target=interrupt, daemon=True)
        thread.start()
        reply = self.run(code, timeout=timeout)
        thread.join(timeout)
        assert sent.is_set(), f"the kernel never reached {when}: {reply.get('out', '')[-500:]}"
        return reply

    def stop(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = Kernel(tmp_path_factory.mktemp("kernel"))
    setup = k.run(
        "%load_ext jupyter_torchprof\n"
        "import os, time, torch\n"
        f"MARK = {str(k.mark)!r}\n"
        "x = torch.randn(128, 128)\n"
        "calls = []\n"
        "def mark_at(n):\n"
        "    calls.append(1)\n"
        "    if len(calls) == n:\n"
        "        open(MARK, 'w').write('cell')\n"
        "        time.sleep(5)\n"
    )
    assert setup["status"] == "ok", setup
    yield k
    k.stop()


def _runs(kernel: Kernel) -> list[dict]:
    return RunStore(kernel.runs).list()


def _next_run_works(kernel: Kernel) -> None:
    """The next capture runs and saves normally; torch holds no stale profiler flag."""
    before = {r["id"] for r in _runs(kernel)}
    reply = kernel.run(
        "os.environ.pop('TORCHPROF_TEST_PAUSE', None)\n"
        "assert not torch.autograd.profiler._is_profiler_enabled\n"
        "assert not torch._C._autograd._profiler_enabled()"
    )
    assert reply["status"] == "ok", reply["out"]
    reply = kernel.run("%%torchprof --warmup 0 --steps 2 --quiet -o after\ny = x @ x")
    assert reply["status"] == "ok", reply["out"]
    assert "already running" not in reply["out"]
    reply = kernel.run("assert after.summary['steps'] == 2 and not after.partial, after.summary")
    assert reply["status"] == "ok", reply["out"]
    new = [r for r in _runs(kernel) if r["id"] not in before]
    assert len(new) == 1 and not new[0]["damaged"] and not new[0].get("partial"), new


def _no_run_running(kernel: Kernel) -> list[dict]:
    runs = _runs(kernel)
    assert not [r for r in runs if r.get("running") or r.get("status") == "running"], runs
    return runs


def _interrupted(reply: dict) -> None:
    assert reply["status"] == "error", reply["out"]
    assert reply["ename"] == "KeyboardInterrupt", (reply["ename"], reply["out"][-800:])


def _torchprof(kernel: Kernel, line: str, body: str, when: str, pause: str | None = None) -> dict:
    reply = kernel.run(
        "calls.clear()\n"
        + (
            f"os.environ['TORCHPROF_TEST_PAUSE'] = {pause!r}"
            if pause
            else "os.environ.pop('TORCHPROF_TEST_PAUSE', None)"
        )
    )
    assert reply["status"] == "ok", reply["out"]
    reply = kernel.run_interrupted(f"%%torchprof {line}\n{body}", when=when)
    _interrupted(reply)
    return reply


def test_sigint_in_warm_up(kernel):
    before = {r["id"] for r in _runs(kernel)}
    _torchprof(kernel, "--warmup 2 --steps 2", "y = x @ x\nmark_at(1)", "warm-up")
    # nothing was recorded: no run is kept
    assert {r["id"] for r in _no_run_running(kernel)} == before
    _next_run_works(kernel)


def _new_runs(kernel: Kernel, before: set[str]) -> list[dict]:
    wait_for_compression()
    return [r for r in _no_run_running(kernel) if r["id"] not in before]


def test_sigint_mid_step(kernel):
    before = {r["id"] for r in _runs(kernel)}
    # call 1 warms up, call 2 is the profiler's own warm-up step, calls 3 and 4 are steps 1 and 2
    _torchprof(kernel, "--warmup 1 --steps 4", "y = x @ x\nmark_at(4)", "step 2")
    (run,) = _new_runs(kernel, before)
    assert run["partial"] and not run["damaged"], run
    assert "Ctrl-C" in run["error"] and "1 of 4 steps completed" in run["error"], run["error"]
    _next_run_works(kernel)


@pytest.mark.parametrize("phase", ["stop", "export"])
def test_sigint_while_the_profiler_stops(kernel, phase):
    before = {r["id"] for r in _runs(kernel)}
    _torchprof(kernel, "--warmup 0 --steps 2", "y = x @ x", phase, pause=f"{phase}:3")
    (run,) = _new_runs(kernel, before)
    # every step had run: the profile is whole, marked as interrupted while stopping
    assert run["partial"] and not run["damaged"], run
    assert "stopping the profiler" in run["error"] and "2 of 2 steps" in run["error"], run["error"]
    assert run["steps"] == 2
    _next_run_works(kernel)


def test_sigint_during_parse(kernel):
    before = {r["id"] for r in _runs(kernel)}
    _torchprof(kernel, "--warmup 0 --steps 2", "y = x @ x", "parse", pause="parse:3")
    (run,) = _new_runs(kernel, before)
    # ended as damaged, deletable, with its trace kept and readable
    assert run["damaged"] and "interrupted (Ctrl-C)" in run["problem"], run
    store = RunStore(kernel.runs)
    (trace,) = store.locate_traces(run["id"])
    assert trace.name == "trace.json.gz"
    assert str(trace) in run["problem"]
    reply = kernel.run(f"%torchprof --load {trace} --quiet -o kept\nassert kept.summary['steps'] == 2")
    assert reply["status"] == "ok", reply["out"]
    _next_run_works(kernel)
    store.delete(run["id"])


# --------------------------------------------------------------------------- #
# in this process

SETUP = "import torch\nx = torch.randn(64, 64)\n"


def test_sigint_held_delivers_after_the_block():
    before = signal.getsignal(signal.SIGINT)
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with sigint_held() as held:
            signal.raise_signal(signal.SIGINT)
            reached.append(held.count)
    assert reached == [1]
    assert signal.getsignal(signal.SIGINT) is before


def test_sigint_held_lets_the_block_exception_win():
    with pytest.raises(ValueError):
        with sigint_held():
            signal.raise_signal(signal.SIGINT)
            raise ValueError("the block's own error")


def test_sigint_held_off_the_main_thread_is_a_plain_block():
    seen: list[object] = []

    def work() -> None:
        with sigint_held() as held:
            seen.append(held.count)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [0]


def _interrupt_after_native_stop(monkeypatch):
    """Make torch's stop raise KeyboardInterrupt just after the native profiler stopped.

    That is where a Ctrl-C left ``_is_profiler_enabled`` True for good: a
    real SIGINT, raised right after ``_disable_profiler()`` returns, whose
    handler runs before torch's ``profile.__exit__`` clears the flag.
    """
    from torch.autograd import profiler as ap

    real = ap._disable_profiler
    hits: list[int] = []

    def disable_then_sigint():
        result = real()
        hits.append(1)
        signal.raise_signal(signal.SIGINT)
        return result

    monkeypatch.setattr(ap, "_disable_profiler", disable_then_sigint)
    return hits


def test_torch_alone_keeps_a_stale_flag_after_that_interrupt(monkeypatch):
    # The failure the guard exists for, shown on torch itself.
    hits = _interrupt_after_native_stop(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        with torch.profiler.profile():
            torch.randn(8, 8) @ torch.randn(8, 8)
    monkeypatch.undo()
    assert hits == [1]
    try:
        assert torch.autograd.profiler._is_profiler_enabled
        assert not torch._C._autograd._profiler_enabled()
    finally:
        assert clear_stale_profiler_flag()
    assert not torch.autograd.profiler._is_profiler_enabled
    assert not clear_stale_profiler_flag()


def test_interrupt_while_stopping_under_torchprof(shell, monkeypatch):
    shell.run_cell(SETUP)
    hits = _interrupt_after_native_stop(monkeypatch)
    res = shell.run_cell("%%torchprof --warmup 0 --steps 2 --quiet\ny = x @ x")
    monkeypatch.undo()
    assert hits, "the profiler never stopped"
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert not torch.autograd.profiler._is_profiler_enabled
    p = shell.user_ns["_torchprof"]
    assert p.partial and "stopping the profiler" in p.error and "2 of 2 steps" in p.error
    res = shell.run_cell("%%torchprof --warmup 0 --steps 1 --quiet\ny = x @ x")
    assert res.error_in_exec is None


def test_stale_flag_is_cleared_by_the_next_run(shell):
    shell.run_cell(SETUP)
    torch.autograd.profiler._set_is_profiler_enabled(True)
    try:
        with pytest.warns(UserWarning, match="earlier profiler stop was interrupted"):
            res = shell.run_cell("%%torchprof --warmup 0 --steps 1 --quiet\ny = x @ x")
        assert res.error_in_exec is None
        assert shell.user_ns["_torchprof"].summary["steps"] == 1
    finally:
        torch.autograd.profiler._set_is_profiler_enabled(False)


def test_a_profiler_in_another_thread_is_not_stale(shell, capsys):
    shell.run_cell(SETUP)
    started, done = threading.Event(), threading.Event()

    def work() -> None:
        with torch.autograd.profiler.profile():
            started.set()
            done.wait(30)

    t = threading.Thread(target=work)
    t.start()
    try:
        assert started.wait(30)
        # the native state is per thread: this one sees none, the flag says one runs
        assert not torch._C._autograd._profiler_enabled()
        assert not clear_stale_profiler_flag()
        capsys.readouterr()
        res = shell.run_cell("%%torchprof --warmup 0 --steps 1\ny = x @ x")
        assert res.error_in_exec is not None
        assert "already running" in "".join(capsys.readouterr())
    finally:
        done.set()
        t.join()
    assert not torch.autograd.profiler._is_profiler_enabled


# --------------------------------------------------------------------------- #
# a profiler inside the profiled cell


@pytest.mark.parametrize(
    "body",
    [
        "with torch.profiler.profile():\n    y = x @ x",
        "from torch.profiler import profile as P\nwith P() as p:\n    y = x @ x",
        "import torch.autograd.profiler as ap\nwith ap.profile():\n    y = x @ x",
        "with torch.autograd.profiler.emit_itt():\n    y = x @ x",
        "prof = torch.profiler.profile()\nprof.start()\ny = x @ x\nprof.stop()",
    ],
)
def test_profiler_in_the_cell_is_refused_before_running(shell, capsys, tmp_path, body):
    shell.run_cell(SETUP + "ran = []")
    capsys.readouterr()
    res = shell.run_cell(f"%%torchprof\nran.append(1)\n{body}")
    text = "".join(capsys.readouterr())
    assert NESTED_MESSAGE in text and "Traceback" not in text
    assert res.error_in_exec is not None
    assert shell.user_ns["ran"] == []  # nothing ran
    assert RunStore(tmp_path / "runs").list() == []


@pytest.mark.parametrize(
    "body",
    [
        "def profile():\n    return x @ x\ny = profile()",  # the cell's own function of that name
        "import cProfile\nwith cProfile.Profile():\n    y = x @ x",  # not a torch profiler
    ],
)
def test_calls_that_only_look_like_profilers_run(shell, body):
    shell.run_cell(SETUP)
    res = shell.run_cell(f"%%torchprof --warmup 0 --steps 1 --quiet\n{body}")
    assert res.error_in_exec is None, res.error_in_exec
    assert shell.user_ns["_torchprof"].summary["steps"] == 1


def test_record_function_in_the_cell_is_fine(shell):
    shell.run_cell(SETUP)
    res = shell.run_cell(
        "%%torchprof --warmup 0 --steps 1 --quiet\nwith torch.profiler.record_function('mine'):\n    y = x @ x"
    )
    assert res.error_in_exec is None
    assert "mine" in set(shell.user_ns["_torchprof"].ops["name"])


def test_profiler_started_by_a_called_function_is_refused_at_runtime(shell, capsys, tmp_path):
    from torch.autograd import profiler as ap

    originals = (ap._prepare_profiler, ap._enable_profiler)
    # defined in an earlier cell: the cell itself shows no profiler call
    shell.run_cell(SETUP + "def helper():\n    with torch.profiler.profile():\n        return x @ x")
    capsys.readouterr()
    res = shell.run_cell("%%torchprof --warmup 0 --steps 2\ny = helper()")
    text = "".join(capsys.readouterr())
    assert NESTED_MESSAGE in text and "Traceback" not in text
    assert res.error_in_exec is not None
    assert not torch.autograd.profiler._is_profiler_enabled
    assert (ap._prepare_profiler, ap._enable_profiler) == originals
    # the guard is gone: the function works outside %%torchprof, and so does the next capture
    assert shell.run_cell("helper()").error_in_exec is None
    assert shell.run_cell("%%torchprof --warmup 0 --steps 1 --quiet\ny = x @ x").error_in_exec is None
    assert all(not r.get("running") for r in RunStore(tmp_path / "runs").list())


def test_guard_lets_our_own_profiler_through():
    from jupyter_torchprof.capture.guards import NestedProfilerError, own_profiler

    with refuse_nested_profilers():
        with pytest.raises(NestedProfilerError):
            with torch.profiler.profile():
                pass
        assert not torch.autograd.profiler._is_profiler_enabled
        prof = torch.profiler.profile()
        with own_profiler():
            prof.start()
        torch.randn(4, 4).sum()
        with own_profiler():
            prof.stop()
    assert any(e.name == "aten::sum" for e in prof.events())


# --------------------------------------------------------------------------- #
# await


def test_asyncio_run_of_an_async_def_is_not_top_level_await(shell):
    shell.run_cell(SETUP + "import asyncio")
    cell = (
        "%%torchprof --warmup 0 --steps 1 --quiet\n"
        "async def f():\n    await asyncio.sleep(0)\n    return x @ x\n"
        "y = asyncio.run(f())"
    )
    res = shell.run_cell(cell)
    assert res.error_in_exec is None, res.error_in_exec
    assert shell.user_ns["_torchprof"].summary["steps"] == 1


@pytest.mark.parametrize(
    "line",
    ["await asyncio.sleep(0)", "y = [v async for v in agen()]", "async with lock:\n    pass"],
)
def test_real_top_level_await_is_refused(shell, capsys, line):
    shell.run_cell(SETUP + "import asyncio")
    capsys.readouterr()
    shell.run_cell(f"%%torchprof\n{line}")
    text = "".join(capsys.readouterr())
    assert "top-level await is not supported" in text and "Traceback" not in text


# --------------------------------------------------------------------------- #
# the run store after failures


def test_error_after_capture_ends_the_run_as_damaged(shell, tmp_path, monkeypatch):
    from jupyter_torchprof import session

    shell.run_cell(SETUP)

    def broken(*args, **kwargs):
        raise TypeError("a bug while summarising")

    monkeypatch.setattr(session, "run_info", broken)
    res = shell.run_cell("%%torchprof --warmup 0 --steps 1 --quiet\ny = x @ x")
    monkeypatch.undo()
    assert isinstance(res.error_in_exec, TypeError)
    wait_for_compression()
    (run,) = RunStore(tmp_path / "runs").list()
    assert run["damaged"] and not run.get("running")
    assert "TypeError: a bug while summarising" in run["problem"]
    run_dir = tmp_path / "runs" / run["id"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["run.json", "trace.json.gz"]
    # what the sidebar lists: a plain object with the problem, no placeholder status
    info = json.loads((run_dir / "run.json").read_text())
    assert info["damaged"] is True and "status" not in info and info["name"] == "y = x @ x"
    RunStore(tmp_path / "runs").delete(run["id"])


@pytest.mark.parametrize("error", [ValueError("bad copy"), KeyboardInterrupt()])
def test_failure_while_keeping_a_loaded_trace_leaves_no_run(shell, tmp_path, monkeypatch, capsys, error):
    from tracefiles import real_trace

    from jupyter_torchprof.runs.store import RunStore as Store

    path = real_trace("cpu_only.pt.trace.json.gz")

    def failing(self, run_dir, source, name=None):
        raise error

    monkeypatch.setattr(Store, "add_trace", failing)
    res = shell.run_cell(f"%torchprof --load {path} --quiet")
    monkeypatch.undo()
    runs_dir = tmp_path / "runs"
    assert not runs_dir.exists() or not [p for p in runs_dir.iterdir() if not p.name.startswith(".")]
    if isinstance(error, KeyboardInterrupt):
        assert isinstance(res.error_in_exec, KeyboardInterrupt)
    else:
        assert res.error_in_exec is None
        assert "not kept" in capsys.readouterr().err
        assert shell.user_ns["_torchprof"].summary["events"] > 0


# --------------------------------------------------------------------------- #
# a Ctrl-C whose KeyboardInterrupt CPython discards


def _swallowed_sigint() -> None:
    """A SIGINT whose handler runs inside a weakref callback, where CPython discards its KeyboardInterrupt.

    What happened when the signal landed while the garbage collector ran
    ``WeakSet._remove`` (during the deep copy of the cell's tree): the
    handler raises, the callback's exception is "ignored", the run goes on.
    """

    class Box:
        pass

    box = Box()
    ref = weakref.ref(box, lambda _: signal.raise_signal(signal.SIGINT))
    del box
    assert ref() is None


def _sigint_at_call(k: int, start: object, fired: list) -> Callable:
    """A profile hook: from the first call of ``start`` until the cell's ``cell_started()``, count the
    distinct functions called, and at the first call of the ``k``-th one send a SIGINT that is
    swallowed (``k=0``: only count).

    Distinct functions, not calls: the calls of a setup vary a hundredfold
    (a deep copy after IPython's traceback display walks far more nodes),
    the functions it goes through hardly at all, so evenly spaced ``k`` cover
    the whole setup, from the options to the capture's start.
    """
    state: dict = {"armed": False, "seen": set()}

    def hook(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code is start:
            state["armed"] = True
        if code.co_name == "cell_started":  # the cell's code runs: setup is over
            fired.append(("count", len(state["seen"])))
            sys.setprofile(None)
            return
        if state["armed"] and code not in state["seen"]:
            state["seen"].add(code)
            if len(state["seen"]) == k:
                fired.append((f"{Path(code.co_filename).name}:{code.co_name}", k))
                _swallowed_sigint()

    return hook


def _run_with_hook(shell, cell: str, hook: Callable) -> object:
    sys.setprofile(hook)
    try:
        return shell.run_cell(cell)
    finally:
        sys.setprofile(None)


def test_a_ctrl_c_lost_in_a_callback_during_setup_still_stops_the_run(shell, tmp_path, monkeypatch):
    """At points spread over the whole setup (options, the cell's compile and deep copy, the run
    folder, the capture's start), a SIGINT raised where CPython discards it: the cell never runs."""
    import inspect

    from jupyter_torchprof.session import RunSession

    start = inspect.unwrap(RunSession.run).__code__
    ignored: list[type] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: ignored.append(u.exc_type))
    shell.run_cell("ran = []\ndef cell_started():\n    ran.append(1)")
    cell = "%%torchprof --warmup 1 --steps 1 --quiet\ncell_started()"
    assert shell.run_cell(cell).error_in_exec is None  # the first run imports (100k+ calls)
    # one Ctrl-C first: IPython's traceback display changes what later setups go through
    assert isinstance(
        _run_with_hook(shell, cell, _sigint_at_call(1, start, [])).error_in_exec, KeyboardInterrupt
    )
    ignored.clear()
    counted: list = []
    assert _run_with_hook(shell, cell, _sigint_at_call(0, start, counted)).error_in_exec is None
    ((what, calls),) = counted
    assert what == "count" and calls > 100, counted  # the setup goes through that many functions
    wait_for_compression()
    kept = RunStore(tmp_path / "runs").list()
    # Every stride-th function, until a run's setup has fewer than k (the
    # number moves a little from run to run: callbacks the collector runs).
    stride, tried = calls // 16, []
    for k in range(1, 30 * stride, stride):
        shell.user_ns["ran"].clear()
        fired: list = []
        res = _run_with_hook(shell, cell, _sigint_at_call(k, start, fired))
        if fired[0][0] == "count":  # the cell started before the k-th call: all points were tried
            assert res.error_in_exec is None and len(shell.user_ns["ran"]) == 3 and not ignored
            break
        where = fired[0][0]
        tried.append(where)
        assert ignored and ignored.pop() is KeyboardInterrupt and not ignored, where  # CPython dropped it
        assert isinstance(res.error_in_exec, KeyboardInterrupt), (where, res.error_in_exec)
        assert shell.user_ns["ran"] == [], where
        wait_for_compression()
        assert RunStore(tmp_path / "runs").list() == kept, where  # no run kept, none left running
    assert len(tried) >= 12 and tried[0] == "session.py:run", tried
    print("SIGINT lost at", len(tried), "points:", ", ".join(tried))


def test_a_ctrl_c_between_the_new_folder_and_the_capture_leaves_no_run_running(shell, tmp_path, monkeypatch):
    """The folder exists, the capture's own guard has not started: the run is still closed."""
    from jupyter_torchprof.session import RunSession

    shell.run_cell(SETUP)

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt  # as a Ctrl-C landing on collect's first line would

    original = RunSession.collect
    monkeypatch.setattr(RunSession, "collect", interrupted)
    res = shell.run_cell("%%torchprof --warmup 0 --steps 1 --quiet\ny = x @ x")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    monkeypatch.setattr(RunSession, "collect", original)
    runs = RunStore(tmp_path / "runs").list()
    assert not [r for r in runs if r.get("running") or r.get("status") == "running"], runs
    # and the next run works
    assert shell.run_cell("%%torchprof --warmup 0 --steps 1 --quiet\ny = x @ x").error_in_exec is None
