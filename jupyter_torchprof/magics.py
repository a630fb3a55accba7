"""The ``%%torchprof`` cell magic and ``%torchprof`` line magic.

The magic turns options into a capture (see `capture.runner`), writes the run
into the run store, builds the `Profile` from the exported trace and shows it.
It is the only module that talks to IPython.
"""

from __future__ import annotations

import argparse
import ast
import re
import shlex
import time
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Integer, Unicode

from .errors import TorchProfError

# Set while a %%torchprof cell runs: a nested one would start a second profiler.
_ACTIVE = False


@magics_class
class TorchProf(Magics):
    """Profile a cell with torch.profiler and show the result inline.

    Every default below can be changed for the session with ``%config``,
    e.g. ``%config TorchProf.steps = 5``.
    """

    device = Unicode(
        "auto", help="Device to profile: auto (torch.accelerator), cpu, cuda, cuda:1, xpu, ..."
    ).tag(config=True)
    warmup = Integer(1, help="Unprofiled runs of the cell before profiling (warm-up).").tag(config=True)
    steps = Integer(3, help="Profiled runs of the cell, each recorded as ProfilerStep#k.").tag(config=True)
    record_shapes = Bool(False, help="Record input shapes (group the op table by shape).").tag(config=True)
    memory = Bool(False, help="Record allocations (memory columns and memory view).").tag(config=True)
    stack = Bool(False, help="Record Python stacks (with_stack).").tag(config=True)
    flops = Bool(False, help="Estimate FLOPs of GEMMs and convolutions (implies --record-shapes).").tag(
        config=True
    )
    modules = Bool(False, help="Record one range per nn.Module call, named after the module.").tag(
        config=True
    )
    sort = Unicode(
        "", help="Default sort column of the op table ('' = self device time, else self CPU)."
    ).tag(config=True)
    row_limit = Integer(20, help="Rows of the op table shown in text and static HTML.").tag(config=True)
    run_dir = Unicode("", help="Run store folder ('' = $TORCHPROF_RUN_DIR or ./.torchprof/runs).").tag(
        config=True
    )
    max_store_mb = Integer(
        2048, help="Delete the oldest runs when the store exceeds this size (0 = never)."
    ).tag(config=True)

    @magic_arguments()
    @argument(
        "--device", "-d", default=None, help="Device: auto (default), cpu, cuda, cuda:1, xpu, mtia, hpu, ..."
    )
    @argument("--warmup", "-w", type=int, default=None, help="Unprofiled runs first (default 1).")
    @argument(
        "--steps", "-n", type=int, default=None, help="Profiled runs, one ProfilerStep each (default 3)."
    )
    @argument(
        "--record-shapes", action=argparse.BooleanOptionalAction, default=None, help="Record input shapes."
    )
    @argument(
        "--memory", action=argparse.BooleanOptionalAction, default=None, help="Record memory allocations."
    )
    @argument(
        "--stack", action=argparse.BooleanOptionalAction, default=None, help="Record Python call stacks."
    )
    @argument(
        "--flops", action=argparse.BooleanOptionalAction, default=None, help="Estimate FLOPs (needs shapes)."
    )
    @argument(
        "--modules", action=argparse.BooleanOptionalAction, default=None, help="One range per nn.Module call."
    )
    @argument(
        "--sort",
        default=None,
        help="Sort ops by: self_device, device_total, self_cpu, cpu_total, calls, flops.",
    )
    @argument("--row-limit", type=int, default=None, help="Rows shown in the text/HTML table (-1 = all).")
    @argument("--name", default=None, help="Name of this run (default: the first line of the cell).")
    @argument(
        "-o", "--output", dest="output", default=None, metavar="VAR", help="Also store the result in VAR."
    )
    @argument("--quiet", "-q", action="store_true", help="Show nothing; the result is still in _torchprof.")
    @argument(
        "--load", default=None, metavar="PATH", help="Open a saved trace (file or folder) instead of running."
    )
    @argument("--run-dir", default=None, metavar="DIR", help="Run store folder for this run.")
    @line_cell_magic
    def torchprof(self, line: str, cell: str | None = None) -> Any:
        """Profile a cell (or one statement) with torch.profiler.

        The cell runs ``warmup + steps`` times: first unprofiled warm-up runs,
        then ``steps`` profiled runs, each followed by a device
        synchronisation. Its printed output and the value of its last line
        appear once (from the first run). The profile is shown inline and kept
        in ``_torchprof`` (and in ``-o VAR``); its tables are pandas
        DataFrames (``_torchprof.ops``, ``_torchprof.kernels``).

        Side effects of the cell (appending to a list, an optimizer step)
        happen once per run.

        Examples::

            %%torchprof
            y = model(x)

            %%torchprof --device cuda --steps 5 --record-shapes -o prof
            loss = model(x).sum(); loss.backward()

            %torchprof model(x)
            %torchprof --load run/rank-0.pt.trace.json.gz
        """
        __tracebackhide__ = True  # noqa: F841 - IPython hides this frame in tracebacks
        args, statement = self._parse(line)
        if cell is not None and statement:
            raise UsageError(f"unexpected argument {statement.split()[0]!r}; the code goes below %%torchprof")
        if args.load:
            if cell is not None and cell.strip():
                raise UsageError(
                    "--load opens a saved trace; the cell below it would not run. Remove the code."
                )
            return self._load(args)
        code = cell if cell is not None else statement
        if not code.strip():
            raise UsageError(
                "nothing to profile: put code below %%torchprof, or after %torchprof, or use --load PATH"
            )
        return self._run(args, code)

    # ------------------------------------------------------------------ #
    # argument handling

    def _parse(self, line: str) -> tuple[argparse.Namespace, str]:
        """Split ``line`` into options and (for the line magic) a statement.

        argparse cannot be trusted with Python code (quotes, ``-x``), so the
        leading options are found token by token with the parser's own
        knowledge of which options take a value; the rest is the statement,
        verbatim.
        """
        parser = self.torchprof.parser
        rest = line.strip()
        opts: list[str] = []
        while rest.startswith("-"):
            token, _, after = rest.partition(" ")
            key = token.split("=", 1)[0]
            action = parser._option_string_actions.get(key)
            if action is None:
                raise UsageError(f"unknown option {key!r}; see %%torchprof? for the options")
            opts.append(token)
            rest = after.lstrip()
            if "=" not in token and action.nargs != 0:
                value, _, after = _split_value(rest)
                if value is None:
                    raise UsageError(f"option {key} needs a value")
                opts.append(value)
                rest = after.lstrip()
        try:
            args = parse_argstring(self.torchprof, " ".join(shlex.quote(o) for o in opts))
        except UsageError:
            raise
        except SystemExit:  # argparse on an invalid value
            raise UsageError(f"invalid options: {line.strip()!r}; see %%torchprof?") from None
        return args, rest

    def _setting(self, value: Any, trait: str) -> Any:
        return getattr(self, trait) if value is None else value

    # ------------------------------------------------------------------ #
    # --load

    def _load(self, args: argparse.Namespace) -> None:
        from .trace.loader import load

        try:
            result = load(args.load, name=args.name)
        except TorchProfError as exc:
            raise UsageError(str(exc)) from None
        self._apply_view_settings(result, args)
        self._publish(result, args)
        return None

    # ------------------------------------------------------------------ #
    # profiling a cell

    def _run(self, args: argparse.Namespace, code: str) -> Any:
        __tracebackhide__ = True  # noqa: F841
        global _ACTIVE
        if _ACTIVE:
            raise UsageError("%%torchprof cannot run inside another %%torchprof cell")
        from .capture.device import resolve_device
        from .capture.runner import CaptureOptions, capture, profiler_is_running
        from .errors import DeviceError

        options = CaptureOptions(
            warmup=self._setting(args.warmup, "warmup"),
            steps=self._setting(args.steps, "steps"),
            record_shapes=self._setting(args.record_shapes, "record_shapes"),
            memory=self._setting(args.memory, "memory"),
            stack=self._setting(args.stack, "stack"),
            flops=self._setting(args.flops, "flops"),
            modules=self._setting(args.modules, "modules"),
        )
        if options.steps < 1:
            raise UsageError("--steps must be at least 1")
        if options.warmup < 0:
            raise UsageError("--warmup cannot be negative")
        try:
            target = resolve_device(self._setting(args.device, "device"))
        except DeviceError as exc:
            raise UsageError(str(exc)) from None
        if profiler_is_running():
            raise UsageError(
                "another torch profiler is already running in this process; "
                "leave its `with torch.profiler.profile()` block first"
            )
        runner = _CellRunner(self.shell, code)  # SyntaxError surfaces here

        from .store import RunStore

        store = RunStore(args.run_dir or self.run_dir or None)
        try:
            run_dir = store.create()
        except OSError as exc:
            raise UsageError(f"cannot create a run folder in {store.root}: {exc.strerror or exc}") from None

        from .views.progress import Progress

        progress = Progress(enabled=not args.quiet, notebook=_in_notebook(self.shell))
        module_names = None
        if options.modules:
            from .capture.modules import module_paths

            module_names = module_paths(self.shell.user_ns)
        started = time.time()
        _ACTIVE = True
        try:
            result = capture(runner, target, options, run_dir / "trace.json", progress, module_names)
        finally:
            _ACTIVE = False

        profile = None
        if result.trace_path is not None:
            progress.update("parsing", 0, 1)
            profile = self._build_profile(result, target, options, code, args, started, run_dir, store)
        progress.finish(_timing_line(result, profile))

        if profile is not None:
            self._apply_view_settings(profile, args)
            self._publish(profile, args)
        if result.error is not None:
            # The traceback of the user's exception, as for any cell.
            raise result.error
        if profile is None:
            raise UsageError("; ".join(result.notes) or "the profiler produced no trace")
        return runner.value

    def _build_profile(
        self,
        result: Any,
        target: Any,
        options: Any,
        code: str,
        args: argparse.Namespace,
        started: float,
        run_dir: Path,
        store: Any,
    ) -> Any:
        from .profile import CaptureInfo, Profile
        from .store import TRACE_NAME, compress_in_background
        from .trace.parser import parse_trace

        t0 = time.perf_counter()
        data = parse_trace(result.trace_path)
        parse_s = time.perf_counter() - t0
        name = args.name or _default_name(code)
        error = None
        if result.error is not None:
            kind = (
                "interrupted (Ctrl-C)"
                if isinstance(result.error, KeyboardInterrupt)
                else (f"{type(result.error).__name__}: {result.error}")
            )
            error = (
                f"partial profile: the cell raised during {result.error_phase} — {kind}; "
                f"{result.steps_done} of {options.steps} steps completed"
            )
        capture_info = CaptureInfo(
            device=target.spec,
            device_kind=target.kind,
            warmup=result.warmup_done,
            steps=result.steps_done,
            options=options.as_dict(),
            cell=code,
            started=started,
            wall_s=time.time() - started,
            parse_s=parse_s,
        )
        profile = Profile(
            data,
            name=name,
            capture=capture_info,
            notes=list(target.notes) + list(result.notes),
            partial=result.error is not None,
            error=error,
            run_dir=run_dir,
        )
        profile.meta.path = str(run_dir / TRACE_NAME)
        compress_in_background(result.trace_path, run_dir / TRACE_NAME)
        store.write_info(run_dir, _run_info(profile, self.shell))
        if self.max_store_mb > 0:
            store.enforce_cap(self.max_store_mb * 2**20, keep={run_dir.name})
        return profile

    def _apply_view_settings(self, result: Any, args: argparse.Namespace) -> None:
        from .profile import Profile, _sort_column

        if not isinstance(result, Profile):
            return
        sort = args.sort if args.sort is not None else (self.sort or None)
        if sort:
            try:
                _sort_column(sort, result.ops)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            result.sort = sort
        result.row_limit = args.row_limit if args.row_limit is not None else self.row_limit

    def _publish(self, result: Any, args: argparse.Namespace) -> None:
        self.shell.user_ns["_torchprof"] = result
        if args.output:
            if not args.output.isidentifier():
                raise UsageError(f"-o needs a variable name, not {args.output!r}")
            self.shell.user_ns[args.output] = result
        if not args.quiet:
            from IPython.display import display

            display(result)


