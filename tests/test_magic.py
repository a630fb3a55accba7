"""The %%torchprof magic in a real IPython shell, with a real torch.profiler run."""

from __future__ import annotations

import json

import pytest
import torch
from tracefiles import real_trace

from jupyter_torchprof import load
from jupyter_torchprof.runs.store import RunStore, wait_for_compression

SETUP = """
import torch
calls = []
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
x = torch.randn(16, 32)
"""


def run(shell, source):
    result = shell.run_cell(source)
    return result


def test_help_lists_the_options(shell):
    doc = shell.find_cell_magic("torchprof").__doc__
    for option in (
        "--device",
        "--warmup",
        "--steps",
        "--record-shapes",
        "--memory",
        "--stack",
        "--flops",
        "--modules",
        "--sort",
        "--row-limit",
        "--name",
        "-o",
        "--quiet",
        "--load",
    ):
        assert option in doc, option


def test_cell_output_and_value_appear_once(shell, capsys):
    run(shell, SETUP)
    capsys.readouterr()
    res = run(
        shell,
        "%%torchprof --warmup 2 --steps 3\ncalls.append(1)\nprint('hello from the cell')\nmodel(x).sum()",
    )
    assert res.error_in_exec is None
    out = capsys.readouterr().out
    assert out.count("hello from the cell") == 1
    # warm-up runs + the profiler's own warm-up step + profiled steps
    assert len(shell.user_ns["calls"]) == 2 + 1 + 3
    assert isinstance(res.result, torch.Tensor)
    assert out.count("Out[") <= 1


def test_profile_object_and_tables(shell):
    run(shell, SETUP)
    res = run(shell, "%%torchprof --steps 2 --record-shapes -o prof --name mlp\ny = model(x)")
    assert res.error_in_exec is None
    p = shell.user_ns["_torchprof"]
    assert shell.user_ns["prof"] is p
    assert p.name == "mlp"
    assert p.summary["steps"] == 2
    assert p.summary["device"] == "CPU"
    assert list(p.ops.columns[:10]) == [
        "name",
        "kind",
        "calls",
        "self_cpu_us",
        "cpu_total_us",
        "self_device_us",
        "device_total_us",
        "self_cpu_pct",
        "self_device_pct",
        "cpu_mean_us",
    ]
    addmm = p.ops.set_index("name").loc["aten::addmm"]
    assert addmm["calls"] == 2 * 2  # two Linear layers, two steps
    assert "input_shapes" in p.op_table("shape").columns
    assert p.kernels.empty
    assert p.trace_path is not None


def test_steps_are_profiler_steps(shell):
    run(shell, SETUP)
    run(shell, "%%torchprof --steps 4 --warmup 0\nmodel(x)")
    p = shell.user_ns["_torchprof"]
    assert len(p.steps) == 4
    names = p.events[p.events["name"].astype(str).str.startswith("ProfilerStep#")]["name"].astype(str)
    assert len(names) == 4


def test_config_traits_set_defaults(shell):
    run(shell, SETUP)
    shell.run_line_magic("config", "TorchProf.steps = 2")
    shell.run_line_magic("config", "TorchProf.warmup = 0")
    run(shell, "%%torchprof\ncalls.append(1)")
    assert shell.user_ns["_torchprof"].summary["steps"] == 2
    assert len(shell.user_ns["calls"]) == 0 + 1 + 2


def test_line_magic_profiles_a_statement(shell):
    run(shell, SETUP)
    res = run(shell, "%torchprof --steps 1 model(x).sum()")
    assert res.error_in_exec is None
    assert isinstance(res.result, torch.Tensor)
    assert shell.user_ns["_torchprof"].summary["steps"] == 1


def test_quiet_shows_nothing(shell, capsys):
    run(shell, SETUP)
    capsys.readouterr()
    run(shell, "%%torchprof --quiet\nmodel(x)\nNone")
    assert "Self CPU" not in capsys.readouterr().out
    assert shell.user_ns["_torchprof"] is not None


def test_terminal_gets_the_text_table(shell, capsys):
    run(shell, SETUP)
    capsys.readouterr()
    run(shell, "%%torchprof\ny = model(x)")
    out = capsys.readouterr().out
    assert "Self CPU %" in out and "aten::addmm" in out and "Calls" in out


