"""The runs REST API of the server extension, through a real Jupyter server (pytest-jupyter).

Runs are real: captured with ``%%torchprof`` in an IPython shell, or real GPU
traces opened with ``%torchprof --load``. Numbers are checked against the trace
files read with the json module (tracefiles.raw_events), not against our tables.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
from shellruns import shell_runs
from tornado.httpclient import HTTPClientError
from tracefiles import raw_events, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.runs.store import RUN_FILE, RunStore, new_run_id

pytest_plugins = ("pytest_jupyter.jupyter_server",)

SETUP = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
x = torch.randn(16, 32)
"""


DOUBLE = "tag = '<b>&amp;'; y = model(x)"


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """A store with two real CPU runs: 'small' (2 steps) and DOUBLE (3 steps, twice the work)."""
    root = tmp_path_factory.mktemp("captured") / "runs"
    shell_runs(
        root,
        [
            "%%torchprof --steps 2 -q --name small\ny = model(x)",
            # named after its first line, markup and all (shown as text by the sidebar)
            "%%torchprof --steps 3 -q\ntag = '<b>&amp;'; y = model(x)\ny = model(x)",
        ],
        SETUP,
    )
    runs = {r["name"]: r for r in RunStore(root).list()}
    assert set(runs) == {"small", DOUBLE}
    return root


@pytest.fixture
def run_root(tmp_path, monkeypatch, captured):
    """This test's store (a copy of the captured one), named by $TORCHPROF_RUN_DIR."""
    root = tmp_path / "store" / "runs"
    shutil.copytree(captured, root)
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(root))
    return root


def ids_by_name(store: RunStore) -> dict[str, str]:
    return {r.get("name"): r["id"] for r in store.list()}


async def get_json(jp_fetch, *parts, **params):
    resp = await jp_fetch("jupyter-torchprof", *parts, params=params or None)
    assert resp.code == 200
    return json.loads(resp.body)


def table_rows(table: dict) -> list[dict]:
    return [dict(zip(table["columns"], row, strict=True)) for row in table["rows"]]


def raw_op_count(path: Path, name: str) -> int:
    return sum(1 for e in raw_events(path) if e.get("cat") == "cpu_op" and e.get("name") == name)


# --------------------------------------------------------------------- listing


async def test_list_runs_newest_first(jp_fetch, store, run_root):
    data = await get_json(jp_fetch, "runs")
    assert data["root"] == str(run_root)
    names = [r["name"] for r in data["runs"]]
    assert names == [DOUBLE, "small"]  # newest first, names as they are
    small = data["runs"][1]
    assert small["steps"] == 2 and small["device"] == "CPU" and small["top_ops"]
    assert small["wall_per_step_us"] > 0 and small["damaged"] is False
    on_disk = sum(f.stat().st_size for f in run_root.rglob("*") if f.is_file())
    assert data["size_bytes"] == on_disk


async def test_server_sets_the_store_for_its_kernels(jp_fetch, run_root):
    await get_json(jp_fetch, "runs")
    assert os.environ["TORCHPROF_RUN_DIR"] == str(run_root)


def test_store_root_follows_the_server_root(tmp_path, monkeypatch):
    """Kernels of notebooks in sub-folders must write where the sidebar reads."""
    from jupyter_torchprof.server.runs import setup_runs, store_root

    monkeypatch.delenv("TORCHPROF_RUN_DIR", raising=False)
    assert store_root(tmp_path) == tmp_path / ".torchprof" / "runs"
    monkeypatch.setenv("TORCHPROF_RUN_DIR", "scratch/runs")  # relative: to the server's root
    assert store_root(tmp_path) == tmp_path / "scratch" / "runs"
    monkeypatch.setenv("TORCHPROF_RUN_DIR", str(tmp_path / "abs"))
    assert store_root("/elsewhere") == tmp_path / "abs"

    class App:
        settings: dict = {}

    monkeypatch.setenv("TORCHPROF_RUN_DIR", "rel")
    root = setup_runs(App(), tmp_path)
    assert root == tmp_path / "rel" and os.environ["TORCHPROF_RUN_DIR"] == str(tmp_path / "rel")
    assert App.settings["torchprof_store"].root == root


