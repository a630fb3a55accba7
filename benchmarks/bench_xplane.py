"""Reading XPlane files: our wire decoder vs the ``protobuf`` package, side by side.

Both read the same bytes into the same thing: for every event of every line,
its name, offset, duration and stats (what `trace.xplane.device_events`
needs). protobuf gets the schema from ``tests/data/xplane_schema.py`` (a
descriptor written by hand) and parses with its C (upb) backend; walking its
message objects is then Python, as ours is.

Files: the real JAX CPU files in tests/data, and a constructed TPU XSpace of
``--steps`` steps (six events per step per device, two devices) written with
protobuf for the occasion. Prints the median of ``--rounds`` interleaved
rounds per file and the ratio. Needs ``protobuf`` (not a dependency).

Usage::

    python benchmarks/bench_xplane.py [--steps 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "data"))

from jupyter_torchprof.trace import xplane  # noqa: E402


def ours(data: bytes) -> int:
    """Decode with our reader and touch every event's name and stats."""
    space = xplane.decode_xspace(data)
    n = 0
    for plane in space.planes:
        md = plane.event_metadata
        for line in plane.lines:
            for ev in line.events:
                m = md.get(ev.metadata_id)
                _ = (m.name if m else "", ev.offset_ps, ev.duration_ps, plane.stat_values(ev.stats))
                n += 1
    return n


def with_protobuf(data: bytes, classes: dict) -> int:
    """Parse with protobuf, then the same walk over its message objects."""
    space = classes["XSpace"]()
    space.ParseFromString(data)
    n = 0
    for plane in space.planes:
        md = plane.event_metadata
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            for ev in line.events:
                name = md[ev.metadata_id].name if ev.metadata_id in md else ""
                stats = {}
                for s in ev.stats:
                    kind = s.WhichOneof("value")
                    value = getattr(s, kind) if kind else None
                    stats[names.get(s.metadata_id, "")] = (
                        names.get(value, "") if kind == "ref_value" else value
                    )
                _ = (name, ev.offset_ps, ev.duration_ps, stats)
                n += 1
    return n


def _big_tpu_file(steps: int) -> bytes:
    from make_xplane_fixtures import _tpu_space
    from xplane_schema import message_classes

    return _tpu_space(message_classes(), steps=steps, bursts=1, link=True).SerializeToString()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    from xplane_schema import message_classes

    classes = message_classes()
    files = {p.name: p.read_bytes() for p in sorted((ROOT / "tests" / "data").glob("jax_cpu_*.xplane.pb"))}
    files[f"constructed TPU, {args.steps} steps"] = _big_tpu_file(args.steps)
    print(f"{'file':38} {'MB':>6} {'events':>8} {'ours s':>8} {'protobuf s':>10} {'ours/protobuf':>13}")
    for name, data in files.items():
        times: dict[str, list[float]] = {"ours": [], "pb": []}
        counts = set()
        for _ in range(args.rounds):
            for key in ("ours", "pb"):
                t = time.perf_counter()
                counts.add(ours(data) if key == "ours" else with_protobuf(data, classes))
                times[key].append(time.perf_counter() - t)
        assert len(counts) == 1, "the two readers disagree on the number of events"
        a, b = statistics.median(times["ours"]), statistics.median(times["pb"])
        print(f"{name:38} {len(data) / 1e6:6.2f} {counts.pop():8d} {a:8.4f} {b:10.4f} {a / b:13.2f}")


if __name__ == "__main__":
    main()
