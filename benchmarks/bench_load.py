"""Loading a Kineto trace: jupyter_torchprof vs Holistic Trace Analysis vs orjson vs gunzip.

Side by side, on the largest real traces (by bytes of JSON) in
``tests/data/kineto`` (or ``$TORCHPROF_TRACE_DIR``) and on a synthetic trace written by
``make_synthetic_trace.py`` (default 1M events in 5 steps, with log arrays,
``[memory]`` events and ~60 kernel names). The contenders, each timed from
the path of the ``.json.gz`` file, so that every one pays for the inflate:

* ``ours``: ``jupyter_torchprof.load(path)`` (read + gunzip + parse) and then
  every table: ops, kernels, steps, streams, summary, events (``wall``,
  ``cpu``); then, timed on from the same start, ``launches`` and the
  ``findings`` (``full``: the issue's "load + every table + findings");
  ``load`` is ``jupyter_torchprof.load`` alone;
* ``orjson``: read + gunzip + ``orjson.loads`` with the cyclic GC paused
  (the floor any Python JSON consumer starts from: dicts, no tables);
* ``gunzip``: read + inflate only (the floor of any reader of the file);
* ``HTA``: ``TraceAnalysis(trace_dir=...)`` (parse, build its DataFrame) and
  then ``get_gpu_kernel_breakdown()``, its kernel table (skipped if
  ``import hta`` fails).
* ``imports``: what ``ours`` imports before its timing starts (this package,
  and with it numpy and pandas), and nothing else: the least time a process
  of ours can take, whatever the trace. HTA's process time over this one is
  the most any tool built on pandas could gain on HTA at process wall.

Every run is a fresh Python process, importing the package from this
checkout (``--source`` for another tree, e.g. an older commit for a
before/after), byte-compiled first as an installed package is
(`base_tree.compile_tree`; this machine sets PYTHONDONTWRITEBYTECODE, and
compiling the lazily imported modules cost ~10 ms inside the timing). Rounds are interleaved (each round runs every contender
once, in turn), so a slow spell of the shared machine falls on all of them
alike; the figures are medians over rounds, and each ratio is the median of
the per-round ratios with its min-max. ``wall`` is measured inside the
process after its imports; ``process`` is the whole process (imports, exit)
as a user waits for it; peak RSS is the process's ``ru_maxrss`` (for ``ours``
with the findings built). ``--warm`` loads the trace once (and builds every
table and the findings) in each child before the timing starts, so lazy
imports and first-call costs fall outside it.

``--shapes`` adds the HTA traces kept in ``benchmarks/traces`` (MTIA, with
its many uncorrelated events, and df_index_resolver, a V100 trace) to the
real traces, one of each trace shape.

Usage::

    python benchmarks/bench_load.py [--events 1000000] [--steps 5] [--real 3] [--repeat 3]
        [--trace FILE ...] [--shapes] [--warm] [--no-hta] [--hta-timeout 900]
        [--source DIR [--source OLD_DIR]]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from base_tree import compile_tree, installed_like

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRACE_DIR = Path(os.environ.get("TORCHPROF_TRACE_DIR") or ROOT / "tests" / "data" / "kineto")
#: Real traces of other shapes than the test data's, from HTA's tests (see traces/README.md).
SHAPE_DIR = HERE / "traces"
TABLES = ("ops", "kernels", "steps", "streams", "summary", "events")
LABELS = {"ours": "ours", "orjson": "orjson", "gunzip": "gunzip", "hta": "HTA", "imports": "imports"}


# --------------------------------------------------------------------------- #
# children: one contender each


def _child(kind: str, path: str) -> dict:
    import resource

    out: dict = {}
    if kind == "imports":
        import jupyter_torchprof  # noqa: F401
        from jupyter_torchprof.results.profile import Profile  # noqa: F401

        t0, c0 = time.perf_counter(), time.process_time()
    elif kind == "ours":
        import jupyter_torchprof
        from jupyter_torchprof.results.profile import Profile  # noqa: F401 - import cost outside the timing

        if os.environ.get("TORCHPROF_BENCH_WARM") == "1":
            _full(jupyter_torchprof.load(path))
        t0, c0 = time.perf_counter(), time.process_time()
        p = jupyter_torchprof.load(path)
        out["parse_s"] = time.perf_counter() - t0
        out["parse_cpu_s"] = time.process_time() - c0
        for name in TABLES:
            getattr(p, name)
        out["wall_s"] = time.perf_counter() - t0
        out["cpu_s"] = time.process_time() - c0
        _full(p)
        out["full_s"] = time.perf_counter() - t0
        out["full_cpu_s"] = time.process_time() - c0
        out["events"] = len(p.events)
        out["fallback"] = getattr(p.meta, "fallback_reason", "n/a (older tree)")
    elif kind in ("orjson", "gunzip"):
        import orjson

        from jupyter_torchprof.trace.reader import read_trace_bytes

        gc.disable()
        t0, c0 = time.perf_counter(), time.process_time()
        data = read_trace_bytes(path)
        if kind == "orjson":
            out["events"] = len(orjson.loads(data)["traceEvents"])
        out["json_mb"] = len(data) / 1e6
    elif kind == "hta":
        import logging

        logging.disable(logging.WARNING)
        from hta.trace_analysis import TraceAnalysis

        folder = tempfile.mkdtemp(prefix="hta-bench-")
        os.symlink(path, os.path.join(folder, os.path.basename(path)))
        t0, c0 = time.perf_counter(), time.process_time()
        analysis = TraceAnalysis(trace_dir=folder)
        out["parse_s"] = time.perf_counter() - t0
        analysis.get_gpu_kernel_breakdown(visualize=False)
        out["events"] = int(sum(len(df) for df in analysis.t.traces.values()))
    else:
        raise SystemExit(f"unknown contender {kind}")
    out.setdefault("wall_s", time.perf_counter() - t0)
    out.setdefault("cpu_s", time.process_time() - c0)
    # VmHWM, not the parent's ru_maxrss of the child: Linux carries the
    # high-water mark across fork + exec, so a big parent inflates it.
    with open("/proc/self/status") as fh:
        hwm = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    out["peak_rss_mb"] = hwm / 1e3
    # Worker processes (if a contender used any) count towards its memory.
    out["children_maxrss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e3
    return out


def _full(p) -> None:
    """Every table, the launches and the findings of Profile ``p`` (those an older tree has)."""
    for name in (*TABLES, "launches", "findings"):
        if hasattr(type(p), name):
            getattr(p, name)


# --------------------------------------------------------------------------- #
# parent


def run_contender(kind: str, path: Path, timeout: float, source: Path) -> dict:
    """Run one contender in a fresh process; add its process wall and peak RSS (MB)."""
    env = installed_like(
        dict(os.environ, PYTHONPATH=os.pathsep.join([str(source), os.environ.get("PYTHONPATH", "")]))
    )
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--child", kind, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=str(source),
        env=env,
    )
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            return {"timed_out": True, "wall_s": timeout}
        time.sleep(0.02)
    process_s = time.perf_counter() - start
    out_text = proc.stdout.read().decode() if proc.stdout else ""
    if status != 0 or not out_text.strip():
        return {"failed": True, "status": status}
    result = json.loads(out_text.strip().splitlines()[-1])
    result["process_s"] = process_s
    result["peak_rss_mb"] = max(result["peak_rss_mb"], result.get("children_maxrss_mb", 0.0))
    return result


def _ok(r: dict) -> bool:
    return "wall_s" in r and not r.get("timed_out") and not r.get("failed")


#: A contender: its label, what the child runs, and the tree it imports the package from.
Contender = tuple[str, str, Path]


def interleaved(contenders: list[Contender], path: Path, repeat: int, hta_timeout: float) -> dict:
    """``repeat`` rounds, each running every contender once, in turn.

    Each round starts one contender further along: whichever runs first
    in a round was measured 5-8 % slower (two trees of the same code,
    swapped, each looked slower when first).
    """
    runs: dict[str, list[dict]] = {label: [] for label, _, _ in contenders}
    for i in range(repeat):
        for label, kind, source in rotated(contenders, i):
            runs[label].append(run_contender(kind, path, hta_timeout if kind == "hta" else 3600, source))
    return runs


def rotated(items: list, round_: int) -> list:
    """``items`` in the order round ``round_`` runs them: each round starts one further along."""
    k = round_ % len(items)
    return items[k:] + items[:k]


def median_of(runs: list[dict], key: str) -> str:
    values = [r[key] for r in runs if _ok(r) and key in r]
    if not values:
        return "timed out" if any(r.get("timed_out") for r in runs) else "-"
    return f"{statistics.median(values):.2f}"


def ratio_of(a: list[dict], b: list[dict], key: str, key_b: str | None = None) -> str:
    """Median over rounds of a[i][key] / b[i][key_b or key] (runs of the same round), with min-max."""
    kb = key_b or key
    ratios = [
        x[key] / y[kb] for x, y in zip(a, b, strict=True) if _ok(x) and _ok(y) and key in x and y.get(kb)
    ]
    if not ratios:
        return "-"
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


def real_traces(count: int) -> list[Path]:
    """The ``count`` largest real traces, by bytes of JSON."""
    from jupyter_torchprof.trace.reader import read_trace_bytes

    sized = [(len(read_trace_bytes(p)), p) for p in TRACE_DIR.glob("**/*.json.gz")]
    return [p for _, p in sorted(sized, key=lambda sp: -sp[0])[:count]]


def shape_traces() -> list[Path]:
    """The HTA traces kept in ``benchmarks/traces`` (other shapes than the test data's)."""
    return sorted(SHAPE_DIR.glob("*.json.gz"))


def bench(path: Path, contenders: list[Contender], repeat: int, hta_timeout: float) -> None:
    runs = interleaved(contenders, path, repeat, hta_timeout)
    json_mb = median_of(runs["gunzip"], "json_mb") if "gunzip" in runs else "?"
    print(
        f"\n== {path.name}: {path.stat().st_size / 1e6:.1f} MB on disk, {json_mb} MB of JSON, {repeat} rounds"
    )
    ours = [label for label, kind, _ in contenders if kind == "ours"]
    for label in ours:
        fallback = {r.get("fallback") for r in runs[label] if _ok(r)} - {None}
        if fallback:
            print(f"   ({label} left the fast path: {sorted(map(str, fallback))})")
    print(
        f"{'contender':10s} {'events':>9s} {'wall s':>8s} {'cpu s':>8s} {'full cpu s':>11s} {'process s':>10s}"
        f" {'peak RSS MB':>12s}"
    )
    for label, _, _ in contenders:
        r = runs[label]
        events = next((x.get("events") for x in r if _ok(x) and "events" in x), "-")
        print(
            f"{label:10s} {events!s:>9s} {median_of(r, 'wall_s'):>8s} {median_of(r, 'cpu_s'):>8s}"
            f" {median_of(r, 'full_cpu_s'):>11s} {median_of(r, 'process_s'):>10s} {median_of(r, 'peak_rss_mb'):>12s}"
        )

    def line(a: str, b: str, keys: tuple[str, ...] = ("wall_s", "cpu_s", "process_s", "peak_rss_mb")) -> str:
        names = {"wall_s": "wall", "cpu_s": "cpu", "process_s": "process", "peak_rss_mb": "peak RSS"}
        return f"{a} / {b}: " + ", ".join(f"{names[k]} {ratio_of(runs[a], runs[b], k)}" for k in keys)

    for other in ours[1:]:
        print(line(other, ours[0]))
    if "HTA" in runs:
        print(line("HTA", "ours"))
        print(line("HTA", "imports", ("process_s",)) + " (the most a pandas-based reader can gain on HTA)")
    print(line("ours", "orjson"))
    print(line("ours", "gunzip", ("wall_s", "cpu_s")) + " (goal 1: <= 4x)")
    for label in ours:
        print(gunzip_ratios(runs[label], runs["gunzip"], label))


def gunzip_ratios(mine: list[dict], gz: list[dict], label: str) -> str:
    """load / gunzip and load + every table + findings / gunzip, by CPU time, per round."""
    return (
        f"{label} / gunzip (cpu): load {ratio_of(mine, gz, 'parse_cpu_s', 'cpu_s')},"
        f" load+tables {ratio_of(mine, gz, 'cpu_s')},"
        f" load+tables+findings {ratio_of(mine, gz, 'full_cpu_s', 'cpu_s')} (issue 25: <= 4x real, <= 3x 1M)"
    )


def synthetic_trace(out: Path, events: int, steps: int) -> Path:
    """The synthetic trace of ``events`` in ``steps`` in ``out``, written by make_synthetic_trace.py if absent."""
    sys.path.insert(0, str(HERE))
    from make_synthetic_trace import synthetic_name

    path = out / synthetic_name(events, steps)
    if not path.exists():
        # In a process of its own: the text of a big trace would stay in this
        # process's memory, which every contender forked from here would count.
        subprocess.run(
            [sys.executable, str(HERE / "make_synthetic_trace.py"), "--events", str(events)]
            + ["--steps", str(steps), "--out", str(out)],
            check=True,
        )
    return path


def _hta_installed(source: Path) -> bool:
    probe = subprocess.run([sys.executable, "-c", "import hta"], capture_output=True, cwd=str(source))
    return probe.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--events", type=int, default=1_000_000, help="size of the synthetic trace (0: none)")
    parser.add_argument("--steps", type=int, default=5, help="ProfilerSteps of the synthetic trace (1-10)")
    parser.add_argument("--real", type=int, default=3, help="how many of the largest real traces")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--no-hta", action="store_true", help="leave HTA out")
    parser.add_argument("--hta-timeout", type=float, default=900, help="seconds HTA may take per run")
    parser.add_argument("--trace", type=Path, action="append", help="trace(s) to use instead of the defaults")
    parser.add_argument("--shapes", action="store_true", help="add the HTA traces in benchmarks/traces")
    parser.add_argument("--warm", action="store_true", help="load once in each child before timing")
    parser.add_argument(
        "--source",
        type=Path,
        action="append",
        help="tree to import jupyter_torchprof from (default: this checkout); given twice or more,"
        " ours runs once per tree in each round (ours, ours@2, ...), for a before/after",
    )
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "torchprof-bench")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child)))
        return

    sources = [src.resolve() for src in (args.source or [ROOT])]
    for src in sources:
        compile_tree(src)
    source = sources[0]
    traces = list(args.trace or [])
    if not traces:
        traces = real_traces(args.real)
        if not traces:
            print(f"(no real traces in {TRACE_DIR}; synthetic only)")
        if args.events:
            traces.append(synthetic_trace(args.out, args.events, args.steps))
    if args.shapes:
        traces += shape_traces()
    if args.warm:
        os.environ["TORCHPROF_BENCH_WARM"] = "1"
    contenders: list[Contender] = [("ours", "ours", source)]
    contenders += [(f"ours@{i + 2}", "ours", src) for i, src in enumerate(sources[1:])]
    contenders += [(LABELS[k], k, source) for k in ("orjson", "gunzip", "imports")]
    if args.no_hta:
        pass
    elif _hta_installed(source):
        contenders.append(("HTA", "hta", source))
    else:
        print("(HTA is not installed: pip install HolisticTraceAnalysis)")
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f},"
        f" package from {', '.join(map(str, sources))}"
    )
    for path in traces:
        bench(path.resolve(), contenders, args.repeat, args.hta_timeout)


if __name__ == "__main__":
    main()
