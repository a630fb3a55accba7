"""One ``%%torchprof`` run, from options to the shown result: capture → store → results.

`RunSession` holds what the magic hands it (the shell, the configured
defaults) and orchestrates: check the options, resolve the device, capture
(eager, compiled or both), keep the run in the store, build the `Profile` or
`Comparison`, export and show it. The magic (`magics`) only parses the line
and calls it; capture knows devices, the store knows files, and nothing here
computes a table.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from .cellrunner import CellRunner, default_name, keeping_interrupts
from .errors import TorchProfError
from .runs.store import notebook_of, run_info

if TYPE_CHECKING:  # pragma: no cover
    import threading

    from .results.profile import Profile

# Set while a %%torchprof cell runs: a nested one would start a second profiler.
_ACTIVE = False


class RunSession:
    """The orchestration of one magic call.

    Parameters
    ----------
    shell
        The IPython shell (its namespace, its display).
    settings
        The configured defaults (the ``TorchProf`` magics' traits: steps,
        warmup, device, run_dir, max_store_mb, backend, sort, row_limit ...).
    """

    def __init__(self, shell: Any, settings: Any) -> None:
        self.shell = shell
        self.settings = settings
        #: Run folder → (the thread packing its trace or None, the trace): the table cache waits for it.
        self._packing: dict[Path, tuple[Any, Path]] = {}
        #: When the current run's set-up began (the session's start, then each capture's end).
        self._mark = time.perf_counter()
        #: Seconds the last `_keep_tables` took on this thread.
        self._cache_s = 0.0

    def _setting(self, value: Any, trait: str) -> Any:
        return getattr(self.settings, trait) if value is None else value

    def load(self, args: argparse.Namespace) -> None:
        """``--load``: open a saved trace (or a folder of ranks), keep it, show it."""
        from .run_options import check_load
        from .runs.load import load

        check_load(args, sort=self._sort(args), row_limit=self._row_limit(args))
        from .views.progress import showing_trace_progress

        try:
            with showing_trace_progress(enabled=not getattr(args, "quiet", False)):
                result = load(args.load, name=args.name)
        except TorchProfError as exc:
            raise UsageError(str(exc)) from None
        self.keep_loaded(result, args)
        self._apply_view_settings(result, args)
        self._publish(result, args)
        self._export(result, args)
        return None

    def keep_loaded(self, result: Any, args: argparse.Namespace) -> None:
        """Keep a copy of a loaded trace (or folder of ranks) in the run store.

        The sidebar lists every run, loaded ones included. A trace that is
        already in the store (re-opening a kept run) is not copied again, and
        a store that cannot be written only costs a warning: the trace is open.
        """
        import sys

        from .capture.guards import sigint_held
        from .results.profile import Profile
        from .runs.keep import keep_loaded
        from .runs.unfinished import describe
        from .trace.remote import is_url

        store = self.run_store(args)
        profiles = [result] if isinstance(result, Profile) else list(result)
        try:
            kept = keep_loaded(
                store,
                profiles,
                name=result.name,
                source=args.load,
                url=args.load if is_url(args.load) else None,
                notebook=notebook_of(self.shell),
                held=sigint_held,
            )
        except Exception as exc:  # the half-made run is removed; Ctrl-C goes on up
            why = exc.strerror or exc if isinstance(exc, OSError) else describe(exc)
            print(f"torchprof: trace opened, but not kept in {store.root}: {why}", file=sys.stderr)
            return
        if kept is None:
            return
        for p in profiles:
            p.run_dir = kept.run_dir
        if not kept.new:
            return  # the same files loaded again: the copy kept before is theirs
        if isinstance(result, Profile) and kept.trace is not None and kept.trace.name.endswith(".gz"):
            # A gzip is copied as it is (a raw .json is packed on a thread this
            # does not see: the sidebar or load() will cache that one).
            self._packing[kept.run_dir] = (None, kept.trace)
        if self.settings.max_store_mb > 0:
            store.enforce_cap(self.settings.max_store_mb * 2**20, keep={kept.run_dir.name})

    @keeping_interrupts  # a Ctrl-C lost in a callback during setup still stops the run
    def run(self, args: argparse.Namespace, code: str, make_runner: Any = None) -> Any:
        """Profile ``code``: check everything first, capture, keep, show; returns the cell's value.

        ``make_runner``: what runs the code once per call (a cell's
        `CellRunner` when not given; `api.profile` hands in its callable's
        runner, with ``code`` the callable's source). It is made after the
        options are checked and must have ``value``, ``namespace`` and
        ``compiled(settings, show_output)``.
        """
        __tracebackhide__ = True  # noqa: F841
        global _ACTIVE
        if _ACTIVE:
            raise UsageError("%%torchprof cannot run inside another %%torchprof cell")
        options, target = self.prepare(args)
        runner = make_runner() if make_runner is not None else self._cell_runner(code)
        store = self.run_store(args)
        progress = self.progress_line(args)
        module_names = None
        if options.modules:
            from .capture.modules import module_paths

            module_names = module_paths(runner.namespace)
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
                args.name or default_name(code),
            )
        finally:
            _ACTIVE = False
        self.show_run(args, result, profile, progress)
        return runner.value

    def prepare(self, args: argparse.Namespace) -> tuple[Any, Any]:
        """Check the options and the device before anything runs; (`CaptureOptions`, `DeviceTarget`)."""
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
        return options, target

    def _cell_runner(self, code: str) -> CellRunner:
        """The cell's runner; a syntax error or a profiler the cell starts is refused here."""
        runner = CellRunner(self.shell, code)  # SyntaxError surfaces here
        from .capture.cellcheck import profiler_call
        from .capture.guards import NESTED_MESSAGE

        starts = profiler_call(runner.tree, self.shell.user_ns)
        if starts is not None:
            raise UsageError(f"{NESTED_MESSAGE} (it calls {starts})")
        return runner

    def run_store(self, args: argparse.Namespace) -> Any:
        """The run store the options name (``--run-dir``, else the configured one, else the default)."""
        from .runs import RunStore, store_folder

        return RunStore(store_folder(args.run_dir, self.settings.run_dir))

    def progress_line(self, args: argparse.Namespace) -> Any:
        """The progress line of a run (nothing with ``--quiet``)."""
        from .views.progress import Progress

        return Progress(enabled=not args.quiet, notebook=in_notebook(self.shell))

    def show_run(
        self, args: argparse.Namespace, result: Any, profile: Any, progress: Any, reraise: bool = True
    ) -> None:
        """After a capture: the timing line, the profile shown and exported; then what ended it, raised.

        ``reraise=False``: what ended the capture is not raised here (a
        ``with`` block's own exception, which propagates by itself).
        """
        __tracebackhide__ = True  # noqa: F841
        if not getattr(progress, "notebook", True):
            progress.finish()  # a terminal's line goes before the tables print under it
        if profile is not None:
            self._apply_view_settings(profile, args)
            self._shown_timed(profile, args, progress)
        progress.finish(timing_line(result, profile))
        if profile is not None and result.error is None:
            self._export(profile, args)
        if result.error is not None:
            if reraise:
                raise_capture_error(result.error)
            return
        if profile is None:
            raise UsageError("; ".join(result.notes) or "the profiler produced no trace")

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
        from .runs import RAW_TRACE_NAME

        started = time.time()
        run_dir = self.new_run_dir(store)
        try:
            return self.collect(
                lambda: capture(run_once, target, options, run_dir / RAW_TRACE_NAME, progress, module_names),
                run_dir,
                started,
                target,
                options,
                code,
                args,
                store,
                progress,
                name,
                extra_info,
            )
        except BaseException as exc:
            # A Ctrl-C after the folder was made but before `collect` guards it
            # would leave the run listed as running; closing twice changes nothing.
            close_run(store, run_dir, exc, name=name, cell=code, started=started)
            raise

    def new_run_dir(self, store: Any) -> Path:
        """A new run folder in ``store`` (a store that cannot be written: one line)."""
        try:
            return store.create()
        except OSError as exc:
            raise UsageError(f"cannot create a run folder in {store.root}: {exc.strerror or exc}") from None

    def collect(
        self,
        take: Any,
        run_dir: Path,
        started: float,
        target: Any,
        options: Any,
        code: str,
        args: argparse.Namespace,
        store: Any,
        progress: Any,
        name: str,
        extra_info: dict[str, Any] | None = None,
    ) -> tuple[Any, Any]:
        """Take a capture (``take()`` returns its `CaptureResult`) into ``run_dir``; (Profile or None, result).

        Whatever ends it early, the run is closed, not left "running".
        """
        __tracebackhide__ = True  # noqa: F841
        profile = None
        setup_s = time.perf_counter() - self._mark
        try:
            result = take()
            if result.trace_path is not None:
                progress.update("parsing", 0, 1)
                profile = self._build_profile(
                    result, target, options, code, args, started, run_dir, store, name, extra_info, progress
                )
                profile.capture.phases = {"set-up": setup_s, **profile.capture.phases}
            else:
                # Nothing to keep: drop the folder so the sidebar does not list an empty run.
                import shutil

                shutil.rmtree(run_dir, ignore_errors=True)
        except BaseException as exc:
            # Ctrl-C while the trace is read, or a bug: the run must not stay
            # "running" (the sidebar could not delete it until the kernel exits).
            close_run(store, run_dir, exc, name=name, cell=code, started=started)
            raise
        self._mark = time.perf_counter()
        return profile, result

    def _shown_timed(self, profile: Any, args: argparse.Namespace, progress: Any) -> None:
        """Compute the profile's tables, then show it; each timed into its `CaptureInfo.phases`.

        The tables are what the view shows first (the op and kernel tables,
        the steps, the headline numbers, the findings): computed here, the
        view's own build is timed apart from them.
        """
        progress.update("tables", 0, 1)
        _timed_tables(profile, findings=True)
        progress.update("view", 0, 1)
        phases = profile.capture.phases if profile.capture is not None else {}
        # bokeh is imported here either way (the view's tables, or the table
        # cache's writer: see _keep_tables); its first import in a kernel
        # takes a second or more, which the line names apart from the view.
        t0 = time.perf_counter()
        import bokeh.models  # noqa: F401

        phases["bokeh import"] = time.perf_counter() - t0
        self._cache_s = 0.0
        t0 = time.perf_counter()
        self._publish(profile, args)
        phases["view"] = max(time.perf_counter() - t0 - self._cache_s, 0.0)
        phases["table cache"] = self._cache_s  # what starting the cache's writer thread took here

    def _compile_settings(self, args: argparse.Namespace) -> Any:
        """``torch.compile``'s settings from the options, checked before anything runs."""
        from .capture.compile import CompileSettings
        from .run_options import check_compile

        names = [n.strip() for n in (args.compile_names or "").split(",") if n.strip()]
        bad = [n for n in names if not n.isidentifier()]
        if bad:
            raise UsageError(f"--compile-names takes variable names separated by commas, not {bad[0]!r}")
        missing = [n for n in names if n not in self.shell.user_ns]
        if missing:
            raise UsageError(f"--compile-names: {', '.join(missing)} is not defined in the notebook")
        settings = CompileSettings(
            backend=args.backend or self.settings.backend,
            mode=args.mode,
            fullgraph=bool(args.fullgraph),
            dynamic=args.dynamic,
            names=names,
        )
        check_compile(settings)  # before the eager run, not after it
        return settings

    def _run_compare(
        self,
        args: argparse.Namespace,
        code: str,
        runner: CellRunner,
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

        from .capture.compile import CompileRecorder, cpu_kernel_ranges
        from .results.comparison import Comparison

        settings = self._compile_settings(args)
        base = args.name or default_name(code)
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
                    progress.finish(timing_line(result, eager))
                    if eager is not None:
                        self._apply_view_settings(eager, args)
                        self._publish(eager, args)
                    raise_capture_error(result.error)

            # The compiled run warms up at least twice: the first call compiles,
            # the second catches a recompile (e.g. dynamic shapes), so neither
            # lands in a profiled step.
            coptions = replace(options, warmup=max(options.warmup, 2))
            recorder = CompileRecorder(settings)
            compiled_runner, swap = runner.compiled(settings, show_output=args.compile)
            info = {"compile": {"role": "compiled", "settings": settings.kwargs()}}
            with recorder, cpu_kernel_ranges(), swap:
                compiled, cresult = self._capture_profile(
                    compiled_runner,
                    target,
                    coptions,
                    code,
                    args,
                    store,
                    Relabel(progress, {"warm-up": "compiling"}),
                    module_names,
                    f"{base} [compiled]",
                    info,
                )
                paired = self._interleaved(
                    runner, compiled_runner, target, options, settings, eager, compiled
                )
        finally:
            _ACTIVE = False
        stats, compiled = self._compile_stats(recorder, cresult, compiled, compiled_runner, store)
        self._pair_runs(store, eager, compiled)
        progress.finish(timing_line(cresult, compiled))
        comparison = Comparison(eager, compiled, stats, paired)
        for p in (eager, compiled):
            if p is not None:
                self._apply_view_settings(p, args)
        comparison.row_limit = args.row_limit if args.row_limit is not None else self.settings.row_limit
        self._publish(comparison, args)
        self._export(comparison, args)
        if args.compile and value is None:
            value = getattr(compiled_runner, "value", None)
        return value

    def _interleaved(
        self,
        runner: Any,
        compiled_runner: Any,
        target: Any,
        options: Any,
        settings: Any,
        eager: Any,
        compiled: Any,
    ) -> Any:
        """Eager and compiled runs alternating, each timed (`capture.runner.interleave`); None without both sides.

        Two profiled runs one after the other are not comparable on a machine
        whose load shifts between them; runs that alternate are. Not with
        ``--compile-names``: the names swapped for compiled objects would make
        the eager side compiled too. Ctrl-C stops the rounds and is raised.
        """
        from .capture.runner import INTERLEAVE_ROUNDS, interleave

        if eager is None or compiled is None or settings.names:
            return None
        paired = interleave(runner, compiled_runner, target, max(options.steps, INTERLEAVE_ROUNDS))
        if isinstance(paired.error, KeyboardInterrupt):
            raise paired.error
        return paired

    def _compile_stats(
        self, recorder: Any, cresult: Any, compiled: Any, compiled_runner: Any, store: Any
    ) -> tuple[Any, Any]:
        """What the compiler did, from the recorder and the compiled profile; (stats, compiled or None)."""
        from .analysis.compile_stats import compiled_regions, generated_kernels
        from .capture.guards import NestedProfilerError

        stats = recorder.stats
        if cresult.error is not None:
            if isinstance(cresult.error, (KeyboardInterrupt, NestedProfilerError)):
                raise_capture_error(cresult.error)
            recorder.failed(cresult.error)
            if cresult.error_phase == "warm-up":
                compiled = None
        first = getattr(compiled_runner, "first_call_s", None)
        stats.first_call_s = first
        if first is not None and compiled is not None:
            stats.compile_s = max(first - compiled.summary["wall_per_step_us"] / 1e6, 0.0)
        if compiled is None:
            return stats, None
        # Findings read this (graph breaks, recompiles); set before any display.
        compiled.compile_stats = stats
        steps = max(compiled.summary["steps"], 1)
        stats.kernels = generated_kernels(compiled.kernels, compiled.events, compiled.ops, steps)
        regions = compiled_regions(compiled.ops)
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
            store.update_info(compiled.run_dir, {"compile": {"role": "compiled", **stats.as_dict()}})
        return stats, compiled

    def _pair_runs(self, store: Any, eager: Any, compiled: Any) -> None:
        """Mark the two runs of a comparison as each other's pair in the store."""
        if eager is None or eager.run_dir is None or compiled is None or compiled.run_dir is None:
            return
        store.update_info(eager.run_dir, {"pair": compiled.run_dir.name, "role": "eager"})
        store.update_info(compiled.run_dir, {"pair": eager.run_dir.name, "role": "compiled"})

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
        progress: Any = None,
    ) -> Any:
        from .capture.guards import pause_for_tests
        from .results.profile import CaptureInfo, Profile
        from .runs.store import TRACE_NAME
        from .trace.files import parse_trace
        from .trace.progress import reporting

        pause_for_tests("parse")
        t0 = time.perf_counter()
        try:
            with reporting(progress.update if progress is not None else None):
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
            step_cpu_us=list(result.step_cpu_us),
            phases={**result.phases, "parse": parse_s},
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
        profile.meta.path = str(result.trace_path)  # until the gzip is in place (`_pack`)
        t_store = _timed_tables(profile)
        packing = _pack(profile, run_dir / TRACE_NAME)
        self._packing[run_dir] = (packing, run_dir / TRACE_NAME)
        # The process's CPU time per step: the trace has wall times only (see `ProfileDiff`).
        cpu = {"step_cpu_us": list(result.step_cpu_us)}
        store.write_info(run_dir, {**run_info(profile, notebook_of(self.shell)), **cpu, **(extra_info or {})})
        if self.settings.max_store_mb > 0:
            store.enforce_cap(self.settings.max_store_mb * 2**20, keep={run_dir.name})
        capture_info.phases["store"] = time.perf_counter() - t_store
        return profile

    def _apply_view_settings(self, result: Any, args: argparse.Namespace) -> None:
        from .columns import sort_column
        from .results.profile import Profile

        if not isinstance(result, Profile):
            return
        sort = self._sort(args)
        if sort:
            try:
                sort_column(sort, result.ops.columns)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            result.sort = sort
        result.row_limit = self._row_limit(args)

    def _sort(self, args: argparse.Namespace) -> str | None:
        return args.sort if args.sort is not None else (self.settings.sort or None)

    def _row_limit(self, args: argparse.Namespace) -> int:
        return args.row_limit if args.row_limit is not None else self.settings.row_limit

    def _export(self, result: Any, args: argparse.Namespace) -> None:
        """``--export``: write the result (see `export.export_result`); problems are one clear line."""
        if not args.export:
            return
        from .export import ExportError, export_result

        try:
            written = export_result(result, args.export, force=args.force, table=args.export_table)
        except ExportError as exc:
            raise UsageError(f"export: {exc}") from None
        if not args.quiet:
            for line in written:
                print(line)

    def _publish(self, result: Any, args: argparse.Namespace) -> None:
        self.shell.user_ns["_torchprof"] = result
        if args.output:  # checked before anything ran (run_options.check_output)
            self.shell.user_ns[args.output] = result
        if not args.quiet:
            import secrets

            from IPython.display import display

            from .views.interactive import shown_in

            # With a display id, a view closed later (the live-view cap) turns
            # this output into its static form, in the page and the saved file.
            display_id = secrets.token_hex(8)
            with shown_in(display_id):
                display(result, display_id=display_id)
        self._keep_tables(result)

    def _keep_tables(self, result: Any) -> None:
        """Keep the tables of each run just captured (or loaded) beside its trace (`runs.cache`).

        After the result was shown: its tables are computed by then (those
        that are not, are computed here, on this thread, so the writer only
        reads them). The files are written once the trace is packed, since
        they are keyed on the packed trace's size and time: the tables, then
        the sidebar's timeline (`sidebar_timeline`); the sidebar and
        ``load()`` then reopen the run without parsing it.
        """
        t0 = time.perf_counter()
        self._keep_tables_now(result)
        self._cache_s = time.perf_counter() - t0  # timed apart from the view (`_shown_timed`)

    def _keep_tables_now(self, result: Any) -> None:
        from .results.comparison import Comparison
        from .runs.keep import keep_tables

        profiles = [result.eager, result.compiled] if isinstance(result, Comparison) else [result]
        for p in profiles:
            run_dir = getattr(p, "run_dir", None)
            entry = self._packing.pop(run_dir, None) if run_dir is not None else None
            if entry is None:
                continue  # kept before, or not kept: the server or load() writes its cache
            packing, trace = entry
            # bokeh's import is circular inside bokeh.models: imported from this thread
            # and from the writer's (the sidebar's timeline) at once it fails
            # ("partially initialized module").
            import bokeh.models  # noqa: F401

            keep_tables(p, trace, packing, also=(sidebar_timeline,))


def _pack(profile: Profile, packed: Path) -> threading.Thread:
    """Gzip the profile's trace into ``packed`` in the background; the profile points at the gzip once it is in place.

    It moves before the raw file is removed, so a file is there at every
    moment for whoever reads `Profile.trace_path` (or the flows, read lazily
    from it).
    """
    from .runs.store import compress_in_background

    def point_at_packed() -> None:
        profile.meta.path = str(packed)

    return compress_in_background(Path(profile.meta.path), packed, on_written=point_at_packed)


def _timed_tables(profile: Any, findings: bool = False) -> float:
    """Compute the tables a view and the run's record show, timed into ``tables``; returns when it ended.

    The op and kernel tables, the steps and the headline numbers (what the
    run's record in the store holds), and with ``findings`` the findings (only once
    the profile is complete: a compiled run's read its compile stats). What
    the view's first page shows is made here, and the view's build is timed
    apart from it.
    """
    t0 = time.perf_counter()
    profile.ops, profile.kernels, profile.steps, profile.summary  # noqa: B018
    if findings:
        try:
            profile.findings  # noqa: B018
        except Exception:  # noqa: BLE001, S110 - the view says "findings unavailable" and why
            pass
    t1 = time.perf_counter()
    if profile.capture is not None:
        phases = profile.capture.phases
        phases["tables"] = phases.get("tables", 0.0) + (t1 - t0)
    return t1


def sidebar_timeline(profile: Any, trace: Path) -> Path:
    """Keep beside ``trace`` the timeline the sidebar asks for (``GET runs/<id>/timeline``).

    The same payload the server builds (`views.timeline.build_timeline`,
    `runs.cache.SIDEBAR_GLYPHS` glyphs, bokeh's ``json_item``), drawn
    from the profile the notebook holds. Returns the file written.
    """
    import json

    from bokeh.embed import json_item

    from .runs.cache import SIDEBAR_GLYPHS, timeline_stamp
    from .runs.keep import write_timeline_cache
    from .runs.store import json_safe
    from .views.timeline import build_timeline

    item = json_item(build_timeline(profile, window=None, max_glyphs=SIDEBAR_GLYPHS))
    data = json.dumps(json_safe(item), allow_nan=False).encode()
    return write_timeline_cache(data, trace, timeline_stamp(SIDEBAR_GLYPHS))


def close_run(store: Any, run_dir: Path, error: BaseException, **record: Any) -> None:
    """Close a capture's run that ``error`` ended before it was saved (`runs.unfinished.close_unfinished`).

    Ctrl-C is held back meanwhile: a second one cannot leave the run half closed.
    """
    from .capture.guards import sigint_held
    from .runs.unfinished import close_unfinished

    with sigint_held():
        close_unfinished(store, run_dir, error, **record)


def raise_capture_error(error: BaseException) -> None:
    """Re-raise what ended a capture.

    The user's exception keeps its traceback, as for any cell; a profiler
    started inside the cell is one line.
    """
    __tracebackhide__ = True  # noqa: F841
    from .capture.guards import NestedProfilerError

    if isinstance(error, NestedProfilerError):
        raise UsageError(str(error)) from None
    raise error


class Relabel:
    """Progress sink that renames phases (the compiled run's warm-up is compiling)."""

    def __init__(self, progress: Any, names: dict[str, str]) -> None:
        self.progress = progress
        self.names = names

    def update(self, phase: str, done: int, total: int) -> None:
        """Pass the update on under the phase's new name."""
        self.progress.update(self.names.get(phase, phase), done, total)


def in_notebook(shell: Any) -> bool:
    """Whether the shell is a Jupyter kernel's (the progress line then updates one output)."""
    return type(shell).__name__ == "ZMQInteractiveShell"


def timing_line(result: Any, profile: Any) -> str:
    """Where a run's time went, for the line that replaces the progress bar.

    The profiled steps first (what the profile is about), then every other
    phase of the run in the order it ran (`CaptureInfo.phases`), those under
    10 ms left out, then the whole: "3 profiled steps 0.95 s (316 ms each) ·
    also: set-up 0.4 s, warm-up 1× 12 s, profiler start-up 9.8 s (…), parse
    0.4 s, tables 0.1 s, view 0.3 s · 24 s in all". A first run in a fresh
    kernel pays start-up costs a later run does not; this says which.
    """
    from .format import fmt_time

    def took(seconds: float) -> str:
        return fmt_time(seconds * 1e6)

    cap = getattr(profile, "capture", None)
    phases = dict(cap.phases if cap is not None and cap.phases else result.phases)
    n = result.steps_done
    step_s = phases.pop("profiled steps", result.profile_s)
    head = f"{n} profiled step{'' if n == 1 else 's'} {took(step_s)}"
    if n > 1:
        head += f" ({took(step_s / n)} each)"
    rest = []
    for name, seconds in phases.items():
        if seconds < 0.01:
            continue
        label = f"warm-up {result.warmup_done}×" if name == "warm-up" else name
        why = _COMPILER_IMPORT if name == "profiler start-up" and result.compiler_imported else ""
        rest.append(f"{label} {took(seconds)}{why}")
    total = step_s + sum(phases.values())
    also = f" · also: {', '.join(rest)}" if rest else ""
    return f"torchprof: {head}{also} · {took(total)} in all"


#: Said after the profiler's start-up when it imported torch's compiler (once per kernel).
_COMPILER_IMPORT = " (torch's profiler imports torch._inductor on its first use in a kernel)"