_VALUE = re.compile(r"""("(?:[^"\\]|\\.)*"|'[^']*'|\S+)""")


def _split_value(text: str) -> tuple[str | None, str, str]:
    """First shell-like token of ``text`` (quotes allowed) and the remainder."""
    m = _VALUE.match(text)
    if not m:
        return None, "", ""
    token = m.group(1)
    if token[:1] in "\"'" and token[-1:] == token[:1] and len(token) >= 2:
        token = token[1:-1]
    return token, "", text[m.end() :]


def _in_notebook(shell: Any) -> bool:
    return type(shell).__name__ == "ZMQInteractiveShell"


def _default_name(code: str) -> str:
    for line in code.splitlines():
        text = line.strip()
        if text and not text.startswith("#"):
            return text if len(text) <= 60 else text[:59] + "…"
    return "cell"


def _timing_line(result: Any, profile: Any) -> str:
    parts = []
    if result.warmup_done:
        parts.append(f"warm-up {result.warmup_done}× {result.warmup_s:.2f} s")
    parts.append(f"{result.steps_done} profiled step(s) {result.profile_s:.2f} s")
    parts.append(f"trace export {result.export_s:.2f} s")
    if profile is not None and profile.capture is not None:
        parts.append(f"parse {profile.capture.parse_s:.2f} s")
    return "torchprof: " + " · ".join(parts)


