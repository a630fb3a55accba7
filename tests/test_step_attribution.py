"""Device work belongs to the step that launched it; steps, streams and kernels agree.

The oracle reads each real GPU trace with the json module (tracefiles.raw_events)
and follows the links by hand: a kernel's ``correlation`` names its runtime call
(``cuda_runtime`` / ``cuda_driver``), and the ``ProfilerStep#k`` range on the host
that holds the call's start owns the kernel, as Holistic Trace Analysis does.
Work with no recorded launch whose correlation id is below the first runtime
call's was queued before the trace started and belongs to no step (HTA's
iteration -1); other work with no recorded launch belongs to the step whose
range holds its own start. Times are taken relative to the first complete
event, as the parser does.
"""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
from tracefiles import GPU_TRACES, raw_events, real_trace, union_length

from jupyter_torchprof import load
from jupyter_torchprof.format import fmt_time

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
HOST_CATS = {"cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver"}
STEP = re.compile(r"^ProfilerStep#(\d+)$")


class Raw:
    """A trace's complete events, its steps and the step each device activity was launched in."""

    def __init__(self, name: str, path=None) -> None:
        self.path = path if path is not None else real_trace(name)
        self.events = [e for e in raw_events(self.path) if e.get("ph") == "X" and e.get("cat") != "Trace"]
        t0 = min(float(e["ts"]) for e in self.events)
        for e in self.events:
            e["_s"] = float(e["ts"]) - t0
            e["_e"] = e["_s"] + float(e.get("dur", 0))
        self.steps = sorted(
            (
                (int(STEP.match(e["name"]).group(1)), e["_s"], e["_e"], (e["pid"], e["tid"]))
                for e in self.events
                if e["cat"].lower() == "user_annotation" and STEP.match(str(e["name"]))
            ),
            key=lambda s: (s[0], s[1]),
        )
        self.device = [e for e in self.events if e["cat"] in DEVICE_CATS]
        runtime = {}
        for e in self.events:
            if e["cat"] in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
                runtime.setdefault(e["args"]["correlation"], e)
        ops_by_ext = defaultdict(list)
        for e in self.events:
            if e["cat"] == "cpu_op" and "External id" in e.get("args", {}):
                ops_by_ext[e["args"]["External id"]].append(e)
        first_launch = min(runtime, default=None)
        self.owner = []  # step position per device activity, -1 outside
        self.unlinked = []  # no recorded launch (then owned by the step its own start is in)
        self.queued = []  # no recorded launch, correlation id below the first launch's: in no step
        for d in self.device:
            corr = d["args"].get("correlation")
            src = runtime.get(corr)
            if src is None:
                same = ops_by_ext.get(d["args"].get("External id"), [])
                src = same[0] if len(same) == 1 else None
            queued = (
                src is None and first_launch is not None and corr is not None and 0 <= corr < first_launch
            )
            self.unlinked.append(src is None and not queued)
            self.queued.append(queued)
            self.owner.append(-1 if queued else self.step_at(d if src is None else src))

    def step_at(self, e: dict) -> int:
        """Position of the step range holding ``e``'s start (its own thread first), -1 if none."""
        t, lane = e["_s"], (e["pid"], e["tid"])
        hits = [k for k, (_, lo, hi, _) in enumerate(self.steps) if lo <= t < hi]
        mine = [k for k in hits if self.steps[k][3] == lane]
        return (mine or hits or [-1])[0]

    def launched(self, k: int) -> list[dict]:
        return [d for d, o in zip(self.device, self.owner, strict=True) if o == k]

    def counted(self) -> list[int]:
        """Steps neither empty (trailing, no op and no launch) nor suspicious (complete runs here)."""
        others = [
            e
            for e in self.events
            if not (e["cat"].lower() == "user_annotation" and STEP.match(str(e["name"])))
        ]
        rec_lo = min(e["_s"] for e in others)
        rec_hi = max(e["_e"] for e in others)
        op_lanes = {(e["pid"], e["tid"]) for e in self.events if e["cat"] == "cpu_op"}
        idle = [
            not any(lo <= e["_s"] < hi for e in others if e["cat"] in HOST_CATS) and not self.launched(k)
            for k, (_, lo, hi, _) in enumerate(self.steps)
        ]
        by_start = sorted(range(len(self.steps)), key=lambda k: self.steps[k][1])
        busy = [i for i, k in enumerate(by_start) if not idle[k]]
        empty = set(by_start[busy[-1] + 1 :]) if busy else set()
        out = []
        for k, (_, lo, hi, lane) in enumerate(self.steps):
            inside = max(0.0, min(hi, rec_hi) - max(lo, rec_lo))
            suspicious = bool(op_lanes) and lane not in op_lanes and (hi - lo) - inside > inside
            if k not in empty and not suspicious:
                out.append(k)
        return out


