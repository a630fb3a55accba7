"""The interactive view's builders: level of detail, payloads, exact totals, escaping.

The browser side (clicks, sorting, drawing) is in tests/browser/test_views.py;
here are the Python builders, checked against brute force and against the
trace files read with the standard library.
"""

from __future__ import annotations

import html
import os
import re

import nbformat
import numpy as np
import orjson
import pandas as pd
import pytest
from nbclient import NotebookClient
from tracefiles import key_averages_rows, raw_events, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis.lod import LodIndex, ancestor_count
from jupyter_torchprof.format import fmt_time
from jupyter_torchprof.results.profile import Profile
from jupyter_torchprof.trace.parser import parse_bytes
from jupyter_torchprof.views.interactive import WIDGET_MIME, widgets_available
from jupyter_torchprof.views.memory import build_memory, device_series, envelope
from jupyter_torchprof.views.tables import KernelTable, OpTable, available_groupings, match_names
from jupyter_torchprof.views.timeline import Timeline, build_timeline

EVIL = "<img src=x onerror=alert(1)>"
A100 = "a100_nccl_rank0.pt.trace.json.gz"


# --------------------------------------------------------------------------- #
# fixtures


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """A real CPU capture with shapes, memory and an evil record_function name."""
    from IPython.core.interactiveshell import InteractiveShell

    tmp = tmp_path_factory.mktemp("views")
    old_cwd = os.getcwd()
    os.chdir(tmp)
    os.environ["TORCHPROF_RUN_DIR"] = str(tmp / "runs")
    InteractiveShell.clear_instance()
    sh = InteractiveShell.instance()
    try:
        sh.run_line_magic("load_ext", "jupyter_torchprof")
        sh.run_cell(
            "import torch\nfrom torch.profiler import record_function\n"
            "m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))\n"
            "x = torch.randn(32, 64)"
        )
        res = sh.run_cell(
            f"%%torchprof --steps 2 --record-shapes --memory -q -o p\n"
            f"with record_function({EVIL!r}):\n    y = m(x).sum()"
        )
        assert res.error_in_exec is None, res.error_in_exec
        profile = sh.user_ns["p"]
        from jupyter_torchprof.runs.store import wait_for_compression

        wait_for_compression()
        yield profile
    finally:
        InteractiveShell.clear_instance()
        os.chdir(old_cwd)
        os.environ.pop("TORCHPROF_RUN_DIR", None)


@pytest.fixture(scope="module")
def a100():
    path = real_trace(A100)
    return path, load(path)


def _synthetic_profile(steps: int, layers: int) -> Profile:
    """A Kineto trace written here (not by the code under test): per layer a
    nested op, a launch and a kernel linked by correlation, on two threads."""
    events = []
    t = 0.0
    corr = 0
    for step in range(steps):
        start = t
        for layer in range(layers):
            corr += 1
            tid = 1 if layer % 3 else 2
            events.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": "aten::linear",
                    "pid": 1,
                    "tid": tid,
                    "ts": t,
                    "dur": 9.0,
                }
            )
            events.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": f"aten::op{layer % 7}",
                    "pid": 1,
                    "tid": tid,
                    "ts": t + 1,
                    "dur": 7.0,
                }
            )
            events.append(
                {
                    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid,
                    "ts": t + 2, "dur": 3.0, "args": {"correlation": corr},
                }
            )  # fmt: skip
            events.append(
                {
                    "ph": "X", "cat": "kernel", "name": f"kernel_{layer % 11}", "pid": 0, "tid": 7,
                    "ts": t + 4, "dur": 2.0 + (layer % 5),
                    "args": {"correlation": corr, "device": 0, "stream": 7, "grid": [8, 1, 1], "block": [128, 1, 1]},
                }
            )  # fmt: skip
            t += 10.0
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{step}",
                "pid": 1,
                "tid": 1,
                "ts": start,
                "dur": t - start,
            }
        )
        t += 1.0
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "Synthetic GPU"}],
        "traceEvents": events,
    }
    return Profile(parse_bytes(orjson.dumps(doc)), name="synthetic")


@pytest.fixture(scope="module")
def synthetic():
    return _synthetic_profile(steps=40, layers=1000)  # 160k events


# --------------------------------------------------------------------------- #
# level of detail


