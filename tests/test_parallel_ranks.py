"""Ranks parsed in parallel: worker processes or a Dask cluster give what one process gives.

The folder holds copies of real traces with their ``distributedInfo.rank``
rewritten (written to a temporary folder, never beside the shared traces),
so the job has ranks of very different step times and a straggler.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import subprocess
import sys
import time
import warnings

import pandas as pd
import pytest
from tracefiles import ROOT, assert_same_findings, raw_events, real_trace, write_rank_folder

from jupyter_torchprof import load
from jupyter_torchprof.results.parallel import RankDigest, digest_files
from jupyter_torchprof.results.profile import Profile
from jupyter_torchprof.results.ranks import RankSet

#: Rank -> the real trace its copy is made from.
SOURCES = {
    0: "a100_nccl_rank0.pt.trace.json.gz",
    1: "a100_nccl_rank0.pt.trace.json.gz",
    2: "gp100_sgd_step_user_annotation.pt.trace.json.gz",
    3: "mi250_rocm_train.pt.trace.json.gz",
}


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return write_rank_folder(tmp_path_factory.mktemp("job"), SOURCES)


def _in_one_process(folder) -> RankSet:
    """The reference: every rank a full Profile, loaded one after another here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RankSet([Profile.from_file(f) for f in sorted(folder.iterdir())], name=folder.name)


def _same(a: RankSet, b: RankSet) -> None:
    pd.testing.assert_frame_equal(a.table, b.table)
    assert a.stragglers == b.stragglers
    assert_same_findings(a.findings, b.findings)


@pytest.fixture(scope="module")
def reference(job):
    return _in_one_process(job)


def test_reference_matches_the_raw_files(job, reference):
    # Independent of the parser: step counts and step times from the json module.
    table = reference.table.set_index("rank")
    assert sorted(table.index) == sorted(SOURCES)
    for rank in (0, 1):  # every ProfilerStep of the A100 trace is a full step
        raw = [e for e in raw_events(job / f"rank{rank}.pt.trace.json.gz") if e.get("ph") == "X"]
        steps = [e["dur"] for e in raw if e["name"].startswith("ProfilerStep#")]
        assert table.loc[rank, "steps"] == len(steps)
        assert table.loc[rank, "wall_per_step_us"] == pytest.approx(sum(steps) / len(steps))
    assert reference.stragglers  # ranks of such different step times hold a straggler


def test_worker_processes_give_the_same_tables_and_findings(job, reference):
    digests, errors = digest_files(sorted(job.iterdir()), workers=2, here=False)
    assert not errors
    assert os.getpid() not in {d.pid for d in digests}  # every rank parsed in a worker
    ranks = RankSet(digests=digests, name=job.name)
    _same(ranks, reference)
    for i in range(len(ranks)):
        ref = reference.tables(i)
        for name, table in ranks.tables(i).items():
            pd.testing.assert_frame_equal(table, ref[name])
    assert ranks.summaries == reference.summaries


def test_load_shares_the_ranks_with_its_workers(job, reference):
    ranks = load(str(job), workers=2)
    assert isinstance(ranks, RankSet)
    assert all(isinstance(e, RankDigest) for e in ranks._entries)  # no rank's events kept
    assert not ranks._loaded
    _same(ranks, reference)


def test_in_process_path_gives_the_same(job, reference):
    ranks = load(str(job), workers=1)
    assert {e.pid for e in ranks._entries} == {os.getpid()}
    _same(ranks, reference)


def test_events_of_a_rank_load_on_demand(job, reference):
    ranks = load(str(job), workers=2)
    p = ranks[2]
    assert list(ranks._loaded) == [2]
    assert p.meta.rank == 2 and p.trace_path == job / "rank2.pt.trace.json.gz"
    pd.testing.assert_frame_equal(p.events, reference[2].events)
    assert ranks[2] is p  # kept once loaded


def test_unreadable_rank_is_skipped_in_the_workers(job, tmp_path):
    folder = tmp_path / "job"
    folder.mkdir()
    for f in job.iterdir():
        (folder / f.name).symlink_to(f)
    (folder / "broken.pt.trace.json").write_text('{"traceEvents": [{"ph": "X", "name": "a"')
    with pytest.warns(UserWarning, match="broken.pt.trace.json"):
        ranks = load(str(folder), workers=2)
    assert len(ranks) == len(SOURCES)
    assert any("broken.pt.trace.json" in n for n in ranks.notes)


def test_no_readable_rank_raises_the_first_error(tmp_path):
    for i in range(2):
        (tmp_path / f"bad{i}.pt.trace.json").write_text("[")
    digests, errors = digest_files(sorted(tmp_path.iterdir()), workers=2)
    assert not digests and len(errors) == 2
    assert all("bad" in str(e) for e in errors)


UNGUARDED = """\
import os
import time

import jupyter_torchprof
from jupyter_torchprof.results import parallel

first = jupyter_torchprof.load({folder!r}, workers=3)
# the workers still starting when this process had parsed every rank are
# kept once started: the next load hands them ranks from its start
deadline = time.monotonic() + 240
while len(parallel.kept_workers()) < 2 and time.monotonic() < deadline:
    time.sleep(0.1)
again = jupyter_torchprof.load({folder!r}, workers=3)
print(len(first), len(again), sum(p != os.getpid() for p in again.parsed_by), flush=True)
"""


def test_script_without_main_guard_gets_its_workers_quietly(job, tmp_path):
    # A plain script, no  if __name__ == "__main__":  guard. spawn's workers
    # imported it again and failed with a traceback (then this process
    # parsed every rank alone); ours never import it.
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED.format(folder=str(job)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path
    )
    assert "Traceback" not in proc.stderr and "RuntimeError" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, again, by_workers = (int(x) for x in proc.stdout.split())
    assert first == again == len(SOURCES)
    assert by_workers >= 1  # the parallel path ran: ranks parsed in the workers


