"""Write the XPlane test files in this folder (see README.md beside this script).

Run once, from the repository root, with jax, jaxlib and protobuf installed::

    python tests/data/make_xplane_fixtures.py

* ``jax_cpu_*.xplane.pb`` are real: JAX's profiler on this machine's CPU
  wrote them (``jax.profiler.trace``); ``jax_cpu_*.xprof.trace.json.gz`` is
  the Chrome-trace copy xprof wrote of the same XSpace at the same time,
  kept as an independent reading of it.
* ``tpu_*_constructed.*`` are constructed: XSpace messages built with the
  xplane.proto schema (``xplane_schema.py``) in the shape TPU profiles have
  (``/device:TPU:N`` planes with ``Steps`` / ``XLA Modules`` / ``XLA Ops``
  lines), plus the Kineto JSON of the host side of the same run. No TPU
  wrote them.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: Epoch nanoseconds of the constructed run (any fixed instant works).
T0_NS = 1_796_000_000_000_000_000
#: Kineto's baseTimeNanoseconds for the constructed host trace.
BASE_NS = 1_790_000_000_000_000_000


# --------------------------------------------------------------------------- #
# real: JAX on the CPU


def _jax_run(out: Path, program: str) -> None:
    import jax
    import jax.numpy as jnp

    @jax.jit
    def f(x):
        return jnp.tanh(x @ x.T).sum()

    @jax.jit
    def g(x):
        return (jnp.sin(x) * 2.0).mean(axis=0)

    x = jnp.ones((64, 64))
    f(x).block_until_ready()
    g(x).block_until_ready()
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp):
            if program == "jit":
                for _ in range(3):
                    f(x).block_until_ready()
            else:
                for step in range(5):
                    with jax.profiler.StepTraceAnnotation("train", step_num=step):
                        f(x).block_until_ready()
                        g(x).block_until_ready()
        (pb,) = Path(tmp).glob("plugins/profile/*/*.xplane.pb")
        shutil.copyfile(pb, out / f"jax_cpu_{program}.xplane.pb")
        for js in pb.parent.glob("*.trace.json.gz"):
            shutil.copyfile(js, out / f"jax_cpu_{program}.xprof.trace.json.gz")


# --------------------------------------------------------------------------- #
# constructed: TPU planes with the xplane.proto schema


class _Plane:
    """Helper that fills one XPlane message (metadata ids handed out in order)."""

    def __init__(self, msg, pid: int, name: str) -> None:
        self.msg = msg
        msg.id, msg.name = pid, name
        self.events: dict[str, int] = {}
        self.stats: dict[str, int] = {}

    def event_id(self, name: str) -> int:
        if name not in self.events:
            i = len(self.events) + 1
            self.events[name] = i
            md = self.msg.event_metadata[i]
            md.id, md.name = i, name
        return self.events[name]

    def stat_id(self, name: str) -> int:
        if name not in self.stats:
            i = len(self.stats) + 1
            self.stats[name] = i
            md = self.msg.stat_metadata[i]
            md.id, md.name = i, name
        return self.stats[name]

    def line(self, line_id: int, name: str, timestamp_ns: int):
        line = self.msg.lines.add()
        line.id, line.display_id, line.name, line.timestamp_ns = line_id, line_id, name, timestamp_ns
        return line

    def event(self, line, name: str, offset_ps: int, duration_ps: int, **stats) -> None:
        ev = line.events.add()
        ev.metadata_id = self.event_id(name)
        ev.offset_ps, ev.duration_ps = offset_ps, duration_ps
        for key, value in stats.items():
            st = ev.stats.add()
            st.metadata_id = self.stat_id(key)
            if isinstance(value, str):
                # Repeated strings are stored once, as a stat metadata name
                # referenced by id (ref_value), as TPU profiles do.
                st.ref_value = self.stat_id(value)
            elif isinstance(value, float):
                st.double_value = value
            elif key == "bytes_accessed":
                st.uint64_value = value
            else:
                st.int64_value = value


#: One step's ops on the TPU: (HLO op, category, duration µs, FLOPs, bytes).
_OPS = [
    ("fusion.1", "convolution fusion", 180, 2_000_000_000, 40_000_000),
    ("dot.2", "matrix multiply", 120, 1_500_000_000, 20_000_000),
    ("all-reduce.3", "all-reduce", 60, 0, 8_000_000),
    ("copy.4", "data formatting", 15, 0, 4_000_000),
]


def _tpu_space(classes, steps: int, bursts: int, link: bool):
    """An XSpace: a host plane and two TPU planes, ``steps`` steps of ``bursts`` programs each."""
    space = classes["XSpace"]()
    space.hostnames.append("tpu-host")
    host = _Plane(space.planes.add(), 0, "/host:CPU")
    py = host.line(1, "python", T0_NS)
    step_us = 2000
    for dev in (0, 1):
        plane = _Plane(space.planes.add(), 1 + dev, f"/device:TPU:{dev}")
        step_line = plane.line(1, "Steps", T0_NS)
        mod_line = plane.line(2, "XLA Modules", T0_NS)
        op_line = plane.line(3, "XLA Ops", T0_NS)
        for s in range(steps):
            start_ps = (s * step_us + 100) * 10**6
            plane.event(step_line, str(s), start_ps, (step_us - 200) * 10**6, group_id=s)
            t = start_ps
            for b in range(bursts):
                module = "jit_train_step(1)" if bursts == 1 else f"jit_graph_piece({b})"
                m_start = t
                for name, category, dur_us, flops, nbytes in _OPS if bursts == 1 else _OPS[1:2]:
                    dur_ps = (dur_us if bursts == 1 else 12) * 10**6
                    stats = dict(hlo_category=category, hlo_module=module, program_id=7 + b, group_id=s)
                    if flops:
                        stats["flops"] = flops
                    stats["bytes_accessed"] = nbytes
                    if link:
                        stats["correlation_id"] = 1000 + 100 * s + b
                    plane.event(op_line, name, t, dur_ps, **stats)
                    t += dur_ps + 2 * 10**6
                plane.event(mod_line, module, m_start, t - m_start, program_id=7 + b, run_id=s)
                # Between graph pieces the TPU waits for the host (a graph
                # break, or a .item() that needs the value on the host).
                t += (0 if bursts == 1 else 110) * 10**6
            if dev == 0:
                host.event(py, "PjRtExecute", start_ps - 60 * 10**6, 40 * 10**6)
    return space


def _host_trace(steps: int, bursts: int, link: bool) -> dict:
    """The Kineto JSON of the same run's host side (as TorchTPU's would hold it)."""
    pid, tid = 4242, 4242
    events = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": "main thread"}},
    ]
    step_us = 2000
    base_us = (T0_NS - BASE_NS) / 1000
    corr = 0
    for s in range(steps):
        t = base_us + s * step_us
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{s + 1}",
                "pid": pid,
                "tid": tid,
                "ts": t,
                "dur": step_us - 10,
                "args": {"External id": 10 * s + 1},
            }
        )
        for b in range(bursts):
            # A piece's launch happens shortly before its ops start on the TPU.
            launch_ts = t + 30 + b * (12 + 2 + 110) if bursts > 1 else t + 30
            ext = 10 * s + 2 + b
            events.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": "aten::mm" if bursts == 1 else "aten::_local_scalar_dense",
                    "pid": pid,
                    "tid": tid,
                    "ts": launch_ts,
                    "dur": 60,
                    "args": {"External id": ext},
                }
            )
            args = {"External id": ext}
            if link:
                args["correlation"] = 1000 + 100 * s + b
                corr += 1
            events.append(
                {
                    "ph": "X",
                    "cat": "privateuse1_runtime",
                    "name": "PjRtLoadedExecutable::Execute",
                    "pid": pid,
                    "tid": tid,
                    "ts": launch_ts + 5,
                    "dur": 40,
                    "args": args,
                }
            )
    return {
        "schemaVersion": 1,
        "deviceProperties": [],
        "baseTimeNanoseconds": BASE_NS,
        "traceEvents": events,
        "traceName": "constructed TorchTPU host side",
    }


def _write_tpu(out: Path, name: str, steps: int, bursts: int, link: bool) -> None:
    from xplane_schema import message_classes

    classes = message_classes()
    folder = out / name / "plugins" / "profile" / "2026_12_01_12_00_00"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tpu-host.xplane.pb").write_bytes(_tpu_space(classes, steps, bursts, link).SerializeToString())
    doc = _host_trace(steps, bursts, link)
    with open(out / name / "tpu-host.1796000000000.pt.trace.json", "w") as fh:
        json.dump(doc, fh, separators=(",", ":"))


def main() -> None:
    _jax_run(HERE, "jit")
    _jax_run(HERE, "steps")
    _write_tpu(HERE, "tpu_constructed", steps=3, bursts=1, link=True)
    _write_tpu(HERE, "tpu_bursts_constructed", steps=3, bursts=12, link=False)
    for p in sorted(HERE.rglob("*")):
        if p.is_file() and p.suffix != ".py" and p.name != "README.md":
            print(f"{p.relative_to(HERE)}: {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()
