"""Several ranks: a folder of traces, the cross-rank table, stragglers."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
from tracefiles import assert_same_findings, raw_events, real_trace, union_length

from jupyter_torchprof import load
from jupyter_torchprof.analysis.ranks import STRAGGLER_RATIO, rank_row
from jupyter_torchprof.results.parallel import DIGEST_TABLES
from jupyter_torchprof.results.profile import Profile
from jupyter_torchprof.results.ranks import RankSet

#: Real traces of different ranks (each names its own in distributedInfo).
RANK_FILES = [
    "a100_nccl_rank0.pt.trace.json.gz",
    "diff_pair/test.pt.trace.json.gz",
    "diff_pair/control.pt.trace.json.gz",
]


def _doc(path):
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


@pytest.fixture
def rank_folder(tmp_path):
    """Symlinks to shared real traces of three ranks (the traces themselves are not copied)."""
    folder = tmp_path / "job"
    folder.mkdir()
    for name in RANK_FILES:
        src = real_trace(name)
        (folder / f"{src.parent.name}_{src.name}").symlink_to(src)
    return folder


def test_folder_of_ranks(rank_folder):
    ranks = load(str(rank_folder))
    assert isinstance(ranks, RankSet)
    expected = {}
    for name in RANK_FILES:
        path = real_trace(name)
        expected[_doc(path)["distributedInfo"]["rank"]] = path
    assert sorted(ranks.ranks) == sorted(expected)
    table = ranks.table.set_index("rank")
    walls = {}
    for rank, path in expected.items():
        raw = [e for e in raw_events(path) if e.get("ph") == "X"]
        steps = [e for e in raw if e["name"].startswith("ProfilerStep#")]
        # the collectives the steps launched: not those queued before the trace started
        # (no launch recorded, correlation id below the first runtime call's)
        calls = {e["args"]["correlation"] for e in raw if e.get("cat") == "cuda_runtime"}
        comm = sum(
            e["dur"]
            for e in raw
            if e.get("cat") == "kernel"
            and "nccl" in e["name"].lower()
            and (e["args"]["correlation"] in calls or e["args"]["correlation"] >= min(calls))
        )
        row = table.loc[rank]
        assert row["steps"] == len(steps)
        assert row["wall_per_step_us"] == pytest.approx(sum(e["dur"] for e in steps) / len(steps))
        assert row["comm_per_step_us"] == pytest.approx(comm / len(steps))
        walls[rank] = row["wall_per_step_us"]
        assert ranks[rank].trace_path.name.endswith(path.name)
    median = float(np.median(list(walls.values())))
    for rank, wall in walls.items():
        if wall / median > STRAGGLER_RATIO:
            assert table.loc[rank, "straggler"]
    text = ranks.text()
    for rank in expected:
        assert f"\n{rank} " in text
    assert "text/html" in ranks._repr_mimebundle_()


def test_unreadable_rank_is_skipped_with_a_warning(rank_folder):
    bad = rank_folder / "broken.pt.trace.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "a"')
    with pytest.warns(UserWarning, match="broken.pt.trace.json"):
        ranks = load(str(rank_folder))
    assert len(ranks) == len(RANK_FILES)
    assert any("broken.pt.trace.json" in n for n in ranks.notes)
    assert "broken.pt.trace.json" in ranks.text()


def test_magic_load_folder(shell, rank_folder):
    shell.run_line_magic("torchprof", f"--load {rank_folder} --quiet")
    result = shell.user_ns["_torchprof"]
    assert isinstance(result, RankSet)
    assert sorted(result.ranks) == sorted(_doc(real_trace(n))["distributedInfo"]["rank"] for n in RANK_FILES)


# --------------------------------------------------------------------------- #
# many tiny ranks: tables and findings wait until asked for

TINY_RANKS = 64


@pytest.fixture(scope="module")
def tiny_job(tmp_path_factory):
    """64 copies of the small CPU trace, each naming its own rank (written to tmp)."""
    folder = tmp_path_factory.mktemp("tiny")
    doc = _doc(real_trace("cpu_only.pt.trace.json.gz"))
    for rank in range(TINY_RANKS):
        doc["distributedInfo"] = {**doc["distributedInfo"], "rank": rank, "world_size": TINY_RANKS}
        with gzip.open(folder / f"rank{rank}.pt.trace.json.gz", "wt") as fh:
            json.dump(doc, fh)
    return folder


def _built(ranks: RankSet) -> tuple[int, int]:
    """How many ranks have their findings, and how many their tables, built."""
    entries = ranks._entries
    return sum(e.findings is not None for e in entries), sum(bool(e.tables) for e in entries)


def test_many_tiny_ranks_build_tables_and_findings_only_when_asked(tiny_job):
    ranks = load(str(tiny_job))
    assert ranks.ranks == list(range(TINY_RANKS))
    table, _ = ranks.table, ranks.text()  # what the set shows on its own
    assert _built(ranks) == (0, 0)
    # the summary is right without them: step time from the json module, the eager row
    raw = [e for e in raw_events(tiny_job / "rank0.pt.trace.json.gz") if e.get("ph") == "X"]
    steps = [e["dur"] for e in raw if e["name"].startswith("ProfilerStep#")]
    eager = Profile.from_file(tiny_job / "rank5.pt.trace.json.gz")
    row = rank_row(eager)
    assert (table["steps"] == len(steps)).all()
    assert table["wall_per_step_us"].to_numpy() == pytest.approx(sum(steps) / len(steps))
    for col in ("cpu_busy_per_step_us", "comm_per_step_us", "work_per_step_us"):
        assert table[col].to_numpy() == pytest.approx(row[col]), col
    assert not ranks.stragglers and not table["straggler"].any()  # identical ranks
    assert _built(ranks) == (0, 0)

    tables = ranks.tables(5)
    assert _built(ranks) == (0, 1)  # that rank's alone
    for name in DIGEST_TABLES:
        pd.testing.assert_frame_equal(tables[name], getattr(eager, name))
    assert ranks.tables(5) is tables  # kept

    found = ranks.findings
    assert _built(ranks) == (TINY_RANKS, 1)
    assert sorted(set(found["rank"])) == list(range(TINY_RANKS))
    assert_same_findings(ranks._entries[5].findings, eager.findings)
    # the other ranks' differ from rank 5's only where they name their rank
    # ("stragglers not checked: only rank r of 64 loaded", dropped once merged)
    assert not (found["rule"] == "stragglers").any()
    same = eager.findings[eager.findings["rule"] != "stragglers"].reset_index(drop=True)
    for e in ranks._entries:
        assert_same_findings(e.findings[e.findings["rule"] != "stragglers"].reset_index(drop=True), same)


# --------------------------------------------------------------------------- #
# a real two-rank job on this machine (gloo), one rank doing more work

WORKER = textwrap.dedent(
    """
    import os, sys
    import torch, torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    rank = int(os.environ["RANK"])
    torch.set_num_threads(1)  # two ranks share this machine's cores
    dist.init_process_group("gloo", rank=rank, world_size=2)
    a = torch.randn(256, 256)
    t = torch.ones(1 << 14)
    handler = tensorboard_trace_handler(sys.argv[1], worker_name=f"rank{rank}", use_gzip=True)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=3),
                 on_trace_ready=handler) as prof:
        for _ in range(4):
            # rank 1 is the straggler: twelve times the work of rank 0
            for _ in range(60 if rank == 1 else 5):
                a = torch.tanh(a @ a)
            dist.all_reduce(t)
            prof.step()
    dist.destroy_process_group()
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gloo_job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gloo")
    script = folder / "worker.py"
    script.write_text(WORKER)
    out = folder / "traces"
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": "2"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(out)],
            env={**env, "RANK": str(r)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for r in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err.decode()[-2000:]
    return out


@pytest.mark.slow
def test_real_two_rank_job_shows_the_straggler(gloo_job):
    files = sorted(gloo_job.iterdir())
    assert len(files) == 2
    ranks = load(str(gloo_job))
    assert sorted(ranks.ranks) == [0, 1]
    table = ranks.table.set_index("rank")
    for f in files:
        doc = _doc(f)
        rank = doc["distributedInfo"]["rank"]
        assert table.loc[rank, "file"] == f.name
        raw = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in raw if e["name"].startswith("ProfilerStep#"))
        coll = [
            (e["ts"], e["ts"] + e["dur"])
            for e in raw
            if e["name"].startswith(("gloo:", "c10d::")) and e["cat"].lower() in ("cpu_op", "user_annotation")
        ]
        # time inside collectives, cut to each step
        comm = sum(
            union_length([(max(s, lo), min(e, hi)) for s, e in coll if e > lo and s < hi]) for lo, hi in steps
        )
        wall = sum(hi - lo for lo, hi in steps) / len(steps)
        assert table.loc[rank, "wall_per_step_us"] == pytest.approx(wall)
        assert table.loc[rank, "comm_per_step_us"] == pytest.approx(comm / len(steps), rel=1e-6, abs=1e-3)
    # Collectives make both ranks' steps about as long; the straggler is the
    # rank that works longest and waits least.
    assert table.loc[1, "work_per_step_us"] > table.loc[0, "work_per_step_us"]
    assert table.loc[1, "comm_per_step_us"] < table.loc[0, "comm_per_step_us"]
    assert bool(table.loc[1, "straggler"])
    assert not bool(table.loc[0, "straggler"])
    assert "straggler" in ranks.text()


@pytest.mark.slow
def test_work_straggler_is_a_finding(gloo_job):
    """The finding follows the work straggler even when step times are equal."""
    ranks = load(str(gloo_job))
    rows = ranks.straggler_findings
    assert list(rows["evidence"].map(lambda e: e["rank"])) == [1]
    ev = rows["evidence"].iloc[0]
    table = ranks.table.set_index("rank")
    assert ev["work_per_step_us"] == pytest.approx(table.loc[1, "work_per_step_us"])
    assert ev["work_vs_median"] > 1.1