def test_cell_that_raises_keeps_a_partial_profile(shell):
    run(shell, SETUP)
    cell = "%%torchprof --warmup 0 --steps 4\ncalls.append(1)\nmodel(x)\nif len(calls) == 4:\n    raise ValueError('boom')"
    res = run(shell, cell)
    assert isinstance(res.error_in_exec, ValueError)
    assert not torch.autograd.profiler._is_profiler_enabled
    p = shell.user_ns["_torchprof"]
    assert p.partial and "ValueError: boom" in p.error
    # after the profiler's warm-up step, two steps completed and the third raised:
    # the trace keeps the interrupted step too, as recorded
    assert len(p.steps) == 3
    assert "2 of 4 steps completed" in p.error
    # the kernel is fine: the next run works
    res = run(shell, "%%torchprof --steps 1\nmodel(x)")
    assert res.error_in_exec is None and not shell.user_ns["_torchprof"].partial


def test_keyboard_interrupt_stops_the_profiler(shell):
    run(shell, SETUP)
    cell = (
        "%%torchprof --warmup 0 --steps 5\ncalls.append(1)\nif len(calls) == 3:\n    raise KeyboardInterrupt"
    )
    res = run(shell, cell)
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert not torch.autograd.profiler._is_profiler_enabled
    p = shell.user_ns["_torchprof"]
    assert p.partial and "Ctrl-C" in p.error
    assert run(shell, "%%torchprof --steps 1\nmodel(x)").error_in_exec is None


def test_error_during_warmup_shows_traceback_only(shell):
    run(shell, SETUP)
    shell.user_ns.pop("_torchprof", None)
    res = run(shell, "%%torchprof\nraise RuntimeError('in warm-up')")
    assert isinstance(res.error_in_exec, RuntimeError)
    assert "_torchprof" not in shell.user_ns
    assert not torch.autograd.profiler._is_profiler_enabled


@pytest.mark.parametrize(
    "cell, message",
    [
        ("%%torchprof --bogus\n1", "unknown option '--bogus'"),
        ("%%torchprof --steps\n1", "needs a value"),
        ("%%torchprof --steps 0\n1", "--steps must be a whole number from 1 to 10000"),
        ("%%torchprof\n# only a comment\n", "nothing to profile"),
        ("%%torchprof --device nonsense_device\n1", "unknown device"),
        ("%%torchprof --sort nope\nmodel(x)", "cannot sort by 'nope'"),
        ("%%torchprof\ndef f(:\n  pass", "syntax error"),
    ],
)
def test_bad_usage_is_one_clear_line(shell, capsys, cell, message):
    run(shell, SETUP)
    capsys.readouterr()
    res = run(shell, cell)
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert message in text
    assert "Traceback" not in text
    assert res.error_in_exec is not None or res.error_before_exec is not None


@pytest.mark.parametrize(
    "line, message",
    [
        ("--steps 99999999999999999999999", "--steps must be a whole number from 1 to 10000"),
        ("--steps 10001", "--steps must be a whole number from 1 to 10000"),
        ("--warmup -1", "--warmup must be a whole number from 0 to 10000"),
        ("--warmup 20000", "--warmup must be a whole number from 0 to 10000"),
        ("--sort nope", "--sort: cannot sort by 'nope'; choose one of:"),
        ("--sort flops", "--sort flops needs --flops"),
        ("--sort self_cpu_memory", "--sort self_cpu_memory needs --memory"),
        ("-o 1x", "-o needs a variable name, not '1x'"),
        ("-o class", "-o needs a variable name, not 'class'"),
        ("--row-limit -5", "--row-limit must be -1 (all rows) or a number of rows"),
        ("--export out.docx", "export: unknown export format '.docx'"),
        ("--export no/such/folder/t.csv", "export: folder no/such/folder does not exist"),
        ("--compare --backend nope", "torch.compile options: Invalid backend: 'nope'"),
        ("--compare --mode fastest", "torch.compile options: Unrecognized mode=fastest"),
    ],
)
def test_bad_options_are_refused_before_anything_runs(shell, capsys, tmp_path, line, message):
    run(shell, SETUP)
    capsys.readouterr()
    res = run(shell, f"%%torchprof {line}\ncalls.append(1)\nmodel(x)")
    text = "".join(capsys.readouterr())
    assert message in text, text
    assert "Traceback" not in text and len(text.strip().splitlines()) == 1
    assert res.error_in_exec is not None
    assert shell.user_ns["calls"] == []  # the cell never ran
    assert RunStore(tmp_path / "runs").list() == []  # and nothing was stored


