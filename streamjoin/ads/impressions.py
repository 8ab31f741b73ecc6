"""The impressions one task of the ad join holds: in memory by auction, in state by segment. Pure.

:class:`ImpressionStore` keeps every impression a task holds in memory,
by join key (the auction id) in ``(ts, id)`` order, which is what a click
looks up. In the task's state the impressions are stored in *chunks*
(:func:`streamjoin.ads.keys.chunk_key`): the impressions of one time segment
added since the last :meth:`ImpressionStore.flush` are one row, written once
and never rewritten, and a segment's chunks are deleted together when it
expires. So an impression costs one entry in a JSON list instead of a row,
a changelog record and a tombstone of its own.

Whether a click billed an impression is not stored with the impression: the
click's own row says it (outcome ``attributed`` and the impression's id),
and :meth:`ImpressionStore.bill_by_id` sets it again when a task is rebuilt.
Rows of the format before 0.2 (one row per impression, ``i``, with a
``billed`` field) are still read and expire one by one.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from streamjoin.ads import keys
from streamjoin.ads.chunks import SegmentChunks
from streamjoin.ads.events import loads
from streamjoin.join.state import KVState

__all__ = ["ImpressionStore", "Row", "held"]

#: an impression held in memory: (ts, id, campaign, cost, billed click id or None)
Row = tuple[int, str, str, float, str | None]


class ImpressionStore:
    """The impressions of one task, with the time segments that expire them.

    Attributes:
        segment: the length of a time segment (ms); a segment starts at a
            multiple of it.
        by_key: join key -> the impressions held: the one row of a key that
            has one (nearly every auction), the rows in ``(ts, id)`` order
            otherwise (:func:`held`). No tuple around a single row: one
            object less per impression held, for the memory and for the
            young collections of the cyclic collector that look at each new
            one.
        count: how many impressions are held.
    """

    def __init__(self, segment: int) -> None:
        self.segment = segment
        self.by_key: dict[str, Row | tuple[Row, ...]] = {}
        self.count = 0
        #: the impressions' chunks; a segment's members are the join keys of its
        #: impressions (the key strings the rows are held by: nothing new to
        #: allocate, or for the cyclic collector to look at, per impression)
        self._chunks: SegmentChunks[str] = SegmentChunks(keys.CHUNK)
        #: rows of the format before 0.2 held: (ts, key, id), expiry order
        self._rows: list[tuple[int, str, str]] = []

    def clear(self) -> None:
        """Forget everything (the task is rebuilt from its state)."""
        self.by_key.clear()
        self.count = 0
        self._chunks.clear()
        self._rows.clear()

    def holds(self, jkey: str, ts: int, rid: str) -> bool:
        """Whether impression *rid* at *ts* of auction *jkey* is held."""
        return any(row[0] == ts and row[1] == rid for row in held(self.by_key.get(jkey)))

    def add(self, jkey: str, ts: int, rid: str, campaign: str, cost: float) -> None:
        """Hold a new impression; it goes to state at the next :meth:`flush`."""
        self._hold(jkey, (ts, rid, campaign, cost, None))
        self._chunks.add(ts - ts % self.segment, jkey, (jkey, ts, rid, campaign, cost))

    def flush(self, state: KVState) -> None:
        """Write the impressions added since the last flush: one chunk per segment."""
        self._chunks.flush(state)

    def first_match(self, jkey: str, lo: int, hi: int) -> tuple[Row | None, int]:
        """The earliest impression of *jkey* with ``lo <= ts <= hi`` and its index."""
        for i, row in enumerate(held(self.by_key.get(jkey))):
            if row[0] > hi:
                break
            if row[0] >= lo:
                return row, i
        return None, 0

    def bill(self, jkey: str, at: int, click_id: str) -> None:
        """Note that *click_id* billed the impression at index *at* of *jkey*."""
        rows = held(self.by_key[jkey])
        row = rows[at]
        billed: Row = (row[0], row[1], row[2], row[3], click_id)
        self.by_key[jkey] = _entry((*rows[:at], billed, *rows[at + 1 :]))

    def bill_by_id(self, jkey: str, rid: str, click_id: str) -> int | None:
        """Note that *click_id* billed impression *rid* of *jkey* (read back from
        the click's row); returns the impression's time, ``None`` if not held."""
        for i, row in enumerate(held(self.by_key.get(jkey))):
            if row[1] == rid:
                if row[4] is None:
                    self.bill(jkey, i, click_id)
                return row[0]
        return None

    def expires_before(self, cut: int) -> bool:
        """Whether any impression held is before *cut*."""
        rows = self._rows
        return self._chunks.any_before(cut) or bool(rows and rows[0][0] < cut)

    def expire(self, cut: int) -> list[bytes]:
        """Drop every impression before *cut* (a segment start). Returns the state
        keys to delete; the caller deletes them once the campaigns' counts
        (kept by segment, :class:`~streamjoin.ads.campaigns.CampaignTally`)
        are folded. Flush first."""
        dropped: list[bytes] = []
        for _, members in self._chunks.pop_before(cut, dropped):
            for jkey in members:
                self._drop_before(jkey, cut)
        rows = self._rows
        while rows and rows[0][0] < cut:
            ts, jkey, rid = heapq.heappop(rows)
            self._drop(jkey, ts, rid)
            dropped.append(keys.record_key(keys.IMPRESSION, jkey, ts, rid))
        return dropped

    def load(self, state: KVState, counted: Callable[[str, int], None]) -> None:
        """Hold the impressions of *state* (chunks, and rows of the format before
        0.2 with their ``billed``); *counted* is told each one's campaign and time."""
        self.clear()
        for _, held, entries in self._chunks.load(state):
            for jkey, ts, rid, campaign, cost in entries:
                self._hold(jkey, (ts, rid, campaign, float(cost), None))
                held.append(jkey)
                counted(campaign, ts)
        for key, raw in state.scan(*keys.family_range(keys.IMPRESSION)):
            jkey, ts, rid = keys.decode_record_key(key)
            doc = loads(raw)
            self._hold(jkey, (ts, rid, doc["campaign"], float(doc["cost"]), doc["billed"]))
            self._rows.append((ts, jkey, rid))
            counted(doc["campaign"], ts)
        heapq.heapify(self._rows)

    def _hold(self, jkey: str, row: Row) -> None:
        got = self.by_key.get(jkey)
        self.by_key[jkey] = row if got is None else tuple(sorted((*held(got), row), key=_order))
        self.count += 1

    def _drop_before(self, jkey: str, cut: int) -> None:
        """Drop *jkey*'s impressions before *cut* (of the segments that expire:
        the key's rows of other segments stay)."""
        got = self.by_key.pop(jkey, None)
        if got is None:
            return  # an earlier segment's entry of the same key dropped them
        rows = held(got)
        if rows[-1][0] < cut:  # all of them, most often the only one
            self.count -= len(rows)
            return
        kept = tuple(row for row in rows if row[0] >= cut)
        self.by_key[jkey] = _entry(kept)
        self.count -= len(rows) - len(kept)

    def _drop(self, jkey: str, ts: int, rid: str) -> None:
        rows = held(self.by_key.get(jkey))
        for i, row in enumerate(rows):
            if row[0] == ts and row[1] == rid:
                rest = (*rows[:i], *rows[i + 1 :])
                if rest:
                    self.by_key[jkey] = _entry(rest)
                else:
                    del self.by_key[jkey]
                self.count -= 1
                return


def held(got: Row | tuple[Row, ...] | None) -> tuple[Row, ...]:
    """The rows of a :attr:`ImpressionStore.by_key` entry (``None``: no
    entry), ``(ts, id)`` order."""
    if got is None:
        return ()
    return (got,) if type(got[0]) is int else got  # type: ignore[return-value]


def _entry(rows: tuple[Row, ...]) -> Row | tuple[Row, ...]:
    """The :attr:`ImpressionStore.by_key` entry of a key's *rows* (at least one)."""
    return rows[0] if len(rows) == 1 else rows


def _order(row: Row) -> tuple[int, str]:
    return row[0], row[1]
