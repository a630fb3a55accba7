"""XPlane files: our wire decoder, the events it makes, and loading them with a Kineto trace.

Test data (tests/data, see README.md there): ``jax_cpu_*.xplane.pb`` are real
files JAX's profiler wrote on this machine's CPU, each with the Chrome-trace
copy xprof wrote of the same XSpace (an independent reading of it);
``tpu_*_constructed`` are TPU-shaped XSpaces built with the xplane.proto
schema, plus the Kineto JSON of their host side: no TPU wrote them.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tracefiles import real_trace

from jupyter_torchprof.errors import TraceError
from jupyter_torchprof.runs.load import load
from jupyter_torchprof.trace import categories as K
from jupyter_torchprof.trace import xplane
from jupyter_torchprof.trace.files import parse_xplane

DATA = Path(__file__).parent / "data"
JAX_FILES = ["jax_cpu_jit", "jax_cpu_steps"]
TPU = DATA / "tpu_constructed"
BURSTS = DATA / "tpu_bursts_constructed"


def _xplane_of(folder: Path) -> Path:
    (pb,) = folder.glob("plugins/profile/*/*.xplane.pb")
    return pb


def _xprof_events(name: str) -> dict[str, list[tuple[str, float, float]]]:
    """xprof's own reading: (name, ts, dur) per thread name, from its Chrome-trace copy."""
    doc = json.loads(gzip.decompress((DATA / f"{name}.xprof.trace.json.gz").read_bytes()))
    threads = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    out: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            # xprof writes 1e-06 for an instant event.
            out[threads[e["tid"]]].append((e["name"], e["ts"], 0.0 if e["dur"] <= 1e-5 else e["dur"]))
    return out


@pytest.mark.parametrize("name", JAX_FILES)
def test_jax_file_reads_like_xprof(name: str) -> None:
    """Every host event of a real JAX file: same names, durations and relative times as xprof's copy."""
    theirs = _xprof_events(name)
    td = parse_xplane(DATA / f"{name}.xplane.pb")
    ev = td.events
    threads = td.meta.thread_names
    ours: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
    for pid, tid, n, ts, dur in zip(
        ev["pid"], ev["tid"], ev["name"].astype(str), ev["ts"], ev["dur"], strict=True
    ):
        ours[threads[(pid, tid)]].append((n, ts, dur))
    assert set(ours) == set(theirs)
    # Both time axes start at an arbitrary origin: compare offsets from each file's first event.
    t_ours = min(t for v in ours.values() for _, t, _ in v)
    t_theirs = min(t for v in theirs.values() for _, t, _ in v)
    for thread in theirs:
        a = sorted((n, round(t - t_ours, 3), round(d, 3)) for n, t, d in ours[thread])
        b = sorted((n, round(t - t_theirs, 3), round(d, 3)) for n, t, d in theirs[thread])
        assert a == b, thread
    assert len(ev) == sum(len(v) for v in theirs.values())


def test_jax_file_is_on_the_epoch_clock() -> None:
    """JAX saves line times relative to the session start; we put them back on the epoch clock."""
    space = xplane.read_xspace(DATA / "jax_cpu_steps.xplane.pb")
    env = next(p for p in space.planes if p.name == "Task Environment").stats
    start_ns, stop_ns = sorted(v for v in env.values() if isinstance(v, int))[:2]
    assert xplane.profile_start_ns(space) == start_ns
    td = parse_xplane(DATA / "jax_cpu_steps.xplane.pb")
    base_ns = td.meta.top_level["baseTimeNanoseconds"]
    first_ns = base_ns + td.meta.t0_us * 1e3
    # The first event starts inside the session (the last, JAX's own
    # stop_trace frame, ends after the recorded stop time).
    assert start_ns <= first_ns <= stop_ns


def test_jax_steps_file_has_its_steps_and_no_device() -> None:
    """The step annotations JAX recorded are events; a CPU-only XSpace says it has no device planes."""
    prof = load(DATA / "jax_cpu_steps.xplane.pb")
    names = Counter(prof.events["name"].astype(str))
    assert names["train"] == 5
    assert not K.kind_mask(prof.events, K.DEVICE_ACTIVITY).any()
    assert any("no device planes" in n for n in prof.notes)