def _random_rows(n: int, rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    row = rng.integers(0, rows, n)
    dur = rng.exponential(5.0, n) * (rng.random(n) < 0.98) + rng.exponential(500.0, n) * (
        rng.random(n) < 0.02
    )
    ts = np.zeros(n)
    for r in range(rows):
        m = row == r
        gaps = rng.exponential(4.0, m.sum())
        ts[m] = np.cumsum(dur[m] + gaps) - dur[m]
    return ts, dur, row


@pytest.mark.parametrize("budget", [50, 1000, 20_000])
def test_lod_stays_within_budget_and_accounts_for_every_event(budget):
    ts, dur, row = _random_rows(200_000, 12)
    index = LodIndex(ts, dur, row)
    end = ts + dur
    lo, hi = float(ts.min()), float(end.max())
    for t0, t1 in [(lo, hi), (lo + (hi - lo) * 0.3, lo + (hi - lo) * 0.31), (hi - 50.0, hi)]:
        g = index.query(t0, t1, max_glyphs=budget, resolution=4000)
        visible = (ts <= t1) & (end >= t0)
        assert len(g) <= budget
        if len(g) < budget or g.resolution > 16:
            # Nothing was dropped: merged glyphs stand for every visible event.
            assert g.count.sum() == visible.sum()
        # Every glyph is on the row of the event it shows, and starts no later
        # than it, and merged glyphs are as busy as their members.
        assert (row[g.rep] == g.row).all()
        assert (g.start <= ts[g.rep] + 1e-9).all()
        assert (g.busy <= g.dur + 1e-6).all() or (g.count == 1).all()
        single = g.count == 1
        np.testing.assert_allclose(g.start[single], ts[g.rep[single]])
        np.testing.assert_allclose(g.dur[single], dur[g.rep[single]])


def test_lod_keeps_wide_events_and_merges_narrow_ones():
    ts, dur, row = _random_rows(50_000, 4, seed=1)
    index = LodIndex(ts, dur, row)
    g = index.query(max_glyphs=10**9, resolution=1000)
    px = (index.span[1] - index.span[0]) / g.resolution
    wide = np.flatnonzero(dur >= px)
    assert set(wide.tolist()) <= set(g.rep[g.count == 1].tolist())
    assert (g.count > 1).any()
    # Busy time is conserved exactly by the merging.
    np.testing.assert_allclose(g.busy.sum(), dur.sum(), rtol=1e-9)


def test_lod_zoomed_window_is_exact():
    ts, dur, row = _random_rows(100_000, 6, seed=2)
    index = LodIndex(ts, dur, row)
    t0, t1 = float(np.median(ts)), float(np.median(ts)) + 40.0
    g = index.query(t0, t1, max_glyphs=100_000)
    visible = np.flatnonzero((ts <= t1) & (ts + dur >= t0))
    assert (g.count == 1).all()
    assert sorted(g.rep.tolist()) == sorted(visible.tolist())


def test_ancestor_count_matches_a_walk_up_the_tree():
    rng = np.random.default_rng(3)
    n = 2000
    parent = np.full(n, -1)
    depth = np.zeros(n, dtype=np.int32)
    for i in range(1, n):
        if rng.random() < 0.9:
            parent[i] = rng.integers(0, i)
            depth[i] = depth[parent[i]] + 1
    wanted = rng.random(n) < 0.5
    got = ancestor_count(parent, depth, wanted)
    for i in range(n):
        k, p = 0, parent[i]
        while p >= 0:
            k += bool(wanted[p])
            p = parent[p]
        assert got[i] == k


# --------------------------------------------------------------------------- #
# tables


def test_filter_reads_substrings_and_regexes():
    names = pd.Series(["aten::mm", "aten::addmm", "aten::add_", "Conv2d", "nccl:all_reduce"])
    mask, mode = match_names(names, "MM")
    assert mode == "text" and names[mask].tolist() == ["aten::mm", "aten::addmm"]
    mask, mode = match_names(names, "^aten::(mm|add_)$")
    assert mode == "regex" and names[mask].tolist() == ["aten::mm", "aten::add_"]
    mask, mode = match_names(names, "conv")
    assert names[mask].tolist() == ["Conv2d"]
    mask, mode = match_names(names, "add(")
    assert mode == "text (invalid regex)" and not mask.any()
    mask, mode = match_names(names, "  ")
    assert mode == "" and mask.all()


def test_op_table_rows_and_totals_agree_with_the_trace_file(a100):
    path, profile = a100
    raw = [e for e in raw_events(path) if e.get("ph") == "X"]
    counted = key_averages_rows(raw, ("cpu_op", "user_annotation"))
    table = OpTable(profile, limit=5)
    data = table.source.data
    assert len(data["name"]) == 5
    # Names travel as text, numbers as float arrays.
    assert all(isinstance(n, str) for n in data["name"])
    assert data["calls"].dtype == np.float64
    for name, calls, total in zip(data["name"], data["calls"], data["cpu_total_us"], strict=True):
        if name == "ProfilerStep*":
            continue
        # Calls and totals as key_averages() counts them (a lone same-name
        # child is part of its parent), from the raw file in plain Python.
        assert calls == counted[name][0]
        assert total == pytest.approx(counted[name][1], rel=1e-9)
    # Filtering keeps exact totals over every row, not only the shown ones.
    table.update(pattern="conv")
    assert all("conv" in n.lower() for n in table.source.data["name"])
    assert "match" in table.status() and "totals over all rows" in table.status()
    n_all = len(profile.ops)
    table.update(pattern="", limit=10**6)
    assert len(table.source.data["name"]) == min(n_all, 5000)


def test_kernel_table_total_is_exact(a100):
    path, profile = a100
    raw = [
        e
        for e in raw_events(path)
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    table = KernelTable(profile, limit=3)
    assert len(table.source.data["short_name"]) == 3
    status = table.status()
    assert f"{len(raw):,} calls" in status
    assert fmt_time(sum(float(e["dur"]) for e in raw)) in status
    # Launch arguments appear when the trace has them.
    assert {c.field for c in table.columns} >= {"grid", "block"}
    # The selected row maps to exactly its kernel's events.
    rows = table.event_rows(0)
    name = table.shown.iloc[0]["name"]
    assert len(rows) == sum(1 for e in raw if e["name"] == name)


def test_groupings_follow_what_was_recorded(cpu_run):
    assert available_groupings(cpu_run) == ["name", "shape"]
    table = OpTable(cpu_run, group_by="shape")
    shown = table.shown
    visible = {c.field for c in table.model.columns if c.visible}
    assert "input_shapes" in visible
    for i in range(len(shown)):
        assert len(table.event_rows(i)) == shown.iloc[i]["calls"]
    with pytest.raises(ValueError):
        table.update(group_by="stack")


# --------------------------------------------------------------------------- #
# timeline


def test_timeline_sends_names_once_as_codes(a100):
    _, profile = a100
    tl = Timeline(profile)
    strings = tl.strings_source.data["s"]
    assert len(strings) == len(set(strings))
    ev_names = set(profile.events["name"].astype(str))
    assert set(strings) <= ev_names | set(profile.events["grid"].dropna().astype(str)) | set(
        profile.events["block"].dropna().astype(str)
    )
    for source in (tl.host_source, tl.dev_source):
        for col, values in source.data.items():
            assert isinstance(values, np.ndarray) and values.dtype.kind in "iuf", col
        codes = source.data["n"]
        assert codes.dtype == np.int32 and codes.max() < len(strings)
    # Every drawable event is sent (the trace is below the detail limit).
    assert tl.detailed
    assert tl.glyph_count == int((tl.row >= 0).sum())


def test_timeline_lod_bounds_and_zoom_refetch(a100):
    _, profile = a100
    tl = Timeline(profile, max_glyphs=500)
    assert not tl.detailed
    assert tl.glyph_count <= 500
    k = np.concatenate([tl.host_source.data["k"], tl.dev_source.data["k"]])
    assert (k > 1).any()
    assert k.sum() == int((tl.row >= 0).sum())  # every drawn event is represented
    lo, hi = tl.span
    start, end = lo + (hi - lo) * 0.40, lo + (hi - lo) * 0.4005
    assert tl.needs_fetch(start, end)
    tl.fetch(start, end)
    assert tl.glyph_count <= 500
    x = np.concatenate([tl.host_source.data["x"], tl.dev_source.data["x"]])
    w = np.concatenate([tl.host_source.data["w"], tl.dev_source.data["w"]])
    k = np.concatenate([tl.host_source.data["k"], tl.dev_source.data["k"]])
    in_view = (x <= end) & (x + w >= start)
    ts = profile.events["ts"].to_numpy()
    dur = profile.events["dur"].to_numpy()
    expected = int(((tl.row >= 0) & (ts <= end) & (ts + dur >= start)).sum())
    # Zoomed in, the visible events are there one by one.
    assert k[in_view].sum() >= expected
    assert (k[in_view] == 1).mean() > 0.9


def test_clicking_a_kernel_links_the_op_that_launched_it(a100):
    path, profile = a100
    tl = Timeline(profile)
    ev = profile.events
    picked = []
    tl.on_pick = picked.append
    dev = tl.dev_source.data
    is_kernel = ev["kind"].astype(str).to_numpy()[tl._dev_reps] == "kernel"
    i = int(np.argmax(np.where(is_kernel & (dev["k"] == 1), dev["w"], 0)))
    krow = int(tl._dev_reps[i])
    assert str(ev["kind"].iloc[krow]) == "kernel"
    tl.pick("device", i)
    op = int(ev["op"].iloc[krow])
    assert op in tl.highlighted.tolist()
    described = dict(picked[-1])
    assert described["launched by"] == str(ev["name"].iloc[op])
    # The trace file says the same: the launch with this kernel's correlation
    # ran on the op's thread, inside the op.
    raw = raw_events(path)
    corr = int(ev["correlation"].iloc[krow])
    launch = next(
        e for e in raw if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation") == corr
    )
    assert int(launch["tid"]) == int(ev["tid"].iloc[op])
    t0 = profile.meta.t0_us
    assert (
        ev["ts"].iloc[op] - 1e-3 <= float(launch["ts"]) - t0 <= ev["ts"].iloc[op] + ev["dur"].iloc[op] + 1e-3
    )
    # And the reverse: clicking the op highlights the kernel.
    host_i = int(np.flatnonzero(tl._host_reps == op)[0])
    tl.pick("host", host_i)
    assert krow in tl.highlighted.tolist()


def test_build_timeline_is_a_standalone_bokeh_model(a100):
    from bokeh.embed import json_item

    _, profile = a100
    model = build_timeline(profile, max_glyphs=2000)
    item = json_item(model)
    text = orjson.dumps(item)
    assert b"torchprof-timeline" in text
    # No CDN or script URL inside the model.
    assert b"https://" not in text and b"cdn." not in text


def test_timeline_payload_is_small_for_a_large_trace(synthetic):
    from bokeh.embed import json_item

    tl = Timeline(synthetic, max_glyphs=20_000)
    n_events = int((tl.row >= 0).sum())
    assert n_events > 150_000
    assert tl.glyph_count <= 20_000
    size = len(orjson.dumps(json_item(tl.model)))
    # A few dozen bytes per glyph, names not repeated per glyph.
    assert size < 20_000 * 60 + 200_000, size
    strings = tl.strings_source.data["s"]
    assert len(strings) == len(set(strings))
    assert len(strings) <= len(synthetic.events["name"].cat.categories) + 2  # + grid, block


# --------------------------------------------------------------------------- #
# escaping


def test_names_are_text_in_every_view(cpu_run):
    from bokeh.models import HTMLTemplateFormatter, StringFormatter

    from jupyter_torchprof.views.widget import ProfileView, _details_html, header_html

    assert EVIL in cpu_run.ops["name"].tolist()
    static = cpu_run._repr_html_static()
    assert EVIL not in static and html.escape(EVIL) in static
    assert EVIL not in header_html(cpu_run) or "&lt;img" in header_html(cpu_run)
    view = ProfileView(cpu_run)
    try:
        # The op table sends the name as a string rendered by StringFormatter.
        assert EVIL in view.ops.source.data["name"]
        for col in view.ops.model.columns:
            if col.field in ("name", "input_shapes", "stack", "module"):
                assert isinstance(col.formatter, StringFormatter)
            if isinstance(col.formatter, HTMLTemplateFormatter) and col.field == "note":
                # The notes' chips: text reaches the page only through the template's escaping.
                template = col.formatter.template
                assert "<%- t %>" in template and "<%=" not in template
            elif isinstance(col.formatter, HTMLTemplateFormatter):
                assert view.ops.source.data[col.field].dtype.kind == "f"
        # Timeline: tooltips look names up through a formatter (escaped by
        # bokeh), never with {safe}.
        for tool in view.timeline.figure.tools:
            tips = getattr(tool, "tooltips", None)
            if isinstance(tips, str):
                assert "{safe}" not in tips and "@n{str}" in tips
        ev = cpu_run.events
        row = int(np.flatnonzero(ev["name"].astype(str).to_numpy() == EVIL)[0])
        details = _details_html(view.timeline.describe(row))
        assert "<img" not in details and "&lt;img src=x" in details
        assert "<img" not in view.header.value
    finally:
        view.close()


# --------------------------------------------------------------------------- #
# mimebundle and the widget's behaviour


def test_terminal_ipython_gets_text_and_static_html(shell):
    shell.run_cell("import torch\nx = torch.randn(8, 8)")
    shell.run_cell("%%torchprof --steps 1 -q -o p\ny = x @ x")
    p = shell.user_ns["p"]
    assert not widgets_available()
    bundle = p._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}


def test_kernel_output_has_widget_next_to_static_fallbacks(tmp_path):
    trace = real_trace("cpu_only.pt.trace.json.gz")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext jupyter_torchprof\nimport torch\nx = torch.randn(16, 16)"),
        nbformat.v4.new_code_cell("%%torchprof --steps 2\ny = x @ x"),
        nbformat.v4.new_code_cell(f"%torchprof --load {trace}"),
    ]
    env = dict(os.environ, TORCHPROF_RUN_DIR=str(tmp_path / "runs"))
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute(env=env)
    for cell in nb.cells[1:]:
        outs = [o for o in cell.outputs if o.output_type == "display_data"]
        views = [o for o in outs if WIDGET_MIME in o.data]
        assert len(views) == 1, [o.get("data", {}).keys() for o in cell.outputs]
        data = views[0].data
        assert {"text/plain", "text/html", WIDGET_MIME} <= set(data)
        assert "jp-TorchProf-static" in data["text/html"]
        # What the notebook saves per output stays small: no JavaScript, no data.
        size = len(orjson.dumps(dict(data)))
        assert size < 60_000, size
        assert "<script" not in data["text/html"]
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    assert state, "nbclient stored no widget state: no widget was created"


