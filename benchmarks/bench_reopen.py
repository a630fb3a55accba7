"""Reopening a run in the sidebar: parsing its trace (cold) vs the tables kept beside it (cached).

A real Jupyter server (a subprocess, our extension on, token auth) serves a
run store; requests go through HTTP as the sidebar's do. Every request hits
a run folder the server has never seen (fresh copies each round of the trace
and its ``run.json``: the store serves no hard-linked file), so the server's in-memory caches
never answer; what differs is only whether the run folder holds the cache
files (`jupyter_torchprof.runs.cache`):

* ``cold``: no cache files: the server parses the trace and analyses it
  (and then writes the cache, as it does);
* ``cached``: ``trace.json.gz.tables.npz`` and ``.timeline.npz`` present.

Measured, in interleaved rounds (the order of cold and cached alternates):

* ``GET runs/<id>/tables``, one run;
* ``GET runs/<id>/timeline``, one run;
* ``GET runs`` (the listing), requested back to back while 20 timeline
  requests to 20 other runs are in flight; p50 and p99 of its latency
  (cached bursts end within a few listings, so bursts on new runs repeat
  until ``MIN_SAMPLES`` listings were timed, each burst's runs removed
  after it so the store keeps its size).

Reported: medians over rounds, and the median of the per-round ratios
cold / cached with min-max. The store also holds ``--baseline`` other runs
(a listing reads every run's ``run.json``); the run count is printed.

Usage::

    python benchmarks/bench_reopen.py [--trace FILE] [--rounds 3] [--baseline 10]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT / "tests" / "data" / "kineto" / "v100_ddp_ns_timestamps.pt.trace.json.gz"
sys.path.insert(0, str(ROOT))

from jupyter_torchprof.results.profile import Profile  # noqa: E402
from jupyter_torchprof.runs import cache  # noqa: E402
from jupyter_torchprof.runs.store import TRACE_NAME, RunStore, new_run_id, run_info  # noqa: E402

LOAD = 20
MIN_SAMPLES = 30
MAX_BURSTS = 20


class Server:
    """A Jupyter server with our extension, on a free port, serving ``store``."""

    def __init__(self, workdir: Path, store: Path) -> None:
        self.token = secrets.token_hex(16)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = workdir / "config"
        config.mkdir()
        (config / "jupyter_server_config.json").write_text(
            json.dumps(
                {
                    "ServerApp": {"jpserver_extensions": {"jupyter_torchprof": True}, "open_browser": False},
                    "IdentityProvider": {"token": self.token},
                }
            )
        )
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(config),
            "TORCHPROF_RUN_DIR": str(store),
            "PYTHONPATH": str(ROOT),
        }
        cmd = [sys.executable, "-m", "jupyter_server", f"--ServerApp.port={self.port}"]
        cmd += ["--ServerApp.port_retries=0", f"--ServerApp.root_dir={workdir}", "--ServerApp.ip=127.0.0.1"]
        cmd += ["--allow-root"]  # containers run as root; harmless elsewhere
        self.log = open(workdir / "server.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    def _wait_ready(self) -> None:
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Jupyter server exited ({self.proc.returncode}); see server.log")
            try:
                self.get("jupyter-torchprof/runs")
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("the Jupyter server did not start (see server.log)")

    def get(self, path: str) -> float:
        """Seconds for one GET (body read), asserting 200."""
        req = urllib.request.Request(self.url(path), headers={"Authorization": f"token {self.token}"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=600) as resp:
            resp.read()
            assert resp.status == 200, resp.status
        return time.perf_counter() - t0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def make_template(store: RunStore, source: Path) -> Path:
    """One run folder as the store keeps a loaded trace: the trace, run.json and the table cache."""
    from jupyter_torchprof.runs.keep import write_table_cache

    folder = store.create()
    shutil.copyfile(source, folder / TRACE_NAME)
    profile = Profile.from_file(folder / TRACE_NAME)
    store.write_info(folder, {**run_info(profile, kind="load"), "status": "done"})
    write_table_cache(profile, folder / TRACE_NAME)
    return folder


def copies(store: RunStore, template: Path, n: int, cached: bool) -> list[str]:
    """``n`` new run folders with copies of the template's trace, with or without its caches.

    Copies, not hard links: the store treats a file with more than one link
    as missing (a store copied with ``cp -al``), and answered 404 here. The
    copy keeps the trace's mtime, which the cache files record and must match.
    """
    ids = []
    trace = template / TRACE_NAME
    extra = [cache.tables_path(trace), cache.timeline_path(trace)] if cached else []
    for _ in range(n):
        run_id = new_run_id()
        folder = store.root / run_id
        folder.mkdir()
        shutil.copy2(trace, folder / TRACE_NAME)  # with its mtime, which the caches must match
        shutil.copyfile(template / "run.json", folder / "run.json")
        for f in extra:
            shutil.copyfile(f, folder / f.name)
        ids.append(run_id)
    return ids


def listing_under_load(
    server: Server, ids: list[str], endpoint: str = "timeline"
) -> tuple[list[float], float]:
    """Listing latencies while ``len(ids)`` requests (timelines) are in flight; and the burst's wall time.

    One asyncio client (tornado's, non-blocking) sends the burst and the
    listings: client threads would compete for the GIL with the very
    request being timed and inflate its latency.
    """
    import asyncio

    from tornado.httpclient import AsyncHTTPClient

    async def burst() -> tuple[list[float], float]:
        client = AsyncHTTPClient(force_instance=True, max_clients=len(ids) + 4)
        suffix = f"/{endpoint}" if endpoint else ""
        headers = {"Authorization": f"token {server.token}"}

        async def get(path: str) -> float:
            t0 = time.perf_counter()
            resp = await client.fetch(server.url(path), headers=headers, request_timeout=600)
            assert resp.code == 200, resp.code
            return time.perf_counter() - t0

        t0 = time.perf_counter()
        timelines = [asyncio.ensure_future(get(f"jupyter-torchprof/runs/{i}{suffix}")) for i in ids]
        lat = []
        while not all(t.done() for t in timelines):
            lat.append(await get("jupyter-torchprof/runs"))
        await asyncio.gather(*timelines)
        wall = time.perf_counter() - t0
        client.close()
        return lat, wall

    return asyncio.run(burst())


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


def run_round(server: Server, store: RunStore, template: Path, r: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {"cold": {}, "cached": {}}
    runs = {kind: copies(store, template, 2 + LOAD, kind == "cached") for kind in out}
    order = ["cold", "cached"] if r % 2 == 0 else ["cached", "cold"]
    for kind in order:
        out[kind]["tables"] = server.get(f"jupyter-torchprof/runs/{runs[kind][0]}/tables")
    for kind in order:
        out[kind]["timeline"] = server.get(f"jupyter-torchprof/runs/{runs[kind][1]}/timeline")
    for kind in order:
        lat, wall = listing_under_load(server, runs[kind][2:])
        bursts = 1
        # A burst of cached timelines is over in a few listings: more bursts, on new runs,
        # until the percentiles rest on at least MIN_SAMPLES listings.
        while len(lat) < MIN_SAMPLES and bursts < MAX_BURSTS:
            more = copies(store, template, LOAD, kind == "cached")
            lat += listing_under_load(server, more)[0]
            for run_id in more:  # the store keeps its size: a listing reads every run
                shutil.rmtree(store.root / run_id)
            bursts += 1
        out[kind].update(p50=pct(lat, 50), p99=pct(lat, 99), samples=len(lat), burst=wall, bursts=bursts)
    for kind in out:
        for run_id in runs[kind]:
            shutil.rmtree(store.root / run_id)
    # For reference, on a store of the same size: the listing with nothing in flight, and
    # while 20 requests for a run's run.json (no analysis at all) are in flight.
    idle = copies(store, template, 2 * (2 + LOAD), cached=True)
    lat = [server.get("jupyter-torchprof/runs") for _ in range(MIN_SAMPLES)]
    out["idle"] = {"p50": pct(lat, 50), "p99": pct(lat, 99)}
    lat = []
    while len(lat) < MIN_SAMPLES:
        lat += listing_under_load(server, idle[:LOAD], endpoint="")[0]
    out["info"] = {"p50": pct(lat, 50), "p99": pct(lat, 99)}
    for run_id in idle:
        shutil.rmtree(store.root / run_id)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", type=int, default=10, help="other runs kept in the store")
    ap.add_argument("--verbose", action="store_true", help="print every round's figures")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="torchprof-reopen-"))
    store = RunStore(work / "runs")
    template = make_template(store, args.trace)
    server = Server(work, store.root)
    try:
        # The template's timeline cache, written by the server itself; the baseline runs.
        server.get(f"jupyter-torchprof/runs/{template.name}/timeline")
        assert cache.timeline_path(template / TRACE_NAME).is_file(), "the server wrote no timeline cache"
        copies(store, template, args.baseline, cached=True)
        server.get("jupyter-torchprof/runs")  # warm imports of the listing
        rounds = [run_round(server, store, template, r) for r in range(args.rounds)]
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    if args.verbose:
        for i, r in enumerate(rounds):
            print(f"round {i}: {json.dumps(r)}")
    report(args, rounds)


def report(args: argparse.Namespace, rounds: list[dict[str, dict[str, float]]]) -> None:
    size = args.trace.stat().st_size / 1e6
    print(f"trace {args.trace.name} ({size:.1f} MB gz), {args.rounds} interleaved rounds,")
    print(
        f"store of {args.baseline + 1 + 2 * (2 + LOAD)} runs during a round; times in ms (median over rounds)"
    )
    print(f"{'':34}{'cold':>10}{'cached':>10}   cold/cached median [min-max]")
    rows = [
        ("GET tables", "tables"),
        ("GET timeline", "timeline"),
        (f"GET runs p50, {LOAD} timelines in flight", "p50"),
        (f"GET runs p99, {LOAD} timelines in flight", "p99"),
        (f"the {LOAD} timeline requests (wall)", "burst"),
    ]
    for label, key in rows:
        cold = [r["cold"][key] for r in rounds]
        cached = [r["cached"][key] for r in rounds]
        ratios = [a / b for a, b in zip(cold, cached, strict=True)]
        print(
            f"{label:34}{statistics.median(cold) * 1e3:10.0f}{statistics.median(cached) * 1e3:10.0f}"
            f"   {statistics.median(ratios):6.1f}x [{min(ratios):.1f}-{max(ratios):.1f}]"
        )
    idle = {k: statistics.median([r["idle"][k] for r in rounds]) * 1e3 for k in ("p50", "p99")}
    print(f"GET runs with nothing in flight: p50 {idle['p50']:.0f} ms, p99 {idle['p99']:.0f} ms")
    info = {k: statistics.median([r["info"][k] for r in rounds]) * 1e3 for k in ("p50", "p99")}
    print(
        f"GET runs, {LOAD} GET runs/<id> (run.json only) in flight: p50 {info['p50']:.0f} ms, p99 {info['p99']:.0f} ms"
    )
    for k in ("cold", "cached"):
        samples = [int(r[k]["samples"]) for r in rounds]
        bursts = [int(r[k]["bursts"]) for r in rounds]
        print(
            f"{k}: listing samples per round {min(samples)}-{max(samples)}, bursts {min(bursts)}-{max(bursts)}"
        )
    worst = {k: max(r["cached"][k] for r in rounds) * 1e3 for k in ("tables", "timeline", "p99")}
    print(
        "targets (issue 18, cached, worst round): "
        f"tables {worst['tables']:.0f} ms (< 200), timeline {worst['timeline']:.0f} ms (< 500), "
        f"listing p99 {worst['p99']:.0f} ms (< 150)"
    )


if __name__ == "__main__":
    main()
