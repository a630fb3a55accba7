"""%%torchprof --compare / --compile with real torch.compile runs on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from jupyter_torchprof.capture.compile import assigned_names
from jupyter_torchprof.capture.runner import INTERLEAVE_ROUNDS

SETUP = """
import torch
calls = []
m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
x = torch.randn(16, 32)
"""


def test_assigned_names_cover_top_level_bindings():
    import ast

    tree = ast.parse(
        "a = 1\nb, (c, *d) = f()\ne += 1\nfor i in r: j = i\nwith o as w: k = 2\n"
        "import torch.nn as nn, os\nfrom x import y as z\ndef fn(): inner = 1\nclass C: attr = 1\n"
        "if (walrus := 3): pass\ntry:\n  t = 1\nexcept E as err:\n  u = 2\n"
    )
    assert assigned_names(tree.body) == [
        "a", "b", "c", "d", "e", "i", "j", "w", "k", "nn", "os", "z", "fn", "C", "walrus", "t", "err", "u",
    ]  # fmt: skip


def test_compare_gives_eager_compiled_and_diff(shell, capsys):
    shell.run_cell(SETUP)
    capsys.readouterr()
    res = shell.run_cell(
        "%%torchprof --compare --backend aot_eager --warmup 1 --steps 2\n"
        "calls.append(1)\nh = m(x)\nprint('printed once')\nh.sum()"
    )
    assert res.error_in_exec is None
    assert capsys.readouterr().out.count("printed once") == 1
    c = shell.user_ns["_torchprof"]
    assert c.eager is not None and c.compiled is not None
    assert c.eager.summary["steps"] == 2 and c.compiled.summary["steps"] == 2
    # eager: 1 warm-up + profiler warm-up + 2 steps; compiled: >= 2 warm-ups + profiler warm-up + 2 steps;
    # then 8 runs of each side, alternating (the wall and CPU verdicts rest on them)
    assert len(shell.user_ns["calls"]) == (1 + 1 + 2) + (2 + 1 + 2) + 2 * INTERLEAVE_ROUNDS
    assert c.paired is not None and c.paired.pairs == INTERLEAVE_ROUNDS
    rows = c.headline.set_index("metric")
    assert rows.loc["wall per step", "evidence"] == "interleaved"
    assert rows.loc["wall per step", "steps_a"] == INTERLEAVE_ROUNDS
    assert f"evidence: {INTERLEAVE_ROUNDS} interleaved pairs" in rows.loc["wall per step", "reason"]
    assert rows.loc["process CPU per step", "evidence"] == "interleaved"
    assert c.verdict[1] == rows.loc["wall per step", "reason"]
    # names assigned by the cell land in the notebook namespace from the compiled run too
    assert isinstance(shell.user_ns["h"], torch.Tensor) and shell.user_ns["h"].shape == (16, 8)
    assert isinstance(res.result, torch.Tensor)
    assert set(c.diff["level"]) == {"op"}
    assert {"name", "status", "self_cpu_us_a", "self_cpu_us_b", "ratio"} <= set(c.diff.columns)
    # The compiled run went through Dynamo: its trace has the compiled region.
    compiled_ops = set(c.compiled.ops["name"])
    assert any(n.startswith("Torch-Compiled Region") for n in compiled_ops)
    # the print breaks the graph: one graph before it, one resumed after it
    assert c.compile_stats.graphs >= 1 and c.compile_stats.graph_break_count >= 1
    assert set(c.compile_stats.regions["name"]) == {
        n for n in compiled_ops if n.startswith("Torch-Compiled Region")
    }
    assert c.compile_stats.first_call_s is not None and c.compile_stats.compile_s is not None
    # diff numbers are the per-step op tables of both sides
    eager_addmm = c.eager.ops.set_index("name").loc["aten::addmm"]
    row = c.diff.set_index("name").loc["aten::addmm"]
    assert row["calls_a"] == eager_addmm["calls"] / 2
    assert row["self_cpu_us_a"] == pytest.approx(eager_addmm["self_cpu_us"] / 2)
    text = c.text()
    assert "eager" in text and "compiled" in text and "torch.compile" in text
    # Dynamo's helper globals (compiled graphs, resume functions) stay out of the notebook
    dynamo_names = [
        n for n in shell.user_ns if n.startswith(("__compiled_fn", "__resume", "__builtins_dict"))
    ]
    assert dynamo_names == []


def test_compared_cell_that_defines_a_function_keeps_it_live(shell):
    """A function the cell defines lands in the notebook and reads the notebook's globals."""
    shell.run_cell(SETUP + "scale = 2.0\n")
    res = shell.run_cell(
        "%%torchprof --compare --backend aot_eager --steps 1 --quiet\n"
        "def head(t):\n    return scale * m(t)\nh = head(x)"
    )
    assert res.error_in_exec is None
    assert torch.allclose(shell.user_ns["h"], 2.0 * shell.user_ns["m"](shell.user_ns["x"]))
    shell.run_cell("scale = 3.0\nh3 = head(x)")
    assert torch.allclose(shell.user_ns["h3"], 3.0 * shell.user_ns["m"](shell.user_ns["x"]))