def iv(acts: list[dict]) -> list[tuple[float, float]]:
    return [(d["_s"], d["_e"]) for d in acts]


def lane(d: dict) -> tuple[int, str]:
    return d["args"].get("device", d["pid"]), str(d["args"].get("stream", d["tid"]))


@pytest.fixture(scope="module", params=GPU_TRACES)
def traced(request):
    raw = Raw(request.param)
    return raw, load(str(raw.path))


def test_each_step_holds_the_device_work_it_launched(traced):
    raw, p = traced
    steps = p.steps
    assert len(steps) == len(raw.steps)
    for k in range(len(raw.steps)):
        mine = raw.launched(k)
        row = steps.iloc[k]
        assert row["step"] == raw.steps[k][0]
        assert row["device_activities"] == len(mine)
        assert row["device_busy_us"] == pytest.approx(union_length(iv(mine)), abs=1e-6)
        for col, cat in (("kernel_us", "kernel"), ("memcpy_us", "gpu_memcpy"), ("memset_us", "gpu_memset")):
            assert row[col] == pytest.approx(sum(d["dur"] for d in mine if d["cat"] == cat), abs=1e-6)
        nccl = [d for d in mine if d["cat"] == "kernel" and "nccl" in d["name"].lower()]
        assert row["comm_us"] == pytest.approx(sum(d["dur"] for d in nccl), abs=1e-6)
        if mine:
            span = max(d["_e"] for d in mine) - min(d["_s"] for d in mine)
            assert row["device_span_us"] == pytest.approx(span, abs=1e-6)
            assert row["device_idle_us"] == pytest.approx(span - union_length(iv(mine)), abs=1e-6)
    # summed over the counted steps: the device time of the work those steps launched
    counted = raw.counted()
    assert steps.index[steps["counted"]].tolist() == counted
    launched = [d for k in counted for d in raw.launched(k)]
    assert steps.loc[steps["counted"], "device_busy_us"].sum() == pytest.approx(
        sum(union_length(iv(raw.launched(k))) for k in counted), abs=1e-3
    )
    assert p.summary.get("device_us_in_steps", 0.0) == pytest.approx(
        sum(d["dur"] for d in launched), abs=1e-3
    )


def test_no_device_work_is_lost(traced):
    raw, p = traced
    s = p.summary
    k = p.kernels
    if not raw.steps:
        # one window, the whole trace: the kernel table and the summary hold it all
        assert "device_activities_in_steps" not in s
        assert int(k["calls"].sum()) == len(raw.device)
        assert s["device_busy_per_step_us"] == pytest.approx(union_length(iv(raw.device)), abs=1e-6)
        return
    counted = set(raw.counted())
    owned = list(zip(raw.device, raw.owner, raw.unlinked, raw.queued, strict=True))
    parts = {
        "in_steps": [d for d, o, _, _ in owned if o in counted],
        "left_out": [d for d, o, _, _ in owned if o >= 0 and o not in counted],
        "outside_steps": [d for d, o, u, q in owned if o == -1 and not u and not q],
        "queued": [d for d, _, _, q in owned if q],
        "unlinked": [d for d, o, u, _ in owned if o == -1 and u],
    }
    by_window = [d for d, o, u, _ in owned if o >= 0 and u]
    assert s["device_activities_by_window"] == len(by_window)
    for key, acts in parts.items():
        assert s[f"device_activities_{key}"] == len(acts), key
        assert s[f"device_us_{key}"] == pytest.approx(sum(d["dur"] for d in acts), abs=1e-3), key
    # the parts add up to every device activity of the trace
    assert len(raw.device) == sum(s[f"device_activities_{p_}"] for p_ in parts)
    # the kernel table holds the counted steps' part, as the steps table does
    mine = parts["in_steps"] if counted else raw.device
    assert int(k["calls"].sum()) == len(mine)
    assert float(k["total_us"].sum()) == pytest.approx(sum(d["dur"] for d in mine), abs=1e-3)
    # and what is not in a counted step is said in the notes
    for key in ("outside_steps", "queued", "unlinked", "left_out"):
        if parts[key] and counted:
            assert any(f"{len(parts[key]):,} device activities" in n for n in p.notes), key
    if by_window and counted:
        assert any(f"{len(by_window):,} device activities" in n and "time window" in n for n in p.notes)