def test_view_reacts_to_filter_grouping_and_selection(cpu_run):
    from jupyter_torchprof.views.widget import ProfileView

    view = ProfileView(cpu_run)
    try:
        assert [view.tabs.get_title(i) for i in range(len(view.tabs.children))] == [
            f"Ops ({len(cpu_run.ops)})",
            "Timeline",
            "Memory",
        ]
        view.op_filter.value = "addmm"
        assert view.ops.source.data["name"] == ["aten::addmm"]
        assert "1 of" in view.op_status.value
        view.op_group.value = "shape"
        assert set(view.ops.source.data["name"]) == {"aten::addmm"}
        view.op_filter.value = ""
        view.op_group.value = "name"
        view.op_mode.value = "total"
        visible = {c.field for c in view.ops.model.columns if c.visible}
        assert "cpu_total_us" in visible and "self_cpu_us" not in visible
        # Selecting a row outlines its events in the timeline.
        names = view.ops.source.data["name"]
        i = names.index("aten::addmm")
        view.ops.source.selected.indices = [i]
        calls = int(cpu_run.ops.set_index("name").loc["aten::addmm", "calls"])
        assert len(view.timeline.highlight_source.data["x"]) == calls
        assert "outlined in the timeline" in view.op_selection.value
        view.op_goto.click()
        assert view.tabs.selected_index == 1
    finally:
        view.close()


