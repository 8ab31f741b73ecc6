"""Click attribution, the ad-monetization join policy, per task.

Impressions (left) and clicks (right) share a key (the auction id). For a
click ``c`` the matching impressions are those with the same key and
``window.matches(imp.ts, c.ts)``; ``c`` is attributed to the earliest of them
(by ``(ts, impression_id)``). Each impression bills one click: the earliest of
its attributed clicks by ``(ts, click_id)``; its later clicks are duplicates.
A click without a matching impression is unattributed. Every click gets
exactly one outcome.

Outcomes depend on the events alone, never on their arrival order: a click's
outcome is emitted once the task's decision time (the minimum of the two
inputs' watermarks, :mod:`streamjoin.join.watermarks`) passes
``window.decided_after(click.ts)``, when every impression and every earlier
click it depends on has arrived (a later one would be late), whichever input
the consumer fetched first. Outcomes carry the click's id, so replaying a click
after a crash yields the same outcome again (effectively once, by key).

:class:`TaskAttribution` is the whole per-task state machine: feed it records
in arrival order, it returns what to emit. It does no I/O; the runtime
persists its state and the Spark side applies the same rules in batch. The
records, outcomes and the reference (:func:`attribute`) are in
:mod:`streamjoin.ads.events` (re-exported here).
"""

from __future__ import annotations

import heapq
from typing import Any

from streamjoin.ads import keys
from streamjoin.ads.campaigns import CampaignTally
from streamjoin.ads.events import (
    CampaignCounts,
    Click,
    ClickOutcome,
    Impression,
    Outcome,
    attribute,
    dump_state,
    loads,
    micros,
    outcome_from_state,
)
from streamjoin.join.policy import LEFT, RIGHT, SIDES, Late
from streamjoin.join.state import KVState, MemoryState
from streamjoin.join.watermarks import Watermarks
from streamjoin.join.window import JoinWindow

__all__ = [
    "SEGMENTS",
    "CampaignCounts",
    "Click",
    "ClickOutcome",
    "Impression",
    "Outcome",
    "TaskAttribution",
    "attribute",
    "loads",
]


#: state segments per retention: state expires, and campaign counts fold, a
#: whole segment (retention / SEGMENTS of event time) at a time, so a task holds
#: at most 1 / SEGMENTS more than the retention needs
SEGMENTS = 8