def test_streams_agree_with_steps_and_their_stated_definitions(traced):
    raw, p = traced
    streams = p.streams
    steps = p.steps
    counted = raw.counted()
    if counted:
        acts = [d for k in counted for d in raw.launched(k)]
        lo = min(raw.steps[k][1] for k in counted)
        hi = max(max(raw.steps[k][2] for k in counted), max((d["_e"] for d in acts), default=-1))
        # steps and streams count the same work
        per_stream = streams[streams["stream"] != "all"]
        assert int(per_stream["kernels"].sum()) == int(steps.loc[steps["counted"], "device_activities"].sum())
    else:
        acts = raw.device
        s = p.summary
        lo, hi = s["window_start_us"], s["window_end_us"]
        # the recording window: every event but a step range left out as suspicious
        others = [
            e for e in raw.events if not STEP.match(str(e["name"])) or e["cat"].lower() != "user_annotation"
        ]
        assert lo == pytest.approx(min(e["_s"] for e in others))
        assert hi == pytest.approx(max(e["_e"] for e in others))
    by_lane, by_device = defaultdict(list), defaultdict(list)
    for d in acts:
        by_lane[lane(d)].append(d)
        by_device[lane(d)[0]].append(d)
    table = streams.set_index(["device", "stream"])
    assert len(table) == len(by_lane) + len(by_device)
    for key, mine in by_lane.items():
        row = table.loc[key]
        busy = union_length(iv(mine))
        ordered = sorted(iv(mine))
        hta = sum(ordered[i][0] - ordered[i - 1][1] for i in range(1, len(ordered)))
        assert row["kernels"] == len(mine)
        assert row["busy_us"] == pytest.approx(busy, abs=1e-6)
        assert row["window_us"] == pytest.approx(hi - lo)
        assert row["idle_in_window_us"] == pytest.approx(hi - lo - busy, abs=1e-6)
        assert row["idle_between_kernels_us"] == pytest.approx(hta, abs=1e-6)
        assert row["utilization_pct"] == pytest.approx(100 * busy / (hi - lo))
    for dev, mine in by_device.items():
        row = table.loc[(dev, "all")]
        busy = union_length(iv(mine))
        span = max(d["_e"] for d in mine) - min(d["_s"] for d in mine)
        assert row["busy_us"] == pytest.approx(busy, abs=1e-6)
        assert row["idle_between_kernels_us"] == pytest.approx(span - busy, abs=1e-6)
        assert row["idle_in_window_us"] == pytest.approx(hi - lo - busy, abs=1e-6)
    # the device's busy time never exceeds what the steps' own busy times add up to
    if counted:
        total = sum(table.loc[(dev, "all"), "busy_us"] for dev in by_device)
        assert total <= steps.loc[steps["counted"], "device_busy_us"].sum() + 1e-6


def test_v100_ddp_device_work_per_step_is_steady():
    """The V100 DDP trace: host steps shrink and grow, the work each launched does not."""
    raw = Raw("v100_ddp_ns_timestamps.pt.trace.json.gz")
    p = load(str(raw.path))
    busy = p.steps["device_busy_us"].to_numpy()
    expected = [union_length(iv(raw.launched(k))) for k in range(len(raw.steps))]
    assert busy == pytest.approx(expected, abs=1e-6)
    assert (busy.max() - busy.min()) / busy.mean() < 0.01
    # the host window sees much less of the first step's work: the old figure
    window = p.steps["device_busy_in_window_us"].to_numpy()
    assert window[0] < 0.5 * busy[0]
    # the work launched after the last host range ends is still the last step's
    last_end = raw.steps[-1][2]
    after = [d for d in raw.launched(len(raw.steps) - 1) if d["_s"] >= last_end]
    assert after and p.summary["device_activities_outside_steps"] == 0
    assert p.summary["device_busy_per_step_us"] == pytest.approx(sum(expected) / len(expected))
    # busy share over the time until the steps' work ended, said in the notes
    work_end = max(d["_e"] for k in range(len(raw.steps)) for d in raw.launched(k))
    window = work_end - raw.steps[0][1]
    launched = [d for k in range(len(raw.steps)) for d in raw.launched(k)]
    assert p.summary["device_busy_pct"] == pytest.approx(100 * union_length(iv(launched)) / window)
    assert p.summary["device_busy_pct"] <= 100
    lag = fmt_time(work_end - last_end)
    assert any("ran behind the host" in n and lag in n for n in p.notes)
