"""The clicks one task of the ad join holds: pending ones as rows, decided ones in chunks. Pure.

:class:`ClickStore` keeps every click a task holds in memory, by its identity
``(join key, ts, click id)``, with its stored value: ``{"o": None}`` while it
is pending, the outcome's fields once it is decided. In the task's state a
click that is still pending at the end of a batch is a row of its own
(``c``); the clicks decided since the last :meth:`ClickStore.flush` go to
state as one *chunk* per time segment (``v``, see :mod:`streamjoin.ads.keys`),
written once and deleted whole when the segment expires, and a pending row
they replace is deleted after the chunk is written. A click's segment is
that of the later of its time and the time of the impression it billed: the
chunk is what says the impression is billed, so it must not go first.

Decided rows of the format before 0.2 (``c`` with an outcome) are still
read, and expire one by one.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from streamjoin.ads import keys
from streamjoin.ads.chunks import SegmentChunks
from streamjoin.ads.events import Outcome, dump_state, loads
from streamjoin.join.state import KVState

__all__ = ["ClickKey", "ClickStore"]

#: a click's identity: (join key, event time, click id)
ClickKey = tuple[str, int, str]

#: the stored value of a pending click
_PENDING = dump_state({"o": None})
_UNATTRIBUTED = Outcome.UNATTRIBUTED.value


class ClickStore:
    """The clicks of one task, with the time segments that expire the decided ones.

    Attributes:
        segment: the length of a time segment (ms).
        values: every click held -> its stored value.
    """

    def __init__(self, segment: int) -> None:
        self.segment = segment
        self.values: dict[ClickKey, dict[str, Any]] = {}
        #: pending clicks added since the last flush (their rows are written then)
        self._unsaved: list[ClickKey] = []
        #: pending clicks whose row is in state
        self._saved: set[ClickKey] = set()
        #: clicks whose pending row is to be deleted at the next flush
        self._stale: list[ClickKey] = []
        #: the decided clicks' chunks; a segment's members are its clicks
        self._chunks: SegmentChunks[ClickKey] = SegmentChunks(keys.VERDICTS)
        #: decided rows of the format before 0.2: (expires at, ts, key, id)
        self._rows: list[tuple[int, int, str, str]] = []

    def clear(self) -> None:
        """Forget everything (the task is rebuilt from its state)."""
        self.values.clear()
        self._unsaved.clear()
        self._saved.clear()
        self._stale.clear()
        self._chunks.clear()
        self._rows.clear()

    def add_pending(self, key: ClickKey) -> None:
        """Hold a new pending click; its row is written at the next :meth:`flush`
        if it is still pending then."""
        self.values[key] = {"o": None}
        self._unsaved.append(key)

    def decide(self, key: ClickKey, value: dict[str, Any], expires: int) -> int:
        """Hold *key*'s outcome (*value*) until *expires*; returns the start of the
        segment it expires with."""
        self.values[key] = value
        segment = expires - expires % self.segment
        entry = (*key, value["o"], value.get("imp"), value.get("campaign"), value.get("cost"))
        self._chunks.add(segment, key, entry)
        if key in self._saved:
            self._saved.discard(key)
            self._stale.append(key)
        return segment

    def flush(self, state: KVState) -> None:
        """Write the clicks decided since the last flush (one chunk per segment),
        then delete the pending rows they replace, then write the rows of the
        clicks still pending."""
        self._chunks.flush(state)
        for stale in self._stale:
            state.delete(keys.record_key(keys.CLICK, *stale))
        self._stale.clear()
        values = self.values
        for pending in self._unsaved:
            value = values.get(pending)
            if value is not None and value["o"] is None:
                state.put(keys.record_key(keys.CLICK, *pending), _PENDING)
                self._saved.add(pending)
        self._unsaved.clear()

    def expires_before(self, cut: int) -> bool:
        """Whether any decided click held expires before *cut*."""
        rows = self._rows
        return self._chunks.any_before(cut) or bool(rows and rows[0][0] < cut)

    def expire(self, cut: int, gone: Callable[[dict[str, Any], int], None]) -> list[bytes]:
        """Drop every decided click that expires before *cut* (a segment start);
        *gone* is told each one's value and expiry time (or its segment's
        start). Returns the state keys to delete (see
        :meth:`~streamjoin.ads.impressions.ImpressionStore.expire`). Flush first."""
        dropped: list[bytes] = []
        values = self.values
        for segment, members in self._chunks.pop_before(cut, dropped):
            for key in members:
                value = values.pop(key, None)
                if value is not None:
                    gone(value, segment)
        rows = self._rows
        while rows and rows[0][0] < cut:
            expires, ts, jkey, rid = heapq.heappop(rows)
            value = values.pop((jkey, ts, rid), None)
            if value is not None:
                gone(value, expires)
            dropped.append(keys.record_key(keys.CLICK, jkey, ts, rid))
        return dropped

    def load(
        self,
        state: KVState,
        bill: Callable[[str, str, str], int | None],
        counted: Callable[[dict[str, Any], int], None],
    ) -> list[ClickKey]:
        """Hold the clicks of *state*; returns the pending ones.

        Call it after the impressions are held: *bill* ``(key, impression id,
        click id)`` notes an attributed click's billing and returns the
        impression's time (``None`` if it is not held); *counted* is told each
        decided click's value and the time its counts belong to.
        """
        self.clear()
        values = self.values
        for segment, members, entries in self._chunks.load(state):
            for jkey, ts, rid, outcome, imp, campaign, cost in entries:
                click = (jkey, ts, rid)
                value: dict[str, Any] = {"o": outcome}
                if outcome != _UNATTRIBUTED:
                    value.update(imp=imp, campaign=campaign, cost=cost)
                    if outcome == Outcome.ATTRIBUTED.value:
                        bill(jkey, imp, rid)
                values[click] = value
                members.append(click)
                counted(value, segment)
        pending: list[ClickKey] = []
        for key, raw in state.scan(*keys.family_range(keys.CLICK)):
            click = keys.decode_record_key(key)
            if click in values:  # decided in a chunk; the delete of its row was cut off
                self._stale.append(click)
                continue
            value = loads(raw)
            values[click] = value
            if value["o"] is None:
                self._saved.add(click)
                pending.append(click)
                continue
            jkey, ts, rid = click
            expires = ts
            if value["o"] == Outcome.ATTRIBUTED.value:
                imp_ts = bill(jkey, str(value["imp"]), rid)
                expires = ts if imp_ts is None else max(ts, imp_ts)
            self._rows.append((expires, ts, jkey, rid))
            counted(value, expires)
        heapq.heapify(self._rows)
        return pending
