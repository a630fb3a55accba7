"""``jupyter_torchprof.profile(fn, ...)`` and ``with profiling():``: the magic's recipe without magics.

Real torch.profiler runs on the CPU. The op table of a profiled callable is
checked against the calls and times ``key_averages()`` would give, counted
straight from the trace file with the standard library (`tracefiles`), and
against ``%%torchprof`` on the same code with the same options.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from tracefiles import key_averages_rows, raw_events

import jupyter_torchprof as tp
from jupyter_torchprof.api import ProfileError, option_table
from jupyter_torchprof.capture.runner import profiler_is_running
from jupyter_torchprof.results.comparison import Comparison
from jupyter_torchprof.results.profile import Profile
from jupyter_torchprof.runs.store import RunStore, wait_for_compression

REPO = Path(__file__).resolve().parent.parent

SETUP = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
x = torch.randn(16, 32)
"""


def _mlp() -> tuple[torch.nn.Module, torch.Tensor]:
    ns: dict = {}
    exec(SETUP, ns)
    return ns["model"], ns["x"]


def _cpu_ops(p: Profile) -> dict[str, int]:
    ops = p.ops[p.ops["kind"] == "cpu_op"]
    return dict(zip(ops["name"], ops["calls"], strict=True))


def _by_shape(p: Profile) -> list[tuple[str, str, int]]:
    table = p.op_table("shape")
    table = table[table["kind"] == "cpu_op"]
    return sorted(zip(table["name"], table["input_shapes"], table["calls"], strict=True))


def _stored(root: Path) -> list[dict]:
    wait_for_compression()
    return RunStore(root).list()


def test_profile_of_a_callable_agrees_with_key_averages_and_with_the_magic(shell, tmp_path):
    model, x = _mlp()
    p = tp.profile(model, x, steps=2, warmup=1, record_shapes=True, quiet=True)
    assert isinstance(p, Profile)
    assert p.summary["steps"] == 2
    assert p.name == "Sequential"
    wait_for_compression()

    # key_averages(), counted from the very trace file with the standard library.
    theirs = key_averages_rows(raw_events(Path(p.trace_path)))
    table = p.ops[p.ops["kind"] == "cpu_op"].set_index("name")
    assert set(table.index) == set(theirs)
    for name, (calls, total_us) in theirs.items():
        assert table.loc[name, "calls"] == calls, name
        assert table.loc[name, "cpu_total_us"] == pytest.approx(total_us, rel=0.01, abs=2.0), name
    assert table.loc["aten::addmm", "calls"] == 2 * 2  # two Linear layers, two steps

    # The magic on the same code, with the same options: the same ops, as often.
    shell.run_cell(SETUP)
    res = shell.run_cell("%%torchprof --steps 2 --warmup 1 --record-shapes --quiet\nmodel(x)")
    assert res.error_in_exec is None
    magic = shell.user_ns["_torchprof"]
    assert _cpu_ops(p) == _cpu_ops(magic)
    assert _by_shape(p) == _by_shape(magic)

    # Both runs are kept in the same store, as captures.
    runs = _stored(tmp_path / "runs")
    assert sorted(r["name"] for r in runs) == sorted(["Sequential", "model(x)"])
    assert {r["kind"] for r in runs} == {"capture"}
    assert Path(p.run_dir).parent == tmp_path / "runs"


def test_output_shows_once_and_the_callable_runs_warmup_plus_one_plus_steps(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(tmp_path))
    model, x = _mlp()
    calls = []

    def step(inp, scale=1.0):
        calls.append(scale)
        print("hello from fn")
        return model(inp * scale)

    p = tp.profile(step, x, kwargs={"scale": 2.0}, steps=3, warmup=2, quiet=True)
    assert p.summary["steps"] == 3
    assert p.name == "step"
    # warm-up runs + the profiler's own warm-up step + profiled steps, as for a cell
    assert calls == [2.0] * (2 + 1 + 3)
    assert capsys.readouterr().out.count("hello from fn") == 1
    assert "def step(inp, scale=1.0):" in p.capture.cell