def test_a_script_that_exits_right_after_its_load_leaves_quietly(tmp_path):
    # This process parses both tiny ranks long before its workers have
    # imported pandas: they start into a closed pipe, and must say nothing.
    doc = json.loads(gzip.decompress(real_trace("cpu_only.pt.trace.json.gz").read_bytes()))
    for rank in range(2):
        doc["distributedInfo"] = {**doc["distributedInfo"], "rank": rank, "world_size": 2}
        (tmp_path / f"rank{rank}.pt.trace.json").write_text(json.dumps(doc))
    script = tmp_path / "quick.py"
    script.write_text(
        f"import jupyter_torchprof\nprint(len(jupyter_torchprof.load({str(tmp_path)!r}, workers=3)))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0 and proc.stdout.split() == ["2"], proc.stderr[-2000:]
    # run() returned once the workers, which write to the same stderr, had exited too
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr, proc.stderr[-2000:]


def test_a_worker_let_go_while_it_starts_exits_quietly():
    # The parent stopped listening before the worker said it was ready (a
    # script exiting right after its load, with its workers still importing).
    from jupyter_torchprof.results.rank_worker import BOOTSTRAP

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-c", BOOTSTRAP],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    proc.stdout.close()
    pickle.dump(list(sys.path), proc.stdin)
    proc.stdin.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0, err[-2000:]
    assert "Traceback" not in err, err[-2000:]


def test_dask_cluster_gives_the_same(job, reference):
    distributed = pytest.importorskip("dask.distributed", reason="dask[distributed] is not installed")
    with (
        distributed.LocalCluster(
            processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None, host="127.0.0.1"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        ranks = load(str(job), client=client)
        workers = client.run(lambda: __import__("os").getpid())
        packages = client.run(lambda: __import__("jupyter_torchprof").__file__)
    assert len(set(workers.values())) == 2
    # the workers ran this checkout's code, not some other installed copy
    assert set(packages.values()) == {__import__("jupyter_torchprof").__file__}
    _same(ranks, reference)


def test_the_next_load_finds_the_workers_started(job, reference, monkeypatch):
    from jupyter_torchprof.results import parallel

    parallel.close_workers()
    first = digest_files(sorted(job.iterdir()), workers=2, here=False)[0]
    again = digest_files(sorted(job.iterdir()), workers=2, here=False)[0]
    assert {d.pid for d in again} <= {d.pid for d in first}  # the same processes, not new ones
    _same(RankSet(digests=again, name=job.name), reference)
    # more workers: the kept ones (started, they take the ranks first) and a new one
    other = digest_files(sorted(job.iterdir()), workers=3, here=False)[0]
    assert {d.pid for d in other} & {d.pid for d in first}
    deadline = time.monotonic() + 240
    while len(parallel.kept_workers()) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(parallel.kept_workers()) == 3
    parallel.close_workers()
    assert not parallel.kept_workers()


def test_idle_workers_exit(job, monkeypatch):
    from jupyter_torchprof.results import parallel

    parallel.close_workers()
    monkeypatch.setattr(parallel, "POOL_IDLE_S", 0.2)
    digests = digest_files(sorted(job.iterdir()), workers=2, here=False)[0]
    pids = {d.pid for d in digests}
    deadline = time.monotonic() + 30
    while parallel.kept_workers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not parallel.kept_workers()
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def test_a_worker_that_dies_is_replaced(job, reference):
    from jupyter_torchprof.results import parallel

    parallel.close_workers()
    first = digest_files(sorted(job.iterdir()), workers=2, here=False)[0]
    for pid in {d.pid for d in first}:
        os.kill(pid, 9)
    again = digest_files(sorted(job.iterdir()), workers=2, here=False)[0]
    assert not {d.pid for d in again} & {d.pid for d in first}
    _same(RankSet(digests=again, name=job.name), reference)
    parallel.close_workers()


def test_ctrl_c_during_a_load_lets_the_workers_go_and_the_next_load_works(job, reference, monkeypatch):
    from jupyter_torchprof.results import parallel

    parallel.close_workers()
    real = parallel.digest_file
    calls = []

    def interrupted(path, parts=()):
        calls.append(path)
        raise KeyboardInterrupt  # the user's Ctrl-C, while this process parses its first rank

    monkeypatch.setattr(parallel, "digest_file", interrupted)
    with pytest.raises(KeyboardInterrupt):
        digest_files(sorted(job.iterdir()), workers=3)  # two workers and this process
    assert calls and not parallel.kept_workers()  # the workers were let go, not kept busy
    monkeypatch.setattr(parallel, "digest_file", real)
    _same(load(str(job), workers=3), reference)
    parallel.close_workers()


def test_kept_workers_exit_when_the_kernel_is_killed(job, tmp_path):
    # kill -9 (or the OOM killer) runs no exit handler: the workers must notice on their own.
    script = tmp_path / "killed.py"
    script.write_text(
        "import time\n"
        "if __name__ == '__main__':\n"
        "    import jupyter_torchprof\n"
        "    from jupyter_torchprof.results import parallel\n"
        f"    jupyter_torchprof.load({str(job)!r}, workers=3)\n"
        "    while len(parallel.kept_workers()) < 2:\n"
        "        time.sleep(0.1)\n"
        "    print(*parallel.kept_workers(), flush=True)\n"
        "    time.sleep(600)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        workers = [int(w) for w in proc.stdout.readline().split()]
        assert len(workers) == 2 and all(_alive(w) for w in workers)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers)