def test_decoder_agrees_with_protobuf() -> None:
    """Every field of every message, as protobuf's own decoder reads them (where protobuf is installed)."""
    pytest.importorskip("google.protobuf", reason="protobuf is not installed (an optional oracle)")
    sys.path.insert(0, str(DATA))
    from xplane_schema import message_classes

    classes = message_classes()
    for path in [*(DATA / f"{n}.xplane.pb" for n in JAX_FILES), _xplane_of(TPU), _xplane_of(BURSTS)]:
        data = path.read_bytes()
        ref = classes["XSpace"]()
        ref.ParseFromString(data)
        ours = xplane.decode_xspace(data)
        assert [p.name for p in ours.planes] == [p.name for p in ref.planes]
        assert ours.hostnames == list(ref.hostnames)
        for mine, theirs in zip(ours.planes, ref.planes, strict=True):
            assert mine.stat_metadata == {k: v.name for k, v in theirs.stat_metadata.items()}
            assert {k: v.name for k, v in mine.event_metadata.items()} == {
                k: v.name for k, v in theirs.event_metadata.items()
            }
            for la, lb in zip(mine.lines, theirs.lines, strict=True):
                assert (la.id, la.name, la.timestamp_ns, la.duration_ps) == (
                    lb.id,
                    lb.name,
                    lb.timestamp_ns,
                    lb.duration_ps,
                )
                got = [(e.metadata_id, e.offset_ps, e.duration_ps, e.stats) for e in la.events]
                want = [
                    (
                        e.metadata_id,
                        e.offset_ps,
                        e.duration_ps,
                        {s.metadata_id: _stat_value(s) for s in e.stats},
                    )
                    for e in lb.events
                ]
                assert got == want


def _stat_value(s: object) -> object:
    return getattr(s, s.WhichOneof("value")) if s.WhichOneof("value") else None