# --------------------------------------------------------------------------- #
# memory


def test_memory_envelope_keeps_peaks():
    rng = np.random.default_rng(4)
    ts = np.sort(rng.random(100_000) * 1e6)
    value = np.cumsum(rng.normal(0, 1000, 100_000))
    x, y = envelope(ts, value, 2000)
    assert len(x) <= 2000
    assert y.max() == value.max() and y.min() == value.min()


def test_memory_view_peak_matches_the_trace(cpu_run):
    raw = raw_events(cpu_run.trace_path)
    allocated = [
        float(e["args"]["Total Allocated"])
        for e in raw
        if e.get("name") == "[memory]" and "Total Allocated" in e.get("args", {})
    ]
    assert allocated
    series = device_series(cpu_run)
    assert max(float(s["allocated"].max()) for s in series.values()) == max(allocated)
    layout = build_memory(cpu_run)
    legend = layout.children[0].legend[0].items[0].label["value"]
    from jupyter_torchprof.format import fmt_bytes

    assert fmt_bytes(max(allocated)) in legend
    assert re.search(r"peak", legend)


# --------------------------------------------------------------------------- #
# issue 14: what the kernel table, the timeline's axis and the compare pages show


def _varies(counts) -> str:
    """The label a kernel row should carry for these per-call values (the oracle)."""
    (top, n), total = counts.most_common(1)[0], sum(counts.values())
    return str(top) if len(counts) == 1 else f"varies: {top} ×{n:,}/{total:,}"


