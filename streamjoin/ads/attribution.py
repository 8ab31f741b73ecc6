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
persists its state and the Spark side applies the same rules in batch.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable
from enum import StrEnum
from typing import Any, NamedTuple

try:  # a faster JSON codec for the state's values and the inputs (a dependency)
    import orjson as _orjson
except ImportError:  # pragma: no cover - the json module does the same, slower
    _orjson = None  # type: ignore[assignment]

from streamjoin.ads import keys
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


class CampaignCounts(NamedTuple):
    """What a task (or a worker, summed) counted for one campaign."""

    impressions: int
    billed_clicks: int
    spend: float


def _micros(cost: object) -> int:
    """A cost in millionths: sums that do not depend on the order of additions."""
    return round(float(cost) * 1_000_000) if isinstance(cost, int | float) else 0


class Impression(NamedTuple):
    """An impression (the left input). Records are named tuples: made per input
    record, they cost a fraction of a frozen dataclass."""

    key: str
    impression_id: str
    ts: int
    campaign: str = ""
    cost: float = 0.0


class Click(NamedTuple):
    """A click (the right input)."""

    key: str
    click_id: str
    ts: int


class Outcome(StrEnum):
    ATTRIBUTED = "attributed"
    DUPLICATE = "duplicate"
    UNATTRIBUTED = "unattributed"