def _run_info(profile: Any, shell: Any) -> dict[str, Any]:
    from .store import TRACE_NAME

    s = profile.summary
    cap = profile.capture
    ops = profile.ops
    sort_col = "self_device_us" if s["device_traced"] else "self_cpu_us"
    top = ops.sort_values(sort_col, ascending=False).head(5)
    notebook = shell.user_ns.get("__session__") or shell.user_ns.get("__vsc_ipynb_file__")
    return {
        "name": profile.name,
        "kind": "capture",
        "created": cap.started if cap else time.time(),
        "cell": cap.cell if cap else "",
        "notebook": str(notebook) if notebook else None,
        "device": s["device"],
        "device_spec": cap.device if cap else None,
        "device_kind": cap.device_kind if cap else None,
        "device_traced": s["device_traced"],
        "steps": s["steps"],
        "warmup": cap.warmup if cap else 0,
        "options": cap.options if cap else {},
        "wall_per_step_us": s["wall_per_step_us"],
        "cpu_busy_per_step_us": s["cpu_busy_per_step_us"],
        "device_busy_per_step_us": s["device_busy_per_step_us"],
        "device_busy_pct": s["device_busy_pct"],
        "events": s["events"],
        "partial": profile.partial,
        "error": profile.error,
        "notes": profile.notes,
        "top_ops": [
            {"name": str(r.name), "self_us": float(getattr(r, sort_col)), "calls": int(r.calls)}
            for r in top.itertuples(index=False)
        ],
        "trace": TRACE_NAME,
    }