async def test_damaged_runs_are_listed(jp_fetch, store, run_root):
    broken = store.create(new_run_id(time.time() + 5))
    (broken / RUN_FILE).write_bytes(b"\x00\x01 not json")
    missing = store.create(new_run_id(time.time() + 10))
    (missing / RUN_FILE).unlink()
    data = await get_json(jp_fetch, "runs")
    by_id = {r["id"]: r for r in data["runs"]}
    assert len(by_id) == 4
    assert by_id[broken.name]["damaged"] and "unreadable" in by_id[broken.name]["problem"]
    assert by_id[missing.name]["damaged"] and "missing" in by_id[missing.name]["problem"]
    # the damaged one can still be fetched, and deleted
    info = await get_json(jp_fetch, "runs", broken.name)
    assert info["damaged"] is True
    resp = await jp_fetch("jupyter-torchprof", "runs", broken.name, method="DELETE")
    assert resp.code == 204 and not broken.exists()


async def test_empty_store(jp_fetch, run_root):
    shutil.rmtree(run_root)
    data = await get_json(jp_fetch, "runs")
    assert data["runs"] == [] and data["size_bytes"] == 0


# ---------------------------------------------------------------------- one run


async def test_run_info_and_tables(jp_fetch, store):
    run_id = ids_by_name(store)[DOUBLE]
    info = await get_json(jp_fetch, "runs", run_id)
    assert info["name"] == DOUBLE and info["traces"] == ["trace.json.gz"]
    data = await get_json(jp_fetch, "runs", run_id, "tables")
    trace = store.run_dir(run_id) / "trace.json.gz"
    assert data["summary"]["steps"] == 3 and data["summary"]["device"] == "CPU"
    ops = {r["name"]: r for r in table_rows(data["ops"])}
    # calls straight from the trace file, read with the json module
    assert ops["aten::addmm"]["calls"] == raw_op_count(trace, "aten::addmm")
    assert ops["aten::relu"]["calls"] == raw_op_count(trace, "aten::relu")
    assert data["ops"]["total_rows"] == len(data["ops"]["rows"])
    self_cpu = [r["self_cpu_us"] for r in table_rows(data["ops"])]
    assert self_cpu == sorted(self_cpu, reverse=True)
    assert data["kernels"]["rows"] == []  # a CPU run has no device kernels
    assert len(data["steps"]["rows"]) == 3


async def test_tables_row_limit(jp_fetch, store):
    run_id = ids_by_name(store)["small"]
    data = await get_json(jp_fetch, "runs", run_id, "tables", limit="2")
    assert len(data["ops"]["rows"]) == 2 and data["ops"]["total_rows"] > 2
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("jupyter-torchprof", "runs", run_id, "tables", params={"limit": "-1"})
    assert err.value.code == 400


async def test_kernel_table_of_a_loaded_gpu_trace(jp_fetch, store, run_root):
    src = real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    shell_runs(run_root, [f"%torchprof --load {src} -q --name gp100"], SETUP)
    run_id = ids_by_name(store)["gp100"]
    listed = {r["id"]: r for r in (await get_json(jp_fetch, "runs"))["runs"]}
    assert listed[run_id]["kind"] == "load"
    data = await get_json(jp_fetch, "runs", run_id, "tables")
    kernels = {r["name"]: r for r in table_rows(data["kernels"])}
    expected = Counter()
    for e in raw_events(src):
        if e.get("cat") == "kernel" and e.get("ph") == "X":
            expected[e["name"]] += e["dur"]
    assert set(kernels) >= set(expected)
    for name, total in expected.items():
        assert kernels[name]["total_us"] == pytest.approx(total, rel=1e-9), name


