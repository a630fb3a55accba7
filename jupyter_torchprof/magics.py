"""The ``%%torchprof`` cell magic and ``%torchprof`` line magic.

The magic turns options into a capture (see `capture.runner`), writes the run
into the run store, builds the `Profile` from the exported trace and shows it.
It is the only module that talks to IPython.
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import time
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
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
    backend = Unicode("inductor", help="torch.compile backend used by --compare/--compile.").tag(config=True)
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
    @argument(
        "--compare",
        action="store_true",
        help="Profile the cell eagerly AND through torch.compile, and show eager | compiled | diff. "
        "The cell runs in both modes (side effects happen in both).",
    )
    @argument("--compile", action="store_true", help="Profile only the torch.compile'd cell.")
    @argument(
        "--compile-names",
        default=None,
        metavar="NAMES",
        help="Compile these notebook objects (e.g. model,fn) instead of the whole cell, for the compiled run only.",
    )
    @argument(
        "--export",
        default=None,
        metavar="PATH",
        help="Also write the result: .json/.json.gz (trace for Perfetto), .csv/.parquet (a table), "
        ".html (standalone report), .txt, or a folder (all of them).",
    )
    @argument("--export-table", default="ops", choices=["ops", "kernels"], help="Table for .csv/.parquet.")
    @argument("--force", action="store_true", help="Let --export overwrite existing files.")
    @argument("--backend", default=None, help="torch.compile backend (default inductor).")
    @argument(
        "--mode", default=None, help="torch.compile mode (default, reduce-overhead, max-autotune, ...)."
    )
    @argument(
        "--fullgraph", action="store_true", help="torch.compile(fullgraph=True): a graph break is an error."
    )
    @argument(
        "--dynamic", action=argparse.BooleanOptionalAction, default=None, help="torch.compile(dynamic=...)."
    )
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
        happen once per run. With ``--compare`` the cell runs both eagerly and
        through ``torch.compile`` (compilation happens during the warm-up and
        is timed separately), so its side effects happen in both modes.

        Examples::

            %%torchprof
            y = model(x)

            %%torchprof --device cuda --steps 5 --record-shapes -o prof
            loss = model(x).sum(); loss.backward()

            %%torchprof --compare
            y = model(x)

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
            # The tokens are already split and unquoted: hand them to argparse
            # as a list (a re-joined string would keep quotes in values).
            args = parser.parse_args(opts)
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
        from .run_options import check_load
        from .trace.loader import load

        check_load(args, sort=self._sort(args), row_limit=self._row_limit(args))
        try:
            result = load(args.load, name=args.name)
        except TorchProfError as exc:
            raise UsageError(str(exc)) from None
        self._keep_loaded(result, args)
        self._apply_view_settings(result, args)
        self._publish(result, args)
        self._export(result, args)
        return None

    def _keep_loaded(self, result: Any, args: argparse.Namespace) -> None:
        """Keep a copy of a loaded trace (or folder of ranks) in the run store.

        The sidebar lists every run, loaded ones included. A trace that is
        already in the store (re-opening a kept run) is not copied again, and
        a store that cannot be written only costs a warning: the trace is open.
        """
        import sys

        from .profile import Profile
        from .store import RunStore, source_key

        store = RunStore(args.run_dir or self.run_dir or None)
        profiles = [result] if isinstance(result, Profile) else list(result)
        sources = [Path(p.meta.path) for p in profiles if p.meta.path]
        root = store.root.resolve()
        if not sources or any(root in s.resolve().parents for s in sources):
            return
        key = source_key(sources)
        kept_before = store.find_loaded(key)
        if kept_before is not None:
            # The same files loaded again: point at the copy already kept
            # instead of storing a second one.
            for p in profiles:
                p.run_dir = kept_before
            return
        run_dir = None
        try:
            run_dir = store.create()
            kept: list[str] = []
            for i, src in enumerate(sources):
                name = src.name if src.name not in kept else f"{i}-{src.name}"
                kept.append(store.add_trace(run_dir, src, name=name).name)
            info = _run_info(profiles[0], self.shell, kind="load")
            info.update(
                name=result.name,
                source=str(Path(args.load).expanduser().resolve()),
                traces=kept,
                trace=kept[0],
                source_key=key,
            )
            info["ranks"] = len(profiles)
            store.write_info(run_dir, info)
        except BaseException as exc:
            # Whatever stopped the copy (a full disk, a bug, Ctrl-C), the
            # half-made run must not stay listed as "running".
            from .unfinished import describe, drop_unfinished

            drop_unfinished(run_dir)
            if not isinstance(exc, Exception):
                raise
            why = exc.strerror or exc if isinstance(exc, OSError) else describe(exc)
            print(f"torchprof: trace opened, but not kept in {store.root}: {why}", file=sys.stderr)
            return
        for p in profiles:
            p.run_dir = run_dir
        if self.max_store_mb > 0:
            store.enforce_cap(self.max_store_mb * 2**20, keep={run_dir.name})

    # ------------------------------------------------------------------ #
    # profiling a cell

    def _run(self, args: argparse.Namespace, code: str) -> Any:
        __tracebackhide__ = True  # noqa: F841
        global _ACTIVE
        if _ACTIVE:
            raise UsageError("%%torchprof cannot run inside another %%torchprof cell")
        from .capture.device import resolve_device
        from .capture.runner import CaptureOptions, profiler_is_running
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
        from .run_options import check_run

        check_run(args, options, sort=self._sort(args), row_limit=self._row_limit(args))
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
        from .capture.cellcheck import profiler_call
        from .capture.guards import NESTED_MESSAGE

        starts = profiler_call(runner.tree, self.shell.user_ns)
        if starts is not None:
            raise UsageError(f"{NESTED_MESSAGE} (it calls {starts})")

        from .store import RunStore
        from .views.progress import Progress

        store = RunStore(args.run_dir or self.run_dir or None)
        progress = Progress(enabled=not args.quiet, notebook=_in_notebook(self.shell))
        module_names = None
        if options.modules:
            from .capture.modules import module_paths

            module_names = module_paths(self.shell.user_ns)
        if args.compare or args.compile or args.compile_names:
            return self._run_compare(args, code, runner, target, options, store, progress, module_names)

        _ACTIVE = True
        try:
            profile, result = self._capture_profile(
                runner,
                target,
                options,
                code,
                args,
                store,
                progress,
                module_names,
                args.name or _default_name(code),
            )
        finally:
            _ACTIVE = False
        progress.finish(_timing_line(result, profile))
        if profile is not None:
            self._apply_view_settings(profile, args)
            self._publish(profile, args)
            if result.error is None:
                self._export(profile, args)
        if result.error is not None:
            _raise_capture_error(result.error)
        if profile is None:
            raise UsageError("; ".join(result.notes) or "the profiler produced no trace")
        return runner.value

    def _capture_profile(
        self,
        run_once: Any,
        target: Any,
        options: Any,
        code: str,
        args: argparse.Namespace,
        store: Any,
        progress: Any,
        module_names: dict[int, str] | None,
        name: str,
        extra_info: dict[str, Any] | None = None,
    ) -> tuple[Any, Any]:
        """Capture one run into a new run folder; (Profile or None, CaptureResult)."""
        __tracebackhide__ = True  # noqa: F841
        from .capture.runner import capture

        try:
            run_dir = store.create()
        except OSError as exc:
            raise UsageError(f"cannot create a run folder in {store.root}: {exc.strerror or exc}") from None
        started = time.time()
        profile = None
        try:
            result = capture(run_once, target, options, run_dir / "trace.json", progress, module_names)
            if result.trace_path is not None:
                progress.update("parsing", 0, 1)
                profile = self._build_profile(
                    result, target, options, code, args, started, run_dir, store, name, extra_info
                )
            else:
                # Nothing to keep: drop the folder so the sidebar does not list an empty run.
                import shutil

                shutil.rmtree(run_dir, ignore_errors=True)
        except BaseException as exc:
            # Ctrl-C while the trace is read, or a bug: the run must not stay
            # "running" (the sidebar could not delete it until the kernel exits).
            from .unfinished import close_unfinished

            close_unfinished(store, run_dir, exc, name=name, cell=code, started=started)
            raise
        return profile, result

    def _run_compare(
        self,
        args: argparse.Namespace,
        code: str,
        runner: _CellRunner,
        target: Any,
        options: Any,
        store: Any,
        progress: Any,
        module_names: dict[int, str] | None,
    ) -> Any:
        """``--compare`` / ``--compile``: eager and/or compiled runs, then the comparison."""
        __tracebackhide__ = True  # noqa: F841
        global _ACTIVE
        from dataclasses import replace

        from .capture.compile import (
            CompiledCell,
            CompileRecorder,
            CompileSettings,
            compiled_names,
            compiled_regions,
            cpu_kernel_ranges,
            generated_kernels,
        )
        from .capture.guards import NestedProfilerError
        from .comparison import Comparison
        from .run_options import check_compile

        names = [n.strip() for n in (args.compile_names or "").split(",") if n.strip()]
        bad = [n for n in names if not n.isidentifier()]
        if bad:
            raise UsageError(f"--compile-names takes variable names separated by commas, not {bad[0]!r}")
        missing = [n for n in names if n not in self.shell.user_ns]
        if missing:
            raise UsageError(f"--compile-names: {', '.join(missing)} is not defined in the notebook")
        settings = CompileSettings(
            backend=args.backend or self.backend,
            mode=args.mode,
            fullgraph=bool(args.fullgraph),
            dynamic=args.dynamic,
            names=names,
        )
        check_compile(settings)  # before the eager run, not after it
        base = args.name or _default_name(code)
        eager = None
        value = None
        _ACTIVE = True
        try:
            if not args.compile:
                eager, result = self._capture_profile(
                    runner, target, options, code, args, store, progress, module_names, f"{base} [eager]"
                )
                value = runner.value
                if result.error is not None:
                    progress.finish(_timing_line(result, eager))
                    if eager is not None:
                        self._apply_view_settings(eager, args)
                        self._publish(eager, args)
                    _raise_capture_error(result.error)

            # The compiled run warms up at least twice: the first call compiles,
            # the second catches a recompile (e.g. dynamic shapes), so neither
            # lands in a profiled step.
            coptions = replace(options, warmup=max(options.warmup, 2))
            recorder = CompileRecorder(settings)
            if names:
                compiled_runner: Any = _CellRunner(self.shell, code, show_output=args.compile)
                swap = compiled_names(self.shell.user_ns, settings)
            else:
                compiled_runner = CompiledCell(runner.tree, runner.filename, self.shell.user_ns, settings)
                swap = _nullcontext()
            info = {"compile": {"role": "compiled", "settings": settings.kwargs()}}
            with recorder, cpu_kernel_ranges(), swap:
                compiled, cresult = self._capture_profile(
                    compiled_runner,
                    target,
                    coptions,
                    code,
                    args,
                    store,
                    _Relabel(progress, {"warm-up": "compiling"}),
                    module_names,
                    f"{base} [compiled]",
                    info,
                )
        finally:
            _ACTIVE = False
        stats = recorder.stats
        if cresult.error is not None:
            if isinstance(cresult.error, (KeyboardInterrupt, NestedProfilerError)):
                _raise_capture_error(cresult.error)
            recorder.failed(cresult.error)
            if cresult.error_phase == "warm-up":
                compiled = None
        first = getattr(compiled_runner, "first_call_s", None)
        stats.first_call_s = first
        if first is not None and compiled is not None:
            stats.compile_s = max(first - compiled.summary["wall_per_step_us"] / 1e6, 0.0)
        if compiled is not None:
            # Findings read this (graph breaks, recompiles); set before any display.
            compiled.compile_stats = stats
            stats.kernels = generated_kernels(compiled)
            regions = compiled_regions(compiled)
            # What ran in the profiled steps is the most direct evidence:
            # one compiled region per graph; compile ids above 0 are recompiles.
            stats.graphs = max(stats.graphs, len(regions))
            stats.regions = regions
            if not stats.recompiles:
                stats.recompiles = [
                    f"frame {r.frame} ran recompiled code (compile id {r.compile_id})"
                    for r in regions.itertuples(index=False)
                    if r.compile_id > 0
                ]
            compiled.capture.compile_s = stats.compile_s
            if compiled.run_dir is not None:
                self._update_run_info(
                    store, compiled.run_dir, {"compile": {"role": "compiled", **stats.as_dict()}}
                )
        if (
            eager is not None
            and eager.run_dir is not None
            and compiled is not None
            and compiled.run_dir is not None
        ):
            self._update_run_info(store, eager.run_dir, {"pair": compiled.run_dir.name, "role": "eager"})
            self._update_run_info(store, compiled.run_dir, {"pair": eager.run_dir.name, "role": "compiled"})
        progress.finish(_timing_line(cresult, compiled))
        comparison = Comparison(eager, compiled, stats)
        for p in (eager, compiled):
            if p is not None:
                self._apply_view_settings(p, args)
        comparison.row_limit = args.row_limit if args.row_limit is not None else self.row_limit
        self._publish(comparison, args)
        self._export(comparison, args)
        if args.compile and value is None:
            value = getattr(compiled_runner, "value", None)
        return value

    def _update_run_info(self, store: Any, run_dir: Path, extra: dict[str, Any]) -> None:
        info = store.read_info(run_dir.name)
        if info.get("damaged"):
            return
        info.update(extra)
        info.pop("id", None)
        info.pop("damaged", None)
        info.pop("schema", None)
        store.write_info(run_dir, info)

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
        name: str,
        extra_info: dict[str, Any] | None = None,
    ) -> Any:
        from .capture.guards import pause_for_tests
        from .profile import CaptureInfo, Profile
        from .store import TRACE_NAME, compress_in_background
        from .trace.parser import parse_trace

        pause_for_tests("parse")
        t0 = time.perf_counter()
        try:
            data = parse_trace(result.trace_path)
        except TorchProfError as exc:
            # One line (a full disk: "no space left on …"); the run is closed
            # as damaged by the caller, with this reason.
            raise UsageError(f"the captured trace cannot be read: {exc}") from None
        parse_s = time.perf_counter() - t0
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
        store.write_info(run_dir, {**_run_info(profile, self.shell), **(extra_info or {})})
        if self.max_store_mb > 0:
            store.enforce_cap(self.max_store_mb * 2**20, keep={run_dir.name})
        return profile

    def _apply_view_settings(self, result: Any, args: argparse.Namespace) -> None:
        from .profile import Profile, _sort_column

        if not isinstance(result, Profile):
            return
        sort = self._sort(args)
        if sort:
            try:
                _sort_column(sort, result.ops)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            result.sort = sort
        result.row_limit = self._row_limit(args)

    def _sort(self, args: argparse.Namespace) -> str | None:
        return args.sort if args.sort is not None else (self.sort or None)

    def _row_limit(self, args: argparse.Namespace) -> int:
        return args.row_limit if args.row_limit is not None else self.row_limit

    def _export(self, result: Any, args: argparse.Namespace) -> None:
        """``--export``: write the result; problems are one clear line."""
        if not args.export:
            return
        from .comparison import Comparison
        from .export import ExportError
        from .profile import Profile

        targets: list[tuple[Any, Path]] = []
        path = Path(args.export).expanduser()
        report: Path | None = None  # a Comparison's own report (both sides and the diff)
        if isinstance(result, Profile):
            targets.append((result, path))
        elif isinstance(result, Comparison) and not path.is_dir() and path.name.lower().endswith(".html"):
            report = path
        elif isinstance(result, Comparison):
            report = path / "comparison.html" if path.is_dir() else None
            for label, p in (("eager", result.eager), ("compiled", result.compiled)):
                if p is None:
                    continue
                if path.is_dir():
                    sub = path / label
                    sub.mkdir(exist_ok=True)
                    targets.append((p, sub))
                else:
                    name = path.name
                    stem, dot, rest = name.partition(".")
                    targets.append((p, path.with_name(f"{stem}.{label}{dot}{rest}")))
        else:
            raise UsageError(
                "--export works for one profile (or --compare); export ranks one by one: ranks[0].export(...)"
            )
        try:
            if report is not None:
                from .export import plan

                plan(report, force=args.force)  # refuse before writing anything
            for profile, target in targets:
                done = profile.export(target, force=args.force, table=args.export_table)
                if not args.quiet:
                    print(str(done))
            if report is not None:
                from .views.report import write_report

                done = write_report(result, report, force=args.force)
                if not args.quiet:
                    print(str(done))
        except ExportError as exc:
            raise UsageError(f"export: {exc}") from None

    def _publish(self, result: Any, args: argparse.Namespace) -> None:
        self.shell.user_ns["_torchprof"] = result
        if args.output:  # checked before anything ran (run_options.check_output)
            self.shell.user_ns[args.output] = result
        if not args.quiet:
            from IPython.display import display

            display(result)


_VALUE = re.compile(r"""("(?:[^"\\]|\\.)*"|'[^']*'|\S+)""")