def _innermost_host_op(raw: list[dict]) -> dict:
    """Correlation id -> name of the innermost op or annotation around its runtime call (as HTA)."""
    import bisect
    from collections import defaultdict

    ops = defaultdict(list)
    for e in raw:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation"):
            ops[(e["pid"], e["tid"])].append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"]))
    for lane in ops.values():
        lane.sort()
    out = {}
    for e in raw:
        if e.get("cat") not in ("cuda_runtime", "cuda_driver") or "correlation" not in e.get("args", {}):
            continue
        lane = ops.get((e["pid"], e["tid"]), [])
        t0, t1 = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        i = bisect.bisect_right(lane, (t0, float("inf"), ""))
        # Walking back from the last op started before the call, the first one
        # that holds it is the innermost.
        while i > 0:
            i -= 1
            if lane[i][1] >= t1:
                out[e["args"]["correlation"]] = lane[i][2]
                break
    return out


def test_kernel_rows_say_when_grid_and_launching_op_vary(a100):
    """Grid, block and launching op of an aggregated kernel row, from the trace file's own links."""
    from collections import Counter, defaultdict

    path, profile = a100
    raw = raw_events(path)
    launcher_of = _innermost_host_op(raw)
    grids, blocks, ops = defaultdict(Counter), defaultdict(Counter), defaultdict(Counter)
    for e in raw:
        if e.get("ph") != "X" or e.get("cat") != "kernel":
            continue
        a = e["args"]
        grids[e["name"]][str(a["grid"]).replace(" ", "")] += 1
        blocks[e["name"]][str(a["block"]).replace(" ", "")] += 1
        launcher = launcher_of.get(a.get("correlation"))
        if launcher is not None:
            ops[e["name"]][launcher] += 1
    table = KernelTable(profile, limit=20)
    shown = table.shown[table.shown["kind"] == "kernel"]
    assert len(shown) >= 10
    varied = 0
    for rec in shown.itertuples():
        assert rec.grid == _varies(grids[rec.name]), rec.name
        assert rec.block == _varies(blocks[rec.name]), rec.name
        assert rec.launched_by == _varies(ops[rec.name]), (rec.name, ops[rec.name])
        varied += rec.grid.startswith("varies")
    assert varied >= 3  # the trace has kernels launched with several grids
    assert "launched_by" in table.source.data


