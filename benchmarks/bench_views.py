"""Size and build time of the interactive view for 10k, 100k and 1M events.

For each size a realistic Kineto trace is written by
``benchmarks/make_synthetic_trace.py`` (training steps with nested ops,
launches, kernels on three streams, flows, annotations), parsed, and its
tables computed (analysis, timed apart). Then, side by side:

* **build**: Python time to build the timeline (level of detail), the op and
  kernel tables, and the whole ipywidgets view (tables and findings already
  computed: they are analysis, timed apart);
* **zoom**: Python time to answer a zoom into 1% of the trace (what a
  ``RangesUpdate`` from the browser costs);
* **sizes**: what the notebook saves by default (the output's mimebundle:
  text/plain, static text/html and the widget reference), what it saves with
  JupyterLab's "save widget state" on (the bokeh documents), and the
  timeline alone as ``bokeh.embed.json_item`` (what the sidebar embeds);
* **glyphs**: how many rectangles the browser gets for the full view.

Ratios are printed against the 10k row. Usage::

    python benchmarks/bench_views.py [--sizes 10000 100000 1000000]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent


def _synthetic_writer():
    spec = importlib.util.spec_from_file_location("make_synthetic_trace", HERE / "make_synthetic_trace.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.write_trace


def _timed(fn):
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _findings(profile):
    try:
        return profile.findings
    except AttributeError:  # a checkout without the findings
        return None


def _widget_state_bytes(view) -> int:
    """Bytes of every widget's state, as "save widget state" would store it."""
    import ipywidgets as W

    total = 0
    seen = set()

    def walk(w):
        nonlocal total
        if id(w) in seen or not isinstance(w, W.Widget):
            return
        seen.add(id(w))
        state = w.get_state()
        total += len(orjson.dumps(state, default=str))
        for child in getattr(w, "children", ()):
            walk(child)

    walk(view)
    return total


def measure(n_events: int, folder: Path) -> dict:
    from bokeh.embed import json_item

    from jupyter_torchprof import load
    from jupyter_torchprof.views.tables import KernelTable, OpTable
    from jupyter_torchprof.views.timeline import Timeline
    from jupyter_torchprof.views.widget import ProfileView

    write_trace = _synthetic_writer()
    path = folder / f"synthetic_{n_events}.pt.trace.json.gz"
    written = write_trace(path, n_events)
    profile, parse_s = _timed(lambda: load(path))
    # Tables and findings are analysis: the view shows them but does not make them.
    _, analysis_s = _timed(
        lambda: (
            profile.events,
            profile.ops,
            profile.kernels,
            profile.steps,
            profile.summary,
            _findings(profile),
        )
    )

    tl, timeline_s = _timed(lambda: Timeline(profile))
    _, tables_s = _timed(lambda: (OpTable(profile), KernelTable(profile)))
    view, view_s = _timed(lambda: ProfileView(profile))
    lo, hi = tl.span
    mid = (lo + hi) / 2
    _, zoom_s = _timed(lambda: tl.fetch(mid, mid + (hi - lo) / 100))
    zoom_glyphs = tl.glyph_count
    tl.fetch()

    bundle = {
        "text/plain": profile.table(),
        "text/html": profile._repr_html_static(),
        "application/vnd.jupyter.widget-view+json": {
            "version_major": 2,
            "version_minor": 0,
            "model_id": "0" * 32,
        },
    }
    out = {
        "events": written,
        "drawable": int((tl.row >= 0).sum()),
        "parse_s": parse_s,
        "analysis_s": analysis_s,
        "timeline_s": timeline_s,
        "tables_s": tables_s,
        "view_s": view_s,
        "zoom_s": zoom_s,
        "glyphs": tl.glyph_count,
        "zoom_glyphs": zoom_glyphs,
        "output_bytes": len(orjson.dumps(bundle)),
        "state_bytes": _widget_state_bytes(view),
        "timeline_bytes": len(orjson.dumps(json_item(tl.model))),
    }
    view.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            r = measure(n, Path(tmp))
            rows.append(r)
            print(
                f"{r['events']:>9,} events  parse {r['parse_s']:6.2f} s  analysis {r['analysis_s']:6.2f} s  "
                f"| timeline {r['timeline_s']:6.2f} s  tables {r['tables_s']:5.2f} s  view {r['view_s']:6.2f} s  "
                f"zoom {r['zoom_s'] * 1e3:6.0f} ms  | glyphs {r['glyphs']:>7,} (zoomed {r['zoom_glyphs']:,}) "
                f"| saved output {r['output_bytes'] / 1e3:6.1f} kB  widget state {r['state_bytes'] / 1e6:5.2f} MB  "
                f"timeline json {r['timeline_bytes'] / 1e6:5.2f} MB",
                flush=True,
            )
    base = rows[0]
    print("\nratios to the first size:")
    for r in rows:
        print(
            f"{r['events'] / base['events']:7.1f}× events: view build {r['view_s'] / base['view_s']:6.1f}×, "
            f"widget state {r['state_bytes'] / base['state_bytes']:5.1f}×, "
            f"saved output {r['output_bytes'] / base['output_bytes']:4.1f}×, "
            f"view build / parse {r['view_s'] / r['parse_s']:4.2f}, "
            f"bytes per event {r['state_bytes'] / r['events']:6.1f}"
        )


if __name__ == "__main__":
    main()
