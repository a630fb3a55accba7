"""%%torchprof --compare / --compile with real torch.compile runs on the CPU."""

from __future__ import annotations

import pytest
import torch

from jupyter_torchprof.capture.compile import assigned_names

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
    # eager: 1 warm-up + profiler warm-up + 2 steps; compiled: >= 2 warm-ups + profiler warm-up + 2 steps
    assert len(shell.user_ns["calls"]) == (1 + 1 + 2) + (2 + 1 + 2)
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
    from jupyter_torchprof.store import RunStore, wait_for_compression

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
    pytest.importorskip("jupyter_bokeh")
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
    assert view.body.children[0].profile is c.eager
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
