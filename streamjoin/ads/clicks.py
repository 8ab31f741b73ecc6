"""The clicks one task of the ad join holds: pending and decided ones in chunks. Pure.

:class:`ClickStore` keeps every click a task holds in memory, by its identity
``(join key, ts, click id)``, with its stored value: ``{"o": None}`` while it
is pending, the outcome's fields once it is decided. In the task's state the
clicks still pending at the end of a batch are one *pending chunk* (``q``: a
JSON list of ``[key, ts, id]``), written once; it is deleted when the last
of them is decided. The clicks decided since the last :meth:`ClickStore.flush`
go to state as one *chunk* per time segment (``v``, see
:mod:`streamjoin.ads.keys`), written once and deleted whole when the segment
expires. A click's segment is that of the later of its time and the time of
the impression it billed: the chunk is what says the impression is billed,
so it must not go first.

So a click that waits for its decision across batches costs one entry in a
list, not a row, a changelog record and a tombstone of its own. A restore
reads a pending chunk's clicks that no decided chunk holds as pending; a
pending chunk is therefore never left to outlive the decided entry of a
click it lists (:meth:`ClickStore.expire` writes it anew without the
decided ones first).

Rows of the format before 0.3 (``c``: one per pending click, and before 0.2
per decided click too) are still read; a pending one is deleted once its
click is decided, a decided one expires on its own.
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
        #: pending clicks added since the last flush (written then if still pending)
        self._unsaved: list[ClickKey] = []
        #: pending clicks in state -> the key that holds them: a pending chunk,
        #: or a row of their own (format before 0.3)
        self._saved: dict[ClickKey, bytes] = {}
        #: pending chunks in state -> the clicks they list (pending or decided since)
        self._listed: dict[bytes, list[ClickKey]] = {}
        #: pending chunks in state -> how many of their clicks are still pending
        self._live: dict[bytes, int] = {}
        #: a segment of decided clicks -> the pending chunks that list one of them
        #: (the chunks to write anew when it expires; some may be gone since)
        self._listing: dict[int, list[bytes]] = {}
        #: pending chunks read from state that list a click another chunk holds
        #: pending (a rewrite cut off): looked at whenever clicks expire
        self._recheck: list[bytes] = []
        #: state keys to delete at the next flush: pending chunks (and rows)
        #: whose clicks are all decided
        self._stale: list[bytes] = []
        #: the decided clicks' chunks; a segment's members are its clicks
        self._chunks: SegmentChunks[ClickKey] = SegmentChunks(keys.VERDICTS)
        #: decided rows of the format before 0.2: (expires at, ts, key, id)
        self._rows: list[tuple[int, int, str, str]] = []

    def clear(self) -> None:
        """Forget everything (the task is rebuilt from its state)."""
        self.values.clear()
        self._unsaved.clear()
        self._saved.clear()
        self._listed.clear()
        self._live.clear()
        self._listing.clear()
        self._recheck.clear()
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
        saved = self._saved.pop(key, None)
        if saved is not None and self._release(saved):
            self._note_listing(segment, saved)
        return segment

    def _note_listing(self, segment: int, chunk: bytes) -> None:
        listing = self._listing.get(segment)
        if listing is None:
            self._listing[segment] = [chunk]
        elif listing[-1] != chunk:
            listing.append(chunk)

    def _release(self, saved: bytes) -> bool:
        """One click *saved* holds is decided: delete it once none is left pending.
        Returns whether *saved* is a pending chunk that still lists pending clicks."""
        live = self._live.get(saved)
        if live is None:  # a row of its own (format before 0.3)
            self._stale.append(saved)
            return False
        if live > 1:
            self._live[saved] = live - 1
            return True
        del self._live[saved], self._listed[saved]
        self._stale.append(saved)
        return False

    def flush(self, state: KVState) -> None:
        """Write the clicks decided since the last flush (one chunk per segment),
        then delete the pending chunks whose clicks are all decided, then write
        the clicks added since and still pending as one pending chunk."""
        self._chunks.flush(state)
        for stale in self._stale:
            state.delete(stale)
        self._stale.clear()
        values = self.values
        pending = [c for c in self._unsaved if (v := values.get(c)) is not None and v["o"] is None]
        self._unsaved.clear()
        if pending:
            self._write_pending(state, pending)

    def _write_pending(self, state: KVState, pending: list[ClickKey]) -> bytes:
        """Write *pending* as one pending chunk, named by its first click (which
        no other pending chunk lists: a click is written pending once, or
        again only when its chunk is written anew without the decided ones)."""
        key = keys.record_key(keys.PENDING, *pending[0])
        state.put(key, dump_state(pending))
        self._listed[key] = pending
        self._live[key] = len(pending)
        saved = self._saved
        for click in pending:
            saved[click] = key
        return key

    def expires_before(self, cut: int) -> bool:
        """Whether any decided click held expires before *cut*."""
        rows = self._rows
        return self._chunks.any_before(cut) or bool(rows and rows[0][0] < cut)

    def expire(self, cut: int, state: KVState) -> list[bytes]:
        """Drop every decided click that expires before *cut* (a segment start).
        Returns the state keys to delete (see
        :meth:`~streamjoin.ads.impressions.ImpressionStore.expire`). Flush first.

        A pending chunk that lists a click dropped here is written anew with
        its pending clicks only (to *state*, now) and its old key comes first
        in the list: a restore never reads a click as pending whose decided
        entry is gone. The chunks looked at are those noted with the expiring
        segments (and any read from state listing a click held twice), not
        every pending chunk: the cost follows what expires.
        """
        dropped: list[bytes] = []
        values = self.values
        expired: set[ClickKey] = set()
        candidates: set[bytes] = set(self._recheck)
        for segment, members in self._chunks.pop_before(cut, dropped):
            for key in members:
                values.pop(key, None)
            listing = self._listing.pop(segment, None)
            if listing is not None:
                candidates.update(listing)
                expired.update(members)
            elif self._recheck:
                expired.update(members)
        rows = self._rows
        while rows and rows[0][0] < cut:
            _, ts, jkey, rid = heapq.heappop(rows)
            values.pop((jkey, ts, rid), None)
            dropped.append(keys.record_key(keys.CLICK, jkey, ts, rid))
        if expired:
            saved, listed = self._saved, self._listed
            rewritten = [
                k for k in sorted(candidates) if k in listed and not expired.isdisjoint(listed[k])
            ]
            self._recheck = [k for k in self._recheck if k in listed and k not in rewritten]
            for old in rewritten:
                pending = [c for c in self._listed.pop(old) if saved.get(c) == old]
                del self._live[old]
                if self._write_pending(state, pending) != old:
                    dropped.insert(0, old)
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
        #: decided click -> its segment (a pending chunk that lists it is noted there)
        segment_of: dict[ClickKey, int] = {}
        for segment, members, entries in self._chunks.load(state):
            for jkey, ts, rid, outcome, imp, campaign, cost in entries:
                click = (jkey, ts, rid)
                segment_of[click] = segment
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
                self._stale.append(key)
                continue
            value = loads(raw)
            values[click] = value
            if value["o"] is None:
                self._saved[click] = key
                pending.append(click)
                continue
            jkey, ts, rid = click
            expires = ts
            if value["o"] == Outcome.ATTRIBUTED.value:
                imp_ts = bill(jkey, str(value["imp"]), rid)
                expires = ts if imp_ts is None else max(ts, imp_ts)
            self._rows.append((expires, ts, jkey, rid))
            counted(value, expires)
        pending.extend(self._load_pending(state, segment_of))
        heapq.heapify(self._rows)
        return pending

    def _load_pending(self, state: KVState, segment_of: dict[ClickKey, int]) -> list[ClickKey]:
        """Hold the pending chunks of *state* (after the decided clicks, whose
        segments *segment_of* gives); returns their clicks still pending."""
        values = self.values
        pending: list[ClickKey] = []
        for key, raw in state.scan(*keys.family_range(keys.PENDING)):
            listed: list[ClickKey] = [(jkey, ts, rid) for jkey, ts, rid in loads(raw)]
            # a click decided in a chunk (whose delete of this one was cut off),
            # or also listed by a chunk read before (its rewrite was cut off)
            live = [click for click in listed if click not in values]
            if not live:
                self._stale.append(key)
                continue
            for click in listed:
                held = values.get(click)
                if held is None:
                    continue
                if held["o"] is None:  # pending in a chunk read before
                    self._recheck.append(key)
                elif click in segment_of:
                    self._note_listing(segment_of[click], key)
            self._listed[key] = listed
            self._live[key] = len(live)
            for click in live:
                values[click] = {"o": None}
                self._saved[click] = key
            pending.extend(live)
        return pending