class ClickOutcome(NamedTuple):
    """The final outcome of one click (keyed by ``click_id``)."""

    click_id: str
    key: str
    click_ts: int
    outcome: Outcome
    impression_id: str | None = None
    campaign: str | None = None
    cost: float | None = None


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
        self._delay = window.decision_delay
        self._grace = window.grace
        #: records older than this are gone (expired at the last checkpoint), even
        #: when they are still held (a segment expires whole, a little later)
        self._horizon = self._expiry_horizon()
        self._segment = max(1, window.retention // SEGMENTS)
        #: per campaign: [records before this time are folded, impressions, billed
        #: clicks, spend (micros)]
        self._folded: dict[str, list[int]] = {}
        #: per campaign: [impressions, billed clicks, spend (micros)] of records held
        #: that are not folded
        self._live: dict[str, list[int]] = {}

    # -- feeding ------------------------------------------------------------
    def on_impression(self, imp: Impression) -> list[ClickOutcome | Late]:
        """Add an impression; return what became final (and a Late if it is late)."""
        ts = imp.ts
        rkey = keys.record_key(keys.IMPRESSION, imp.key, ts, imp.impression_id)
        if rkey in self._imp_keys and ts >= self._horizon:
            return self._advance(LEFT, ts)  # replayed: stored once
        decided = self.marks.decided
        if decided is not None and ts + self._grace < decided:
            self.late_count += 1
            return [Late(imp, "impression", decided), *self._advance(LEFT, ts)]
        self.state.put(rkey, _dump({"campaign": imp.campaign, "cost": imp.cost, "billed": None}))
        self._hold_impression(imp.key, ts, imp.impression_id, imp.campaign, imp.cost, None, rkey)
        self._count(imp.campaign, ts, 1, 0, 0)
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
            replayed = _outcome(click.key, ts, click.click_id, known)
            return [replayed, *self._advance(RIGHT, ts)]
        decided = self.marks.decided
        if decided is not None and ts + self._grace < decided:
            self.late_count += 1
            return [Late(click, "click", decided), *self._advance(RIGHT, ts)]
        pending: dict[str, Any] = {"o": None}
        self.state.put(rkey, _dump(pending))
        self._clicks[rkey] = pending
        heapq.heappush(self._due, (ts + self._delay, ts, click.key, click.click_id))
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
        self._folded.clear()
        self._live.clear()
        self._horizon = self._expiry_horizon()
        for key, raw in self.state.scan(*keys.family_range(keys.CAMPAIGN)):
            campaign = keys.decode_campaign(key)
            folded = loads(raw)
            self._folded[campaign] = [
                folded["before"],
                folded["impressions"],
                folded["billed"],
                folded["spend"],
            ]
        # rows of the due and expiry indexes a version before 0.2 kept in RocksDB
        for family in (keys.DUE, keys.EXPIRY):
            for key, _ in self.state.scan(*keys.family_range(family)):
                self.state.delete_index(key)
        for key, raw in self.state.scan(*keys.family_range(keys.IMPRESSION)):
            jkey, ts, rid = keys.decode_record_key(key)
            imp = loads(raw)
            self._hold_impression(jkey, ts, rid, imp["campaign"], imp["cost"], imp["billed"], key)
            self._count(imp["campaign"], ts, 1, 0, 0)
        for key, raw in self.state.scan(*keys.family_range(keys.CLICK)):
            jkey, ts, rid = keys.decode_record_key(key)
            value = loads(raw)
            self._clicks[key] = value
            if value["o"] is None:
                self._due.append((ts + self._delay, ts, jkey, rid))
            else:
                self._expiry.append((ts, keys.CLICK, jkey, rid))
                if value["o"] == Outcome.ATTRIBUTED.value:
                    self._count(value["campaign"], ts, 0, 1, _micros(value["cost"]))
        heapq.heapify(self._due)
        heapq.heapify(self._expiry)

    # -- introspection ------------------------------------------------------
    def stored(self) -> int:
        """Records held in state (impressions, undecided and recently decided clicks)."""
        return len(self._imp_keys) + len(self._clicks)

    def campaign_counts(self) -> dict[str, CampaignCounts]:
        """Per campaign, what this task stored and billed since it began: impressions
        stored (not late, each id once), clicks billed and their spend (see the
        class docstring: exact after a crash)."""
        out = {}
        for campaign in sorted({*self._folded, *self._live}):
            folded = self._folded.get(campaign, [-1, 0, 0, 0])
            live = self._live.get(campaign, [0, 0, 0])
            out[campaign] = CampaignCounts(
                folded[1] + live[0], folded[2] + live[1], (folded[3] + live[2]) / 1_000_000
            )
        return out

    # -- internals ----------------------------------------------------------
    def _expiry_horizon(self) -> int:
        """Event time below which records are gone (the last checkpoint's expiry)."""
        decided = self.marks.decided
        return -1 if decided is None else decided - self.window.retention

    def _count(self, campaign: str, ts: int, imps: int, billed: int, spend: int) -> None:
        """Count a record held in state, unless it is folded already."""
        folded = self._folded.get(campaign)
        if folded is not None and ts < folded[0]:
            return
        live = self._live.get(campaign)
        if live is None:
            self._live[campaign] = [imps, billed, spend]
        else:
            live[0] += imps
            live[1] += billed
            live[2] += spend

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
                    _dump({"campaign": campaign, "cost": cost, "billed": billed}),
                )
            # billed by this very click (a replay after a partial write) stays billed
            kind = Outcome.ATTRIBUTED if billed == click_id else Outcome.DUPLICATE
            if kind is Outcome.ATTRIBUTED:
                self._count(campaign, ts, 0, 1, _micros(cost))
            value = {"o": kind.value, "imp": imp_id, "campaign": campaign, "cost": cost}
        rkey = keys.record_key(keys.CLICK, jkey, ts, click_id)
        self.state.put(rkey, _dump(value))
        self._clicks[rkey] = value
        heapq.heappush(self._expiry, (ts, keys.CLICK, jkey, click_id))
        return _outcome(jkey, ts, click_id, value)

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
                        self._fold(delta, row[2], ts, 1, 0, 0)
                        break
                if held:
                    self._imps[jkey] = held
                else:
                    self._imps.pop(jkey, None)
            else:
                value = self._clicks.pop(rkey, None)
                if value is not None and value["o"] == Outcome.ATTRIBUTED.value:
                    self._fold(delta, value["campaign"], ts, 0, 1, _micros(value["cost"]))
        for campaign, (imps, billed, spend) in sorted(delta.items()):
            folded = self._folded.setdefault(campaign, [-1, 0, 0, 0])
            folded[0] = cut
            folded[1] += imps
            folded[2] += billed
            folded[3] += spend
            live = self._live[campaign]
            live[0] -= imps
            live[1] -= billed
            live[2] -= spend
            self.state.put(
                keys.campaign_key(campaign),
                _dump({"before": cut, "impressions": folded[1], "billed": folded[2],
                       "spend": folded[3]}),
            )  # fmt: skip
        for rkey in gone:
            self.state.delete(rkey)

    def _fold(
        self,
        delta: dict[str, list[int]],
        campaign: str,
        ts: int,
        imps: int,
        billed: int,
        spend: int,
    ) -> None:
        """Note an expiring record's counts for its campaign, unless folded already."""
        folded = self._folded.get(campaign)
        if folded is not None and ts < folded[0]:
            return
        add = delta.setdefault(campaign, [0, 0, 0])
        add[0] += imps
        add[1] += billed
        add[2] += spend