def test_bad_xplane_files_fail_in_one_line(tmp_path: Path) -> None:
    good = (DATA / "jax_cpu_jit.xplane.pb").read_bytes()
    cases = {
        "empty.xplane.pb": b"",
        "cut.xplane.pb": good[: len(good) // 2],
        "text.xplane.pb": b"this is not a protobuf, just text\n" * 3,
    }
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(TraceError) as info:
            xplane.read_xspace(p)
        msg = str(info.value)
        assert "\n" not in msg and name in msg
    assert "empty" in str(pytest.raises(TraceError, xplane.read_xspace, tmp_path / "empty.xplane.pb").value)


# --------------------------------------------------------------------------- #
# TPU planes merged into the host's Kineto trace


def _raw_tpu_ops(folder: Path) -> tuple[dict[tuple[int, str], list[float]], dict[int, int]]:
    """Durations (µs) per (device, op name) of the XLA Ops lines, and absolute starts (ps) by correlation id."""
    space = xplane.read_xspace(_xplane_of(folder))
    durs: dict[tuple[int, str], list[float]] = defaultdict(list)
    first_by_corr: dict[int, int] = {}
    for plane in space.planes:
        if not plane.name.startswith("/device:TPU:"):
            continue
        dev = int(plane.name.rsplit(":", 1)[1])
        for line in plane.lines:
            if line.name != "XLA Ops":
                continue
            for e in line.events:
                durs[(dev, plane.event_metadata[e.metadata_id].name)].append(e.duration_ps / 1e6)
                stats = plane.stat_values(e.stats)
                if "correlation_id" in stats:
                    t = line.timestamp_ns * 1000 + e.offset_ps
                    c = stats["correlation_id"]
                    first_by_corr[c] = min(first_by_corr.get(c, t), t)
    return durs, first_by_corr


def test_tpu_ops_become_kernels_on_streams() -> None:
    prof = load(TPU)
    durs, _ = _raw_tpu_ops(TPU)
    k = prof.kernels.set_index("name")
    by_name: dict[str, list[float]] = defaultdict(list)
    for (_dev, name), values in durs.items():
        by_name[name].extend(values)
    assert set(k.index) == set(by_name)
    for name, values in by_name.items():
        assert k.loc[name, "calls"] == len(values)
        assert k.loc[name, "total_us"] == pytest.approx(sum(values))
    streams = prof.streams
    per_stream = streams[streams["stream"] != "all"]
    assert sorted(per_stream["device"].astype(int)) == [0, 1]
    for dev in (0, 1):
        busy = per_stream.loc[per_stream["device"].astype(int) == dev, "busy_us"].sum()
        # Ops on one line do not overlap, so busy time is their sum.
        assert busy == pytest.approx(sum(sum(v) for (d, _), v in durs.items() if d == dev))
    # The step and module lines are on the device timeline but not device activity.
    ann = prof.events[K.kind_mask(prof.events, K.GPU_ANNOTATION)]
    assert set(ann["name"].astype(str)) >= {"jit_train_step(1)", "0", "1", "2"}


def test_tpu_ops_link_to_their_launch_on_one_clock() -> None:
    """Ops carrying a correlation id link to the host launch with that id; delays from the raw files."""
    prof = load(TPU)
    _, first_by_corr = _raw_tpu_ops(TPU)
    (host,) = TPU.glob("*.pt.trace.json")
    doc = json.loads(host.read_text())
    base_ps = doc["baseTimeNanoseconds"] * 1000
    launch_ps = {
        e["args"]["correlation"]: base_ps + round(e["ts"] * 1e6)
        for e in doc["traceEvents"]
        if e.get("cat") == "privateuse1_runtime"
    }
    links = prof.launches
    assert (links["link"] == "correlation").all()
    assert set(links["launch_name"]) == {"PjRtLoadedExecutable::Execute"}
    assert set(links["op_name"]) == {"aten::mm"}
    first = links.sort_values("ts").groupby("correlation").first()
    for corr, row in first.iterrows():
        assert row["launch_delay_us"] == pytest.approx(
            (first_by_corr[corr] - launch_ps[corr]) / 1e6, abs=1e-3
        )
        assert row["launch_delay_us"] > 0
    summary = prof.launch_summary
    total = summary.iloc[-1]
    assert total["launches"] == len(launch_ps)


def test_run_folder_layout_and_device_files_listed(tmp_path: Path) -> None:
    """A run folder: trace.json with device/plugins/profile/<ts>/<host>.xplane.pb below it."""
    run = tmp_path / "run"
    (host,) = TPU.glob("*.pt.trace.json")
    dev = run / "device" / "plugins" / "profile" / "2026_12_01_12_00_00"
    dev.mkdir(parents=True)
    shutil.copyfile(host, run / "trace.json")
    shutil.copyfile(_xplane_of(TPU), dev / "tpu-host.xplane.pb")
    prof = load(run)
    assert prof.meta.top_level["device_files"] == "tpu-host.xplane.pb"
    assert len(prof.kernels) == 4
    assert not [n for n in prof.notes if "TPU" in n or "device" in n]


def test_an_unrelated_run_in_a_sibling_folder_is_not_spliced_in(tmp_path: Path) -> None:
    # A CPU trace saved in a shared folder that also holds some JAX run's XPlane files.
    cpu = real_trace("cpu_only.pt.trace.json.gz")
    shutil.copyfile(cpu, tmp_path / cpu.name)
    jax = tmp_path / "jax_run" / "plugins" / "profile" / "2026_12_01_12_00_00"
    jax.mkdir(parents=True)
    shutil.copyfile(_xplane_of(TPU), jax / "tpu-host.xplane.pb")
    prof = load(tmp_path / cpu.name)
    assert "device_files" not in prof.meta.top_level
    assert not prof.kernels.size
    alone = load(real_trace("cpu_only.pt.trace.json.gz"))
    pd.testing.assert_frame_equal(prof.ops, alone.ops)


@pytest.mark.parametrize("hours", [-1, 1])
def test_a_device_session_of_another_time_is_not_spliced_in(tmp_path: Path, hours: int) -> None:
    # A TensorBoard log folder with one run's host trace and another run's
    # XPlane session, an hour before or after it.
    (host,) = TPU.glob("*.pt.trace.json")
    doc = json.loads(host.read_text())
    doc["baseTimeNanoseconds"] += hours * 3_600_000_000_000
    (tmp_path / host.name).write_text(json.dumps(doc))
    dev = tmp_path / "plugins" / "profile" / "2026_12_01_12_00_00"
    dev.mkdir(parents=True)
    shutil.copyfile(_xplane_of(TPU), dev / "tpu-host.xplane.pb")
    prof = load(tmp_path / host.name)
    assert prof.kernels.empty
    assert not prof.events["cat"].astype(str).isin(["xla_op", "xla_annotation"]).any()
    (line,) = [n for n in prof.notes if "do not overlap" in n]
    assert "tpu-host.xplane.pb" in line
    # the same files at the same time are spliced in
    assert len(load(TPU).kernels) == 4


def test_empty_xplane_is_one_clear_line(tmp_path: Path) -> None:
    (host,) = TPU.glob("*.pt.trace.json")
    dev = tmp_path / "plugins" / "profile" / "2026_12_01_12_00_00"
    dev.mkdir(parents=True)
    shutil.copyfile(host, tmp_path / host.name)
    (dev / "tpu-host.xplane.pb").write_bytes(b"")
    prof = load(tmp_path)
    lines = [n for n in prof.notes if "device trace not read" in n]
    assert len(lines) == 1 and "empty" in lines[0] and "tpu-host.xplane.pb" in lines[0]
    # No device events, so the host launches are reported as having none.
    assert any(n.startswith("privateuse1: ") and "no device events" in n for n in prof.notes)
    assert prof.kernels.empty


def test_host_trace_without_its_xplane_names_the_backend(tmp_path: Path) -> None:
    (host,) = TPU.glob("*.pt.trace.json")
    shutil.copyfile(host, tmp_path / "trace.json")
    prof = load(tmp_path / "trace.json")
    (line,) = [n for n in prof.notes if "no device events" in n]
    n_launches = sum(
        1 for e in json.loads(host.read_text())["traceEvents"] if e.get("cat") == "privateuse1_runtime"
    )
    assert line.startswith(f"privateuse1: {n_launches} host call(s) (privateuse1_runtime)")


def test_merge_keeps_every_host_event() -> None:
    (host,) = TPU.glob("*.pt.trace.json")
    data = host.read_bytes()
    n_host = sum(1 for e in json.loads(data)["traceEvents"] if e.get("ph") == "X")
    space = xplane.read_xspace(_xplane_of(TPU))
    found = xplane.device_events(space, xplane.kineto_base_ns(data))
    merged = json.loads(xplane.merge_into_kineto(data, found.events))
    xs = [e for e in merged["traceEvents"] if e.get("ph") == "X"]
    assert len(xs) == n_host + sum(1 for e in found.events if e["ph"] == "X")
    assert found.kernels == sum(len(v) for v in _raw_tpu_ops(TPU)[0].values())
    assert found.linked == found.kernels
    assert merged["baseTimeNanoseconds"] == json.loads(data)["baseTimeNanoseconds"]
    assert np.all(np.diff([e["ts"] for e in xs if e["cat"] == "xla_op" and e["pid"] == 0]) > 0)


def test_tpu_many_short_bursts_rule() -> None:
    """Steps split into many programs are named; a step run as one program is not."""
    prof = load(BURSTS)
    space = xplane.read_xspace(_xplane_of(BURSTS))
    # Each XLA Modules event is one program run: count them per device and step from the raw file.
    (host,) = BURSTS.glob("*.pt.trace.json")
    doc = json.loads(host.read_text())
    base_ps = doc["baseTimeNanoseconds"] * 1000
    steps = sorted(
        (base_ps + round(e["ts"] * 1e6), base_ps + round((e["ts"] + e["dur"]) * 1e6))
        for e in doc["traceEvents"]
        if e.get("name", "").startswith("ProfilerStep#")
    )
    want = {}
    for plane in space.planes:
        if not plane.name.startswith("/device:TPU:"):
            continue
        dev = int(plane.name.rsplit(":", 1)[1])
        (modules,) = [ln for ln in plane.lines if ln.name == "XLA Modules"]
        starts = [modules.timestamp_ns * 1000 + e.offset_ps for e in modules.events]
        for k, (lo, hi) in enumerate(steps, start=1):
            want[(dev, k)] = sum(lo <= t < hi for t in starts)
    f = prof.findings
    rows = f[f["rule"] == "device_bursts"]
    got = {
        (r["evidence"]["device"], int(r["title"].split("step ")[1].split(" ")[0])): r["evidence"]["bursts"]
        for _, r in rows.iterrows()
    }
    assert got == want and min(want.values()) >= 8
    assert (rows["severity"].isin(["high", "medium"])).all()
    assert rows["detail"].str.contains(r"\.item\(\)").all()
    one = load(TPU).findings
    assert not (one["rule"] == "device_bursts").any()


def test_folder_export_keeps_the_device_trace(tmp_path: Path) -> None:
    """Exporting a TPU profile to a folder copies its XPlane; loading the folder reads it again."""
    prof = load(TPU)
    out = tmp_path / "out"
    out.mkdir()
    result = prof.export(out)
    copied = [p for p in result.paths if p.name.endswith(".xplane.pb")]
    assert len(copied) == 1 and copied[0].read_bytes() == _xplane_of(TPU).read_bytes()
    again = load(out)
    assert again.kernels.set_index("name")["total_us"].to_dict() == pytest.approx(
        prof.kernels.set_index("name")["total_us"].to_dict()
    )


def test_device_work_in_both_files_is_counted_once(tmp_path: Path) -> None:
    """When the Kineto JSON already has device work, the XPlane's copy is not added (and we say so)."""
    (host,) = TPU.glob("*.pt.trace.json")
    doc = json.loads(host.read_text())
    doc["traceEvents"].append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": "from_kineto",
            "pid": 0,
            "tid": 3,
            "ts": doc["traceEvents"][3]["ts"] + 50,
            "dur": 10.0,
            "args": {"device": 0, "stream": 3},
        }
    )
    dev = tmp_path / "plugins" / "profile" / "2026_12_01_12_00_00"
    dev.mkdir(parents=True)
    (tmp_path / host.name).write_text(json.dumps(doc))
    shutil.copyfile(_xplane_of(TPU), dev / "tpu-host.xplane.pb")
    prof = load(tmp_path)
    assert list(prof.kernels["name"]) == ["from_kineto"]
    assert any("XPlane's copy" in n and "tpu-host.xplane.pb" in n for n in prof.notes)