def test_unknown_occupancy_is_a_dash_not_zero(a100):
    path, profile = a100
    occ = {}
    for e in raw_events(path):
        if e.get("cat") == "kernel" and "est. achieved occupancy %" in e.get("args", {}):
            occ.setdefault(e["name"], []).append(float(e["args"]["est. achieved occupancy %"]))
    table = KernelTable(profile, limit=50)
    data = dict(zip(table.shown["name"], table.source.data["occupancy"], strict=True))
    unknown = [n for n, v in occ.items() if n in data and max(v) == 0]
    known = [n for n, v in occ.items() if n in data and min(v) > 0]
    assert unknown and known
    assert all(np.isnan(data[n]) for n in unknown)  # drawn as the template's "–" for NaN
    assert all(data[n] == pytest.approx(np.mean(occ[n])) for n in known)
    fmt = next(c.formatter for c in table.model.columns if c.field == "occupancy")
    assert fmt.template.startswith("<% if (value == null || isNaN(value)) { %>–<% } else { %>")


def test_name_column_fits_its_names_and_headers_their_titles(a100):
    from jupyter_torchprof.views.tables import (
        CHAR_PX,
        NAME_FLOOR_PX,
        NAME_MAX_PX,
        NAME_SOFT_PX,
        WRAP_LINES,
        header_width,
    )

    _, profile = a100
    table = KernelTable(profile)
    widths = {c.field: c.width for c in table.model.columns}
    longest = max(len(n) for n in table.shown["short_name"])
    assert widths["short_name"] == min(int(CHAR_PX * longest + 18), NAME_MAX_PX)
    # The browser fits the name column to the room there is: this width is
    # what it wants, then its soft width and its floor; the times stay on screen.
    floor = max(NAME_FLOOR_PX, header_width(table.columns[0], lines=WRAP_LINES))
    assert table.model.tags[0]["short_name"] == [widths["short_name"], NAME_SOFT_PX, floor]
    assert set(table.model.tags[1]) == {c.field for c in table.columns if c.kind == "time"}
    # The kernel table's headers wrap ("Launch" over "delay").
    assert table.wrap_headers
    for spec in table.columns:
        assert widths[spec.field] >= header_width(spec, lines=WRAP_LINES), spec