#: an impression held in memory: (ts, id, campaign, cost, billed click id or None)
_Row = tuple[int, str, str, float, str | None]


def _imp_order(row: _Row) -> tuple[int, str]:
    return row[0], row[1]


def loads(raw: bytes | str) -> Any:
    """JSON decoded by orjson when it is installed, else by :mod:`json`.

    A document orjson rejects is given to :mod:`json`, which accepts a little
    more (``NaN``, integers beyond 64 bits, lone surrogates): either way the
    result is what :func:`json.loads` returns, or its error.
    """
    if _orjson is not None:
        try:
            return _orjson.loads(raw)
        except _orjson.JSONDecodeError:
            pass
    return json.loads(raw)


def _dump(value: dict[str, object]) -> bytes:
    """Compact JSON of a state value (orjson's when installed: the same
    document, so either reads what the other wrote)."""
    if _orjson is not None:
        return _orjson.dumps(value)
    return json.dumps(value, separators=(",", ":")).encode()


def _outcome(key: str, ts: int, click_id: str, value: dict[str, object]) -> ClickOutcome:
    kind = Outcome(str(value["o"]))
    if kind is Outcome.UNATTRIBUTED:
        return ClickOutcome(click_id, key, ts, kind)
    cost = value["cost"]
    return ClickOutcome(
        click_id,
        key,
        ts,
        kind,
        str(value["imp"]),
        str(value["campaign"]),
        float(cost) if isinstance(cost, int | float) else None,
    )


def attribute(
    impressions: Iterable[Impression], clicks: Iterable[Click], window: JoinWindow
) -> dict[str, ClickOutcome]:
    """The reference: every click's outcome computed directly from all events.

    Same rules as :class:`TaskAttribution`, no ordering, no state: what a batch
    job (and the tests) compare the stream against.
    """
    by_key: dict[str, list[Impression]] = {}
    for imp in impressions:
        by_key.setdefault(imp.key, []).append(imp)
    billed: set[str] = set()
    out: dict[str, ClickOutcome] = {}
    for click in sorted(clicks, key=lambda c: (c.ts, c.click_id)):
        matching = [i for i in by_key.get(click.key, ()) if window.matches(i.ts, click.ts)]
        if not matching:
            out[click.click_id] = ClickOutcome(
                click.click_id, click.key, click.ts, Outcome.UNATTRIBUTED
            )
            continue
        imp = min(matching, key=lambda i: (i.ts, i.impression_id))
        kind = Outcome.DUPLICATE if imp.impression_id in billed else Outcome.ATTRIBUTED
        billed.add(imp.impression_id)
        out[click.click_id] = ClickOutcome(
            click.click_id, click.key, click.ts, kind, imp.impression_id, imp.campaign, imp.cost
        )
    return out