def test_tpu_devices_are_named() -> None:
    prof = load(TPU)
    assert [p["name"] for p in prof.meta.device_properties] == ["TPU", "TPU"]
    assert prof.summary["device"] == "TPU ×2"


def test_test_writer_bytes_read_the_same_by_protobuf() -> None:
    """tests/xplane_writer.py's bytes mean what it was told, by protobuf's reading (where installed)."""
    pytest.importorskip("google.protobuf", reason="protobuf is not installed (an optional oracle)")
    sys.path.insert(0, str(DATA))
    sys.path.insert(0, str(Path(__file__).parent))
    from xplane_schema import message_classes
    from xplane_writer import encode_xspace

    events = [("fusion.1", 5_000_000, 2_000_000, {"hlo_category": "fusion", "flops": -3, "ratio": 0.5})]
    plane = {
        "id": 2,
        "name": "/device:TPU:1",
        "lines": [{"id": 3, "name": "XLA Ops", "timestamp_ns": 10**18, "events": events}],
    }
    data = encode_xspace([plane], ("h",))
    ref = message_classes()["XSpace"]()
    ref.ParseFromString(data)
    (p,) = ref.planes
    (line,) = p.lines
    (ev,) = line.events
    stats = {p.stat_metadata[s.metadata_id].name: _stat_value(s) for s in ev.stats}
    assert (p.name, line.timestamp_ns, p.event_metadata[ev.metadata_id].name) == (
        "/device:TPU:1",
        10**18,
        "fusion.1",
    )
    assert (ev.offset_ps, ev.duration_ps, stats) == (
        5_000_000,
        2_000_000,
        {"hlo_category": "fusion", "flops": -3, "ratio": 0.5},
    )
    ours = xplane.decode_xspace(data).planes[0]
    assert ours.stat_values(ours.lines[0].events[0].stats) == stats