def test_modules_are_named_after_the_callers_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(tmp_path))
    model, x = _mlp()
    p = tp.profile(model, x, steps=1, warmup=0, modules=True, quiet=True)
    names = set(p.ops["name"])
    assert {
        "nn.Module: model (Sequential)",
        "nn.Module: model.0 (Linear)",
        "nn.Module: model.2 (Linear)",
    } <= names


def test_compare_gives_a_comparison_with_both_sides(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(tmp_path))
    model, x = _mlp()

    def forward(inp):
        return torch.relu(model(inp)).sum()

    c = tp.profile(forward, x, compare=True, backend="aot_eager", steps=2, quiet=True)
    assert isinstance(c, Comparison)
    assert isinstance(c.eager, Profile) and isinstance(c.compiled, Profile)
    assert c.eager.name == "forward [eager]" and c.compiled.name == "forward [compiled]"
    assert c.eager.summary["steps"] == c.compiled.summary["steps"] == 2
    assert c.compile_stats.graphs >= 1
    # Both sides ran the model's matmuls; only the compiled one went through a compiled region.
    assert _cpu_ops(c.eager)["aten::addmm"] == _cpu_ops(c.compiled)["aten::addmm"] == 2 * 2
    compiled_names = " ".join(c.compiled.ops["name"])
    assert "CompiledFunction" in compiled_names or "Torch-Compiled Region" in compiled_names
    assert "CompiledFunction" not in " ".join(c.eager.ops["name"])
    # Kept as a pair, as --compare keeps them.
    by_role = {r["role"]: r for r in _stored(tmp_path)}
    assert by_role["eager"]["pair"] == c.compiled.run_dir.name
    assert by_role["compiled"]["pair"] == c.eager.run_dir.name


def test_with_block_is_one_profiled_step(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(tmp_path))
    model, x = _mlp()
    model(x)  # warm up: the block itself runs once
    with tp.profiling(record_shapes=True, quiet=True) as run:
        y = model(x).sum()
        during = run.profile
    assert during is None and y.ndim == 0
    p = run.profile
    assert isinstance(p, Profile)
    assert p.summary["steps"] == 1
    assert p.name == "y = model(x).sum()"
    wait_for_compression()
    theirs = key_averages_rows(raw_events(Path(p.trace_path)))
    assert _cpu_ops(p) == {name: calls for name, (calls, _) in theirs.items()}
    assert theirs["aten::addmm"][0] == 2  # two Linear layers, once
    assert [r["name"] for r in _stored(tmp_path)] == ["y = model(x).sum()"]
    with pytest.raises(ProfileError, match="already ran"):
        with run:
            pass


def test_with_block_that_raises_keeps_a_partial_profile_and_propagates(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(tmp_path))
    model, x = _mlp()
    boom = ValueError("boom")
    with pytest.raises(ValueError) as info:
        with tp.profiling(quiet=True) as run:
            model(x)
            raise boom
    assert info.value is boom
    assert not profiler_is_running()
    assert run.profile is not None and run.profile.partial
    assert "aten::addmm" in set(run.profile.ops["name"])
    with tp.profiling(quiet=True) as again:
        model(x)
    assert again.profile.summary["steps"] == 1 and not again.profile.partial


def test_with_block_refuses_what_needs_repeats():
    with pytest.raises(ProfileError, match="steps can only be 1"):
        tp.profiling(steps=3)
    with pytest.raises(ProfileError, match="warmup can only be 0"):
        tp.profiling(warmup=1)
    with pytest.raises(TypeError, match="does not take compare="):
        tp.profiling(compare=True)


def test_exception_in_fn_propagates_after_the_profiler_stopped(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(tmp_path))
    model, x = _mlp()
    calls = []
    error = RuntimeError("third call fails")

    def flaky(inp):
        calls.append(1)
        if len(calls) == 3:  # warm-up, profiler warm-up step, then the first profiled step
            raise error
        return model(inp)

    with pytest.raises(RuntimeError) as info:
        tp.profile(flaky, x, steps=2, warmup=1, quiet=True)
    assert info.value is error
    assert not profiler_is_running()
    runs = _stored(tmp_path)
    assert len(runs) == 1 and runs[0]["partial"]
    p = tp.profile(model, x, steps=1, quiet=True)  # the next call works
    assert isinstance(p, Profile) and not p.partial


