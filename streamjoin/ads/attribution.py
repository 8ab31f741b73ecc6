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

import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

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
    "Click",
    "ClickOutcome",
    "Impression",
    "Outcome",
    "TaskAttribution",
    "attribute",
    "loads",
]


@dataclass(frozen=True)
class Impression:
    key: str
    impression_id: str
    ts: int
    campaign: str = ""
    cost: float = 0.0


@dataclass(frozen=True)
class Click:
    key: str
    click_id: str
    ts: int


class Outcome(StrEnum):
    ATTRIBUTED = "attributed"
    DUPLICATE = "duplicate"
    UNATTRIBUTED = "unattributed"


@dataclass(frozen=True)
class ClickOutcome:
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

    All state lives in a :class:`~streamjoin.join.state.KVState` (records,
    decisions and stream time as content; the due and expiry orders as local
    indexes), so a durable backend survives a crash and a new owner rebuilds
    the task from the changelog: call :meth:`rebuild_indexes` after a restore.
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
        # Lower bounds of the due and expiry ranges still holding entries: the
        # scans start there instead of at the family's start, so they do not
        # walk over the deletions of earlier scans (RocksDB tombstones).
        self._due_floor = 0
        self._expiry_floor = 0

    # -- feeding ------------------------------------------------------------
    def on_impression(self, imp: Impression) -> list[ClickOutcome | Late]:
        """Add an impression; return what became final (and a Late if it is late)."""
        rkey = keys.record_key(keys.IMPRESSION, imp.key, imp.ts, imp.impression_id)
        if self.state.get(rkey) is not None:
            return self._advance(LEFT, imp.ts)  # replayed: stored once
        if self.window.is_late(imp.ts, self.marks.decided):
            self.late_count += 1
            return [Late(imp, "impression", self._now()), *self._advance(LEFT, imp.ts)]
        self.state.put(rkey, _dump({"campaign": imp.campaign, "cost": imp.cost, "billed": None}))
        self.state.put_index(
            keys.expiry_key(imp.ts, keys.IMPRESSION, imp.key, imp.impression_id), b""
        )
        return self._advance(LEFT, imp.ts)

    def on_click(self, click: Click) -> list[ClickOutcome | Late]:
        """Add a click; return what became final (and a Late if it is late)."""
        rkey = keys.record_key(keys.CLICK, click.key, click.ts, click.click_id)
        known = self.state.get(rkey)
        if known is not None:
            value = loads(known)
            if value["o"] is None:
                return self._advance(RIGHT, click.ts)  # replayed while pending
            # replayed after its outcome (e.g. after a crash): the same outcome
            replayed = _outcome(click.key, click.ts, click.click_id, value)
            return [replayed, *self._advance(RIGHT, click.ts)]
        if self.window.is_late(click.ts, self.marks.decided):
            self.late_count += 1
            return [Late(click, "click", self._now()), *self._advance(RIGHT, click.ts)]
        self.state.put(rkey, _dump({"o": None}))
        self.state.put_index(
            keys.due_key(self.window.decided_after(click.ts), click.ts, click.key, click.click_id),
            b"",
        )
        return self._advance(RIGHT, click.ts)

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
        floor = self._due_floor
        out: list[ClickOutcome | Late] = list(self._emit(keys.MAX_TS))
        self._due_floor = floor
        return out

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
        """Recreate the local due and expiry indexes from the content.

        The runtime calls it when a task is opened on a worker (its content
        may just have been restored from the changelog).
        """
        self._due_floor = 0
        self._expiry_floor = 0
        for family in (keys.DUE, keys.EXPIRY):
            for key, _ in self.state.scan(*keys.family_range(family)):
                self.state.delete_index(key)
        for key, _ in self.state.scan(*keys.family_range(keys.IMPRESSION)):
            jkey, ts, rid = keys.decode_record_key(key)
            self.state.put_index(keys.expiry_key(ts, keys.IMPRESSION, jkey, rid), b"")
        for key, raw in self.state.scan(*keys.family_range(keys.CLICK)):
            jkey, ts, rid = keys.decode_record_key(key)
            if loads(raw)["o"] is None:
                due = self.window.decided_after(ts)
                self.state.put_index(keys.due_key(due, ts, jkey, rid), b"")
            else:
                self.state.put_index(keys.expiry_key(ts, keys.CLICK, jkey, rid), b"")

    # -- introspection ------------------------------------------------------
    def stored(self) -> int:
        """Records held in state (impressions, undecided and recently decided clicks)."""
        return sum(
            len(self.state.scan(*keys.family_range(f))) for f in (keys.IMPRESSION, keys.CLICK)
        )

    # -- internals ----------------------------------------------------------
    def _now(self) -> int:
        return self.marks.decided if self.marks.decided is not None else 0

    def _advance(self, side: str | None, ts: int | None) -> list[ClickOutcome | Late]:
        """Note a record at *ts* on *side* (``None``: an idleness change) and
        decide what the new decision time makes final."""
        before = self.marks.decided
        if side is not None and ts is not None:
            self.marks.observe(side, ts)
        decided = self.marks.advance()
        out: list[ClickOutcome | Late] = []
        if decided is not None and decided != before:
            out.extend(self._emit(decided))
        if self.auto_checkpoint:
            self.checkpoint()
        return out

    def _emit(self, decided: int) -> list[ClickOutcome]:
        """Decide pending clicks whose due time is before *decided*, earliest first."""
        out: list[ClickOutcome] = []
        due = self.state.scan(
            keys.DUE + keys.ts_bytes(self._due_floor), keys.DUE + keys.ts_bytes(decided)
        )
        # new due times are >= decision time (a click that is not late has
        # ts >= decided - grace), so nothing lands below the floor later
        self._due_floor = max(self._due_floor, min(decided, keys.MAX_TS))
        # due = ts + before + grace, so (due, ts, key, id) order is billing order
        for dkey, _ in due:
            _, ts, jkey, click_id = keys.decode_due(dkey)
            self.state.delete_index(dkey)
            outcome = self._decide(jkey, ts, click_id)
            out.append(outcome)
        return out

    def _decide(self, jkey: str, ts: int, click_id: str) -> ClickOutcome:
        prefix = keys.record_prefix(keys.IMPRESSION, jkey)
        # impressions with imp.ts - before <= ts <= imp.ts + after, earliest (ts, id) first
        lo = max(0, ts - self.window.after)
        hi = ts + self.window.before
        matching = self.state.scan(prefix + keys.ts_bytes(lo), prefix + keys.ts_bytes(hi + 1))
        value: dict[str, object]
        if not matching:
            value = {"o": Outcome.UNATTRIBUTED.value}
        else:
            ikey, raw = matching[0]
            imp = loads(raw)
            if imp["billed"] is None:
                imp["billed"] = click_id
                self.state.put(ikey, _dump(imp))
            # billed by this very click (a replay after a partial write) stays billed
            kind = Outcome.ATTRIBUTED if imp["billed"] == click_id else Outcome.DUPLICATE
            value = {
                "o": kind.value,
                "imp": keys.decode_record_key(ikey)[2],
                "campaign": imp["campaign"],
                "cost": imp["cost"],
            }
        self.state.put(keys.record_key(keys.CLICK, jkey, ts, click_id), _dump(value))
        self.state.put_index(keys.expiry_key(ts, keys.CLICK, jkey, click_id), b"")
        self._expiry_floor = min(self._expiry_floor, ts)
        return _outcome(jkey, ts, click_id, value)

    def _expire(self, decided: int) -> None:
        """Drop impressions and decided clicks no pending or future click needs.

        A non-late click has ``ts >= decided - grace`` and a pending one
        ``ts >= decided - before - grace``; neither can match an impression
        older than decided - retention, nor be a replay of a click that old
        that is not late.
        """
        horizon = decided - self.window.retention
        if horizon <= 0:
            return
        start = keys.EXPIRY + keys.ts_bytes(self._expiry_floor)
        for xkey, _ in self.state.scan(start, keys.EXPIRY + keys.ts_bytes(horizon)):
            self.state.delete(keys.decode_expiry(xkey))
            self.state.delete_index(xkey)
        # impressions stored later have ts >= decided - grace >= horizon;
        # a click decided later may be older: _decide lowers the floor for it
        self._expiry_floor = max(self._expiry_floor, horizon)


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