def test_kept_loaded_run_keeps_its_device_trace(tmp_path: Path) -> None:
    """The run store's copy of a loaded TPU trace takes its XPlane along and reads the same."""
    from jupyter_torchprof.runs.store import RunStore, wait_for_compression

    store = RunStore(tmp_path / "runs")
    run_dir = store.create()
    (host,) = TPU.glob("*.pt.trace.json")
    kept = store.add_trace(run_dir, host)
    wait_for_compression()
    assert [p.name for p in store.device_files(run_dir.name)] == ["tpu-host.xplane.pb"]
    again = load(kept)
    assert again.kernels.set_index("name")["total_us"].to_dict() == pytest.approx(
        load(TPU).kernels.set_index("name")["total_us"].to_dict()
    )


def test_tensorboard_folder_with_only_xplane_files(tmp_path: Path) -> None:
    """A log folder as JAX (or TorchTPU's legacy API) leaves it: the XPlane is read, not xprof's JSON copy."""
    session = tmp_path / "plugins" / "profile" / "2026_12_01_13_38_02"
    session.mkdir(parents=True)
    shutil.copyfile(DATA / "jax_cpu_steps.xplane.pb", session / "vm.xplane.pb")
    shutil.copyfile(DATA / "jax_cpu_steps.xprof.trace.json.gz", session / "vm.trace.json.gz")
    prof = load(tmp_path)
    assert prof.trace_path == session / "vm.xplane.pb"
    assert len(prof.events) == len(parse_xplane(DATA / "jax_cpu_steps.xplane.pb").events)