def _raise_capture_error(error: BaseException) -> None:
    """Re-raise what ended a capture.

    The user's exception keeps its traceback, as for any cell; a profiler
    started inside the cell is one line.
    """
    __tracebackhide__ = True  # noqa: F841
    from .capture.guards import NestedProfilerError

    if isinstance(error, NestedProfilerError):
        raise UsageError(str(error)) from None
    raise error


def _split_value(text: str) -> tuple[str | None, str, str]:
    """First shell-like token of ``text`` (quotes allowed) and the remainder."""
    m = _VALUE.match(text)
    if not m:
        return None, "", ""
    token = m.group(1)
    if token[:1] in "\"'" and token[-1:] == token[:1] and len(token) >= 2:
        token = token[1:-1]
    return token, "", text[m.end() :]


class _Relabel:
    """Progress sink that renames phases (the compiled run's warm-up is compiling)."""

    def __init__(self, progress: Any, names: dict[str, str]) -> None:
        self.progress = progress
        self.names = names

    def update(self, phase: str, done: int, total: int) -> None:
        self.progress.update(self.names.get(phase, phase), done, total)


def _nullcontext() -> Any:
    from contextlib import nullcontext

    return nullcontext()


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


def _run_info(profile: Any, shell: Any, kind: str = "capture") -> dict[str, Any]:
    from .store import TRACE_NAME

    s = profile.summary
    cap = profile.capture
    ops = profile.ops
    sort_col = "self_device_us" if s["device_traced"] else "self_cpu_us"
    # The step ranges themselves are not an op anyone can speed up.
    candidates = ops[~ops["name"].isin(["ProfilerStep*"])]
    top = candidates.sort_values(sort_col, ascending=False).head(5)
    notebook = shell.user_ns.get("__session__") or shell.user_ns.get("__vsc_ipynb_file__")
    return {
        "name": profile.name,
        "kind": kind,
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

    def __init__(self, shell: Any, code: str, show_output: bool = True) -> None:
        self.shell = shell
        self.value: Any = None
        self.calls = 0
        self.show_output = show_output
        self.first_call_s: float | None = None
        transformed = shell.transform_cell(code)
        filename = shell.compile.cache(transformed, shell.execution_count, raw_code=code)
        try:
            tree = ast.parse(transformed, filename=filename)
        except SyntaxError as exc:
            raise UsageError(f"the cell has a syntax error: {exc.msg} (line {exc.lineno})") from None
        from .capture.cellcheck import top_level_await

        if top_level_await(tree) is not None:
            raise UsageError(
                "top-level await is not supported inside %%torchprof; "
                "wrap the async code in a function and call it with asyncio"
            )
        if not tree.body:
            raise UsageError("nothing to profile: the cell has no statements (only comments or blank lines)")
        # Kept for --compare, which builds a function out of the same cell.
        self.tree = copy.deepcopy(tree)
        self.filename = filename
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
        t0 = time.perf_counter()
        if self.calls == 1 and self.show_output:
            self.value = self._once()
        else:
            from IPython.utils.capture import capture_output

            with capture_output(stdout=True, stderr=True, display=True):
                value = self._once()
            if self.calls == 1:
                self.value = value
        if self.calls == 1:
            # With --compile-names the first call includes compilation.
            self.first_call_s = time.perf_counter() - t0
