"""The ``%%torchprof`` cell magic and ``%torchprof`` line magic: IPython glue only.

The magic declares its options (``%%torchprof?`` prints them), its configurable
defaults (``%config TorchProf.steps = 5``) and splits the line into options and
a statement; `session.RunSession` does the run (capture → store → results).
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from traitlets import Bool, Integer, Unicode

from .runs import DEFAULT_STORE, STORE_ENV
from .session import RunSession


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
    run_dir = Unicode("", help=f"Run store folder ('' = ${STORE_ENV} or ./{DEFAULT_STORE.as_posix()}).").tag(
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

        The cell runs ``warmup + 1 + steps`` times: ``warmup`` unprofiled
        runs, one run under the profiler whose events are discarded (torch's
        schedule warm-up step, so the profiler's start-up cost stays out of
        the numbers), then ``steps`` profiled runs, each a ``ProfilerStep#k``
        range that ends with a device synchronisation. Intel Gaudi (HPU), TorchTPU and
        TorchNeuron get at least 3 warm-up runs (they compile on their first
        runs). Its printed output and the value of its last line appear once
        (from the first run). The profile is shown inline and kept in
        ``_torchprof`` (and in ``-o VAR``); its tables are pandas DataFrames
        (``_torchprof.ops``, ``_torchprof.kernels``).

        Side effects of the cell (appending to a list, an optimizer step)
        happen on every run. ``--compile`` runs the compiled cell
        ``max(warmup, 2) + 1 + steps`` times (compilation happens in the
        warm-up and is timed separately). ``--compare`` runs the cell
        ``warmup + 1 + steps`` times eagerly, ``max(warmup, 2) + 1 + steps``
        times compiled, then ``max(steps, 8)`` more times in each mode,
        unprofiled and alternating, to time the two side by side (not with
        ``--compile-names``); side effects happen in both modes.

        Without magics, ``jupyter_torchprof.profile(fn, *args, **options)``
        takes the same options as keyword arguments (``--row-limit`` ->
        ``row_limit=``; ``help(jupyter_torchprof.profile)`` lists them).

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
            return RunSession(self.shell, self).load(args)
        code = cell if cell is not None else statement
        if not code.strip():
            raise UsageError(
                "nothing to profile: put code below %%torchprof, or after %torchprof, or use --load PATH"
            )
        return RunSession(self.shell, self).run(args, code)

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


#: What every ``%%torchprof`` run imports (pandas and pyarrow with them) and
#: each ``%load_ext`` imports at once (`preload`): the set-up's modules, then
#: those that read the trace and make the tables. Not torch (the notebook
#: imports it) nor bokeh (the view's, a second more).
PRELOADED = (
    "jupyter_torchprof.capture.device",
    "jupyter_torchprof.capture.runner",
    "jupyter_torchprof.capture.cellcheck",
    "jupyter_torchprof.run_options",
    "jupyter_torchprof.views.progress",
    "jupyter_torchprof.results.profile",
    "jupyter_torchprof.trace.files",
    "jupyter_torchprof.trace.neuron",
    "jupyter_torchprof.trace.xplane",
    "jupyter_torchprof.trace.native.digest",
    "jupyter_torchprof.analysis.findings",
    "pyarrow.pandas_compat",  # pandas imports it when it first makes an Arrow string column
)


def preload() -> None:
    """Import `PRELOADED` and load the native parser, as ``%load_ext`` runs.

    A session's first profile paid them between the end of its last step
    and its op table (pandas alone 0.2-0.3 s, the rest about 50 ms; a
    small profile's own work is a few tens of ms), once per kernel: paid
    here instead, where the session pays its imports. A failure is left for
    the run that needs the module, which says what went wrong.
    """
    import importlib

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - the run that needs it reports it
            continue
    try:
        from .trace import native

        native.library()  # found (or built once per machine) and loaded
    except Exception:  # noqa: BLE001, S110 - the parse falls back to Python, as without preloading
        pass


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