class _CellRunner:
    """Runs the cell's code once per call, in the user namespace.

    The code is compiled once. The first call runs with its output visible;
    later calls (more warm-up runs, profiled steps) run with stdout, stderr
    and rich display captured and dropped, so the cell's output appears once.
    The value of a trailing expression is kept in ``value``.
    """

    def __init__(self, shell: Any, code: str) -> None:
        self.shell = shell
        self.value: Any = None
        self.calls = 0
        transformed = shell.transform_cell(code)
        filename = shell.compile.cache(transformed, shell.execution_count, raw_code=code)
        try:
            tree = ast.parse(transformed, filename=filename)
        except SyntaxError as exc:
            raise UsageError(f"the cell has a syntax error: {exc.msg} (line {exc.lineno})") from None
        if any(isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith)) for node in ast.walk(tree)):
            raise UsageError(
                "top-level await is not supported inside %%torchprof; "
                "wrap the async code in a function and call it with asyncio"
            )
        if not tree.body:
            raise UsageError("nothing to profile: the cell has no statements (only comments or blank lines)")
        last: ast.expr | None = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = tree.body.pop().value
        self._body = compile(tree, filename, "exec")
        self._last = compile(ast.Expression(last), filename, "eval") if last is not None else None
        self._ns = shell.user_ns

    def _once(self) -> Any:
        __tracebackhide__ = True  # noqa: F841
        exec(self._body, self._ns)
        if self._last is not None:
            return eval(self._last, self._ns)
        return None

    def __call__(self) -> None:
        __tracebackhide__ = True  # noqa: F841
        self.calls += 1
        if self.calls == 1:
            self.value = self._once()
            return
        from IPython.utils.capture import capture_output

        with capture_output(stdout=True, stderr=True, display=True):
            self._once()