def test_bokeh_ready_callbacks_reach_the_document():
    """BokehJS fires document_ready on the document's callbacks only; ours are moved there."""
    from bokeh.models import CustomJS
    from bokeh.plotting import figure

    from jupyter_torchprof.views.style import follow_theme, ready_on_document
    from jupyter_torchprof.views.tables import Column, make_table

    fig = figure()
    follow_theme([fig])
    table, _ = make_table(pd.DataFrame({"name": ["a"], "calls": [1]}), [Column("name", "Name", "text")])
    for model in (fig, table):
        before = [cb for m in model.references() for cb in m.js_event_callbacks.get("document_ready", [])]
        assert before and all(isinstance(cb, CustomJS) for cb in before)
        ready_on_document(model)
        ready_on_document(model)  # twice: registered once
        assert model.document.callbacks.js_event_callbacks["document_ready"] == before


def _run_js(code: str) -> object:
    import json
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    out = subprocess.run([node, "-e", code], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize(
    ("ticks", "expected"),
    [
        ([63500.0, 63502.5, 63505.0, 63507.5], ["63.5000 ms", "63.5025 ms", "63.5050 ms", "63.5075 ms"]),
        ([0.0, 250.0, 500.0, 750.0], ["0", "250 µs", "500 µs", "750 µs"]),
        ([1e6, 1.5e6, 2e6], ["1.0 s", "1.5 s", "2.0 s"]),
        ([0.2, 0.4, 0.6], ["200 ns", "400 ns", "600 ns"]),
    ],
)
def test_time_ticks_are_as_precise_as_their_spacing(ticks, expected):
    """The axis formatter run by node: neighbouring ticks never read the same."""
    import json

    from jupyter_torchprof.views.style import TIME_TICKS_JS

    code = (
        "const f = new Function('tick', 'index', 'ticks', " + json.dumps(TIME_TICKS_JS) + ");"
        f"const ticks = {json.dumps(ticks)};"
        "console.log(JSON.stringify(ticks.map((t, i) => f(t, i, ticks))));"
    )
    assert _run_js(code) == expected


def test_timeline_tools_zoom_out_as_far_as_in_and_stay_on_screen(a100):
    """Bokeh's zoom-out needs a factor below 0.5 (it asserts |f / (1 - f)| < 1)."""
    from bokeh.models import ZoomInTool, ZoomOutTool

    _, profile = a100
    fig = Timeline(profile, max_glyphs=2000).figure
    zin = next(t for t in fig.tools if isinstance(t, ZoomInTool))
    zout = next(t for t in fig.tools if isinstance(t, ZoomOutTool))
    assert zout.factor / (1 - zout.factor) < 1
    # One click in and one out give back the span: (1 - f) * 1 / (1 - f).
    assert zin.factor == zout.factor
    assert fig.toolbar_location == "above"


def test_compare_pages_hold_their_tables_as_figures(shell):
    """The diff and graph-break tables are bokeh figures of the comparison's one widget.

    (Their width on screen is asserted in the browser: tests/browser/test_every_view.py.)
    """
    pytest.importorskip("anywidget")
    from jupyter_torchprof.views import ui
    from jupyter_torchprof.views.compare import ComparisonView

    shell.run_cell("import torch\nm = torch.nn.Linear(8, 8)\nx = torch.randn(4, 8)")
    shell.run_cell(
        "%%torchprof --compare --backend aot_eager --steps 1 -q\nh = m(x)\nprint('b')\ny = h.sum()"
    )
    view = ComparisonView(shell.user_ns["_torchprof"])
    page = view.body.children[0]
    figures = [n for n in ui.walk(page) if isinstance(n, ui.Figure)]
    classes = {c for f in figures for c in f.classes}
    assert {"jp-TorchProf-difftable", "jp-TorchProf-breaktable"} <= classes, classes
    # Every figure has a bokeh document of its own, sent when the page first shows it.
    assert len({id(f.sync.doc) for f in figures}) == len(figures)
    view.close()