async def test_run_tables_carry_the_findings(jp_fetch, store, run_root):
    src = real_trace("gp100_sgd_step_user_annotation.pt.trace.json.gz")
    shell_runs(run_root, [f"%torchprof --load {src} -q --name gp100-findings"], SETUP)
    run_id = ids_by_name(store)["gp100-findings"]
    data = await get_json(jp_fetch, "runs", run_id, "tables")
    rows = table_rows(data["findings"])
    expected = load(str(src)).findings
    assert [r["title"] for r in rows] == expected["title"].tolist()
    assert [r["severity"] for r in rows] == expected["severity"].tolist()
    assert rows and all(r["detail"] for r in rows)


async def test_run_lists_its_device_files(jp_fetch, store, run_root):
    """A loaded TorchTPU-style trace (constructed fixture) keeps its XPlane; the run says so."""
    tpu = Path(__file__).parent / "data" / "tpu_constructed"
    (host,) = tpu.glob("*.pt.trace.json")
    shell_runs(run_root, [f"%torchprof --load {host} -q --name tpu-kept"], SETUP)
    run_id = ids_by_name(store)["tpu-kept"]
    info = await get_json(jp_fetch, "runs", run_id)
    assert [Path(f).name for f in info["device_files"]] == ["tpu-host.xplane.pb"]
    assert all((store.run_dir(run_id) / f).is_file() for f in info["device_files"])
    small = await get_json(jp_fetch, "runs", ids_by_name(store)["small"])
    assert small["device_files"] == []


async def test_run_tables_carry_the_memory_peaks(jp_fetch, store, run_root):
    shell_runs(run_root, ["%%torchprof --memory --steps 2 -q --name with-memory\ny = model(x)"], SETUP)
    run_id = ids_by_name(store)["with-memory"]
    data = await get_json(jp_fetch, "runs", run_id, "tables")
    rows = {r["device"]: r for r in table_rows(data["memory"])}
    mem = [
        e["args"]
        for e in raw_events(store.run_dir(run_id) / "trace.json.gz")
        if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type") == 0
    ]
    assert mem, "the capture recorded CPU memory"
    assert rows["CPU"]["peak_bytes"] == max(a["Total Allocated"] for a in mem)
    assert rows["CPU"]["allocations"] == sum(1 for a in mem if a["Bytes"] > 0)
    assert rows["CPU"]["relative"] is True
    # no --memory: no rows
    small = await get_json(jp_fetch, "runs", ids_by_name(store)["small"], "tables")
    assert small["memory"]["rows"] == []


async def test_download_trace_loads_back(jp_fetch, store, tmp_path):
    run_id = ids_by_name(store)["small"]
    resp = await jp_fetch("jupyter-torchprof", "runs", run_id, "trace")
    stored = store.run_dir(run_id) / "trace.json.gz"
    assert resp.body == stored.read_bytes()
    assert resp.headers["Content-Type"] == "application/gzip"
    assert f'filename="{run_id}.pt.trace.json.gz"' in resp.headers["Content-Disposition"]
    out = tmp_path / "downloaded.pt.trace.json.gz"
    out.write_bytes(resp.body)
    p = load(str(out))
    trace_addmm = raw_op_count(stored, "aten::addmm")
    assert p.ops.set_index("name").loc["aten::addmm", "calls"] == trace_addmm
    json.loads(gzip.decompress(resp.body))  # a plain Kineto JSON inside


async def test_delete_run(jp_fetch, store):
    run_id = ids_by_name(store)["small"]
    resp = await jp_fetch("jupyter-torchprof", "runs", run_id, method="DELETE")
    assert resp.code == 204
    assert not store.run_dir(run_id).exists()
    assert [r["name"] for r in (await get_json(jp_fetch, "runs"))["runs"]] == [DOUBLE]
    for parts in ((run_id,), (run_id, "tables"), (run_id, "trace")):
        with pytest.raises(HTTPClientError) as err:
            await jp_fetch("jupyter-torchprof", "runs", *parts)
        assert err.value.code == 404


async def test_a_run_being_written_is_not_deleted(jp_fetch, store):
    running = store.create()  # placeholder of a live process (this one)
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("jupyter-torchprof", "runs", running.name, method="DELETE")
    assert err.value.code == 409 and running.exists()
    listed = {r["id"]: r for r in (await get_json(jp_fetch, "runs"))["runs"]}
    assert listed[running.name]["running"] is True


