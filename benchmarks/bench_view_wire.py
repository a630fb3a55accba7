"""Bytes sent and kernel time to the first drawn view: two source trees side by side.

For each trace and each tree (``--source``, a checkout of this project; the
default compares this tree with ``--base``, a commit checked out into a
temporary git worktree), a fresh process loads the trace, builds the inline
view in an in-process ipykernel (real comms) and counts every byte the
kernel publishes on widget comms until the page has what it needs to draw
the first page:

* an ipywidgets + jupyter_bokeh view (before this change) sends every widget
  model's state, every bokeh document included, when it is displayed;
* the one-anywidget view sends its state (front-end module and stylesheet),
  then, as the page asks: the node tree and the documents of the figures on
  the first page (other pages' figures are sent when first shown). BokehJS,
  sent once per page, is reported in its own column, and so is what opening
  the Timeline tab sends (the old view sent it with the rest).

Also reported: what the saved notebook keeps per view (the widget's saved
state plus the output's static text and HTML), and the kernel's wall time
from "display" to the last byte. Rounds rotate the order of the trees; the
figures are medians over rounds, with min-max.

    python benchmarks/bench_view_wire.py --base 78f4587 --repeat 3
    python benchmarks/bench_view_wire.py --events 1000000   # adds the 1M-event synthetic trace
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from base_tree import ROOT, checkout, run_child

sys.path.insert(0, str(Path(__file__).resolve().parent))

_CHILD = r"""
import json, sys, time
trace = sys.argv[1]
from ipykernel.inprocess.manager import InProcessKernelManager
km = InProcessKernelManager(); km.start_kernel()
import comm.base_comm as base_comm
import ipykernel.comm.comm as kernel_comm

sent = {"bytes": 0, "messages": 0}

def counting(cls):
    original = cls.publish_msg

    def publish(self, msg_type, data=None, metadata=None, buffers=None, **keys):
        sent["bytes"] += len(json.dumps(data, default=str)) + sum(len(bytes(b)) for b in (buffers or []))
        sent["messages"] += 1
        return original(self, msg_type, data=data, metadata=metadata, buffers=buffers, **keys)

    cls.publish_msg = publish

for cls in {base_comm.BaseComm, kernel_comm.BaseComm}:
    if "publish_msg" in vars(cls):
        counting(cls)
import jupyter_torchprof as jt
profile = jt.load(trace)
profile.ops, profile.kernels, profile.findings  # tables are not what is measured here
t0 = time.perf_counter()
bundle = profile._repr_mimebundle_()
if isinstance(bundle, tuple):
    bundle = bundle[0]
widget_mime = "application/vnd.jupyter.widget-view+json"
assert widget_mime in bundle, "no widget in the bundle"
saved_state = sent["bytes"]  # what the notebook keeps as widget state when it saves it
bokehjs = 0
try:
    from jupyter_torchprof.views import widget as view_module
    from jupyter_torchprof.views import ui
except ImportError:
    ui = None
if ui is not None and hasattr(view_module, "keep_live"):
    view = view_module._LIVE[-1]
    surface = view.widget()

    def count_custom(content, buffers=None):
        # An in-process kernel's comm drops custom messages (it has no kernel
        # to send them on): count them here, as the comm would serialise them.
        sent["bytes"] += len(json.dumps({"method": "custom", "content": content}, default=str))
        sent["bytes"] += sum(len(bytes(b)) for b in (buffers or []))
        sent["messages"] += 1

    surface.send = count_custom
    surface._on_page_message(surface, {"t": "hello"}, [])
    first_page = view.tabs.children[view.tabs.selected_index]
    for node in ui.walk(first_page):
        if isinstance(node, ui.Figure):
            surface._on_page_message(surface, {"t": "doc", "id": node.id}, [])
    from jupyter_torchprof.views.surface import bokehjs as _bokehjs
    bokehjs = sum(len(b) for b in _bokehjs()[1])
seconds = time.perf_counter() - t0
first = sent["bytes"]
timeline = 0
if ui is not None and hasattr(view_module, "keep_live"):
    # As a click on the tab: a page built when first shown is built and sent now.
    view.tabs.set_from_page(view._timeline_tab)
    for node in ui.walk(view.tabs.children[view._timeline_tab]):
        if isinstance(node, ui.Figure):
            surface._on_page_message(surface, {"t": "doc", "id": node.id}, [])
    timeline = sent["bytes"] - first
static = len(json.dumps({k: bundle[k] for k in ("text/plain", "text/html") if k in bundle}))
print(json.dumps({"bytes": first, "messages": sent["messages"], "seconds": seconds,
                  "saved": saved_state + static, "bokehjs": bokehjs, "timeline": timeline}))
"""


def measure(source: Path, trace: Path) -> dict:
    return run_child(_CHILD, source, str(trace))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="78f4587", help="commit of the view before (default: %(default)s)")
    ap.add_argument("--source", action="append", type=Path, help="trees to compare (default: base and this)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--events", type=int, default=0, help="also a synthetic trace of this many events")
    args = ap.parse_args()
    if args.source:
        run(args, args.source)
        return
    with checkout(args.base) as base:
        run(args, [base, ROOT])


def run(args: argparse.Namespace, sources: list[Path]) -> None:
    """Measure every trace in every tree of ``sources`` and print the table."""
    TRACE_DIR = ROOT / "tests" / "data" / "kineto"
    traces = [
        ("small CPU cell", TRACE_DIR / "cpu_only.pt.trace.json.gz"),
        ("A100 trace", TRACE_DIR / "a100_nccl_rank0.pt.trace.json.gz"),
    ]
    if args.events:
        from bench_load import synthetic_trace

        out = Path(tempfile.gettempdir()) / "torchprof-bench"
        out.mkdir(exist_ok=True)
        traces.append((f"{args.events:,} events", synthetic_trace(out, args.events, 5)))
    print(
        f"{'trace':<18} {'tree':<40} {'sent to first view':>20} {'msgs':>5} {'kernel s':>9} "
        f"{'saved/view':>11} {'BokehJS once':>13} {'timeline opened':>16}"
    )
    for label, trace in traces:
        runs: dict[Path, list[dict]] = {s: [] for s in sources}
        for r in range(args.repeat):
            order = sources[r % len(sources) :] + sources[: r % len(sources)]  # rotated rounds
            for s in order:
                runs[s].append(measure(s, trace))
        for s in sources:
            med = {k: statistics.median(x[k] for x in runs[s]) for k in runs[s][0]}
            lo = min(x["seconds"] for x in runs[s])
            hi = max(x["seconds"] for x in runs[s])
            print(
                f"{label:<18} {str(s)[-40:]:<40} {med['bytes'] / 1e3:>17.1f} kB {med['messages']:>5.0f} "
                f"{med['seconds']:>5.2f} ({lo:.2f}-{hi:.2f}) {med['saved'] / 1e3:>8.1f} kB "
                f"{med['bokehjs'] / 1e6:>10.2f} MB {med['timeline'] / 1e3:>13.1f} kB"
            )
        if len(sources) >= 2:
            base, new = (statistics.median(x["bytes"] for x in runs[s]) for s in sources[:2])
            print(f"{'':<18} bytes to the first view: {base / max(new, 1):.1f}x fewer in {sources[1]}")


if __name__ == "__main__":
    main()