def test_compare_export_is_checked_before_either_run(shell, capsys, tmp_path):
    run(shell, SETUP)
    (tmp_path / "both.html").write_text("kept")
    (tmp_path / "t.compiled.csv").write_text("kept")
    for line in ("--compare --export both.html", "--compile --export t.csv"):
        capsys.readouterr()
        res = run(shell, f"%%torchprof {line}\ncalls.append(1)")
        text = "".join(capsys.readouterr())
        assert "export:" in text and "exists" in text and "--force" in text, text
        assert res.error_in_exec is not None
    assert shell.user_ns["calls"] == []
    assert (tmp_path / "both.html").read_text() == "kept"


def test_config_defaults_are_checked_too(shell, capsys):
    run(shell, SETUP)
    shell.run_line_magic("config", "TorchProf.steps = 50000")
    capsys.readouterr()
    run(shell, "%%torchprof\ncalls.append(1)")
    assert "--steps must be a whole number from 1 to 10000, not 50000" in "".join(capsys.readouterr())
    assert shell.user_ns["calls"] == []


def test_bad_options_of_load_are_refused_before_reading(shell, capsys, tmp_path):
    path = real_trace("cpu_only.pt.trace.json.gz")
    for line, message in (("-o 2b", "-o needs a variable name"), ("--sort nope", "cannot sort by 'nope'")):
        capsys.readouterr()
        res = run(shell, f"%torchprof --load {path} {line}")
        assert res.error_in_exec is not None
        assert message in "".join(capsys.readouterr())
    assert RunStore(tmp_path / "runs").list() == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_missing_cuda_is_a_clear_error(shell, capsys):
    run(shell, "%%torchprof --device cuda\n1")
    out = capsys.readouterr()
    assert "no cuda device is available" in out.out + out.err


def test_nested_torchprof_is_refused(shell, capsys):
    run(shell, SETUP)
    capsys.readouterr()
    res = run(shell, "%%torchprof --steps 1\nget_ipython().run_cell_magic('torchprof', '', 'model(x)')")
    text = "".join(capsys.readouterr())
    assert "cannot run inside another %%torchprof" in text
    assert res.error_in_exec is not None
    assert not torch.autograd.profiler._is_profiler_enabled


def test_running_profiler_is_refused(shell, capsys):
    run(shell, SETUP)
    capsys.readouterr()
    with torch.profiler.profile():
        run(shell, "%%torchprof\nmodel(x)")
    text = "".join(capsys.readouterr())
    assert "already running" in text


def test_run_is_stored_and_reloads_identically(shell, tmp_path):
    run(shell, SETUP)
    run(shell, "%%torchprof --steps 2 --name stored\nmodel(x)")
    p = shell.user_ns["_torchprof"]
    wait_for_compression()
    store = RunStore(tmp_path / "runs")
    runs = store.list()
    assert len(runs) == 1 and runs[0]["name"] == "stored" and not runs[0]["damaged"]
    run_dir = store.run_dir(runs[0]["id"])
    assert (run_dir / "trace.json.gz").exists() and not (run_dir / "trace.json").exists()
    info = json.loads((run_dir / "run.json").read_text())
    assert info["steps"] == 2 and info["device"] == "CPU" and info["top_ops"]
    again = load(str(run_dir / "trace.json.gz"))
    a = p.ops.set_index("name")[["calls", "self_cpu_us", "cpu_total_us"]]
    b = again.ops.set_index("name")[["calls", "self_cpu_us", "cpu_total_us"]]
    assert a.sort_index().equals(b.sort_index())


def test_load_option_opens_a_saved_trace(shell):
    path = real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    res = run(shell, f"%torchprof --load {path} -o g")
    assert res.error_in_exec is None
    assert shell.user_ns["g"].summary["device"] == "Quadro GP100"


def test_load_of_missing_file_is_one_line(shell, capsys):
    run(shell, "%torchprof --load /no/such/trace.json.gz")
    text = "".join(capsys.readouterr())
    assert "no such file" in text and "Traceback" not in text


def test_memory_and_modules_options(shell):
    run(shell, SETUP)
    run(shell, "%%torchprof --memory --modules --steps 1\ny = model(x)")
    p = shell.user_ns["_torchprof"]
    assert "self_cpu_mem_bytes" in p.ops.columns
    names = set(p.ops["name"])
    assert "nn.Module: model.0 (Linear)" in names
    assert p.ops.set_index("name").loc["aten::addmm", "self_cpu_mem_bytes"] > 0


def test_quoted_name_with_spaces_and_markup(shell):
    run(shell, SETUP)
    run(shell, '%%torchprof --steps 1 --name "train step <b>&1"\nmodel(x)')
    p = shell.user_ns["_torchprof"]
    assert p.name == "train step <b>&1"
    assert "train step &lt;b&gt;&amp;1" in p._repr_mimebundle_()["text/html"]