def test_graph_breaks_are_reported_with_their_line(shell):
    shell.run_cell(SETUP)
    shell.run_cell(
        "%%torchprof --compare --backend aot_eager --steps 1\nh = m(x)\nprint('break')\ny = h.sum()"
    )
    stats = shell.user_ns["_torchprof"].compile_stats
    assert stats.graph_break_count >= 1
    brk = stats.graph_breaks[0]
    # The print is on the cell's third line as the notebook numbers it
    # (the %%torchprof line is the first), in the shell's current cell.
    assert brk.location == f"Cell In[{shell.execution_count}], line 3", brk.location
    assert brk.code == "print('break')"
    assert "print" in brk.reason
    # ... and the compiled profile's findings say so
    findings = shell.user_ns["_torchprof"].compiled.findings
    compile_rows = findings[findings["rule"] == "compile"]
    assert compile_rows["title"].str.contains("graph break").any()


def test_graph_break_in_a_function_of_another_cell_names_that_cell(shell):
    """A break inside a function defined in an ordinary cell keeps that cell's own numbering."""
    shell.run_cell(SETUP, store_history=True)
    shell.run_cell("def head(t):\n    h = m(t)\n    print('break')\n    return h.sum()", store_history=True)
    defined_in = shell.execution_count - 1
    shell.run_cell("%%torchprof --compare --backend aot_eager --steps 1 -q\ny = head(x)", store_history=True)
    locations = {b.location: b.code for b in shell.user_ns["_torchprof"].compile_stats.graph_breaks}
    assert locations.get(f"Cell In[{defined_in}], line 3") == "print('break')", locations


def test_cell_location_leaves_unknown_files_alone():
    from jupyter_torchprof.capture.compile import cell_location

    assert cell_location("/usr/lib/python3/site.py:12", shell=None)[0] == "/usr/lib/python3/site.py:12"
    assert cell_location("no line here") == ("no line here", "")


def test_fullgraph_break_keeps_the_eager_profile(shell, capsys):
    shell.run_cell(SETUP)
    res = shell.run_cell(
        "%%torchprof --compare --fullgraph --backend aot_eager --steps 1\nh = m(x)\nprint('break')"
    )
    assert res.error_in_exec is None
    c = shell.user_ns["_torchprof"]
    assert c.eager is not None and c.compiled is None
    assert c.compile_stats.error and "\n" not in c.compile_stats.error
    assert "Traceback" in c.compile_stats.traceback
    assert c.diff.empty
    bundle = c._repr_mimebundle_()
    assert "compilation failed" in bundle["text/plain"]
    assert "<details>" in bundle["text/html"]
    assert not torch.autograd.profiler._is_profiler_enabled


