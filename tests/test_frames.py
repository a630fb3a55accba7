"""``--stack``: the user's frames are told from the kernel machinery around them."""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_torchprof.analysis.frames import machinery_frames, machinery_name


@pytest.mark.parametrize(
    ("name", "machinery"),
    [
        ("ipykernel/kernelbase.py(405): dispatch_shell", True),
        ("tornado/ioloop.py(742): _run_callback", True),
        ("asyncio/base_events.py(1922): _run_once", True),
        ("IPython/core/interactiveshell.py(3577): run_code", True),
        ("jupyter_torchprof/views/progress.py(63): _tick", True),
        ("threading.py(1002): _bootstrap", True),
        ("torch/profiler/profiler.py(1118): __enter__", True),
        ("multiprocessing/queues.py(231): _feed", True),
        ("/tmp/ipykernel_4242/3158.py(3): <module>", False),
        ("<ipython-input-1-af5b5d0ecf90>(4): user_fn", False),
        ("torch/nn/modules/linear.py(130): forward", False),
        ("mypkg/model.py(12): forward", False),
        ("nn.Module: Linear_0", False),
    ],
)
def test_frame_names(name, machinery):
    assert machinery_name(name) is machinery


def test_a_stack_run_keeps_the_cells_frames_and_hides_the_machinery(shell):
    shell.run_cell(
        "import torch\nm = torch.nn.Linear(8, 8)\nx = torch.randn(4, 8)\n"
        "def user_fn(t):\n    return m(t).relu().sum()\n"
    )
    shell.run_cell_magic("torchprof", "--stack --steps 2 --warmup 1 -o r", "user_fn(x)\n")
    ev = shell.user_ns["r"].events
    hidden = machinery_frames(ev, ev["parent"].to_numpy(), ev["depth"].to_numpy())
    py = (ev["kind"] == "python_function").to_numpy()
    names = ev["name"].astype(str).to_numpy()
    kept, gone = set(names[py & ~hidden]), set(names[hidden])
    assert hidden.sum() > 0 and (py & ~hidden).sum() > 0
    assert any(n.endswith(": user_fn") for n in kept), sorted(kept)[:20]
    assert any("torch/nn/modules/linear.py" in n for n in kept)
    assert not any(machinery_name(n) for n in kept), sorted(n for n in kept if machinery_name(n))
    # standard-library frames called by the machinery go with it
    assert any(n.startswith(("IPython/", "traitlets/")) for n in gone)
    assert not (hidden & ~py).any()
    # a built-in under the user's code stays the user's
    parent = ev["parent"].to_numpy()
    builtin_kept = [i for i in np.flatnonzero(py & ~hidden) if names[i].startswith("<built-in method relu")]
    assert builtin_kept and all(not hidden[parent[i]] for i in builtin_kept)


def test_worker_processes_kept_between_loads_stay_out_of_the_users_frames(shell):
    # The pool of a folder load waits in threads of this process (its queue
    # feeder, its manager, its idle timer): a --stack run records them.
    from tracefiles import real_trace

    from jupyter_torchprof.results import parallel

    trace = real_trace("cpu_only.pt.trace.json.gz")
    parallel.digest_files([trace, trace], workers=2, here=False)
    try:
        assert parallel.kept_workers(), "the load kept its worker processes (and the threads that watch them)"
        test_a_stack_run_keeps_the_cells_frames_and_hides_the_machinery(shell)
    finally:
        parallel.close_workers()


def test_the_timeline_hides_the_machinery_unless_asked(shell):
    from jupyter_torchprof.views.timeline import Timeline, layout

    shell.run_cell("import torch\nx = torch.randn(4, 4)\ndef user_fn(t):\n    return (t @ t).sum()\n")
    shell.run_cell_magic("torchprof", "--stack --steps 1 --warmup 0 -q -o r", "user_fn(x)\n")
    p = shell.user_ns["r"]
    ev = p.events
    hidden = machinery_frames(ev, ev["parent"].to_numpy(), ev["depth"].to_numpy())
    _, row, _ = layout(p)
    _, row_all, _ = layout(p, all_frames=True)
    assert (row[hidden] < 0).all()  # not drawn
    assert (row_all[hidden] >= 0).sum() > 0  # drawn when asked
    names = ev["name"].astype(str).to_numpy()
    user = np.flatnonzero(np.char.endswith(names.astype(str), ": user_fn"))
    assert len(user) and (row[user] >= 0).all()
    tl = Timeline(p)
    assert tl.machinery_hidden == int(hidden.sum()) > 0
    assert Timeline(p, all_frames=True).machinery_hidden == 0
