"""`ColumnStore` gives what concatenating the chunks gives, whatever the guess of rows; the size hint reads gzip's ISIZE."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_torchprof.trace import parser
from jupyter_torchprof.trace.column_store import ColumnStore

_DTYPES = st.sampled_from([np.int32, np.int64, np.float64, np.int8])


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 50), min_size=1, max_size=12),
    expect=st.integers(0, 400),
    late_expect=st.integers(0, 400),
    dtypes=st.lists(_DTYPES, min_size=12, max_size=12),
)
def test_the_same_columns_as_concatenating(sizes, expect, late_expect, dtypes) -> None:
    rng = np.random.default_rng(len(sizes))
    store = ColumnStore()
    store.expect(expect)
    chunks = []
    for i, m in enumerate(sizes):
        chunk = {"a": (rng.random(m) * 100).astype(dtypes[i]), "b": rng.integers(-5, 5, m).astype(np.int64)}
        chunks.append(chunk)
        if i == len(sizes) // 2:
            store.expect(late_expect)  # a renewed guess, larger or smaller
        store.append(chunk)
    assert bool(store)
    got = store.take()
    for k in ("a", "b"):
        want = np.concatenate([c[k] for c in chunks])
        assert got[k].dtype == want.dtype and np.array_equal(got[k], want)
    assert not store and store.rows == 0


def test_an_empty_store_is_false_and_a_chunk_of_no_rows_is_not() -> None:
    store = ColumnStore()
    assert not store
    store.append({"a": np.zeros(0)})
    assert store and len(store.take()["a"]) == 0


def test_chunks_must_bring_the_same_columns_of_one_length() -> None:
    store = ColumnStore()
    store.append({"a": np.zeros(2), "b": np.zeros(2)})
    with pytest.raises(ValueError, match="differ"):
        store.append({"a": np.zeros(2)})
    with pytest.raises(ValueError, match="rows"):
        store.append({"a": np.zeros(2), "b": np.zeros(3)})


def test_a_reserve_is_not_faulted_in() -> None:
    # 200 MB reserved, 8 kB written: the process does not grow by the reserve.
    def rss() -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * 4096

    store = ColumnStore()
    store.expect(25_000_000)
    before = rss()
    store.append({"a": np.ones(1000)})
    assert rss() - before < 50 << 20
    assert store.capacity == 25_000_000 and np.array_equal(store.take()["a"], np.ones(1000))


def test_inflated_size_hint(tmp_path) -> None:
    body = b'{"traceEvents": [' + b",".join(b'{"ph": "X", "ts": %d}' % i for i in range(20000)) + b"]}"
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(body))
    assert parser.inflated_size_hint(gz) == len(body)
    plain = tmp_path / "t.json"
    plain.write_bytes(body)
    assert parser.inflated_size_hint(plain) == len(body)
    assert parser.inflated_size_hint(tmp_path / "missing.json.gz") == 0
    # Past 4 GiB ISIZE wraps: the candidate nearest the usual ratio is taken.
    fake = tmp_path / "big.json.gz"
    size = 400 << 20
    true_size = 5 << 30
    with open(fake, "wb") as fh:
        fh.write(b"\x1f\x8b")
        fh.truncate(size)
        fh.seek(size - 4)
        fh.write((true_size % (1 << 32)).to_bytes(4, "little"))
    assert parser.inflated_size_hint(fake) == true_size


def test_a_parse_reserves_near_its_rows(monkeypatch) -> None:
    from tracefiles import real_trace

    from jupyter_torchprof.trace.reader import read_trace_bytes

    seen = {}
    real_take = ColumnStore.take

    def take(self):
        seen["rows"], seen["capacity"] = self.rows, self.capacity
        return real_take(self)

    monkeypatch.setattr(ColumnStore, "take", take)
    monkeypatch.setattr(parser, "CHUNK_BYTES", 1 << 20)  # several chunks
    data = parser.parse_bytes(read_trace_bytes(real_trace("v100_ddp_ns_timestamps.pt.trace.json.gz")))
    assert seen["rows"] == len(data.events) + sum(data.meta.skipped_reasons.values()) or seen["rows"] >= len(
        data.events
    )
    # Reserved from the first chunk's rows per byte: enough, and not wildly more.
    assert seen["rows"] <= seen["capacity"] <= 2 * seen["rows"]