def test_compile_names_compiles_only_those_and_restores_them(shell):
    shell.run_cell(SETUP)
    original = shell.user_ns["m"]
    res = shell.run_cell(
        "%%torchprof --compare --compile-names m --backend aot_eager --steps 1\ny = m(x).sum()"
    )
    assert res.error_in_exec is None
    assert shell.user_ns["m"] is original
    c = shell.user_ns["_torchprof"]
    assert any(n.startswith("Torch-Compiled Region") for n in c.compiled.ops["name"])
    assert not any(n.startswith("Torch-Compiled Region") for n in c.eager.ops["name"])


def test_compile_alone_profiles_only_the_compiled_run(shell):
    shell.run_cell(SETUP)
    shell.run_cell("%%torchprof --compile --backend aot_eager --steps 1\ncalls.append(1)\ny = m(x)")
    c = shell.user_ns["_torchprof"]
    assert c.eager is None and c.compiled is not None
    assert len(shell.user_ns["calls"]) == 2 + 1 + 1


def test_compile_names_must_exist(shell, capsys):
    shell.run_cell(SETUP)
    capsys.readouterr()
    shell.run_cell("%%torchprof --compare --compile-names nope\ny = m(x)")
    assert "nope is not defined" in "".join(capsys.readouterr())


def test_runs_are_stored_as_a_pair(shell, tmp_path):
    from jupyter_torchprof.runs.store import RunStore, wait_for_compression

    shell.run_cell(SETUP)
    shell.run_cell("%%torchprof --compare --backend aot_eager --steps 1 --name pair\ny = m(x)")
    wait_for_compression()
    runs = {r["name"]: r for r in RunStore(tmp_path / "runs").list()}
    assert set(runs) == {"pair [eager]", "pair [compiled]"}
    assert runs["pair [eager]"]["pair"] == runs["pair [compiled]"]["id"]
    assert runs["pair [compiled]"]["compile"]["graphs"] >= 1


@pytest.mark.slow
def test_inductor_fuses_kernels_on_the_cpu(shell):
    """A real Inductor compile: fused C++ kernels replace the eager elementwise ops."""
    shell.run_cell(SETUP)
    res = shell.run_cell(
        "%%torchprof --compare --steps 2\nh = torch.nn.functional.gelu(x) * 2 + 1\ny = h.sum()"
    )
    assert res.error_in_exec is None
    c = shell.user_ns["_torchprof"]
    kernels = c.compile_stats.kernels
    assert len(kernels) >= 1
    assert kernels["name"].str.contains("cpp_fused").all()
    assert any("gelu" in f for f in kernels["fused_ops"])
    eager_ops = c.eager.ops[c.eager.ops["kind"] == "cpu_op"]
    gone = set(c.diff.loc[c.diff["status"] == "only_a", "name"])
    assert {"aten::gelu", "aten::mul", "aten::add"} <= gone
    # fewer aten elementwise calls per step once compiled
    compiled_aten = c.compiled.ops[c.compiled.ops["name"].str.startswith("aten::")]["calls"].sum()
    assert compiled_aten < eager_ops[eager_ops["name"].str.startswith("aten::")]["calls"].sum()