class TaskAttribution:
    """Attribution state of one task (one partition of both topics).

    The task's content (records, decisions, watermarks) lives in a
    :class:`~streamjoin.join.state.KVState`, so a durable backend survives a
    crash and a new owner rebuilds the task from the changelog. The logic reads
    a mirror of that content in memory (impressions by join key, clicks by
    record key) with the due and expiry orders as heaps: the state is only
    written while records flow, and read once, by :meth:`rebuild_indexes`, when
    the task opens (call it after a restore). What the mirror holds is what
    the state holds: records within the retention behind decision time.

    State expires a time segment (an eighth of the retention, :data:`SEGMENTS`)
    at a time, once all of it is behind the retention. The task also keeps each
    campaign's counts (impressions stored, clicks billed, spend): the
    records it holds plus what expired, folded into one record per campaign
    before the records go (:meth:`campaign_counts`). They are a view of the
    state, so they are exact whatever a crash cut: a campaign's folded record
    says up to which event time its records are in it, and a record of such a
    segment still in the state (its delete cut off) is not counted twice.
    """

    def __init__(
        self, window: JoinWindow, state: KVState | None = None, *, auto_checkpoint: bool = True
    ) -> None:
        self.window = window
        #: checkpoint after every record; a runtime that batches sets it False
        #: and calls :meth:`checkpoint` at the end of each batch
        self.auto_checkpoint = auto_checkpoint
        self.state: KVState = state if state is not None else MemoryState()
        #: the impressions' (left) and clicks' (right) watermarks and the decision time
        self.marks = Watermarks.decode(SIDES, self.state.get(keys.STREAM_TIME))
        self._saved = self.marks.encode()
        self.late_count = 0
        #: impressions by join key: [ts, id, campaign, cost, billed], (ts, id) order
        #: (tuples of atoms: the cyclic collector stops tracking them, so a large
        #: window's state costs its full collections little)
        self._imps: dict[str, tuple[_Row, ...]] = {}
        #: record keys of the impressions held (replays are stored once)
        self._imp_keys: set[bytes] = set()
        #: clicks held, by record key: their stored value (``{"o": None}`` while pending)
        self._clicks: dict[bytes, dict[str, Any]] = {}
        #: pending clicks, (due, ts, key, id): billing order
        self._due: list[tuple[int, int, str, str]] = []
        #: stored records, (ts, family, key, id): expiry order
        self._expiry: list[tuple[int, bytes, str, str]] = []
        #: records older than this are gone (expired at the last checkpoint), even
        #: when they are still held (a segment expires whole, a little later)
        self._horizon = self._expiry_horizon()
        self._segment = max(1, window.retention // SEGMENTS)
        #: per campaign: impressions stored, clicks billed, spend
        self.campaigns = CampaignTally()

    # -- feeding ------------------------------------------------------------
    def on_impression(self, imp: Impression) -> list[ClickOutcome | Late]:
        """Add an impression; return what became final (and a Late if it is late)."""
        ts = imp.ts
        rkey = keys.record_key(keys.IMPRESSION, imp.key, ts, imp.impression_id)
        if rkey in self._imp_keys and ts >= self._horizon:
            return self._advance(LEFT, ts)  # replayed: stored once
        if self.window.is_late(ts, self.marks.decided):
            self.late_count += 1
            return [Late(imp, "impression", self._now()), *self._advance(LEFT, ts)]
        self.state.put(
            rkey, dump_state({"campaign": imp.campaign, "cost": imp.cost, "billed": None})
        )
        self._hold_impression(imp.key, ts, imp.impression_id, imp.campaign, imp.cost, None, rkey)
        self.campaigns.count(imp.campaign, ts, 1, 0, 0)
        return self._advance(LEFT, ts)

    def on_click(self, click: Click) -> list[ClickOutcome | Late]:
        """Add a click; return what became final (and a Late if it is late)."""
        ts = click.ts
        rkey = keys.record_key(keys.CLICK, click.key, ts, click.click_id)
        known = self._clicks.get(rkey) if ts >= self._horizon else None
        if known is not None:
            if known["o"] is None:
                return self._advance(RIGHT, ts)  # replayed while pending
            # replayed after its outcome (e.g. after a crash): the same outcome
            replayed = outcome_from_state(click.key, ts, click.click_id, known)
            return [replayed, *self._advance(RIGHT, ts)]
        if self.window.is_late(ts, self.marks.decided):
            self.late_count += 1
            return [Late(click, "click", self._now()), *self._advance(RIGHT, ts)]
        pending: dict[str, Any] = {"o": None}
        self.state.put(rkey, dump_state(pending))
        self._clicks[rkey] = pending
        due = self.window.decided_after(ts)
        heapq.heappush(self._due, (due, ts, click.key, click.click_id))
        return self._advance(RIGHT, ts)

    def on_left(self, record: Impression) -> list[ClickOutcome | Late]:
        """:meth:`on_impression` (the policy protocol's name)."""
        return self.on_impression(record)

    def on_right(self, record: Click) -> list[ClickOutcome | Late]:
        """:meth:`on_click` (the policy protocol's name)."""
        return self.on_click(record)

    def set_idle(self, side: str, idle: bool) -> list[ClickOutcome | Late]:
        """The runtime reports *side* (``left``/``right``) idle or not; return what
        became final (an idle input leaves the decision time to the other)."""
        self.marks.set_idle(side, idle)
        return self._advance(None, None)

    @property
    def decision_time(self) -> int | None:
        """The highest decision time reached (``None``: nothing decided yet)."""
        return self.marks.decided

    @property
    def pending(self) -> int:
        """Clicks held and not decided yet (read by ``/metrics``)."""
        return len(self._due)

    def flush(self) -> list[ClickOutcome | Late]:
        """Decide every pending click (end of input, e.g. a batch run)."""
        return list(self._emit(keys.MAX_TS + 1))

    def checkpoint(self) -> None:
        """Persist the watermarks and decision time, then expire what they make unnecessary.

        Until a checkpoint the state holds the watermarks of the previous one,
        which are never ahead of the records it holds, and nothing is deleted
        for a decision time that is not persisted first. So a changelog cut
        anywhere restores a state in which a replayed record is either still
        there (its outcome is emitted again) or late by the restored decision
        time (reported), never re-decided against missing records.
        """
        encoded = self.marks.encode()
        if encoded != self._saved:
            self.state.put(keys.STREAM_TIME, encoded)
            self._saved = encoded
            if self.marks.decided is not None:
                self._expire(self.marks.decided)

    def rebuild_indexes(self) -> None:
        """Rebuild the mirror and the due and expiry orders from the state's content.

        The runtime calls it when a task is opened on a worker (its content
        may just have been restored from the changelog).
        """
        self._imps.clear()
        self._imp_keys.clear()
        self._clicks.clear()
        self._due.clear()
        self._expiry.clear()
        self._horizon = self._expiry_horizon()
        self.campaigns.load(self.state)
        # rows of the due and expiry indexes a version before 0.2 kept in RocksDB
        for family in (keys.DUE, keys.EXPIRY):
            for key, _ in self.state.scan(*keys.family_range(family)):
                self.state.delete_index(key)
        for key, raw in self.state.scan(*keys.family_range(keys.IMPRESSION)):
            jkey, ts, rid = keys.decode_record_key(key)
            imp = loads(raw)
            self._hold_impression(jkey, ts, rid, imp["campaign"], imp["cost"], imp["billed"], key)
            self.campaigns.count(imp["campaign"], ts, 1, 0, 0)
        for key, raw in self.state.scan(*keys.family_range(keys.CLICK)):
            jkey, ts, rid = keys.decode_record_key(key)
            value = loads(raw)
            self._clicks[key] = value
            if value["o"] is None:
                self._due.append((self.window.decided_after(ts), ts, jkey, rid))
            else:
                self._expiry.append((ts, keys.CLICK, jkey, rid))
                if value["o"] == Outcome.ATTRIBUTED.value:
                    self.campaigns.count(value["campaign"], ts, 0, 1, micros(value["cost"]))
        heapq.heapify(self._due)
        heapq.heapify(self._expiry)

    # -- introspection ------------------------------------------------------
    def stored(self) -> int:
        """Records held in state (impressions, undecided and recently decided clicks)."""
        return len(self._imp_keys) + len(self._clicks)

    def campaign_counts(self) -> dict[str, CampaignCounts]:
        """Per campaign, what this task stored and billed since it began: impressions
        stored (not late, each id once), clicks billed and their spend (exact after
        a crash: :mod:`streamjoin.ads.campaigns`)."""
        return self.campaigns.counts()

    # -- internals ----------------------------------------------------------
    def _now(self) -> int:
        return self.marks.decided if self.marks.decided is not None else 0

    def _expiry_horizon(self) -> int:
        """Event time below which records are gone (the last checkpoint's expiry)."""
        decided = self.marks.decided
        return -1 if decided is None else decided - self.window.retention

    def _hold_impression(
        self,
        jkey: str,
        ts: int,
        rid: str,
        campaign: str,
        cost: float,
        billed: str | None,
        rkey: bytes,
    ) -> None:
        row: _Row = (ts, rid, campaign, cost, billed)
        held = self._imps.get(jkey)
        if held is None:
            self._imps[jkey] = (row,)
        else:
            self._imps[jkey] = tuple(sorted((*held, row), key=_imp_order))
        self._imp_keys.add(rkey)
        heapq.heappush(self._expiry, (ts, keys.IMPRESSION, jkey, rid))

    def _advance(self, side: str | None, ts: int | None) -> list[ClickOutcome | Late]:
        """Note a record at *ts* on *side* (``None``: an idleness change) and
        decide what the new decision time makes final."""
        before = self.marks.decided
        if side is not None and ts is not None:
            decided = self.marks.see(side, ts)
        else:
            decided = self.marks.advance()
        out: list[ClickOutcome | Late] = []
        if decided is not None and decided != before and self._due and self._due[0][0] < decided:
            out.extend(self._emit(decided))
        if self.auto_checkpoint:
            self.checkpoint()
        return out

    def _emit(self, decided: int) -> list[ClickOutcome]:
        """Decide pending clicks whose due time is before *decided*, earliest first
        (due = ts + before + grace, so (due, ts, key, id) order is billing order)."""
        out: list[ClickOutcome] = []
        due = self._due
        while due and due[0][0] < decided:
            _, ts, jkey, click_id = heapq.heappop(due)
            out.append(self._decide(jkey, ts, click_id))
        return out

    def _decide(self, jkey: str, ts: int, click_id: str) -> ClickOutcome:
        # impressions with imp.ts - before <= ts <= imp.ts + after, earliest (ts, id) first
        lo = ts - self.window.after
        hi = ts + self.window.before
        match = None
        at = 0
        held = self._imps.get(jkey, ())
        for i, row in enumerate(held):
            if row[0] > hi:
                break
            if row[0] >= lo:
                match, at = row, i
                break
        value: dict[str, Any]
        if match is None:
            value = {"o": Outcome.UNATTRIBUTED.value}
        else:
            imp_ts, imp_id, campaign, cost, billed = match
            if billed is None:
                billed = click_id
                self._imps[jkey] = (*held[:at], (*match[:4], billed), *held[at + 1 :])
                self.state.put(
                    keys.record_key(keys.IMPRESSION, jkey, imp_ts, imp_id),
                    dump_state({"campaign": campaign, "cost": cost, "billed": billed}),
                )
            # billed by this very click (a replay after a partial write) stays billed
            kind = Outcome.ATTRIBUTED if billed == click_id else Outcome.DUPLICATE
            if kind is Outcome.ATTRIBUTED:
                self.campaigns.count(campaign, ts, 0, 1, micros(cost))
            value = {"o": kind.value, "imp": imp_id, "campaign": campaign, "cost": cost}
        rkey = keys.record_key(keys.CLICK, jkey, ts, click_id)
        self.state.put(rkey, dump_state(value))
        self._clicks[rkey] = value
        heapq.heappush(self._expiry, (ts, keys.CLICK, jkey, click_id))
        return outcome_from_state(jkey, ts, click_id, value)

    def _expire(self, decided: int) -> None:
        """Drop impressions and decided clicks no pending or future click needs,
        a whole segment at a time, folding them into their campaign's counts first.

        A non-late click has ``ts >= decided - grace`` and a pending one
        ``ts >= decided - before - grace``; neither can match an impression
        older than decided - retention, nor be a replay of a click that old
        that is not late. Segments entirely older than that go: each campaign
        with records in them gets its folded counts written, then the records
        are deleted (a state cut between the two still counts each once).
        """
        self._horizon = horizon = decided - self.window.retention
        cut = horizon // self._segment * self._segment
        expiry = self._expiry
        if not expiry or expiry[0][0] >= cut:
            return
        gone = []
        delta: dict[str, list[int]] = {}
        while expiry and expiry[0][0] < cut:
            ts, family, jkey, rid = heapq.heappop(expiry)
            rkey = keys.record_key(family, jkey, ts, rid)
            gone.append(rkey)
            if family == keys.IMPRESSION:
                self._imp_keys.discard(rkey)
                held = self._imps.get(jkey, ())
                for i, row in enumerate(held):
                    if row[0] == ts and row[1] == rid:
                        held = (*held[:i], *held[i + 1 :])
                        self.campaigns.note(delta, row[2], ts, 1, 0, 0)
                        break
                if held:
                    self._imps[jkey] = held
                else:
                    self._imps.pop(jkey, None)
            else:
                value = self._clicks.pop(rkey, None)
                if value is not None and value["o"] == Outcome.ATTRIBUTED.value:
                    self.campaigns.note(delta, value["campaign"], ts, 0, 1, micros(value["cost"]))
        self.campaigns.fold(delta, cut, self.state)
        for rkey in gone:
            self.state.delete(rkey)


#: an impression held in memory: (ts, id, campaign, cost, billed click id or None)
_Row = tuple[int, str, str, float, str | None]


def _imp_order(row: _Row) -> tuple[int, str]:
    return row[0], row[1]
