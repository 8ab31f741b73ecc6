"""The impressions one task of the ad join holds: in memory and in state by segment. Pure.

:class:`ImpressionStore` keeps every impression a task holds in memory, by
time segment and within one by join key (the auction id) in ``(ts, id)``
order, which is what a click looks up; a segment expires whole, in one
step. In the task's state the impressions are stored in *chunks*
(:func:`streamjoin.ads.keys.chunk_key`): the impressions of one time segment
added since the last :meth:`ImpressionStore.flush` are one row, written once
and never rewritten, and a segment's chunks are deleted together when it
expires. So an impression costs one entry in a JSON list instead of a row,
a changelog record and a tombstone of its own.

Whether a click billed an impression is not stored with the impression: the
click's own row says it (outcome ``attributed`` and the impression's id),
and :meth:`ImpressionStore.bill_by_id` sets it again when a task is rebuilt.
Rows of the format before 0.2 (one row per impression, ``i``, with a
``billed`` field) are still read; their state rows are deleted one by one.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from streamjoin.ads import keys
from streamjoin.ads.chunks import SegmentChunks
from streamjoin.ads.events import loads
from streamjoin.join.state import KVState

__all__ = ["ImpressionStore", "Row", "Spot"]

#: an impression held in memory: (ts, id, campaign, cost, billed click id or None)
Row = tuple[int, str, str, float, str | None]
#: where an impression is held: its segment's start and its index among its key's
Spot = tuple[int, int]


class ImpressionStore:
    """The impressions of one task, by time segment and, within one, by join key.

    A segment's impressions are a dict of their own, so a segment expires in
    one step, whatever it holds; a click looks its auction up in each segment
    its window spans (at most ``retention / segment + 1`` of them), oldest
    first.

    Attributes:
        segment: the length of a time segment (ms); a segment starts at a
            multiple of it.
        segments: segment start -> join key -> the key's impressions of that
            segment, in ``(ts, id)`` order.
        count: how many impressions are held.
    """

    def __init__(self, segment: int) -> None:
        self.segment = segment
        self.segments: dict[int, dict[str, tuple[Row, ...]]] = {}
        self.count = 0
        #: the impressions' chunks in state (their members: none, a segment goes whole)
        self._chunks: SegmentChunks[str] = SegmentChunks(keys.CHUNK)
        #: rows of the format before 0.2 held: (ts, key, id), expiry order
        self._rows: list[tuple[int, str, str]] = []

    def clear(self) -> None:
        """Forget everything (the task is rebuilt from its state)."""
        self.segments.clear()
        self.count = 0
        self._chunks.clear()
        self._rows.clear()

    def holds(self, jkey: str, ts: int, rid: str) -> bool:
        """Whether impression *rid* at *ts* of auction *jkey* is held."""
        segment = self.segments.get(ts - ts % self.segment)
        held = None if segment is None else segment.get(jkey)
        return held is not None and any(row[0] == ts and row[1] == rid for row in held)

    def add(self, jkey: str, ts: int, rid: str, campaign: str, cost: float) -> None:
        """Hold a new impression; it goes to state at the next :meth:`flush`."""
        start = ts - ts % self.segment
        self._hold(start, jkey, (ts, rid, campaign, cost, None))
        self._chunks.add(start, None, (jkey, ts, rid, campaign, cost))

    def flush(self, state: KVState) -> None:
        """Write the impressions added since the last flush: one chunk per segment."""
        self._chunks.flush(state)

    def first_match(self, jkey: str, lo: int, hi: int) -> tuple[Row | None, Spot]:
        """The earliest impression of *jkey* with ``lo <= ts <= hi`` and where it
        is held (for :meth:`bill`)."""
        segments, size = self.segments, self.segment
        for start in range(lo - lo % size, hi + 1, size):
            held = segments.get(start)
            for i, row in enumerate(() if held is None else held.get(jkey, ())):
                if row[0] > hi:
                    return None, (0, 0)
                if row[0] >= lo:
                    return row, (start, i)
        return None, (0, 0)

    def bill(self, jkey: str, at: Spot, click_id: str) -> None:
        """Note that *click_id* billed the impression held at *at* of *jkey*."""
        start, i = at
        segment = self.segments[start]
        held = segment[jkey]
        segment[jkey] = (*held[:i], (*held[i][:4], click_id), *held[i + 1 :])

    def bill_by_id(self, jkey: str, rid: str, click_id: str) -> int | None:
        """Note that *click_id* billed impression *rid* of *jkey* (read back from
        the click's row); returns the impression's time, ``None`` if not held."""
        for start in sorted(self.segments):
            for i, row in enumerate(self.segments[start].get(jkey, ())):
                if row[1] == rid:
                    if row[4] is None:
                        self.bill(jkey, (start, i), click_id)
                    return row[0]
        return None

    def expires_before(self, cut: int) -> bool:
        """Whether any impression held is before *cut*."""
        return any(start < cut for start in self.segments)

    def expire(self, cut: int) -> list[bytes]:
        """Drop every impression before *cut* (a segment start): whole segments.
        Returns the state keys to delete; the caller deletes them once the
        campaigns' counts are folded. Flush first."""
        dropped: list[bytes] = []
        for start in sorted(s for s in self.segments if s < cut):
            self.count -= sum(map(len, self.segments.pop(start).values()))
        for _ in self._chunks.pop_before(cut, dropped):
            pass
        rows = self._rows
        while rows and rows[0][0] < cut:  # (their segments went above)
            ts, jkey, rid = heapq.heappop(rows)
            dropped.append(keys.record_key(keys.IMPRESSION, jkey, ts, rid))
        return dropped

    def load(self, state: KVState, counted: Callable[[str, int], None]) -> None:
        """Hold the impressions of *state* (chunks, and rows of the format before
        0.2 with their ``billed``); *counted* is told each one's campaign and time."""
        self.clear()
        size = self.segment
        for start, _, entries in self._chunks.load(state):
            for jkey, ts, rid, campaign, cost in entries:
                self._hold(start, jkey, (ts, rid, campaign, float(cost), None))
                counted(campaign, ts)
        for key, raw in state.scan(*keys.family_range(keys.IMPRESSION)):
            jkey, ts, rid = keys.decode_record_key(key)
            doc = loads(raw)
            row = (ts, rid, doc["campaign"], float(doc["cost"]), doc["billed"])
            self._hold(ts - ts % size, jkey, row)
            self._rows.append((ts, jkey, rid))
            counted(doc["campaign"], ts)
        heapq.heapify(self._rows)

    def _hold(self, start: int, jkey: str, row: Row) -> None:
        segment = self.segments.get(start)
        if segment is None:
            segment = self.segments[start] = {}
        held = segment.get(jkey)
        segment[jkey] = (row,) if held is None else tuple(sorted((*held, row), key=_order))
        self.count += 1


def _order(row: Row) -> tuple[int, str]:
    return row[0], row[1]
