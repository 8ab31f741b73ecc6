"""Click attribution, the ad-monetization join policy, per task.

Impressions (left) and clicks (right) share a key (the auction id). For a
click ``c`` the matching impressions are those with the same key and
``window.matches(imp.ts, c.ts)``; ``c`` is attributed to the earliest of them
(by ``(ts, impression_id)``). Each impression bills one click: the earliest of
its attributed clicks by ``(ts, click_id)``; its later clicks are duplicates.
A click without a matching impression is unattributed. Every click gets
exactly one outcome.

Outcomes depend on the events alone, never on their arrival order: a click's
outcome is emitted once stream time passes ``window.decided_after(click.ts)``,
when every impression and every earlier click it depends on has arrived (a
later one would be late). Outcomes carry the click's id, so replaying a click
after a crash yields the same outcome again (effectively once, by key).

:class:`TaskAttribution` is the whole per-task state machine: feed it records
in arrival order, it returns what to emit. It does no I/O; the runtime
persists its state and the Spark side applies the same rules in batch.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from streamjoin.join.window import JoinWindow

__all__ = [
    "Click",
    "ClickOutcome",
    "Impression",
    "Late",
    "Outcome",
    "TaskAttribution",
    "attribute",
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


@dataclass(frozen=True)
class Late:
    """A record that arrived beyond grace: reported, never joined."""

    record: Impression | Click
    stream_time: int


@dataclass
class _KeyState:
    impressions: list[Impression] = field(default_factory=list)
    #: impression id -> (ts, click_id) of its billed click
    billed: dict[str, tuple[int, str]] = field(default_factory=dict)
    pending: list[Click] = field(default_factory=list)
    #: outcomes already emitted, by click id (a replayed click gets the same)
    decided: dict[str, ClickOutcome] = field(default_factory=dict)


class TaskAttribution:
    """Attribution state of one task (one partition of both topics)."""

    def __init__(self, window: JoinWindow) -> None:
        self.window = window
        self.stream_time: int | None = None
        self._keys: dict[str, _KeyState] = {}
        #: (decided_after, ts, click_id, key) of every pending click
        self._due: list[tuple[int, int, str, str]] = []
        #: (ts, key) of every stored impression and decided click, for expiry
        self._expiry: list[tuple[int, str]] = []
        self.late_count = 0

    # -- feeding ------------------------------------------------------------
    def on_impression(self, imp: Impression) -> list[ClickOutcome | Late]:
        """Add an impression; return what became final (and a Late if it is late)."""
        if self.window.is_late(imp.ts, self.stream_time):
            self.late_count += 1
            return [Late(imp, self._now())]
        state = self._keys.setdefault(imp.key, _KeyState())
        if all(i.impression_id != imp.impression_id for i in state.impressions):
            state.impressions.append(imp)  # a replayed impression is stored once
            heapq.heappush(self._expiry, (imp.ts, imp.key))
        return self._advance(imp.ts)

    def on_click(self, click: Click) -> list[ClickOutcome | Late]:
        """Add a click; return what became final (and a Late if it is late)."""
        known = self._keys.get(click.key)
        if known is not None and click.click_id in known.decided:
            # replayed after its outcome (e.g. after a crash): the same outcome
            return [known.decided[click.click_id], *self._advance(click.ts)]
        if self.window.is_late(click.ts, self.stream_time):
            self.late_count += 1
            return [Late(click, self._now())]
        state = self._keys.setdefault(click.key, _KeyState())
        if all(c.click_id != click.click_id for c in state.pending):
            state.pending.append(click)
            heapq.heappush(
                self._due,
                (self.window.decided_after(click.ts), click.ts, click.click_id, click.key),
            )
        return self._advance(click.ts)

    def flush(self) -> list[ClickOutcome | Late]:
        """Decide every pending click (end of input, e.g. a batch run)."""
        return self._emit(None)

    # -- introspection ------------------------------------------------------
    def stored(self) -> int:
        """Records held in state (impressions, undecided and recently decided clicks)."""
        return sum(
            len(s.impressions) + len(s.pending) + len(s.decided) for s in self._keys.values()
        )

    # -- internals ----------------------------------------------------------
    def _now(self) -> int:
        return self.stream_time if self.stream_time is not None else 0

    def _advance(self, ts: int) -> list[ClickOutcome | Late]:
        if self.stream_time is None or ts > self.stream_time:
            self.stream_time = ts
        out = self._emit(self.stream_time)
        self._expire(self.stream_time)
        return out

    def _emit(self, stream_time: int | None) -> list[ClickOutcome | Late]:
        due: list[tuple[int, str, str]] = []
        while self._due and (stream_time is None or self._due[0][0] < stream_time):
            _, ts, click_id, key = heapq.heappop(self._due)
            due.append((ts, click_id, key))
        out: list[ClickOutcome | Late] = []
        for ts, click_id, key in sorted(due):  # earliest first: billing order
            state = self._keys[key]
            click = next(c for c in state.pending if c.click_id == click_id and c.ts == ts)
            state.pending.remove(click)
            outcome = self._decide(state, click)
            state.decided[click_id] = outcome
            heapq.heappush(self._expiry, (ts, key))
            out.append(outcome)
        return out

    def _decide(self, state: _KeyState, click: Click) -> ClickOutcome:
        matching = [i for i in state.impressions if self.window.matches(i.ts, click.ts)]
        if not matching:
            return ClickOutcome(click.click_id, click.key, click.ts, Outcome.UNATTRIBUTED)
        imp = min(matching, key=lambda i: (i.ts, i.impression_id))
        if imp.impression_id in state.billed:
            kind = Outcome.DUPLICATE
        else:
            state.billed[imp.impression_id] = (click.ts, click.click_id)
            kind = Outcome.ATTRIBUTED
        return ClickOutcome(
            click.click_id, click.key, click.ts, kind, imp.impression_id, imp.campaign, imp.cost
        )

    def _expire(self, stream_time: int) -> None:
        """Drop impressions and decided clicks no pending or future click needs.

        A non-late click has ``ts >= stream_time - grace`` and a pending one
        ``ts >= stream_time - before - grace``; neither can match an
        impression older than stream time - retention, nor be a replay of a
        click that old that is not late.
        """
        horizon = stream_time - self.window.retention
        while self._expiry and self._expiry[0][0] < horizon:
            _, key = heapq.heappop(self._expiry)
            state = self._keys.get(key)
            if state is None:
                continue
            for gone in [i for i in state.impressions if i.ts < horizon]:
                state.billed.pop(gone.impression_id, None)
            state.impressions = [i for i in state.impressions if i.ts >= horizon]
            state.decided = {c: o for c, o in state.decided.items() if o.click_ts >= horizon}
            if not state.impressions and not state.pending and not state.decided:
                del self._keys[key]


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