def test_comparison_view_builds_with_diff_table(shell):
    """The eager | compiled | diff widget: toggles, a sortable diff table with exact rows."""
    pytest.importorskip("anywidget")
    from jupyter_torchprof.views.compare import ComparisonView, diff_rows

    shell.run_cell(SETUP)
    shell.run_cell("%%torchprof --compare --backend aot_eager --steps 1 -q\ny = m(x)")
    c = shell.user_ns["_torchprof"]
    view = ComparisonView(c)
    assert [o[1] for o in view.toggle.options] == ["eager", "compiled", "diff"]
    assert view.toggle.value == "diff"
    data = view.diff_source.data
    assert list(data["name"]) == list(c.diff_ops["name"])
    assert list(data["self_cpu_us_a"]) == pytest.approx(list(c.diff_ops["self_cpu_us_a"]))
    view.diff_filter.value = "^aten::addmm$"
    assert list(view.diff_source.data["name"]) == ["aten::addmm"]
    rows, mode = diff_rows(c.diff_ops, "^aten::addmm$")
    assert mode == "regex" and len(rows) == 1
    view.toggle.value = "eager"
    assert view.body.children[0] is view._views["eager"].root and view._views["eager"].profile is c.eager
    view.close()


@pytest.mark.parametrize(
    "cell",
    [
        "y = m(x)\nprint(1)\nz = y.sum()",
        # a cell that defines a function runs in the notebook namespace itself
        "def f(a):\n    b = m(a)\n    print(1)\n    return b.sum()\nz = f(x)",
    ],
    ids=["plain cell", "cell defining a function"],
)
def test_leaving_ipython_after_a_compare_prints_no_dynamo_noise(tmp_path, cell):
    """At exit IPython empties the namespace Dynamo left helper globals in; no 'Exception ignored'.

    Each cell graph-breaks (the print), so Dynamo also installs resume functions.
    """
    import subprocess
    import sys

    script = tmp_path / "session.py"
    script.write_text(
        "from IPython.testing.globalipapp import start_ipython\n"
        "ip = start_ipython()\n"
        "ip.run_line_magic('load_ext', 'jupyter_torchprof')\n"
        f"ip.run_cell({SETUP!r})\n"
        f"ip.run_cell_magic('torchprof', '--compare --backend aot_eager --quiet --steps 1', {cell!r})\n"
        "print(type(ip.user_ns['_torchprof']).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("Comparison")
    assert "Exception ignored" not in done.stderr, done.stderr


# --------------------------------------------------------------------------- #
# issue 27: interleaved runs, CPU time per step, readable compiled names


def test_interleave_alternates_which_side_runs_first():
    from jupyter_torchprof.capture.device import resolve_device
    from jupyter_torchprof.capture.runner import interleave

    order = []
    res = interleave(lambda: order.append("a"), lambda: order.append("b"), resolve_device("cpu"), 4)
    assert "".join(order) == "abbaabba"
    assert res.pairs == 4 and len(res.wall_us[0]) == len(res.cpu_us[1]) == 4


def test_interleave_keeps_the_pairs_done_before_an_error():
    from jupyter_torchprof.capture.device import resolve_device
    from jupyter_torchprof.capture.runner import interleave

    calls = []

    def b():
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom")

    res = interleave(lambda: None, b, resolve_device("cpu"), 8)
    assert isinstance(res.error, RuntimeError)
    assert res.pairs == 2 and len(res.wall_us[0]) == len(res.wall_us[1]) == 2


def test_step_cpu_time_leaves_out_other_python_threads(tmp_path):
    """A background thread (the previous run's trace being packed) must not count as the step's CPU time."""
    import hashlib
    import threading
    import time

    from jupyter_torchprof.capture.device import resolve_device
    from jupyter_torchprof.capture.runner import CaptureOptions, capture

    stop = threading.Event()
    block = bytes(1 << 20)

    def spin():
        # hashlib lets go of the GIL on large buffers: this thread burns the other core.
        while not stop.is_set():
            hashlib.sha256(block).digest()

    own, whole = [], []

    def step():
        t0, p0 = time.thread_time(), time.process_time()
        for _ in range(100):  # lets go of the GIL too, so both threads run at once
            hashlib.sha256(block).digest()
        own.append((time.thread_time() - t0) * 1e6)
        whole.append((time.process_time() - p0) * 1e6)

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        result = capture(step, resolve_device("cpu"), CaptureOptions(warmup=0, steps=3), tmp_path / "t.json")
    finally:
        stop.set()
        spinner.join()
    assert result.error is None and len(result.step_cpu_us) == 3
    mine, everything = np.array(own[-3:]), np.array(whole[-3:])
    # The spinner took a large share of the process's CPU time in every step ...
    assert (everything > 1.4 * mine).all(), (everything, mine)
    # ... and the capture's figure is the step's own (plus the device sync around it).
    measured = np.array(result.step_cpu_us)
    assert (measured < 1.2 * mine + 2000).all() and (measured >= 0.9 * mine).all(), (measured, mine)


def test_fused_kernel_names_keep_their_ops_whole():
    from jupyter_torchprof.analysis.names import describe_kernel, readable_op

    d = describe_kernel("cpp_fused_mse_loss_mse_loss_backward_0")
    assert d.fused_ops == ("mse_loss", "mse_loss_backward")
    assert describe_kernel("triton_red_fused__log_softmax_native_layer_norm_3").fused_ops == (
        "log_softmax",
        "native_layer_norm",
    )
    assert describe_kernel("triton_poi_fused_gelu_mul_0").fused_ops == ("gelu", "mul")
    assert readable_op("## Call CompiledFxGraph fz3kq7vx2abcdefgh ##") == "compiled graph fz3kq7vx2"
    assert readable_op("graph_0_cpp_fused_mse_loss_mse_loss_backward_0") == (
        "fused kernel: mse_loss, mse_loss_backward"
    )
    assert readable_op("aten::addmm") == "aten::addmm"


def test_generated_kernels_are_per_step_like_the_diff_beside_them():
    import pandas as pd

    from jupyter_torchprof.analysis.compile_stats import generated_kernels

    kernels = pd.DataFrame({"name": ["triton_poi_fused_gelu_mul_0"], "calls": [6], "total_us": [600.0]})
    events = pd.DataFrame({"name": ["triton_poi_fused_gelu_mul_0"], "kernel_file": [None]})
    ops = pd.DataFrame({"name": ["graph_0_cpp_fused_add_0"], "calls": [3], "cpu_total_us": [90.0]})
    g = generated_kernels(kernels, events, ops, steps=3).set_index("name")
    assert g.loc["triton_poi_fused_gelu_mul_0", "calls"] == 2
    assert g.loc["triton_poi_fused_gelu_mul_0", "total_us"] == pytest.approx(200.0)
    assert g.loc["graph_0_cpp_fused_add_0", "total_us"] == pytest.approx(30.0)


def test_a_compiled_side_never_gets_the_same_source_note_and_comparison_exports(shell, tmp_path):
    shell.run_cell(SETUP)
    shell.run_cell("%%torchprof --compare --backend aot_eager --steps 1 -q -o c\ny = m(x)")
    c = shell.user_ns["c"]
    # A compiled run reopened without its record: only its trace says it was compiled.
    c.compiled.capture.compile_s = None
    del c.compiled.compile_stats
    notes = c.eager.diff(c.compiled).notes
    assert not any("same cell source" in n for n in notes), notes
    # The op diff names what torch.compile made readably, where it can.
    ops = c.diff_ops
    assert "label" in ops.columns
    assert (ops.loc[ops["label"] != "", "name"].str.contains("CompiledFxGraph|cpp_fused", regex=True)).all()
    # A ratio needs both sides: gone and new ops have none, and never read Infinity or 0.00×.
    from jupyter_torchprof import columns

    ratio = next(col for col in columns.diff_ops() if col.key == "ratio")
    absent = ops[ops["status"] != "both"]
    assert len(absent) and absent["ratio"].isna().all()
    assert {columns.format_cell(ratio, v) for v in absent["ratio"]} == {"–"}
    written = c.export(tmp_path / "pair.html")
    assert [p.name for p in written.paths] == ["pair.html"]
    assert "eager" in (tmp_path / "pair.html").read_text(encoding="utf-8")
