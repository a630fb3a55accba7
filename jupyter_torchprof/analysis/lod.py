"""Level of detail for timelines: at most N glyphs for any window of a trace.

A timeline of a million events cannot ship a million rectangles to the
browser, and does not need to: at a given zoom most events are narrower than
a pixel. `LodIndex.query` keeps every event at least one "pixel" wide (the
window divided by a resolution) as itself and folds the narrower events that
start in the same bin of a row into one glyph that remembers how many events
it stands for, their busy time and its longest member. Zooming in asks again for
the smaller window and gets the detail back.

Everything here is positional numpy on plain arrays; nothing knows about
bokeh. Tables never go through this module, so their totals stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Resolution never drops below this many bins per window while shrinking
#: the output to the glyph budget.
MIN_RESOLUTION = 16


@dataclass
class Glyphs:
    """What to draw for one window.

    Attributes
    ----------
    start, dur
        Start (µs) and extent of each glyph; a merged glyph spans from its
        first member's start to its last member's end.
    busy
        Sum of member durations (equals ``dur`` for a single event).
    row
        Timeline row of each glyph.
    count
        Events the glyph stands for (1 = the event itself).
    rep
        Index (into the arrays the index was built from) of the event the
        glyph shows: itself, or the longest member of a merged run.
    resolution
        Bins per window that produced this result (after any shrinking).
    """

    start: np.ndarray
    dur: np.ndarray
    busy: np.ndarray
    row: np.ndarray
    count: np.ndarray
    rep: np.ndarray
    resolution: int

    def __len__(self) -> int:
        return len(self.start)

    @property
    def events(self) -> int:
        """Number of events represented (single and merged)."""
        return int(self.count.sum())

    def take(self, keep: np.ndarray) -> Glyphs:
        """A subset of the glyphs (positions or boolean mask)."""
        return Glyphs(
            self.start[keep],
            self.dur[keep],
            self.busy[keep],
            self.row[keep],
            self.count[keep],
            self.rep[keep],
            self.resolution,
        )


def _empty(resolution: int) -> Glyphs:
    f = np.array([], dtype=np.float64)
    i = np.array([], dtype=np.int64)
    return Glyphs(f, f, f, i, i, i, resolution)


class LodIndex:
    """Events sorted by (row, start) for fast window queries.

    Parameters
    ----------
    ts, dur
        Start and duration (µs) of each event.
    row
        Row (lane and nesting level) of each event; glyphs are only ever
        merged within a row.
    """

    def __init__(self, ts: np.ndarray, dur: np.ndarray, row: np.ndarray) -> None:
        ts = np.asarray(ts, dtype=np.float64)
        dur = np.nan_to_num(np.asarray(dur, dtype=np.float64), nan=0.0)
        dur = np.maximum(dur, 0.0)
        row = np.asarray(row, dtype=np.int64)
        order = np.lexsort((ts, row))
        self.order = order
        self.ts = ts[order]
        self.dur = dur[order]
        self.end = self.ts + self.dur
        self.row = row[order]
        self.size = len(order)
        if self.size:
            rows, first = np.unique(self.row, return_index=True)
            self.rows = rows
            self.bounds = np.append(first, self.size)
            # The longest event of a row bounds how far before a window an
            # event may start and still reach into it.
            self.max_dur = np.maximum.reduceat(self.dur, first)
            self.span = (float(self.ts.min()), float(self.end.max()))
        else:
            self.rows = np.array([], dtype=np.int64)
            self.bounds = np.array([0], dtype=np.int64)
            self.max_dur = np.array([], dtype=np.float64)
            self.span = (0.0, 0.0)

    def visible(self, t0: float, t1: float) -> np.ndarray:
        """Sorted positions of the events that overlap ``[t0, t1]``."""
        parts = []
        for k in range(len(self.rows)):
            lo, hi = int(self.bounds[k]), int(self.bounds[k + 1])
            seg = self.ts[lo:hi]
            a = lo + int(np.searchsorted(seg, t0 - self.max_dur[k], side="left"))
            b = lo + int(np.searchsorted(seg, t1, side="right"))
            if b > a:
                idx = np.arange(a, b)
                parts.append(idx[self.end[idx] >= t0])
        return np.concatenate(parts) if parts else np.array([], dtype=np.int64)

    def query(
        self,
        t0: float | None = None,
        t1: float | None = None,
        max_glyphs: int = 100_000,
        resolution: int = 4000,
        merge: bool = True,
    ) -> Glyphs:
        """Glyphs for the window ``[t0, t1]`` (default: the whole span).

        Parameters
        ----------
        t0, t1
            Window in µs.
        max_glyphs
            Hard upper bound on the number of glyphs returned.
        resolution
            Bins per window: events at least ``(t1 - t0) / resolution`` long
            are kept as themselves; shorter ones starting in the same bin of a
            row are merged.
            Lowered automatically until the result fits ``max_glyphs``.
        merge
            False: return every visible event as itself when they fit in
            ``max_glyphs`` (small traces need no level of detail).
        """
        lo, hi = self.span
        t0 = lo if t0 is None else float(t0)
        t1 = hi if t1 is None else float(t1)
        if t1 <= t0:
            t1 = t0 + max(abs(t0) * 1e-9, 1e-3)
        max_glyphs = max(int(max_glyphs), 1)
        vis = self.visible(t0, t1)
        if len(vis) == 0:
            return _empty(resolution)
        res = max(int(resolution), MIN_RESOLUTION)
        if not merge and len(vis) <= max_glyphs:
            return self._singles(vis, res)
        while True:
            out = self._reduce(vis, t0, t1, res)
            if len(out) <= max_glyphs or res <= MIN_RESOLUTION:
                break
            res = max(MIN_RESOLUTION, int(res * 0.9 * max_glyphs / len(out)))
        if len(out) > max_glyphs:
            # Last resort (pathological overlap within rows): keep the glyphs
            # covering the most time.
            keep = np.sort(np.argsort(-out.dur, kind="stable")[:max_glyphs])
            out = out.take(keep)
        return out

    def _singles(self, pos: np.ndarray, res: int) -> Glyphs:
        d = self.dur[pos]
        return Glyphs(
            self.ts[pos], d, d.copy(), self.row[pos], np.ones(len(pos), np.int64), self.order[pos], res
        )

    def _reduce(self, vis: np.ndarray, t0: float, t1: float, res: int) -> Glyphs:
        px = (t1 - t0) / res
        d = self.dur[vis]
        big = d >= px
        singles = vis[big]
        small = vis[~big]
        if len(small) == 0:
            return self._singles(singles, res)
        # Narrow events that start in the same bin of the same row become one
        # glyph; a wide event in between starts a new one, so merged glyphs
        # never swallow an event that is drawn as itself.
        ts = self.ts[small]
        end = self.end[small]
        row = self.row[small]
        key = row.astype(np.float64) * (res + 4) + np.floor((np.maximum(ts, t0) - t0) / px)
        wide_before = np.cumsum(big)[~big]
        brk = np.empty(len(small), dtype=bool)
        brk[0] = True
        brk[1:] = (key[1:] != key[:-1]) | (wide_before[1:] != wide_before[:-1])
        run_id = np.cumsum(brk) - 1
        first = np.flatnonzero(brk)
        run_end = np.maximum.reduceat(end, first)
        run_start = ts[first]
        count = np.diff(np.append(first, len(small)))
        busy = np.add.reduceat(self.dur[small], first)
        # Longest member of each run: the first position (runs are contiguous)
        # whose duration equals its run's maximum.
        d_small = self.dur[small]
        longest = np.maximum.reduceat(d_small, first)
        hits = np.flatnonzero(d_small == longest[run_id])
        lead = np.empty(len(hits), dtype=bool)
        lead[:1] = True
        lead[1:] = run_id[hits[1:]] != run_id[hits[:-1]]
        rep = self.order[small[hits[lead]]]

        n1 = len(singles)
        start = np.concatenate([self.ts[singles], run_start])
        dur = np.concatenate([self.dur[singles], run_end - run_start])
        busy_all = np.concatenate([self.dur[singles], busy])
        rows = np.concatenate([self.row[singles], row[first]])
        counts = np.concatenate([np.ones(n1, np.int64), count.astype(np.int64)])
        reps = np.concatenate([self.order[singles], rep])
        order = np.lexsort((start, rows))
        return Glyphs(start[order], dur[order], busy_all[order], rows[order], counts[order], reps[order], res)


def ancestor_count(parent: np.ndarray, depth: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each node, how many of its proper ancestors are ``wanted``.

    Used to stack ops on a timeline without the Python frames around them
    (``with_stack`` interleaves dozens of frames between two ops). Walks the
    tree one depth level at a time, so the cost is O(nodes).
    """
    n = len(parent)
    out = np.zeros(n, dtype=np.int32)
    if n == 0:
        return out
    depth = np.asarray(depth)
    max_depth = int(depth.max(initial=0))
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(max_depth + 2))
    for d in range(1, max_depth + 1):
        nodes = order[bounds[d] : bounds[d + 1]]
        p = parent[nodes]
        ok = p >= 0
        nodes, p = nodes[ok], p[ok]
        out[nodes] = out[p] + wanted[p].astype(np.int32)
    return out


def idle_gaps(start: np.ndarray, end: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """The gaps of ``[lo, hi]`` that no interval ``[start, end]`` covers.

    Overlapping and nested intervals (kernels on a stream under a device
    annotation, or concurrent work) count once: busy time is their union,
    and busy + the gaps' lengths = ``hi - lo``.

    Returns
    -------
    (gap_start, gap_end)
        Sorted, non-empty gaps.
    """
    s = np.clip(np.asarray(start, dtype=np.float64), lo, hi)
    e = np.clip(np.asarray(end, dtype=np.float64), lo, hi)
    if len(s) == 0:
        none = np.array([], dtype=np.float64)
        return (np.array([lo]), np.array([hi])) if hi > lo else (none, none)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    # Furthest end reached by any interval up to here: a gap opens where the
    # next interval starts after it.
    reach = np.maximum.accumulate(e)
    gap_start = np.concatenate([[lo], reach])
    gap_end = np.concatenate([s, [hi]])
    keep = gap_end > gap_start
    return gap_start[keep], gap_end[keep]
