"""Traces where they live: load() of fsspec URLs, against a real S3 API served here and a real Dask cluster.

The S3 API is moto's server, started by this module on 127.0.0.1 (a free
port), with a recorder in front of it that notes every request's method,
path and user agent. This process marks its S3 requests with
``AWS_SDK_UA_APP_ID=torchprof-client`` (botocore writes ``app/<id>`` into the
user agent) and the Dask workers theirs with ``torchprof-dask-worker``, so the
server itself tells which process read which object: the check that the
client never reads a trace byte does not trust any code of ours.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import boto3  # the test extras: a missing package fails these tests, never skips them
import dask.distributed
import moto.server as moto_server
import pandas as pd
import pytest
from tracefiles import REAL_TRACES, ROOT, assert_same_findings, real_trace, write_rank_folder

from jupyter_torchprof import load
from jupyter_torchprof.errors import TraceError
from jupyter_torchprof.results.digest import DIGEST_TABLES
from jupyter_torchprof.results.parallel import digest_files
from jupyter_torchprof.results.profile import Profile
from jupyter_torchprof.results.ranks import RankSet

#: Rank -> the real trace its copy is made from: eight ranks of different shapes and step times.
SOURCES = {
    0: "a100_nccl_rank0.pt.trace.json.gz",
    1: "a100_nccl_rank0.pt.trace.json.gz",
    2: "gp100_sgd_step_user_annotation.pt.trace.json.gz",
    3: "mi250_rocm_train.pt.trace.json.gz",
    4: "cuda_event_sync_multi_stream.pt.trace.json.gz",
    5: "triton_kernel.pt.trace.json.gz",
    6: "cpu_only.pt.trace.json.gz",
    7: "gp100_sgd_step_user_annotation.pt.trace.json.gz",
}
BUCKET = "traces"
CLIENT_MARK = "app/torchprof-client"
WORKER_MARK = "app/torchprof-dask-worker"
SINGLE = "a100_nccl_rank0.pt.trace.json.gz"


class _S3:
    """moto's S3 API on a free local port, with every request recorded (method, path, user agent)."""

    def __init__(self) -> None:
        import logging

        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        inner = moto_server.DomainDispatcherApplication(moto_server.create_backend_app)
        self.requests: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()

        def app(environ, start_response):
            with self.lock:
                self.requests.append(
                    (
                        environ["REQUEST_METHOD"],
                        environ.get("PATH_INFO", ""),
                        environ.get("HTTP_USER_AGENT", ""),
                    )
                )
            return inner(environ, start_response)

        self.server = make_server(
            "127.0.0.1", 0, app, threaded=True, request_handler=moto_server.MotoRequestHandler
        )
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.options = {
            "endpoint_url": self.endpoint,
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"region_name": "us-east-1"},
        }
        self.client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        self.client.create_bucket(Bucket=BUCKET)

    def upload(self, local: Path, key: str) -> None:
        self.client.upload_file(str(local), BUCKET, key)

    def keys(self) -> list[str]:
        listed = self.client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
        return sorted(o["Key"] for o in listed)

    def gets(self, prefix: str, mark: str) -> list[str]:
        """Paths of the objects under ``prefix`` that the process marked ``mark`` read (GET of an object)."""
        with self.lock:
            return [
                p
                for m, p, ua in self.requests
                if m == "GET" and p.startswith(f"/{BUCKET}/{prefix}") and mark in ua
            ]

    def lists(self, mark: str) -> int:
        """Listings (GET of the bucket itself) made by the process marked ``mark``."""
        with self.lock:
            return sum(1 for m, p, ua in self.requests if m == "GET" and p == f"/{BUCKET}" and mark in ua)

    def close(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def s3():
    with pytest.MonkeyPatch.context() as mp:
        # Before any S3 client of this process exists; the Dask workers get their own mark.
        mp.setenv("AWS_SDK_UA_APP_ID", "torchprof-client")
        server = _S3()
        try:
            yield server
        finally:
            server.close()


@pytest.fixture(scope="module")
def job(tmp_path_factory, s3):
    folder = write_rank_folder(tmp_path_factory.mktemp("store") / "job8", SOURCES)
    for f in sorted(folder.iterdir()):
        s3.upload(f, f"jobs/job8/{f.name}")
    s3.upload(real_trace(SINGLE), f"single/{SINGLE}")
    return folder


@pytest.fixture(scope="module")
def reference(job):
    """The local folder, loaded as today (every rank parsed in this process)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load(str(job), workers=1, progress=False)


def _same_ranks(got: RankSet, ref: RankSet) -> None:
    pd.testing.assert_frame_equal(got.table, ref.table)
    assert got.stragglers == ref.stragglers
    assert got.ranks == ref.ranks == sorted(SOURCES)
    for i in range(len(ref)):
        mine, theirs = got.tables(i), ref.tables(i)
        assert set(mine) == set(theirs) == set(DIGEST_TABLES)
        for name in DIGEST_TABLES:
            pd.testing.assert_frame_equal(mine[name], theirs[name])


def test_reference_is_the_folder_of_eight_ranks(job, reference):
    assert isinstance(reference, RankSet) and len(reference) == len(SOURCES)
    assert reference.stragglers  # ranks of such different step times hold a straggler


def test_dask_workers_read_their_ranks_from_the_store_and_the_client_reads_no_trace_byte(s3, job, reference):
    before = s3.keys()
    url = f"s3://{BUCKET}/jobs/job8"
    with (
        dask.distributed.LocalCluster(
            processes=True,
            n_workers=2,
            threads_per_worker=1,
            dashboard_address=None,
            host="127.0.0.1",
            env={"AWS_SDK_UA_APP_ID": "torchprof-dask-worker"},
        ) as cluster,
        dask.distributed.Client(cluster) as client,
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ranks = load(url, client=client, storage_options=s3.options, progress=False)
        assert isinstance(ranks, RankSet)
        workers = set(client.run(os.getpid).values())
        packages = set(client.run(lambda: __import__("jupyter_torchprof").__file__).values())
        _same_ranks(ranks, reference)  # per-rank tables are built on the cluster too
        assert_same_findings(ranks.findings, reference.findings)
    assert len(workers) == 2 and os.getpid() not in workers
    assert packages == {__import__("jupyter_torchprof").__file__}  # this checkout's code ran there
    assert set(ranks.parsed_by) <= workers and len(set(ranks.parsed_by)) == 2  # both workers parsed ranks
    # The server's own record: this process listed the folder, and read none of its objects...
    assert s3.lists(CLIENT_MARK) >= 1, (
        "the client's requests carry its mark (else the next check proves nothing)"
    )
    assert s3.gets("jobs/", CLIENT_MARK) == []
    # ...while the workers read every rank (again for the tables and findings asked for later).
    worker_reads = s3.gets("jobs/job8/", WORKER_MARK)
    assert {p.rsplit("/", 1)[-1] for p in worker_reads} == {f"rank{r}.pt.trace.json.gz" for r in SOURCES}
    assert len(worker_reads) >= 3 * len(SOURCES)  # the load, the tables, the findings
    assert s3.keys() == before  # nothing (no table cache) written to the store
    # A rank's events, asked for here, are fetched here (the cluster is gone by now).
    p = ranks[3]
    pd.testing.assert_frame_equal(p.events, reference[3].events)
    pd.testing.assert_frame_equal(p.flows, reference[3].flows)


def test_worker_processes_here_fetch_their_own_ranks(s3, job, reference):
    urls = [f"s3://{BUCKET}/jobs/job8/rank{r}.pt.trace.json.gz" for r in SOURCES]
    digests, errors = digest_files(urls, workers=2, here=False, storage_options=s3.options, parts=("tables",))
    assert not errors
    assert os.getpid() not in {d.pid for d in digests}
    assert [d.path for d in digests] == urls  # a digest names its URL, to fetch the rank again
    ranks = RankSet(digests=digests, name="job8")
    pd.testing.assert_frame_equal(ranks.table, reference.table)
    for i in range(len(ranks)):
        for name in DIGEST_TABLES:
            pd.testing.assert_frame_equal(ranks.tables(i)[name], reference.tables(i)[name])


def test_a_single_trace_at_an_s3_url_gives_the_local_files_tables(s3, job):
    local = Profile.from_file(real_trace(SINGLE))
    remote = load(f"s3://{BUCKET}/single/{SINGLE}", storage_options=s3.options, progress=False)
    assert isinstance(remote, Profile)
    assert remote.name == local.name == SINGLE
    assert remote.summary == local.summary
    for table in ("ops", "kernels", "steps", "streams", "events"):
        pd.testing.assert_frame_equal(getattr(remote, table), getattr(local, table))
    pd.testing.assert_frame_equal(remote.flows, local.flows)  # read from the local copy, on demand
    copy = remote.trace_path
    assert copy is not None and copy.is_file() and copy.name == SINGLE
    del remote
    gc.collect()
    assert not copy.parent.exists()  # the local copy goes with the profile


def test_store_errors_are_one_line(s3, job, monkeypatch):
    with pytest.raises(TraceError, match=r"^s3://traces/nope/x\.json: no such file or folder$"):
        load(f"s3://{BUCKET}/nope/x.json", storage_options=s3.options, progress=False)
    s3.client.put_object(Bucket=BUCKET, Key="notes/readme.txt", Body=b"not a trace")
    with pytest.raises(TraceError, match=r"no trace files"):
        load(f"s3://{BUCKET}/notes", storage_options=s3.options, progress=False)
    # The store's client's own error (here, an option it does not take) as one line naming the URL.
    with pytest.raises(TraceError, match=r"^s3://\S+: cannot be read \(TypeError: .*no_such_option") as err:
        load(f"s3://{BUCKET}/single/{SINGLE}", storage_options={"no_such_option": 1}, progress=False)
    assert "\n" not in str(err.value)
    monkeypatch.setenv("TORCHPROF_MAX_TRACE_BYTES", "1000")
    with pytest.raises(TraceError, match=r"over the 0\.00 GB trace limit") as err:
        load(f"s3://{BUCKET}/single/{SINGLE}", storage_options=s3.options, progress=False)
    assert "\n" not in str(err.value)


def test_an_object_larger_than_it_said_is_cut_off(tmp_path, monkeypatch):
    """The size limit holds while the bytes stream in, not only on the size the store reports."""
    import fsspec

    from jupyter_torchprof.trace import remote

    fs = fsspec.filesystem("memory")
    fs.pipe_file("/liar/big.json", b" " * 5000)
    monkeypatch.setattr(type(fs), "size", lambda self, path: 10)
    monkeypatch.setenv("TORCHPROF_MAX_TRACE_BYTES", "1000")
    with pytest.raises(TraceError, match=r"over the 0\.00 GB trace limit"):
        with remote.fetched("memory://liar/big.json"):
            pass


def test_a_memory_folder_follows_the_local_folder_rules(tmp_path):
    """The rules of a local folder: the shallowest level with traces, *.pt.trace.* preferred, others left out."""
    import fsspec

    fs = fsspec.filesystem("memory")
    trace = real_trace("triton_kernel.pt.trace.json.gz").read_bytes()
    other = real_trace("cpu_only.pt.trace.json.gz").read_bytes()
    fs.pipe_file("/tb/plugins/profile/run1/host_1.1700000000000.pt.trace.json.gz", trace)
    fs.pipe_file("/tb/plugins/profile/run1/host_2.1700000000001.pt.trace.json.gz", other)
    fs.pipe_file("/tb/plugins/profile/run1/notes.json", b"{}")  # not preferred over the .pt.trace files
    fs.pipe_file("/tb/README.md", b"hello")
    ranks = load("memory://tb", workers=1, progress=False)
    assert isinstance(ranks, RankSet)
    assert sorted(ranks.table["file"]) == [
        "host_1.1700000000000.pt.trace.json.gz",
        "host_2.1700000000001.pt.trace.json.gz",
    ]
    assert sorted(ranks.table["worker"]) == ["host_1", "host_2"]
    fs.pipe_file("/one/only.json.gz", other)
    single = load("memory://one/", progress=False)
    assert isinstance(single, Profile) and single.name == "only.json.gz"
    # plain JSON is told from gzip by its bytes, as for a local file (the name says .gz: it is not)
    import gzip

    fs.pipe_file("/plain/renamed.pt.trace.json.gz", gzip.decompress(other))
    plain = load("memory://plain/renamed.pt.trace.json.gz", progress=False)
    pd.testing.assert_frame_equal(plain.ops, Profile.from_file(real_trace("cpu_only.pt.trace.json.gz")).ops)


def _run_blocked(blocked: str, code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a child Python where importing ``blocked`` fails as if it were not installed."""
    prelude = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {blocked!r} or name.startswith({blocked!r} + '.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


LOAD_URL = (
    "from jupyter_torchprof import load, TraceError\n"
    "try:\n"
    "    load({url!r}, progress=False)\n"
    "except TraceError as exc:\n"
    "    print(exc)\n"
)


def test_without_fsspec_a_url_gets_one_line_and_a_path_still_loads():
    trace = real_trace("cpu_only.pt.trace.json.gz")
    code = LOAD_URL.format(url="s3://bucket/job/") + (
        f"p = load({str(trace)!r}, progress=False)\n"
        "print(type(p).__name__, 'fsspec' in sys.modules, 's3fs' in sys.modules)\n"
    )
    done = _run_blocked("fsspec", code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        "s3://bucket/job/: loading a URL needs fsspec: pip install fsspec s3fs",
        "Profile False False",  # a plain path never imports fsspec
    ]
    assert "Traceback" not in done.stderr


def test_without_s3fs_an_s3_url_says_what_to_install():
    done = _run_blocked("s3fs", LOAD_URL.format(url="s3://bucket/job/rank0.pt.trace.json.gz"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        "s3://bucket/job/rank0.pt.trace.json.gz: loading s3:// URLs needs s3fs: pip install s3fs"
    ]


@pytest.mark.parametrize(
    "text, url",
    [
        ("s3://bucket/key", True),
        ("gs://b/k.json.gz", True),
        ("https://example.org/t.json", True),
        ("file:///tmp/x.json", True),
        ("simplecache::s3://b/k", True),
        ("/tmp/x.json", False),
        ("relative/dir", False),
        ("C:\\traces\\x.json", False),
        ("weird:name.json", False),
    ],
)
def test_what_counts_as_a_url(text, url):
    from jupyter_torchprof.trace.remote import is_url

    assert is_url(text) is url
    assert is_url(Path("/tmp/x.json")) is False


@pytest.mark.parametrize("name", REAL_TRACES)
def test_every_real_trace_at_a_url_gives_the_tables_of_the_file(name):
    """The URL path (a local copy, then today's parser) changes no number, on every real trace."""
    import fsspec

    local = Profile.from_file(real_trace(name))
    fsspec.filesystem("memory").pipe_file(f"/real/{name}", real_trace(name).read_bytes())
    remote = load(f"memory://real/{name}", progress=False)
    assert remote.summary == local.summary
    for table in ("ops", "kernels", "steps", "streams", "findings"):
        pd.testing.assert_frame_equal(getattr(remote, table), getattr(local, table))


def test_a_file_url_folder_and_an_http_url_trace(job):
    """``file://`` (the local path it names) and ``http://`` (a server started here) load as the path does."""
    import functools
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_url = load(job.as_uri(), workers=1, progress=False)
        by_path = load(str(job), workers=1, progress=False)
    pd.testing.assert_frame_equal(by_url.table, by_path.table)
    # the path it names, read as a path is (no copy; the reader's rules for local files hold)
    assert [e.path for e in by_url._entries] == [e.path for e in by_path._entries]
    assert by_url.tables(0)["ops"].equals(by_path.tables(0)["ops"])

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):  # no request lines on stderr
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(job)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/rank6.pt.trace.json.gz"
        remote = load(url, progress=False)
    finally:
        server.shutdown()
    local = Profile.from_file(job / "rank6.pt.trace.json.gz")
    for table in ("ops", "kernels", "steps"):
        pd.testing.assert_frame_equal(getattr(remote, table), getattr(local, table))


def test_a_pipe_in_a_store_is_never_opened(tmp_path):
    """A store may list a pipe (fsspec's ``local://``): named, it is one clear line; in a folder, not a trace."""
    import shutil

    pipe = tmp_path / "rank9.pt.trace.json"
    os.mkfifo(pipe)
    shutil.copy(real_trace("cpu_only.pt.trace.json.gz"), tmp_path / "rank0.pt.trace.json.gz")
    outcome: dict[str, object] = {}

    def attempt() -> None:  # a thread, so that a regression that opens the pipe fails instead of hanging
        try:
            load(f"local://{pipe}", progress=False)
        except TraceError as exc:
            outcome["error"] = str(exc)
        outcome["folder"] = load(f"local://{tmp_path}", progress=False)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "load() blocked on a pipe"
    assert (
        outcome["error"] == f"local://{pipe}: is not a regular file (a pipe or a device); refusing to read it"
    )
    folder = outcome["folder"]
    assert isinstance(folder, Profile) and folder.name == "rank0.pt.trace.json.gz"


def test_the_magic_keeps_a_url_once_under_its_url(shell):
    """``%torchprof --load memory://…`` twice: one kept run, its source the URL, its tables the file's."""
    import json

    import fsspec

    from jupyter_torchprof.runs.store import RunStore

    path = real_trace("cpu_only.pt.trace.json.gz")
    url = "memory://magic-load/cpu_only.pt.trace.json.gz"
    fsspec.filesystem("memory").pipe(url, path.read_bytes())
    for _ in range(2):
        assert shell.run_cell(f"%torchprof --load {url} -o g -q").error_in_exec is None
    store = RunStore(os.environ["TORCHPROF_RUN_DIR"])
    runs = store.list()
    assert len(runs) == 1, runs
    info = json.loads((store.run_dir(runs[0]["id"]) / "run.json").read_text())
    assert info["source"] == url and info["traces"] == ["cpu_only.pt.trace.json.gz"]
    assert shell.user_ns["g"].ops.equals(load(str(path), progress=False).ops)
