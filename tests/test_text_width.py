"""The text tables fit the width they are given: names give way first, time columns stay."""

from __future__ import annotations

import re
import warnings

import pytest
from tracefiles import key_averages_calls, raw_events, real_trace

from jupyter_torchprof import load
from jupyter_torchprof.columns import format_cell
from jupyter_torchprof.views.text import fit_width, op_columns, op_extra_columns

TRACES = [
    "a100_nccl_rank0.pt.trace.json.gz",
    "v100_ddp_ns_timestamps.pt.trace.json.gz",
    "mi250_rocm_train.pt.trace.json.gz",
    "cpu_only.pt.trace.json.gz",
]
WIDTHS = [60, 80, 120, 200]


@pytest.fixture(scope="module", params=TRACES)
def profile(request):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = load(str(real_trace(request.param)))
    p.test_trace = real_trace(request.param)
    return p


def _op_table(text: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the first table in ``text`` (between its first three rule lines)."""
    lines = text.splitlines()
    rules = [i for i, line in enumerate(lines) if line and set(line) <= {"-", " "}]
    header = re.split(r"\s{2,}", lines[rules[0] + 1].strip())
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[rules[1] + 1 : rules[2]]]
    # A row without a note ends before the Note column (lines are right-stripped): its cell is empty.
    return header, [cells + [""] * (len(header) - len(cells)) for cells in rows]


def _text_columns(profile, device: bool, rows: int | None):
    """The columns the text table of ``profile``'s first ``rows`` ops shows: numbers, then text (notes)."""
    ops = profile.sorted_ops()
    return op_columns(profile.ops, device) + op_extra_columns(ops if rows is None else ops.head(rows), device)


@pytest.mark.parametrize("width", WIDTHS)
def test_every_line_fits_and_the_time_columns_stay(profile, width):
    text = profile.table(row_limit=15, width=width)
    too_long = [line for line in text.splitlines() if len(line) > width]
    assert not too_long, too_long
    device = bool(profile.summary["device_traced"])
    cols = _text_columns(profile, device, 15)
    titles = {c.title: c for c in cols}
    header, rows = _op_table(text)
    assert header[0] == "Name"
    # The self times (what the table is sorted by) are always there.
    assert "Self CPU" in header
    assert ("Self device" in header) == device
    # Columns keep their order; a time column is hidden only once every other one is.
    kept = [titles[h] for h in header[1:]]
    assert [c.title for c in cols if c in kept] == header[1:]
    hidden = [c for c in cols if c not in kept]
    if any(c.kind == "time" for c in hidden):
        assert all(c.kind == "time" for c in kept), header
    if hidden:
        assert "hidden to fit the width" in text
    # Each row: the op's name (whole, or its start and an ellipsis), its numbers as the catalog writes them.
    ops = profile.sorted_ops().head(15).to_dict("records")
    assert len(rows) == len(ops)
    for cells, d in zip(rows, ops, strict=True):
        name = str(d["name"])
        assert cells[0] == name or (cells[0].endswith("…") and name.startswith(cells[0][:-1])), cells[0]
        for title, cell in zip(header[1:], cells[1:], strict=True):
            assert cell == format_cell(titles[title], d[titles[title].key]), (title, name)


def test_wide_enough_shows_every_column_and_torch_calls(profile):
    text = profile.table(row_limit=15, width=200)
    header, rows = _op_table(text)
    device = bool(profile.summary["device_traced"])
    assert header[1:] == [c.title for c in _text_columns(profile, device, 15)]
    assert "hidden to fit" not in text
    # Calls, independently: as key_averages counts them from the trace file.
    calls = key_averages_calls(raw_events(profile.test_trace), ("cpu_op", "user_annotation"))
    # key_averages folds ProfilerStep#N into one row.
    calls["ProfilerStep*"] = sum(n for name, n in calls.items() if name.startswith("ProfilerStep#"))
    at = header.index("Calls")
    for cells in rows:
        if not cells[0].endswith("…"):
            assert int(cells[at].replace(",", "")) == calls[cells[0]], cells[0]


def test_names_give_way_before_any_column():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = load(str(real_trace("a100_nccl_rank0.pt.trace.json.gz")))
    natural = p.table(row_limit=15, width=0, kernels=False)
    rule = next(line for line in natural.splitlines() if line.startswith("-"))
    # Narrower than the op table, but room for every column once names are short: none is hidden.
    header, _ = _op_table(natural)
    name_col = len(rule.split("  ")[0])
    assert name_col > 30
    width = len(rule) - name_col + 20
    # The op table's own (the kernel table's Note column may want more room than the op table has).
    text = p.table(row_limit=15, width=width, kernels=False)
    assert _op_table(text)[0] == header
    assert "…" in text and "hidden to fit" not in text


def test_width_zero_and_no_terminal_keep_the_natural_table(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert fit_width(None) == 80
    assert fit_width(0) is None and fit_width(120) == 120
    monkeypatch.delenv("COLUMNS")
    # pytest's captured output is no terminal: no limit.
    assert fit_width(None) is None


def test_a_text_export_keeps_every_column_in_a_narrow_terminal(tmp_path, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = load(str(real_trace("a100_nccl_rank0.pt.trace.json.gz")))
    monkeypatch.setenv("COLUMNS", "80")  # what a narrow terminal says
    assert max(len(line) for line in p.table().splitlines()) <= 80
    p.export(tmp_path / "tables.txt")
    text = (tmp_path / "tables.txt").read_text(encoding="utf-8")
    assert "hidden to fit" not in text
    header, _ = _op_table(text)
    assert header[1:] == [c.title for c in _text_columns(p, True, None)]
