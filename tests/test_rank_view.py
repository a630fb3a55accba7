"""The interactive view of a rank folder: its numbers, its verdict, and a rank opened only when clicked."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from tracefiles import key_averages_calls, raw_events, real_trace, union_length, write_rank_folder

from jupyter_torchprof import load
from jupyter_torchprof.results.ranks import RankSet
from jupyter_torchprof.views.rank_view import RANK_VIEW_COLUMNS, RankView
from jupyter_torchprof.views.style import ACCENT

#: Rank -> the real trace its copy is made from: two V100 DDP ranks and an A100
#: rank whose steps take ~2.8x as long (the straggler).
SOURCES = {
    0: "v100_ddp_ns_timestamps.pt.trace.json.gz",
    1: "v100_ddp_ns_timestamps.pt.trace.json.gz",
    2: "a100_nccl_rank0.pt.trace.json.gz",
}
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return write_rank_folder(tmp_path_factory.mktemp("rankjob"), SOURCES)


@pytest.fixture
def ranks(job) -> RankSet:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load(str(job))


def _from_file(path) -> dict[str, float]:
    """Steps, step time and device busy time per step, with the json module only (the oracle)."""
    raw = [e for e in raw_events(path) if e.get("ph") == "X"]
    steps = [e["dur"] for e in raw if e["name"].startswith("ProfilerStep#")]
    busy = union_length([(e["ts"], e["ts"] + e["dur"]) for e in raw if e.get("cat") in DEVICE_CATS])
    return {"steps": len(steps), "wall": sum(steps) / len(steps), "busy": busy / len(steps)}


def test_view_numbers_are_the_rank_table_and_the_files(job, ranks):
    view = RankView(ranks)
    table = ranks.table
    data = view.source.data
    # One row per rank, each column what RankSet.table holds.
    assert list(data["rank"]) == list(table["rank"]) == sorted(SOURCES)
    for c in RANK_VIEW_COLUMNS:
        if c.numeric:
            np.testing.assert_allclose(data[c.field], table[c.field].to_numpy(np.float64), equal_nan=True)
        else:
            assert list(data[c.field]) == [str(v) for v in table[c.field]]
    # The same numbers, independently: each rank's own trace file read with the json module.
    truth = {r: _from_file(job / f"rank{r}.pt.trace.json.gz") for r in SOURCES}
    median = float(np.median([t["wall"] for t in truth.values()]))
    for i, r in enumerate(data["rank"]):
        t = truth[int(r)]
        assert data["steps"][i] == t["steps"]
        assert data["wall_per_step_us"][i] == pytest.approx(t["wall"])
        assert data["device_busy_per_step_us"][i] == pytest.approx(t["busy"], rel=1e-3)
        assert data["vs_median"][i] == pytest.approx(t["wall"] / median)
    # A bar per rank: its step time, the straggler in the accent colour.
    bars = view.bar_source.data
    assert bars["label"] == [f"rank {r}" for r in sorted(SOURCES)]
    np.testing.assert_allclose(bars["step"], [truth[r]["wall"] for r in sorted(SOURCES)])
    slow = [r for r in SOURCES if truth[r]["wall"] / median > 1.10]
    assert slow == [2]
    assert [c == ACCENT for c in bars["colour"]] == [r in slow for r in sorted(SOURCES)]


def test_verdict_names_the_straggler_and_how_much_slower(job, ranks):
    truth = {r: _from_file(job / f"rank{r}.pt.trace.json.gz") for r in SOURCES}
    median = float(np.median([t["wall"] for t in truth.values()]))
    header = RankView(ranks).header.value
    ratio = truth[2]["wall"] / median
    assert "Rank 2 is a straggler: its step takes" in header
    assert f"{ratio:.2f}× the median rank" in header
    assert "Rank 0" not in header and "Rank 1" not in header


def test_even_ranks_have_no_straggler(tmp_path):
    src = real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz")
    for rank in (0, 1):
        (tmp_path / f"rank{rank}.pt.trace.json.gz").symlink_to(src)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranks = load(str(tmp_path))
    view = RankView(ranks)
    assert "No straggler" in view.header.value
    assert ACCENT not in view.bar_source.data["colour"]


def test_a_rank_is_parsed_only_when_opened(job, ranks):
    view = RankView(ranks)
    assert ranks._loaded == {}  # showing the folder parses no rank's events
    assert view.detail.children == []
    # A click on rank 2's row: that rank's full view below, and only it parsed.
    view.source.selected.indices = [2]
    assert list(ranks._loaded) == [2]
    assert view.picker.value == 2
    (shown,) = view.detail.children
    opened = view._views[2]
    assert shown is opened.root
    # Its op table: rows of that rank, calls as key_averages counts them from its file.
    ops = opened.ops.shown
    assert len(ops) > 5
    calls = key_averages_calls(raw_events(job / "rank2.pt.trace.json.gz"), ("cpu_op", "user_annotation"))
    for d in ops.head(10).to_dict("records"):
        assert d["calls"] == calls[d["name"]], d["name"]
    # A bar's tap and the menu open other ranks; an opened rank is not parsed again.
    view.bar_source.selected.indices = [0]
    assert sorted(ranks._loaded) == [0, 2]
    view.picker.value = 2
    assert view.detail.children[0] is opened.root
    assert sorted(ranks._loaded) == [0, 2]
    view.close()


def test_bundle_keeps_the_static_table(ranks, monkeypatch):
    monkeypatch.setenv("TORCHPROF_WIDGETS", "0")
    bundle = ranks._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert "Rank 2 is a straggler" in bundle["text/plain"]
    for r in SOURCES:
        assert f"\n{r} " in bundle["text/plain"]


@pytest.mark.parametrize("width", [60, 80, 200])
def test_rank_text_table_fits_the_width(ranks, width):
    from jupyter_torchprof import columns
    from jupyter_torchprof.columns import format_cell
    from jupyter_torchprof.views.ranks import rank_table_text

    text = rank_table_text(ranks.table, width)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), [line for line in lines if len(line) > width]
    header = [h for h in lines[1].split("  ") if h.strip()]
    header = [h.strip() for h in header]
    assert header[0] == "Rank" and header[-1] == "vs median" and "Wall/step" in header
    by_title = {c.title: c for c in columns.RANKS}
    rows = [[c.strip() for c in line.split("  ") if c.strip()] for line in lines[3 : 3 + len(ranks)]]
    for cells, d in zip(rows, ranks.table.to_dict("records"), strict=True):
        for title, cell in zip(header[:-1], cells[:-1], strict=True):
            assert cell == format_cell(by_title[title], d[by_title[title].key]), title
    assert ("hidden to fit" in text) == (len(header) < len(columns.RANKS))