def test_device_work_of_the_profilers_warmup_step_is_left_out(tmp_path: Path) -> None:
    """XPlane ops that ended before the Kineto trace's first event are not counted (and that is said)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from xplane_writer import encode_xspace

    (host,) = TPU.glob("*.pt.trace.json")
    doc = json.loads(host.read_text())
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    first_ns = doc["baseTimeNanoseconds"] + round(min(e["ts"] for e in xs) * 1000)
    line_ts = first_ns - 500_000  # 500 µs before the host's first event
    ops = [
        ("warmup_op", 0, 100_000_000, {}),  # 0-100 µs: ends 400 µs before the host starts
        ("late_op", 450_000_000, 100_000_000, {}),  # starts before, ends after: kept
        ("step_op", 600_000_000, 50_000_000, {}),
    ]
    plane = {
        "id": 1,
        "name": "/device:TPU:0",
        "lines": [{"id": 3, "name": "XLA Ops", "timestamp_ns": line_ts, "events": ops}],
    }
    session = tmp_path / "plugins" / "profile" / "2026_12_01_12_00_00"
    session.mkdir(parents=True)
    shutil.copyfile(host, tmp_path / host.name)
    (session / "tpu-host.xplane.pb").write_bytes(encode_xspace([plane]))
    prof = load(tmp_path)
    kept = prof.events.loc[prof.events["kind"].astype(str) == "kernel", "name"].astype(str)
    assert sorted(kept) == ["late_op", "step_op"]
    assert any(n.startswith("1 XPlane device event(s) ended before") for n in prof.notes)
    # late_op has no launch and starts before the first step: in no step, so the
    # kernel table (the steps' work) leaves it out too, and a note says so.
    assert sorted(prof.kernels["name"]) == ["step_op"]
    assert any(n.startswith("1 device activities") and "start in no step" in n for n in prof.notes)
    ev = prof.events
    assert ev["ts"].min() == 0.0
    # Times still line up with the host: step_op starts 100 µs after the host's first event.
    first_host = ev.loc[ev["cat"].astype(str) != "xla_op", "ts"].min()
    (step_ts,) = ev.loc[ev["name"] == "step_op", "ts"]
    assert step_ts - first_host == pytest.approx(100.0, abs=1e-3)
    assert prof.meta.t0_us == pytest.approx(
        (first_ns - 50_000) / 1000 - doc["baseTimeNanoseconds"] / 1000, abs=1e-3
    )
