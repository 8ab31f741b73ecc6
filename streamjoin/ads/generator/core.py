"""The generator's pure core: configuration, event model and the seeded schedule.

No I/O, no clock, no global random state, no Kafka client: the same
:class:`GeneratorConfig` yields the same events, in the same production order,
on every machine.

Event contract (the join app decodes exactly this, see
:mod:`streamjoin.ads.policy`). Both topics are keyed by ``auction_id`` (UTF-8
bytes); values are compact UTF-8 JSON; the Kafka record timestamp is the
event's ``ts_ms``:

* impressions: ``{"auction_id", "impression_id", "campaign", "cost", "ts_ms"}``
* clicks: ``{"auction_id", "click_id", "ts_ms"}``

Production order is the order of *arrival*, ``ts_ms + uniform(0, jitter_ms)``:
a record is never produced after a record whose event time exceeds its own by
more than ``jitter_ms``, so a join with ``grace >= jitter_ms`` sees no late
record.
"""

from __future__ import annotations

import heapq
import json
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from streamjoin.ads.generator.config import GeneratorConfig
from streamjoin.ads.policy import ATTRIBUTION_WINDOW_MS, MAX_EVENT_TS
from streamjoin.partitioner import partition_for_key

__all__ = [
    "ATTRIBUTION_WINDOW_MS",
    "LABELS",
    "Event",
    "generate",
    "partition_for_key",
]

_OUTSIDE_MIN_MS: Final = ATTRIBUTION_WINDOW_MS + 1  # strictly outside the window
_OUTSIDE_MAX_MS: Final = 45 * 60_000
_CLICK_MEAN_DELAY_MS: Final = 20_000.0
_DUP_DELAY_MS: Final = (500, 5_000)
_ABSURD_FUTURE_MS: Final = MAX_EVENT_TS + 365 * 86_400_000  # 2101-01-01: after the year 2100
_CAMPAIGN_BASE_COST: Final = (0.10, 1.50)
_COST_SPREAD: Final = (0.80, 1.25)
_COST_BOUNDS: Final = (0.05, 2.00)
_MALFORMED_KINDS: Final = (
    "truncated-json",
    "not-utf8",
    "missing-field",
    "mistyped-field",
    "absurd-ts",
)

#: Labels of valid events: what the join should make of them (window 30 min).
LABELS: Final = (
    "impression",  # an ordinary impression
    "click",  # the first click on an impression, in the window: billed
    "duplicate",  # a second click a few seconds later: a duplicate
    "outside-window",  # a click 30-45 min after its impression: unattributed
    "orphan",  # a click on an auction that never had an impression: unattributed
    "tail-impression",  # the tail's impressions, one per partition
    "tail-click",  # the tail's clicks, one per partition: billed
)


@dataclass(frozen=True)
class Event:
    """One record to produce.

    Attributes:
        topic: the topic it goes to.
        key: the Kafka key (the auction id, UTF-8).
        value: the Kafka value (compact UTF-8 JSON, or broken bytes if malformed).
        timestamp_ms: the Kafka record timestamp: the event's ``ts_ms``; for a
            malformed record, the generator's event-time clock when it made it.
        arrival_ms: when it arrives, in event time; production order sorts by it.
        label: what the generator meant it to be (one of :data:`LABELS`, or
            ``"malformed"``); for clicks it is the outcome a 30 min window gives.
        malformed: a short reason when the record is malformed, else ``None``.
    """

    topic: str
    key: bytes
    value: bytes
    timestamp_ms: int
    arrival_ms: int
    label: str
    malformed: str | None = None


def generate(config: GeneratorConfig) -> Iterator[Event]:
    """Yield the run's events in production order (ascending arrival, ties by creation).

    Pure and deterministic: the same ``config`` always yields the same events.
    Every record has ``timestamp_ms + jitter_ms`` at most the span's end, so
    it arrives within the span; the tail (if on) follows, at the span's end
    plus ``tail_ms``.
    """
    return _Run(config).events()