async def test_a_run_without_trace_says_so(jp_fetch, store):
    run_id = ids_by_name(store)["small"]
    (store.run_dir(run_id) / "trace.json.gz").unlink()
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("jupyter-torchprof", "runs", run_id, "tables")
    assert err.value.code == 404 and b"no trace" in err.value.response.body


async def test_an_unreadable_trace_is_a_clear_error(jp_fetch, store):
    run_id = ids_by_name(store)["small"]
    (store.run_dir(run_id) / "trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [ {"ph": '))
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("jupyter-torchprof", "runs", run_id, "tables")
    assert err.value.code == 422
    assert json.loads(err.value.response.body)["message"]
    assert (await get_json(jp_fetch, "runs"))["runs"]  # the server is fine


async def test_timeline_endpoint(jp_fetch, store):
    run_id = ids_by_name(store)["small"]
    try:
        from jupyter_torchprof.views.timeline import build_timeline  # noqa: F401
    except ImportError:
        with pytest.raises(HTTPClientError) as err:
            await jp_fetch("jupyter-torchprof", "runs", run_id, "timeline")
        assert err.value.code == 501
        assert "timeline" in json.loads(err.value.response.body)["message"]
        assert (await get_json(jp_fetch, "runs"))["timeline"] is False
        return
    item = await get_json(jp_fetch, "runs", run_id, "timeline")
    assert {"doc", "root_id", "target_id"} <= set(item)


# ---------------------------------------------------------------------- compare


async def test_compare_two_captured_runs(jp_fetch, store):
    ids = ids_by_name(store)
    a, b = ids["small"], ids[DOUBLE]
    data = await get_json(jp_fetch, "compare", a=a, b=b)
    assert data["labels"] == ["small", DOUBLE]
    ops = {r["name"]: r for r in table_rows(data["ops"])}
    ta = store.run_dir(a) / "trace.json.gz"
    tb = store.run_dir(b) / "trace.json.gz"
    # per-step calls, from the raw traces: 2 and 3 profiled steps
    assert ops["aten::addmm"]["calls_a"] == pytest.approx(raw_op_count(ta, "aten::addmm") / 2)
    assert ops["aten::addmm"]["calls_b"] == pytest.approx(raw_op_count(tb, "aten::addmm") / 3)
    assert ops["aten::addmm"]["calls_b"] == pytest.approx(2 * ops["aten::addmm"]["calls_a"])
    headline = table_rows(data["headline"])
    wall = next(r for r in headline if r["metric"] == "wall per step")
    steps_b = [e["dur"] for e in raw_events(tb) if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert wall["b_us"] == pytest.approx(sum(steps_b) / len(steps_b), rel=1e-6)


async def test_compare_shows_the_spread_and_a_verdict(jp_fetch, store):
    ids = ids_by_name(store)
    data = await get_json(jp_fetch, "compare", a=ids["small"], b=ids[DOUBLE])
    wall = next(r for r in table_rows(data["headline"]) if r["metric"] == "wall per step")
    steps_b = [float(e["dur"]) for e in raw_events(store.run_dir(ids[DOUBLE]) / "trace.json.gz")
               if str(e.get("name", "")).startswith("ProfilerStep#")]  # fmt: skip
    assert (wall["steps_a"], wall["steps_b"]) == (2, 3)
    assert wall["b_min_us"] == pytest.approx(min(steps_b))
    assert wall["b_max_us"] == pytest.approx(max(steps_b))
    assert wall["speedup_low"] <= wall["speedup"] <= wall["speedup_high"]
    # 2 and 3 steps cannot reach p < 0.05: never a firm faster/slower.
    assert wall["verdict"] in ("within noise", "too few steps")
    # Different cells: no "same cell" note.
    assert data["notes"] == []
    same = await get_json(jp_fetch, "compare", a=ids["small"], b=ids["small"])
    assert any("same cell source" in n for n in same["notes"])


async def test_compare_of_a_compiled_run_never_says_same_cell_noise(jp_fetch, store):
    """One side went through torch.compile: the same source is not a reason to call it noise."""
    ids = ids_by_name(store)
    run_dir = store.run_dir(ids["small"])
    info = store.read_info(run_dir.name)
    original = dict(info)
    for key in ("id", "damaged", "schema"):
        info.pop(key, None)
    info["role"] = "compiled"
    store.write_info(run_dir, info)
    try:
        same = await get_json(jp_fetch, "compare", a=ids["small"], b=ids["small"])
        assert not any("same cell source" in n for n in same["notes"]), same["notes"]
    finally:
        for key in ("id", "damaged", "schema"):
            original.pop(key, None)
        store.write_info(run_dir, original)


async def test_compare_real_gpu_pair(jp_fetch, store, run_root):
    control = real_trace("diff_pair/control.pt.trace.json.gz")
    test = real_trace("diff_pair/test.pt.trace.json.gz")
    shell_runs(
        run_root,
        [f"%torchprof --load {control} -q --name control", f"%torchprof --load {test} -q --name test"],
        SETUP,
    )
    ids = ids_by_name(store)
    data = await get_json(jp_fetch, "compare", a=ids["control"], b=ids["test"], limit="100000")
    kernels = {r["name"]: r for r in table_rows(data["kernels"])}
    steps = {}
    for label, path in (("a", control), ("b", test)):
        events = raw_events(path)
        steps[label] = len({e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")})
        totals = Counter()
        # not the work queued before the trace started (no launch recorded, correlation
        # id below the first runtime call's): in no step, so in no kernel table
        calls = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime"}
        for e in events:
            if e.get("cat") == "kernel" and e.get("ph") == "X":
                if e["args"]["correlation"] not in calls and e["args"]["correlation"] < min(calls):
                    continue
                totals[e["name"]] += e["dur"]
        for name, total in totals.most_common(5):
            assert kernels[name][f"total_us_{label}"] == pytest.approx(total / steps[label], rel=1e-9)


@pytest.mark.parametrize(
    "params",
    [{"a": "..", "b": "../.."}, {"a": "/etc"}, {}, {"a": "20260101-120000-abcdef", "b": "nope"}],
)
async def test_compare_refuses_bad_ids(jp_fetch, params):
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("jupyter-torchprof", "compare", params=params)
    assert err.value.code == 400


# ---------------------------------------------------------------- auth and paths


async def raw_fetch(http_server_client, jp_base_url, path, method="GET", auth=None, **kw):
    """A request with the path sent as written (no escaping, no normalising)."""
    headers = dict(auth or {})
    return await http_server_client.fetch(
        jp_base_url.rstrip("/") + "/jupyter-torchprof/" + path,
        method=method,
        headers=headers,
        raise_error=False,
        follow_redirects=False,
        allow_nonstandard_methods=True,
        **kw,
    )


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("GET", "runs"),
        ("GET", "runs/{id}"),
        ("GET", "runs/{id}/tables"),
        ("GET", "runs/{id}/trace"),
        ("GET", "runs/{id}/timeline"),
        ("GET", "compare?a={id}&b={id}"),
        ("DELETE", "runs/{id}"),
    ],
)
async def test_anonymous_requests_are_refused(
    http_server_client, jp_base_url, jp_serverapp, store, method, suffix
):
    run_id = ids_by_name(store)["small"]
    resp = await raw_fetch(http_server_client, jp_base_url, suffix.format(id=run_id), method=method)
    assert resp.code == 403
    assert b"aten::" not in (resp.body or b"")
    assert store.run_dir(run_id).exists()
    wrong = {"Authorization": "token not-the-token"}
    resp = await raw_fetch(
        http_server_client, jp_base_url, suffix.format(id=run_id), method=method, auth=wrong
    )
    assert resp.code == 403 and store.run_dir(run_id).exists()


@pytest.fixture
def outside(tmp_path):
    """A folder beside the store (``<store>/../../outside``) that looks like a run, with a secret trace."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / RUN_FILE).write_text(json.dumps({"name": "outside"}))
    (folder / "trace.json.gz").write_bytes(b"SECRET-BYTES")
    (tmp_path / "secret.txt").write_text("SECRET-BYTES")
    return folder


TRAVERSALS = [
    "runs/..",
    "runs/../trace",
    "runs/%2e%2e",
    "runs/%2e%2e/trace",
    "runs/%2E%2E%2Fsecret.txt/trace",
    "runs/..%2F..%2Fsecret.txt",
    "runs/..%2F..%2Foutside/trace",
    "runs/..%2f..%2foutside/tables",
    "runs/..%2F..%2Foutside",
    "runs/%2Fetc%2Fpasswd/trace",
    "runs/%2F{tmp}%2Foutside/trace",
    "runs/../../outside/trace",
    "runs/%252e%252e%252foutside/trace",
    "runs/{id}%2F..%2F..%2F..%2Foutside/trace",
    "runs/{id}/trace?trace=../../outside/trace.json.gz",
    "runs/{id}/trace?trace=-1",
    "runs/{id}/trace?trace=%2Fetc%2Fpasswd",
]


@pytest.mark.parametrize("path", TRAVERSALS)
async def test_paths_outside_the_store_cannot_be_read(
    http_server_client, jp_base_url, jp_auth_header, jp_serverapp, store, outside, path
):
    run_id = ids_by_name(store)["small"]
    url = path.format(id=run_id, tmp=str(outside.parent).strip("/").replace("/", "%2F"))
    resp = await raw_fetch(http_server_client, jp_base_url, url, auth=jp_auth_header)
    assert resp.code in (400, 404), (url, resp.code)
    if "/../" not in url:  # (that one the router itself refuses)
        assert json.loads(resp.body)["message"]  # answered by our handlers, not by a missing route
    assert b"SECRET" not in (resp.body or b"")
    assert b"root:" not in (resp.body or b"")


@pytest.mark.parametrize(
    "path",
    [
        "runs/..",
        "runs/%2e%2e",
        "runs/..%2F..%2Foutside",
        "runs/%2e%2e%2f%2e%2e%2foutside",
        "runs/%2F{tmp}%2Foutside",
        "runs/../../outside",
        "runs/{id}%2F..",
    ],
)
async def test_paths_outside_the_store_cannot_be_deleted(
    http_server_client, jp_base_url, jp_auth_header, jp_serverapp, store, outside, path
):
    run_id = ids_by_name(store)["small"]
    url = path.format(id=run_id, tmp=str(outside.parent).strip("/").replace("/", "%2F"))
    resp = await raw_fetch(http_server_client, jp_base_url, url, method="DELETE", auth=jp_auth_header)
    assert resp.code in (400, 404), (url, resp.code)
    assert outside.is_dir() and (outside / "trace.json.gz").exists()
    assert store.run_dir(run_id).exists() and store.root.is_dir()


async def test_symlinks_out_of_the_store_are_refused(jp_fetch, store, outside, tmp_path):
    # a run folder that is a symlink to a folder outside
    link = store.root / new_run_id(time.time() + 60)
    link.symlink_to(outside, target_is_directory=True)
    # a real run whose trace is a symlink to a file outside
    run_id = ids_by_name(store)["small"]
    trace = store.run_dir(run_id) / "trace.json.gz"
    trace.unlink()
    trace.symlink_to(tmp_path / "secret.txt")
    listed = [r["id"] for r in (await get_json(jp_fetch, "runs"))["runs"]]
    assert link.name not in listed
    for parts, method in (
        ((link.name,), "GET"),
        ((link.name, "trace"), "GET"),
        ((link.name, "tables"), "GET"),
        ((link.name,), "DELETE"),
        ((run_id, "trace"), "GET"),
        ((run_id, "tables"), "GET"),
    ):
        with pytest.raises(HTTPClientError) as err:
            await jp_fetch("jupyter-torchprof", "runs", *parts, method=method)
        assert err.value.code == 404, parts
        assert b"SECRET" not in (err.value.response.body or b"")
    assert (outside / "trace.json.gz").read_bytes() == b"SECRET-BYTES"
    assert (tmp_path / "secret.txt").exists()


async def test_hard_links_to_files_outside_the_store_are_refused(jp_fetch, store, outside, tmp_path):
    """A hard link has the run folder as its real path: only its link count tells it is a file from elsewhere."""
    small, double = ids_by_name(store)["small"], ids_by_name(store)[DOUBLE]
    trace = store.run_dir(small) / "trace.json.gz"
    trace.unlink()
    os.link(tmp_path / "secret.txt", trace)
    assert trace.resolve().parent == store.run_dir(small).resolve()  # what the symlink check looks at
    # a run.json hard-linked to a record outside, whose cell holds a secret
    record = tmp_path / "secret.json"
    record.write_text(json.dumps({"name": "secret-name", "cell": "token = 'hunter2'", "created": 1.0}))
    info_path = store.run_dir(double) / RUN_FILE
    info_path.unlink()
    os.link(record, info_path)
    listing = await get_json(jp_fetch, "runs")
    by_id = {r["id"]: r for r in listing["runs"]}
    assert by_id[double]["damaged"] and "hard link" in by_id[double]["problem"], by_id[double]
    info = await get_json(jp_fetch, "runs", small)
    assert info["traces"] == []
    shown = json.dumps(listing) + json.dumps(info)
    assert "hunter2" not in shown and "secret-name" not in shown
    for parts in ((small, "trace"), (small, "tables")):
        with pytest.raises(HTTPClientError) as err:
            await jp_fetch("jupyter-torchprof", "runs", *parts)
        assert err.value.code == 404, parts
        assert b"SECRET" not in (err.value.response.body or b"")
    assert (tmp_path / "secret.txt").read_text() == "SECRET-BYTES" and record.exists()


def test_a_hard_link_swapped_in_after_the_check_is_not_opened(tmp_path):
    """The download checks the file it opened, not only the listing's look at the path."""
    from tornado.web import HTTPError

    from jupyter_torchprof.server.runs import _open_regular

    (tmp_path / "secret.txt").write_text("SECRET-BYTES")
    own = tmp_path / "trace.json.gz"
    own.write_bytes(b"trace")
    fh, size = _open_regular(own)
    fh.close()
    assert size == 5
    os.link(tmp_path / "secret.txt", tmp_path / "linked.json.gz")
    with pytest.raises(HTTPError) as err:
        _open_regular(tmp_path / "linked.json.gz")
    assert err.value.status_code == 422 and "hard link" in err.value.log_message


async def test_download_with_cookie_needs_xsrf(http_server_client, jp_base_url, jp_serverapp, store):
    """A cookie-only GET of a trace from another site is refused, as for Jupyter's own files."""
    run_id = ids_by_name(store)["small"]
    token = jp_serverapp.identity_provider.token
    # log in with the token once to get the cookie a browser would hold
    login = await raw_fetch(http_server_client, jp_base_url, f"runs?token={token}")
    assert login.code == 200
    login_cookie = [
        c.split(";", 1)[0] for c in login.headers.get_list("Set-Cookie") if c.startswith("username")
    ]
    assert login_cookie
    # the cookie alone is a login: the list answers
    assert (
        await raw_fetch(http_server_client, jp_base_url, "runs", auth={"Cookie": login_cookie[0]})
    ).code == 200
    xsrf = "0123456789abcdef"
    cookies = f"{login_cookie[0]}; _xsrf={xsrf}"
    cross = {"Cookie": cookies, "Referer": "http://evil.example/"}
    resp = await raw_fetch(http_server_client, jp_base_url, f"runs/{run_id}/trace", auth=cross)
    assert resp.code == 403 and b"SECRET" not in resp.body
    # the link the sidebar builds carries the token of the _xsrf cookie: that one works
    resp = await raw_fetch(http_server_client, jp_base_url, f"runs/{run_id}/trace?_xsrf={xsrf}", auth=cross)
    assert resp.code == 200 and resp.body == (store.run_dir(run_id) / "trace.json.gz").read_bytes()
