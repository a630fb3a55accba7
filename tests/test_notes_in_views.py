"""The notes on rows (`analysis.notes`) in every view: chips, selection, hover, text, static HTML, report.

The oracle is `Profile.annotations` (one row per note, its explanation and
the triggering event's row in `Profile.events`), itself checked against the
trace file in tests/test_notes_framework.py; the events' own names and
times say where "show in timeline" must land. Several real traces, with op
notes (A100, MI250, GP100) and kernel notes (the Triton trace). What a person
sees in Chromium is tests/browser/test_notes_in_lab.py.
"""

from __future__ import annotations

import re
import warnings
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
from tracefiles import real_trace

from jupyter_torchprof import load
from jupyter_torchprof.analysis.notes import SEPARATOR
from jupyter_torchprof.format import ellipsize, esc, fmt_time
from jupyter_torchprof.views.notes_view import why_html

TRACES = (
    "a100_nccl_rank0.pt.trace.json.gz",
    "mi250_rocm_train.pt.trace.json.gz",
    "gp100_sgd_step_user_annotation.pt.trace.json.gz",
    "triton_kernel.pt.trace.json.gz",
)
EVIL = "<img src=x onerror=alert(1)>"


def _load(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load(str(real_trace(name)))


@pytest.fixture(scope="module", params=TRACES)
def profile(request):
    p = _load(request.param)
    assert len(p.annotations), f"{request.param} holds noted rows"
    return p


@pytest.fixture(scope="module")
def a100():
    return _load("a100_nccl_rank0.pt.trace.json.gz")


@pytest.fixture(scope="module")
def triton():
    return _load("triton_kernel.pt.trace.json.gz")


def _expected(profile, table: str) -> dict[str, str]:
    """Each key's note text on ``table``, from the long table (the oracle)."""
    hits = profile.annotations
    mine = hits[hits["table"] == table]
    return {k: SEPARATOR.join(g["note"]) for k, g in mine.groupby("key", sort=False)}


class _Doc(HTMLParser):
    """Ids, links (href → text) and each id's text in an HTML page (stdlib only)."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: dict[str, str] = {}
        self.links: list[tuple[str, str]] = []
        self.tags: list[str] = []
        self._open: list[tuple[str, str | None, list[str]]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "a" and a.get("href", "").startswith("#"):
            self._href, self._text = a["href"][1:], []
        if a.get("id"):
            self._open.append((tag, a["id"], []))

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text)))
            self._href = None
        if self._open and self._open[-1][0] == tag:
            _, ident, text = self._open.pop()
            self.ids[ident] = "".join(text)

    def handle_data(self, data):
        if self._href is not None:
            self._text.append(data)
        for _, _, text in self._open:
            text.append(data)


def _doc(html: str) -> _Doc:
    d = _Doc()
    d.feed(html)
    return d


def _explanation_ids(html: str, prefix: str) -> dict[str, str]:
    """Each ``<dt id="{prefix}note-…">``'s note id and the ``<dd>`` text after it (the explanation)."""
    pattern = rf'<dt id="{re.escape(prefix)}note-([^"]+)">.*?</dt><dd>(.*?)</dd>'
    return dict(re.findall(pattern, html, flags=re.S))


# --------------------------------------------------------------------------- #
# the bokeh tables: the chip


def test_op_and_kernel_tables_draw_the_notes_as_escaping_chips(profile):
    from bokeh.models import HTMLTemplateFormatter

    from jupyter_torchprof.views.tables import DEFAULT_ROWS, KernelTable, OpTable

    tables = [("ops", OpTable(profile, limit=DEFAULT_ROWS * 50))]
    if profile.summary["device_traced"] and not profile.kernels.empty:
        tables.append(("kernels", KernelTable(profile, limit=DEFAULT_ROWS * 50)))
    drawn = 0
    for which, table in tables:
        expected = _expected(profile, which)
        notes = table.source.data.get("note")
        if not expected:
            continue
        assert notes is not None, f"{which}: no Note column although rows have notes"
        column = next(c for c in table.model.columns if c.field == "note")
        assert isinstance(column.formatter, HTMLTemplateFormatter)
        # The text goes in escaped (``<%-``), never as markup (``<%=``).
        assert "<%- t %>" in column.formatter.template and "<%=" not in column.formatter.template
        for name, note in zip(table.shown["name"].astype(str), notes, strict=True):
            assert note == expected.get(name, ""), name
            drawn += bool(note)
    assert drawn


# --------------------------------------------------------------------------- #
# the selection line


def _select(view, which: str, name: str):
    page = view.op_page if which == "ops" else view.k_page
    table = page.table
    table.update(pattern="^" + re.escape(name) + "$")
    index = int(np.flatnonzero(table.shown["name"].astype(str) == name)[0])
    table.source.selected.indices = [index]
    return page


def _click(button) -> None:
    for handler in list(button._clicks):
        handler(button)


@pytest.mark.parametrize("which", ["ops", "kernels"])
def test_selecting_a_noted_row_explains_it_and_goes_to_its_event(a100, triton, which):
    from jupyter_torchprof.views.widget import ProfileView

    profile = a100 if which == "ops" else triton
    hits = profile.annotations
    hit = hits[(hits["table"] == which) & (hits["event"] >= 0)].iloc[0]
    view = ProfileView(profile, max_glyphs=2000)
    if which == "kernels":
        assert view.kernels is not None
    page = _select(view, which, str(hit["key"]))
    text = page.selection.value
    ev = profile.events
    event = int(hit["event"])
    ts = float(ev["ts"].iloc[event])
    assert why_html(hit["why"]) in text
    assert esc(hit["note"]) in text
    assert f"{esc(ev['name'].iloc[event])} at {esc(fmt_time(ts))}" in text
    assert page.note_goto.layout.display is None
    # "note's event in timeline": the timeline tab opens on a window around that event.
    _click(page.note_goto)
    assert view.tabs.selected_index == view._timeline_tab
    x = view.timeline.figure.x_range
    end = ts + float(np.nan_to_num(ev["dur"].iloc[event]))
    assert x.start <= ts and end <= x.end
    assert x.end - x.start < (view.timeline.span[1] - view.timeline.span[0]) / 10, "zoomed in on it"
    # A row without notes says none and offers no such button (every kernel of the Triton trace has one).
    table = view.op_page.table
    table.update(pattern="")
    plain = np.flatnonzero(table.shown["note"].astype(str) == "")
    table.source.selected.indices = [int(plain[0])]
    page = view.op_page
    assert "jp-TorchProf-notes" not in page.selection.value
    assert page.note_goto.layout.display == "none"


# --------------------------------------------------------------------------- #
# the timeline's hover


def test_timeline_hover_says_each_names_notes_once_per_name(profile):
    from jupyter_torchprof.views.timeline import _DEVICE_TOOLTIP, _HOST_TOOLTIP, Timeline

    tl = Timeline(profile, max_glyphs=5000)
    data = tl.strings_source.data
    assert len(data["t"]) == len(data["s"])
    expected = {**_expected(profile, "kernels"), **_expected(profile, "ops")}
    shown = {s: t for s, t in zip(data["s"], data["t"], strict=True) if t}
    assert shown, "some noted name is drawn"
    for s, t in zip(data["s"], data["t"], strict=True):
        assert t == expected.get(s, ""), s
    # One entry per distinct string: the glyphs carry codes, not text.
    assert len(set(data["s"])) == len(data["s"])
    assert "@n{note}" in _HOST_TOOLTIP and "@n{note}" in _DEVICE_TOOLTIP
    # The hover asks only for fields the glyphs carry (bokeh writes "???" for one they lack).
    for hover in [t for t in tl.figure.tools if type(t).__name__ == "HoverTool"]:
        data = hover.renderers[0].data_source.data
        fields = set(re.findall(r"@(\w+)\{", hover.tooltips))
        assert "n" in fields and fields <= set(data), (hover.description, fields - set(data))


# --------------------------------------------------------------------------- #
# text, static HTML and the report


def test_text_table_has_the_note_of_every_noted_row(profile):
    from jupyter_torchprof.views.text import EXTRA_CHARS

    text = profile.table(row_limit=-1, width=0, findings=False)
    ops = _expected(profile, "ops")
    lines = text.splitlines()
    if ops:
        assert "Note" in re.split(
            r"\s{2,}", lines[lines.index(next(ln for ln in lines if ln.startswith("Name")))]
        )
    for name, note in ops.items():
        row = next(ln for ln in lines if ln.startswith(name + "  "))
        # Long notes are cut to the column's width, with an ellipsis (the whole text is in Profile.ops).
        assert row.rstrip().endswith(ellipsize(note, EXTRA_CHARS)), (name, row)


def _check_links_resolve(html: str, prefix: str, profile, links_expected: bool = True) -> None:
    doc = _doc(html)
    explained = _explanation_ids(html, prefix)
    hits = profile.annotations
    # Every note present is explained once, with its own explanation.
    whys = hits.drop_duplicates("id").set_index("id")["why"]
    assert set(explained) == set(whys.index)
    for note_id, why in whys.items():
        assert explained[note_id] == why_html(why)
    # Every note link goes to one of them, and says the note.
    links = [(h, t) for h, t in doc.links if h.startswith(f"{prefix}note-")]
    assert bool(links) == links_expected
    texts = set(hits["note"])
    for href, text in links:
        assert href in doc.ids, href
        assert text in texts, text


def test_static_html_explains_the_notes_present(profile):
    html = profile._repr_html_static()
    assert "What the notes mean" in html
    # The static view shows the top rows: links where one of them has a note.
    top = profile.sorted_ops().head(profile.row_limit)
    noted = (top["note"] != "").any()
    if profile.summary["device_traced"] and "note" in profile.kernels:
        k = profile.kernels.sort_values("total_us", ascending=False, kind="stable").head(10)
        noted = noted or (k["note"] != "").any()
    _check_links_resolve(html, "torchprof-", profile, links_expected=bool(noted))


def test_static_html_note_cells_link_to_the_explanation(a100):
    from jupyter_torchprof.views.html import ops_html

    ops = a100.ops[a100.ops["note"] != ""]
    assert len(ops)
    table = ops_html(ops, True, row_limit=len(ops))
    _check_links_resolve(table + a100._repr_html_static(), "torchprof-", a100)
    assert ("torchprof-note-metadata-only", "metadata only: no device work") in _doc(table).links


def test_report_shows_the_notes_and_what_they_mean(profile):
    from jupyter_torchprof.views.report import report_html

    html = report_html(profile)
    assert 'id="notes-section"' in html and "What the notes mean" in html
    _check_links_resolve(html, "", profile)


def test_notes_are_escaped_in_every_document():
    """A note's text can hold parts of a kernel name: it never becomes markup."""
    from types import SimpleNamespace

    from jupyter_torchprof.views.notes_view import RowNote, explanations_html, note_links_html, row_notes_html

    hits = pd.DataFrame(
        {
            "table": ["kernels"],
            "key": [EVIL],
            "id": ["triton-fused"],
            "note": [EVIL],
            "why": [EVIL],
            "event": [-1],
        }
    )
    parts = [
        explanations_html(SimpleNamespace(annotations=hits), "x-", EVIL),
        note_links_html(EVIL, "triton-fused"),
        note_links_html(EVIL + SEPARATOR + "b", "a"),  # ids that do not match: plain text
        row_notes_html([RowNote("triton-fused", EVIL, EVIL, 3, EVIL, 1.0)]),
        why_html(f"`{EVIL}` and `x`"),
    ]
    for html in parts:
        assert "img" not in _doc(html).tags, html
        assert esc(EVIL) in html
    # Backticked names in an explanation read as code.
    assert why_html("plain `sgemm` <b>") == "plain <code>sgemm</code> &lt;b&gt;"
