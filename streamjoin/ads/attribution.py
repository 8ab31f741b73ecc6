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
from collections.abc import Sequence
from typing import Any

from streamjoin.ads import keys
from streamjoin.ads.campaigns import CampaignTally
from streamjoin.ads.clicks import ClickKey, ClickStore
from streamjoin.ads.events import (
    CampaignCounts,
    Click,
    ClickOutcome,
    Impression,
    Outcome,
    attribute,
    loads,
    micros,
    outcome_from_state,
)
from streamjoin.ads.impressions import ImpressionStore
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

#: the outcomes' names, as the state stores them
_ATTRIBUTED = Outcome.ATTRIBUTED.value
_DUPLICATE = Outcome.DUPLICATE.value
_UNATTRIBUTED = Outcome.UNATTRIBUTED.value


class TaskAttribution:
    """Attribution state of one task (one partition of both topics).

    The task's content (records, decisions, watermarks) lives in a
    :class:`~streamjoin.join.state.KVState`, so a durable backend survives a
    crash and a new owner rebuilds the task from the changelog. The logic reads
    a mirror of that content in memory (impressions by join key in an
    :class:`~streamjoin.ads.impressions.ImpressionStore`, clicks by identity in
    a :class:`~streamjoin.ads.clicks.ClickStore`) with the due order as a
    heap and the expiry order by time segment: the state is only written while
    records flow, and read once, by :meth:`rebuild_indexes`, when the task
    opens (call it after a restore). What the mirror holds is what the state
    holds: records within the retention behind decision time.

    Impressions and decided clicks are written in chunks, one per time segment
    and part of a batch, impressions before any click is decided against them;
    a click still pending at the checkpoint is written as a row of its own. State
    expires a time segment (an eighth of the retention, :data:`SEGMENTS`) at a
    time, once all of it is behind the retention. The task also keeps each
    campaign's counts (impressions stored, clicks billed, spend): the
    records it holds plus what expired, folded into one record per campaign
    before the records go (:meth:`campaign_counts`). They are a view of the
    state, so they are exact whatever a crash cut: a campaign's folded record
    says up to which event time its records are in it, and a record of such a
    segment still in the state (its delete cut off) is not counted twice.

    With ``decide_per_chunk`` the clicks that become due are decided by
    :meth:`settle`, which the runtime calls after each chunk of records of
    one input, instead of after every record: the outcomes are the same (a
    record that is not late cannot change a click already due), and the
    impressions of a chunk are written as one row per segment.
    """

    def __init__(
        self,
        window: JoinWindow,
        state: KVState | None = None,
        *,
        auto_checkpoint: bool = True,
        decide_per_chunk: bool = False,
    ) -> None:
        self.window = window
        #: checkpoint after every record; a runtime that batches sets it False
        #: and calls :meth:`checkpoint` at the end of each batch
        self.auto_checkpoint = auto_checkpoint
        #: decide due clicks in :meth:`settle` only (and on idleness changes)
        self.decide_per_chunk = decide_per_chunk
        self.state: KVState = state if state is not None else MemoryState()
        #: the impressions' (left) and clicks' (right) watermarks and the decision time
        self.marks = Watermarks.decode(SIDES, self.state.get(keys.STREAM_TIME))
        self._saved = self.marks.encode()
        self.late_count = 0
        self._segment = max(1, window.retention // SEGMENTS)
        #: the impressions held (rows are tuples of atoms: the cyclic collector
        #: stops tracking them, so a large window's state costs its full
        #: collections little)
        self.impressions = ImpressionStore(self._segment)
        #: the clicks held (an attributed click's entry says which impression it
        #: billed, so it expires no earlier than that impression)
        self.clicks = ClickStore(self._segment)
        #: pending clicks, (due, (key, ts, id)): billing order (due = ts + a constant)
        self._due: list[tuple[int, ClickKey]] = []
        #: records older than this are gone (expired at the last checkpoint), even
        #: when they are still held (a segment expires whole, a little later)
        self._horizon = self._expiry_horizon()
        #: per campaign: impressions stored, clicks billed, spend
        self.campaigns = CampaignTally(self._segment)

    # -- feeding ------------------------------------------------------------
    def on_impression(self, imp: Impression) -> list[ClickOutcome | Late]:
        """Add an impression; return what became final (and a Late if it is late)."""
        item = self._take_impression(imp, self.marks.decided)
        advanced = self._advance(LEFT, imp[2])
        return advanced if item is None else [item, *advanced]

    def on_click(self, click: Click) -> list[ClickOutcome | Late]:
        """Add a click; return what became final (and a Late if it is late)."""
        item = self._take_click(click, self.marks.decided)
        advanced = self._advance(RIGHT, click[2])
        return advanced if item is None else [item, *advanced]

    def on_chunk(
        self, side: str, records: Sequence[tuple[Any, ...]]
    ) -> list[tuple[int, ClickOutcome | Late]]:
        """Add a chunk of one input's records in arrival order (impressions or
        clicks, or tuples of their fields); return what became final, each with
        the index of its record: what :meth:`on_impression`/:meth:`on_click`
        give record by record. With ``decide_per_chunk`` (no ``auto_checkpoint``)
        no record makes a click final (:meth:`settle` does): one loop, and the
        input's watermark is seen only when a record raises it, and once it is
        at the other input's (the decision time stays), once at the end."""
        out: list[tuple[int, ClickOutcome | Late]] = []
        if not self.decide_per_chunk or self.auto_checkpoint:
            feed = self.on_impression if side == LEFT else self.on_click
            for i, record in enumerate(records):
                out.extend((i, item) for item in feed(record))  # type: ignore[arg-type]
            return out
        take = self._take_impression if side == LEFT else self._take_click
        marks = self.marks
        see = marks.see
        decided = marks.decided
        high: int | None = None  # the input's watermark, once seen in this chunk
        bound = marks.bound(side)
        deferred: int | None = None  # the highest time not seen yet
        for i, record in enumerate(records):
            item = take(record, decided)
            if item is not None:
                out.append((i, item))
            ts = record[2]
            if high is None or ts > high:
                if bound is not None and high is not None and high >= bound:
                    high = deferred = ts
                else:
                    decided = see(side, ts)
                    high = marks.marks[side]
        if deferred is not None:
            see(side, deferred)
        return out

    def _take_impression(self, imp: tuple[Any, ...], decided: int | None) -> Late | None:
        """Hold impression *imp* (fields in :class:`Impression`'s order) unless it
        is a replay (stored once) or late by *decided* (reported)."""
        key, rid, ts, campaign, cost = imp
        if ts >= self._horizon and self.impressions.holds(key, ts, rid):
            return None  # replayed: stored once
        if self.window.is_late(ts, decided):
            self.late_count += 1
            return Late(Impression(*imp), "impression", decided or 0)
        self.impressions.add(key, ts, rid, campaign, cost)
        self.campaigns.count(campaign, ts, 1, 0, 0)
        return None

    def _take_click(
        self, click: tuple[Any, ...], decided: int | None
    ) -> ClickOutcome | Late | None:
        """Hold click *click* (fields in :class:`Click`'s order) as pending; a
        replay of a decided one gets its outcome again, a late one is reported."""
        key, click_id, ts = click
        ckey = (key, ts, click_id)
        known = self.clicks.values.get(ckey) if ts >= self._horizon else None
        if known is not None:
            if known["o"] is None:
                return None  # replayed while pending
            # replayed after its outcome (e.g. after a crash): the same outcome
            return outcome_from_state(key, ts, click_id, known)
        if self.window.is_late(ts, decided):
            self.late_count += 1
            return Late(Click(*click), "click", decided or 0)
        self.clicks.add_pending(ckey)
        heapq.heappush(self._due, (self.window.decided_after(ts), ckey))
        return None

    def on_left(self, record: Impression) -> list[ClickOutcome | Late]:
        """:meth:`on_impression` (the policy protocol's name)."""
        return self.on_impression(record)

    def on_right(self, record: Click) -> list[ClickOutcome | Late]:
        """:meth:`on_click` (the policy protocol's name)."""
        return self.on_click(record)

    def settle(self) -> list[ClickOutcome | Late]:
        """Decide the clicks the decision time has made due (with
        ``decide_per_chunk``, the runtime calls it after each chunk of records)."""
        decided = self.marks.decided
        if decided is not None and self._due and self._due[0][0] < decided:
            return list(self._emit(decided))
        return []

    def set_idle(self, side: str, idle: bool) -> list[ClickOutcome | Late]:
        """The runtime reports *side* (``left``/``right``) idle or not; return what
        became final (an idle input leaves the decision time to the other)."""
        self.marks.set_idle(side, idle)
        self.marks.advance()
        out = self.settle()
        if self.auto_checkpoint:
            self.checkpoint()
        return out

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
        """Persist what is held in memory only and the watermarks and decision
        time, then expire what they make unnecessary.

        The impressions added since the last chunk and the clicks still pending
        are written first. Until a checkpoint the state holds the watermarks of
        the previous one, which are never ahead of the records it holds, and
        nothing is deleted for a decision time that is not persisted first. So a
        changelog cut anywhere restores a state in which a replayed record is
        either still there (its outcome is emitted again) or late by the
        restored decision time (reported), never re-decided against missing
        records.
        """
        self.impressions.flush(self.state)
        self.clicks.flush(self.state)
        encoded = self.marks.encode()
        if encoded != self._saved:
            self.state.put(keys.STREAM_TIME, encoded)
            self._saved = encoded
            decided = self.marks.decided
            if decided is not None:
                due = self._due
                if due and due[0][0] < decided:
                    # clicks due and not decided yet still need their impressions
                    decided = due[0][0]
                self._expire(decided)

    def rebuild_indexes(self) -> None:
        """Rebuild the mirror and the due and expiry orders from the state's content.

        The runtime calls it when a task is opened on a worker (its content
        may just have been restored from the changelog).
        """
        self._due.clear()
        self._horizon = self._expiry_horizon()
        self.campaigns.load(self.state)
        # rows of the due and expiry indexes a version before 0.2 kept in RocksDB
        for family in (keys.DUE, keys.EXPIRY):
            for key, _ in self.state.scan(*keys.family_range(family)):
                self.state.delete_index(key)
        count = self.campaigns.count
        self.impressions.load(self.state, lambda campaign, ts: count(campaign, ts, 1, 0, 0))

        def counted(value: dict[str, Any], at: int) -> None:
            if value["o"] == _ATTRIBUTED:
                count(value["campaign"], at, 0, 1, micros(value["cost"]))

        pending = self.clicks.load(self.state, self.impressions.bill_by_id, counted)
        self._due = [(self.window.decided_after(click[1]), click) for click in pending]
        heapq.heapify(self._due)

    # -- introspection ------------------------------------------------------
    def stored(self) -> int:
        """Records held in state (impressions, undecided and recently decided clicks)."""
        return self.impressions.count + len(self.clicks.values)

    def campaign_counts(self) -> dict[str, CampaignCounts]:
        """Per campaign, what this task stored and billed since it began: impressions
        stored (not late, each id once), clicks billed and their spend (exact after
        a crash: :mod:`streamjoin.ads.campaigns`)."""
        return self.campaigns.counts()

    # -- internals ----------------------------------------------------------
    def _expiry_horizon(self) -> int:
        """Event time below which records are gone (the last checkpoint's expiry)."""
        decided = self.marks.decided
        return -1 if decided is None else decided - self.window.retention

    def _advance(self, side: str, ts: int) -> list[ClickOutcome | Late]:
        """Note a record at *ts* on *side* and, unless ``decide_per_chunk``, decide
        what the new decision time makes final."""
        before = self.marks.decided
        decided = self.marks.see(side, ts)
        out: list[ClickOutcome | Late] = []
        if (
            not self.decide_per_chunk
            and decided is not None
            and decided != before
            and self._due
            and self._due[0][0] < decided
        ):
            out.extend(self._emit(decided))
        if self.auto_checkpoint:
            self.checkpoint()
        return out

    def _emit(self, decided: int) -> list[ClickOutcome]:
        """Decide pending clicks whose due time is before *decided*, earliest first
        (due = ts + before + grace, so (due, ts, key, id) order is billing order).
        The impressions not written yet are written first: a decided click's row
        may name one."""
        self.impressions.flush(self.state)
        out: list[ClickOutcome] = []
        due = self._due
        while due and due[0][0] < decided:
            out.append(self._decide(heapq.heappop(due)[1]))
        return out

    def _decide(self, click: ClickKey) -> ClickOutcome:
        jkey, ts, click_id = click
        # impressions with imp.ts - before <= ts <= imp.ts + after, earliest (ts, id) first
        match, at = self.impressions.first_match(
            jkey, ts - self.window.after, ts + self.window.before
        )
        value: dict[str, Any]
        expires = ts
        if match is None:
            value = {"o": _UNATTRIBUTED}
        else:
            imp_ts, imp_id, campaign, cost, billed = match
            if billed is None:
                billed = click_id
                self.impressions.bill(jkey, at, click_id)
            # billed by this very click (a replay after a partial write) stays billed
            kind = _ATTRIBUTED if billed == click_id else _DUPLICATE
            if kind == _ATTRIBUTED:
                expires = max(ts, imp_ts)
            value = {"o": kind, "imp": imp_id, "campaign": campaign, "cost": cost}
        segment = self.clicks.decide(click, value, expires)
        if value["o"] == _ATTRIBUTED:
            self.campaigns.count(value["campaign"], segment, 0, 1, micros(value["cost"]))
        return outcome_from_state(jkey, ts, click_id, value)

    def _expire(self, decided: int) -> None:
        """Drop impressions and decided clicks no pending or future click needs,
        a whole segment at a time, folding them into their campaign's counts first.

        A non-late click has ``ts >= decided - grace`` and a pending one
        ``ts >= decided - before - grace``; neither can match an impression
        older than decided - retention, nor be a replay of a click that old
        that is not late. Segments entirely older than that go: each campaign
        with records in them gets its folded counts written, then the records
        are deleted (a state cut between the two still counts each once). An
        attributed click goes with the impression it billed, if that is later.
        """
        self._horizon = horizon = decided - self.window.retention
        cut = horizon // self._segment * self._segment
        if not self.impressions.expires_before(cut) and not self.clicks.expires_before(cut):
            return
        gone = self.impressions.expire(cut)
        gone.extend(self.clicks.expire(cut, self.state))
        self.campaigns.fold(self.campaigns.expire(cut), cut, self.state)
        for key in gone:
            self.state.delete(key)