def _compact(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _count(rng: random.Random, expected: float) -> int:
    """How many of something happen, given the expected number (may exceed 1)."""
    whole = int(expected)
    return whole + (1 if rng.random() < expected - whole else 0)


def _mistyped(field: str, value: Any) -> Any:
    if field in ("ts_ms", "cost"):
        return str(value)  # a number as a string
    if field == "auction_id":
        return int(str(value).rsplit("-", 1)[-1])  # a number instead of a string
    return None  # impression_id, click_id, campaign: null


class _Run:
    """The state of one generation run; :meth:`events` drives it."""

    def __init__(self, config: GeneratorConfig) -> None:
        self.cfg = config
        self.rng = random.Random(f"streamjoin-ad-generator:{config.seed}")
        self.next_id: Counter[str] = Counter()
        self.pending: list[tuple[int, int, Event]] = []  # heap by (arrival, sequence)
        self.sequence = 0
        lo, hi = _CAMPAIGN_BASE_COST
        self.campaigns = [f"camp-{i:02d}" for i in range(config.campaigns)]
        self.base_cost = [round(self.rng.uniform(lo, hi), 2) for _ in self.campaigns]
        self.weights = [1.0 / (i + 1) for i in range(config.campaigns)]  # a few big campaigns
        clicks_per_impression = config.ctr * (1 + config.dup_rate * (1 - config.late_click_rate))
        self.orphans_per_impression = (
            config.orphan_rate / (1 - config.orphan_rate) * clicks_per_impression
        )
        self.malformed_per_record = config.malformed_rate / (1 - config.malformed_rate)

    # -- ids and values ------------------------------------------------------
    def _id(self, prefix: str) -> str:
        n = self.next_id[prefix]
        self.next_id[prefix] = n + 1
        return f"{prefix}-{self.cfg.seed}-{n}"

    def _impression_value(self, auction: str, ts: int) -> dict[str, Any]:
        c = self.rng.choices(range(len(self.campaigns)), weights=self.weights)[0]
        lo, hi = _COST_BOUNDS
        cost = round(min(hi, max(lo, self.base_cost[c] * self.rng.uniform(*_COST_SPREAD))), 2)
        return {
            "auction_id": auction,
            "impression_id": self._id("i"),
            "campaign": self.campaigns[c],
            "cost": cost,
            "ts_ms": ts,
        }

    def _click_value(self, auction: str, ts: int) -> dict[str, Any]:
        return {"auction_id": auction, "click_id": self._id("k"), "ts_ms": ts}

    # -- scheduling -----------------------------------------------------------
    def _push(self, event: Event) -> None:
        heapq.heappush(self.pending, (event.arrival_ms, self.sequence, event))
        self.sequence += 1

    def _arrival(self, ts: int) -> int:
        return ts + self.rng.randint(0, self.cfg.jitter_ms)

    def _valid(
        self, topic: str, value: dict[str, Any], label: str, not_before: int | None = None
    ) -> int:
        """Schedule a valid event (and maybe malformed ones); return its arrival."""
        ts = int(value["ts_ms"])
        arrival = self._arrival(ts)
        if not_before is not None:
            arrival = max(arrival, not_before)
        key = str(value["auction_id"]).encode("utf-8")
        self._push(Event(topic, key, _compact(value), ts, arrival, label))
        for _ in range(_count(self.rng, self.malformed_per_record)):
            self._malformed(ts)
        return arrival

    def _malformed(self, clock: int) -> None:
        cfg = self.cfg
        auction = self._id("a")
        on_impressions = self.rng.random() < 0.5
        topic = cfg.impressions_topic if on_impressions else cfg.clicks_topic
        value = (
            self._impression_value(auction, clock)
            if on_impressions
            else self._click_value(auction, clock)
        )
        kind = self.rng.choice(_MALFORMED_KINDS)
        if kind == "truncated-json":
            whole = _compact(value)
            raw, reason = whole[: self.rng.randint(1, len(whole) - 1)], kind
        elif kind == "not-utf8":
            # a byte that is never valid UTF-8, inside the auction id's string
            raw = _compact(value).replace(b'"auction_id":"', b'"auction_id":"\xff', 1)
            reason = kind
        elif kind == "missing-field":
            field = self.rng.choice(sorted(value))
            del value[field]
            raw, reason = _compact(value), f"missing-field:{field}"
        elif kind == "mistyped-field":
            field = self.rng.choice(sorted(value))
            value[field] = _mistyped(field, value[field])
            raw, reason = _compact(value), f"mistyped-field:{field}"
        else:
            if self.rng.random() < 0.5:
                value["ts_ms"], reason = -self.rng.randint(1, 10**12), "absurd-ts:negative"
            else:
                value["ts_ms"] = _ABSURD_FUTURE_MS + self.rng.randint(0, 10**12)
                reason = "absurd-ts:after-2100"
            raw = _compact(value)
        event = Event(
            topic, auction.encode("utf-8"), raw, clock, self._arrival(clock), "malformed", reason
        )
        self._push(event)

    def _impression_and_clicks(self, ts: int) -> None:
        cfg, rng = self.cfg, self.rng
        auction = self._id("a")
        # Its clicks may arrive before it (within jitter): the join must make them wait.
        self._valid(cfg.impressions_topic, self._impression_value(auction, ts), "impression")
        if rng.random() < cfg.ctr:
            if rng.random() < cfg.late_click_rate:
                late = ts + rng.randint(_OUTSIDE_MIN_MS, _OUTSIDE_MAX_MS)
                self._valid(cfg.clicks_topic, self._click_value(auction, late), "outside-window")
            else:
                room = ATTRIBUTION_WINDOW_MS - _DUP_DELAY_MS[1]
                first = ts + min(room, int(rng.expovariate(1 / _CLICK_MEAN_DELAY_MS)))
                first_arrival = self._valid(
                    cfg.clicks_topic, self._click_value(auction, first), "click"
                )
                if rng.random() < cfg.dup_rate:
                    dup = first + rng.randint(*_DUP_DELAY_MS)
                    # never before the first click arrives: truncation keeps pairs whole
                    self._valid(
                        cfg.clicks_topic,
                        self._click_value(auction, dup),
                        "duplicate",
                        first_arrival,
                    )
        for _ in range(_count(rng, self.orphans_per_impression)):
            orphan = ts + int(rng.expovariate(1 / _CLICK_MEAN_DELAY_MS))
            self._valid(cfg.clicks_topic, self._click_value(self._id("a"), orphan), "orphan")

    def _release(self, upto: int, cutoff: int | None = None) -> Iterator[Event]:
        """Pop pending events arriving by ``upto``; drop those with event time past ``cutoff``."""
        while self.pending and self.pending[0][0] <= upto:
            event = heapq.heappop(self.pending)[2]
            if cutoff is None or event.timestamp_ms <= cutoff:
                yield event

    def _tail(self, tail_ts: int) -> Iterator[Event]:
        cfg = self.cfg
        found: dict[int, str] = {}
        j = 0
        while len(found) < cfg.partitions:
            auction = f"a-{cfg.seed}-t{j}"
            j += 1
            found.setdefault(partition_for_key(auction.encode("utf-8"), cfg.partitions), auction)
        for p in sorted(found):
            auction, key = found[p], found[p].encode("utf-8")
            imp = self._impression_value(auction, tail_ts)
            yield Event(
                cfg.impressions_topic, key, _compact(imp), tail_ts, tail_ts, "tail-impression"
            )
            click = self._click_value(auction, tail_ts)
            yield Event(cfg.clicks_topic, key, _compact(click), tail_ts, tail_ts, "tail-click")

    def events(self) -> Iterator[Event]:
        cfg, rng = self.cfg, self.rng
        mean_gap = 1000.0 / cfg.rate
        # Every generated record has ts_ms <= cutoff, so it arrives by cutoff + jitter_ms
        # = the span's end. Cutting by event time (not arrival) keeps the labels true:
        # a click is kept only if its impression is, a duplicate only if its first click is.
        cutoff = (
            None if cfg.duration_ms is None else cfg.start_ts_ms + cfg.duration_ms - cfg.jitter_ms
        )
        t = float(cfg.start_ts_ms)
        made = 0
        last = cfg.start_ts_ms
        while True:
            ts = int(t)
            if cutoff is not None and ts > cutoff:
                break
            if cfg.impressions is not None and made >= cfg.impressions:
                break
            yield from self._release(upto=ts)  # later records all arrive at or after ts
            self._impression_and_clicks(ts)
            made += 1
            last = ts
            t += rng.expovariate(1.0 / mean_gap)
        if cutoff is None:
            cutoff = last
        end = cutoff + cfg.jitter_ms
        yield from self._release(upto=end, cutoff=cutoff)
        self.pending.clear()
        if cfg.tail:
            yield from self._tail(end + cfg.tail_ms)