def test_unknown_option_is_a_type_error_naming_the_options(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(tmp_path))
    model, x = _mlp()
    with pytest.raises(TypeError) as info:
        tp.profile(model, x, step=3)
    text = str(info.value)
    assert "'step'" in text and "did you mean 'steps'" in text
    for name in option_table():
        assert name in text
    with pytest.raises(TypeError, match="does not take output="):
        tp.profile(model, x, output="prof")
    with pytest.raises(TypeError, match="needs a callable"):
        tp.profile(x)
    assert not _stored(tmp_path)


@pytest.mark.parametrize(
    "options, line",
    [
        ({"steps": 0}, "--steps 0"),
        ({"warmup": -1}, "--warmup -1"),
        ({"row_limit": -5}, "--row-limit -5"),
        ({"sort": "flops"}, "--sort flops"),
        ({"sort": "nonsense"}, "--sort nonsense"),
    ],
)
def test_bad_values_give_the_magics_error(shell, capsys, tmp_path, options, line):
    shell.run_cell(SETUP)
    capsys.readouterr()
    shell.run_cell(f"%%torchprof {line}\nmodel(x)")
    magic_says = capsys.readouterr()
    model, x = shell.user_ns["model"], shell.user_ns["x"]
    with pytest.raises(ProfileError) as info:
        tp.profile(model, x, **options)
    message = str(info.value)
    assert message and "\n" not in message
    assert message in magic_says.out + magic_says.err
    assert not _stored(tmp_path / "runs")  # nothing ran, nothing kept


def test_bad_types_are_one_line():
    model, x = _mlp()
    with pytest.raises(ProfileError, match="record_shapes takes True or False, not 'yes'"):
        tp.profile(model, x, record_shapes="yes")
    with pytest.raises(ProfileError, match="export_table must be one of 'ops', 'kernels'"):
        tp.profile(model, x, export_table="steps")
    with pytest.raises(ProfileError, match="device takes a string"):
        tp.profile(model, x, device=3)


def test_help_lists_every_option_from_the_magics_table():
    """The docstrings and signatures are generated from the magic's argparse table and traits."""
    from jupyter_torchprof.magics import TorchProf

    parser = TorchProf.torchprof.parser
    signature = inspect.signature(tp.profile)
    skipped = {"load", "output", "compile_names", "help"}
    listed = [a for a in parser._actions if a.option_strings and a.dest not in skipped]
    assert len(listed) >= 20
    for action in listed:
        assert f"{action.dest} : " in tp.profile.__doc__, action.dest
        assert action.help.split("(")[0].strip() in tp.profile.__doc__, action.dest
        assert action.dest in signature.parameters
    traits = TorchProf.class_traits(config=True)
    assert signature.parameters["steps"].default == traits["steps"].default_value
    assert signature.parameters["backend"].default == traits["backend"].default_value
    assert "compare" not in inspect.signature(tp.profiling).parameters
    assert "record_shapes : bool" in tp.profiling.__doc__


def test_a_plain_script_without_ipython(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, sys
            import jupyter_torchprof
            heavy = sorted(m for m in ("torch", "pandas", "bokeh", "IPython") if m in sys.modules)
            import torch
            model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
            x = torch.randn(4, 8)
            p = jupyter_torchprof.profile(model, x, steps=2, warmup=0)
            with jupyter_torchprof.profiling() as run:
                model(x)
            from IPython.core.interactiveshell import InteractiveShell
            print(json.dumps({
                "heavy_on_import": heavy,
                "type": type(p).__name__,
                "steps": p.summary["steps"],
                "addmm": int(p.ops.set_index("name").loc["aten::addmm", "calls"]),
                "block_steps": run.profile.summary["steps"],
                "shell": InteractiveShell.initialized(),
                "kernel": "ipykernel" in sys.modules,
            }))
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "TORCHPROF_RUN_DIR": str(tmp_path / "runs")}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {
        "heavy_on_import": [],
        "type": "Profile",
        "steps": 2,
        "addmm": 2,
        "block_steps": 1,
        "shell": False,
        "kernel": False,
    }
    assert len(_stored(tmp_path / "runs")) == 2
