"""Seeded event generator for the ad-monetization example.

Two layers, in one module:

* a **pure core** (:class:`GeneratorConfig`, :func:`generate`): no I/O, no
  clock, no global random state. The same config yields the same events, in
  the same production order, on every machine;
* an **I/O shell** (:func:`main`, ``python -m streamjoin.ads.generator``):
  creates/checks the topics, produces the events with aiokafka, paces them,
  and writes the optional record file.

Event contract (the join app decodes exactly this). Both topics are keyed by
``auction_id`` (UTF-8 bytes); values are compact UTF-8 JSON; the Kafka record
timestamp is the event's ``ts_ms``:

* ``impressions``: ``{"auction_id", "impression_id", "campaign", "cost", "ts_ms"}``
* ``clicks``: ``{"auction_id", "click_id", "ts_ms"}``

Production order is the order of *arrival*, ``ts_ms + uniform(0, jitter_ms)``:
a record is never produced after a record whose event time exceeds its own by
more than ``jitter_ms``, so a join with ``grace >= jitter_ms`` sees no late
record. See ``README.md`` next to this file for the whole story.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import heapq
import json
import logging
import math
import os
import random
import sys
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final

from aiokafka.errors import KafkaError
from aiokafka.partitioner import murmur2

from streamjoin.ads.attribution import Click, Impression

__all__ = [
    "ATTRIBUTION_WINDOW_MS",
    "CLICKS",
    "DEFAULT_START_TS_MS",
    "IMPRESSIONS",
    "LABELS",
    "MAX_VALID_TS_MS",
    "MIN_VALID_TS_MS",
    "Event",
    "GeneratorConfig",
    "GeneratorConfigError",
    "RecordWriter",
    "clicks_from_record",
    "generate",
    "impressions_from_record",
    "main",
    "partition_for_key",
    "read_record",
    "record_row",
    "row_value",
]

IMPRESSIONS: Final = "impressions"
CLICKS: Final = "clicks"

#: 2026-01-01T00:00:00Z: the default start, so a seed alone reproduces a run.
DEFAULT_START_TS_MS: Final = 1_767_225_600_000
#: The attribution window the example's join uses (clicks up to 30 min after).
ATTRIBUTION_WINDOW_MS: Final = 30 * 60_000
#: Valid event times are in [2000-01-01, 2100-01-01) UTC; the join app rejects others.
MIN_VALID_TS_MS: Final = 946_684_800_000
MAX_VALID_TS_MS: Final = 4_102_444_800_000

_OUTSIDE_MIN_MS: Final = ATTRIBUTION_WINDOW_MS + 1  # strictly outside the window
_OUTSIDE_MAX_MS: Final = 45 * 60_000
_CLICK_MEAN_DELAY_MS: Final = 20_000.0
_DUP_DELAY_MS: Final = (500, 5_000)
_ABSURD_FUTURE_MS: Final = 4_133_980_800_000  # 2101-01-01: after the year 2100
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


class GeneratorConfigError(ValueError):
    """A generator setting is out of range: ``field`` names it, ``problem`` says why."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


# ---------------------------------------------------------------------------
# Pure core
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GeneratorConfig:
    """What to generate. Give exactly one of ``impressions`` and ``duration_ms``.

    Attributes:
        seed: seeds the one ``random.Random`` of a run (and appears in every id).
        impressions: generate exactly this many impressions; the span then ends
            ``jitter_ms`` after the last one.
        duration_ms: length of the event-time span ``[start_ts_ms, start_ts_ms + duration_ms)``.
            Records later than the span's end minus ``jitter_ms`` are not generated,
            so every record arrives within the span.
        rate: impressions per second of event time (Poisson arrivals).
        campaigns: number of campaigns (``camp-00`` ...), each with its own base cost.
        ctr: share of impressions that get a (first) click.
        dup_rate: share of first in-window clicks followed, a few seconds later, by
            a duplicate click on the same auction.
        orphan_rate: share of all clicks that are on an auction with no impression.
        late_click_rate: share of first clicks that come 30-45 min after their
            impression, outside a 30 min attribution window.
        jitter_ms: a record arrives up to this long after its event time.
        malformed_rate: share of all records (either topic) that are malformed.
        start_ts_ms: event time of the span's start (not before 2000-01-01).
        tail: after the span, one impression and one click per partition.
        partitions: partition count of both topics (the tail covers each one).
        tail_ms: the tail's event time is the span's end plus this.
        impressions_topic: topic name of impressions.
        clicks_topic: topic name of clicks.
    """

    seed: int = 0
    impressions: int | None = None
    duration_ms: int | None = None
    rate: float = 100.0
    campaigns: int = 8
    ctr: float = 0.2
    dup_rate: float = 0.1
    orphan_rate: float = 0.03
    late_click_rate: float = 0.02
    jitter_ms: int = 2_000
    malformed_rate: float = 0.002
    start_ts_ms: int = DEFAULT_START_TS_MS
    tail: bool = True
    partitions: int = 4
    tail_ms: int = 60_000
    impressions_topic: str = IMPRESSIONS
    clicks_topic: str = CLICKS

    def __post_init__(self) -> None:
        if (self.impressions is None) == (self.duration_ms is None):
            raise GeneratorConfigError(
                "impressions", "give exactly one of impressions and duration_ms"
            )
        _check_int("seed", self.seed, 0)
        if self.impressions is not None:
            _check_int("impressions", self.impressions, 0)
        _check_int("jitter_ms", self.jitter_ms, 0)
        if self.duration_ms is not None:
            _check_int("duration_ms", self.duration_ms, 1)
            if self.duration_ms <= self.jitter_ms:
                raise GeneratorConfigError(
                    "duration_ms",
                    f"must exceed jitter_ms ({self.jitter_ms} ms), got {self.duration_ms} ms",
                )
        _check_int("campaigns", self.campaigns, 1)
        _check_int("partitions", self.partitions, 1)
        _check_int("tail_ms", self.tail_ms, 0)
        _check_int("start_ts_ms", self.start_ts_ms, MIN_VALID_TS_MS)
        if not (isinstance(self.rate, int | float) and math.isfinite(self.rate) and self.rate > 0):
            raise GeneratorConfigError("rate", f"must be a positive number, got {self.rate!r}")
        for name in ("ctr", "dup_rate", "late_click_rate"):
            _check_share(name, getattr(self, name), upper_inclusive=True)
        for name in ("orphan_rate", "malformed_rate"):
            _check_share(name, getattr(self, name), upper_inclusive=False)
        if self.start_ts_ms + self.span_hint_ms() + self.tail_ms >= MAX_VALID_TS_MS:
            raise GeneratorConfigError("start_ts_ms", "the run would reach the year 2100")
        if not self.impressions_topic or not self.clicks_topic:
            raise GeneratorConfigError("impressions_topic", "topic names must not be empty")
        if self.impressions_topic == self.clicks_topic:
            raise GeneratorConfigError("clicks_topic", "must differ from impressions_topic")

    def span_hint_ms(self) -> int:
        """The span's length: exact for ``duration_ms``, the expected one for ``impressions``."""
        if self.duration_ms is not None:
            return self.duration_ms
        return math.ceil((self.impressions or 0) * 1000 / self.rate) + self.jitter_ms


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise GeneratorConfigError(name, f"must be an integer >= {minimum}, got {value!r}")


def _check_share(name: str, value: object, *, upper_inclusive: bool) -> None:
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and value >= 0
        and (value <= 1 if upper_inclusive else value < 1)
    )
    if not ok:
        bound = "[0, 1]" if upper_inclusive else "[0, 1)"
        raise GeneratorConfigError(name, f"must be a share in {bound}, got {value!r}")


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


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a keyed record."""
    return int(murmur2(key) & 0x7FFFFFFF) % partitions


def _compact(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _count(rng: random.Random, expected: float) -> int:
    """How many of something happen, given the expected number (may exceed 1)."""
    whole = int(expected)
    return whole + (1 if rng.random() < expected - whole else 0)


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


def _mistyped(field: str, value: Any) -> Any:
    if field in ("ts_ms", "cost"):
        return str(value)  # a number as a string
    if field == "auction_id":
        return int(str(value).rsplit("-", 1)[-1])  # a number instead of a string
    return None  # impression_id, click_id, campaign: null


def generate(config: GeneratorConfig) -> Iterator[Event]:
    """Yield the run's events in production order (ascending arrival, ties by creation).

    Pure and deterministic: the same ``config`` always yields the same events.
    Every record has ``timestamp_ms + jitter_ms`` at most the span's end, so
    it arrives within the span; the tail (if on) follows, at the span's end
    plus ``tail_ms``.
    """
    return _Run(config).events()


# ---------------------------------------------------------------------------
# Record files: one JSON object per line, one line per produced record
# ---------------------------------------------------------------------------


def record_row(event: Event, partition: int, offset: int) -> dict[str, Any]:
    """The record-file row of ``event``, produced to ``partition`` at ``offset``.

    ``value`` is the value as text when it is valid UTF-8 (``value_encoding``
    ``"utf-8"``), else its base64 (``value_encoding`` ``"base64"``).
    """
    try:
        value, encoding = event.value.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        value, encoding = base64.b64encode(event.value).decode("ascii"), "base64"
    return {
        "topic": event.topic,
        "partition": partition,
        "offset": offset,
        "key": event.key.decode("utf-8"),
        "value": value,
        "value_encoding": encoding,
        "ts_ms": event.timestamp_ms,
        "malformed": event.malformed,
        "label": event.label,
    }


def row_value(row: dict[str, Any]) -> bytes:
    """The exact value bytes of a record-file row."""
    if row.get("value_encoding") == "base64":
        return base64.b64decode(row["value"])
    return str(row["value"]).encode("utf-8")


class RecordWriter:
    """Writes a record file atomically: rows go to a temporary file next to it,
    renamed into place by :meth:`commit`; a reader never sees half a file.

    Used as a context manager, it commits on success and discards the
    temporary file on an exception.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        self._file: IO[str] | None = None

    def __enter__(self) -> RecordWriter:
        self._file = self.tmp.open("w", encoding="utf-8")
        return self

    def write(self, row: dict[str, Any]) -> None:
        """Append one row."""
        if self._file is None:
            raise RuntimeError("RecordWriter.write outside its with block")
        self._file.write(json.dumps(row, separators=(",", ":")) + "\n")

    def commit(self) -> None:
        """Flush, fsync and rename the file into place."""
        if self._file is None:
            return
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None
        os.replace(self.tmp, self.path)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
            return
        if self._file is not None:
            self._file.close()
            self._file = None
        self.tmp.unlink(missing_ok=True)


def read_record(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Load a record file: one dict per produced record, in production order."""
    with Path(path).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _valid_values(rows: Iterable[dict[str, Any]], topic: str) -> Iterator[tuple[str, Any]]:
    for row in rows:
        if row["topic"] == topic and row.get("malformed") is None:
            yield str(row["key"]), json.loads(row_value(row))


def impressions_from_record(
    rows: Iterable[dict[str, Any]], topic: str = IMPRESSIONS
) -> list[Impression]:
    """The valid impressions of a record file's rows (malformed rows skipped), in order."""
    return [
        Impression(key, v["impression_id"], int(v["ts_ms"]), v["campaign"], float(v["cost"]))
        for key, v in _valid_values(rows, topic)
    ]


def clicks_from_record(rows: Iterable[dict[str, Any]], topic: str = CLICKS) -> list[Click]:
    """The valid clicks of a record file's rows (malformed rows skipped), in order."""
    return [Click(key, v["click_id"], int(v["ts_ms"])) for key, v in _valid_values(rows, topic)]


# ---------------------------------------------------------------------------
# I/O shell
# ---------------------------------------------------------------------------

PROG: Final = "generator"
CONNECT_TIMEOUT_S: Final = 10.0
PROGRESS_EVERY_S: Final = 2.0
MAX_IN_FLIGHT: Final = 10_000


class CliError(Exception):
    """A condition the CLI reports as one line and an exit code."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own prints the whole usage
        raise CliError(f"{message} (see --help)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m streamjoin.ads.generator",
        description="Produce a seeded, reproducible stream of ad impressions and clicks "
        "(see examples/ad_monetization/README.md).",
        allow_abbrev=False,
    )
    d = GeneratorConfig(duration_ms=60_000)
    add = p.add_argument
    add("--bootstrap", required=True, help="host:port of a Kafka broker (kafka:// optional)")
    add("--seed", type=int, default=d.seed, help="the run's seed (ids contain it) [%(default)s]")
    span = p.add_mutually_exclusive_group()
    span.add_argument("--duration", type=float, help="seconds of event time [60]")
    span.add_argument("--impressions", type=int, help="exactly this many impressions")
    add(
        "--rate",
        type=float,
        default=d.rate,
        help="impressions per second of event time [%(default)s]",
    )
    add(
        "--partitions",
        type=int,
        default=d.partitions,
        help="partitions of both topics [%(default)s]",
    )
    add(
        "--speed",
        type=float,
        default=0.0,
        help="event-time ms per wall ms (0: no pacing) [%(default)s]",
    )
    add("--record", type=Path, help="also write every produced record to this JSON-lines file")
    add(
        "--tail",
        action=argparse.BooleanOptionalAction,
        default=d.tail,
        help="emit the tail [%(default)s]",
    )
    add(
        "--tail-ms",
        type=int,
        default=d.tail_ms,
        help="tail event time after the span's end [%(default)s]",
    )
    add("--campaigns", type=int, default=d.campaigns, help="number of campaigns [%(default)s]")
    add("--ctr", type=float, default=d.ctr, help="share of impressions clicked [%(default)s]")
    add(
        "--dup-rate",
        type=float,
        default=d.dup_rate,
        help="share of clicks duplicated [%(default)s]",
    )
    add(
        "--orphan-rate",
        type=float,
        default=d.orphan_rate,
        help="share of clicks w/o impression [%(default)s]",
    )
    add(
        "--late-click-rate",
        type=float,
        default=d.late_click_rate,
        help="share of clicks 30-45 min after the impression [%(default)s]",
    )
    add(
        "--jitter-ms",
        type=int,
        default=d.jitter_ms,
        help="max arrival delay (out of order) [%(default)s]",
    )
    add(
        "--malformed-rate",
        type=float,
        default=d.malformed_rate,
        help="share of broken records [%(default)s]",
    )
    add(
        "--start-ts-ms",
        type=int,
        default=d.start_ts_ms,
        help="event time of the span's start [%(default)s]",
    )
    add(
        "--topic-prefix", default="", help="prefix of both topic names (the app's ADS_TOPIC_PREFIX)"
    )
    add("--impressions-topic", help="impressions topic name [PREFIX + impressions]")
    add("--clicks-topic", help="clicks topic name [PREFIX + clicks]")
    add(
        "--create-topics",
        action="store_true",
        help="create missing topics with --partitions partitions (replication 1)",
    )
    return p


def config_from_args(args: argparse.Namespace) -> GeneratorConfig:
    """Build the :class:`GeneratorConfig` the parsed command line asks for."""
    if args.impressions is not None:
        span: dict[str, int | None] = {"impressions": args.impressions}
    else:
        seconds = 60.0 if args.duration is None else args.duration
        if not (math.isfinite(seconds) and seconds > 0):
            raise CliError(f"--duration: must be a positive number of seconds, got {seconds!r}")
        span = {"duration_ms": round(seconds * 1000)}
    return GeneratorConfig(
        seed=args.seed,
        rate=args.rate,
        campaigns=args.campaigns,
        ctr=args.ctr,
        dup_rate=args.dup_rate,
        orphan_rate=args.orphan_rate,
        late_click_rate=args.late_click_rate,
        jitter_ms=args.jitter_ms,
        malformed_rate=args.malformed_rate,
        start_ts_ms=args.start_ts_ms,
        tail=args.tail,
        partitions=args.partitions,
        tail_ms=args.tail_ms,
        impressions_topic=args.impressions_topic or args.topic_prefix + IMPRESSIONS,
        clicks_topic=args.clicks_topic or args.topic_prefix + CLICKS,
        **span,
    )


def _say(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def _bootstrap(raw: str) -> str:
    return raw.removeprefix("kafka://")


def _short(exc: BaseException) -> str:
    name = type(exc).__name__
    text = " ".join(str(exc).split())
    if not text:
        return name
    return text if text.startswith(name) else f"{name}: {text}"


async def _ensure_topics(bootstrap: str, config: GeneratorConfig, create: bool) -> None:
    """Check (and with ``create``, make) both topics with ``config.partitions`` partitions."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        try:
            await asyncio.wait_for(admin.start(), CONNECT_TIMEOUT_S)
        except TimeoutError as exc:
            raise CliError(
                f"cannot reach a Kafka broker at {bootstrap}: no answer within "
                f"{CONNECT_TIMEOUT_S:.0f}s"
            ) from exc
        except Exception as exc:
            raise CliError(f"cannot reach a Kafka broker at {bootstrap} ({_short(exc)})") from exc
        topics = sorted({config.impressions_topic, config.clicks_topic})
        # List before describing: some brokers auto-create a topic that is described.
        existing = set(await admin.list_topics())
        missing = [t for t in topics if t not in existing]
        if missing and not create:
            raise CliError(
                f"topic {missing[0]!r} does not exist on {bootstrap}; "
                "create it or pass --create-topics"
            )
        present = [t for t in topics if t in existing]
        for desc in await admin.describe_topics(present) if present else []:
            _check_count(str(desc["topic"]), len(desc.get("partitions") or ()), config.partitions)
        if missing:
            response = await admin.create_topics(
                [NewTopic(t, config.partitions, 1) for t in missing]
            )
            for topic, code, message in _topic_errors(response):
                if code == 36:  # created meanwhile by someone else: check its count
                    for desc in await admin.describe_topics([topic]):
                        _check_count(topic, len(desc.get("partitions") or ()), config.partitions)
                elif code != 0:
                    raise CliError(f"cannot create topic {topic!r}: error {code} {message or ''}")
    finally:
        with contextlib.suppress(Exception):
            await admin.close()


def _check_count(topic: str, count: int, wanted: int) -> None:
    if count != wanted:
        raise CliError(f"topic {topic!r} has {count} partitions, but --partitions is {wanted}")


def _topic_errors(response: Any) -> list[tuple[str, int, str | None]]:
    rows = []
    for entry in getattr(response, "topic_errors", ()):
        topic, code = entry[0], entry[1]
        message = entry[2] if len(entry) > 2 else None
        rows.append((str(topic), int(code), message))
    return rows


class _Progress:
    """Counts what was sent; prints a progress line every ~2 s and a summary."""

    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        self.started = time.monotonic()
        self.last_print = self.started
        self.sent = 0
        self.by_topic: Counter[tuple[str, str]] = Counter()
        self.event_time = config.start_ts_ms

    def count(self, event: Event) -> None:
        self.sent += 1
        self.by_topic[(event.topic, "malformed" if event.malformed else "valid")] += 1
        self.event_time = max(self.event_time, event.arrival_ms)
        now = time.monotonic()
        if now - self.last_print >= PROGRESS_EVERY_S:
            self.last_print = now
            rate = self.sent / max(now - self.started, 1e-9)
            seconds = (self.event_time - self.config.start_ts_ms) / 1000
            _say(f"{self.sent} records sent, {rate:,.0f}/s, event time +{seconds:,.1f}s")

    def summary(self) -> str:
        cfg = self.config
        elapsed = time.monotonic() - self.started
        imp_ok = self.by_topic[(cfg.impressions_topic, "valid")]
        clk_ok = self.by_topic[(cfg.clicks_topic, "valid")]
        imp_bad = self.by_topic[(cfg.impressions_topic, "malformed")]
        clk_bad = self.by_topic[(cfg.clicks_topic, "malformed")]
        return (
            f"done: {self.sent} records in {elapsed:.1f}s: impressions={imp_ok} "
            f"clicks={clk_ok} malformed={imp_bad + clk_bad} "
            f"({cfg.impressions_topic}: {imp_ok + imp_bad} records, {imp_bad} malformed; "
            f"{cfg.clicks_topic}: {clk_ok + clk_bad} records, {clk_bad} malformed)"
        )


async def _produce(
    bootstrap: str, config: GeneratorConfig, speed: float, writer: RecordWriter | None
) -> _Progress:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=30_000
    )
    progress = _Progress(config)
    try:
        try:
            await asyncio.wait_for(producer.start(), CONNECT_TIMEOUT_S)
        except Exception as exc:
            raise CliError(f"cannot connect the producer to {bootstrap} ({_short(exc)})") from exc
        in_flight: deque[tuple[Event, asyncio.Future[Any]]] = deque()

        async def settle(limit: int) -> None:
            """Record acknowledged sends, in order; wait until at most ``limit`` are pending."""
            while in_flight and (in_flight[0][1].done() or len(in_flight) > limit):
                event, fut = in_flight.popleft()
                try:
                    meta = await fut
                except Exception as exc:
                    raise CliError(f"sending to {event.topic!r} failed ({_short(exc)})", 1) from exc
                if writer is not None:
                    writer.write(record_row(event, meta.partition, meta.offset))
                progress.count(event)

        wall0 = time.monotonic()
        for event in generate(config):
            if speed > 0 and not event.label.startswith("tail-"):
                due = wall0 + (event.arrival_ms - config.start_ts_ms) / speed / 1000
                delay = due - time.monotonic()
                if delay > 0:
                    await settle(MAX_IN_FLIGHT)
                    await asyncio.sleep(delay)
            fut = await producer.send(
                event.topic, event.value, key=event.key, timestamp_ms=event.timestamp_ms
            )
            in_flight.append((event, fut))
            await settle(MAX_IN_FLIGHT)
        await settle(0)
    finally:
        await producer.stop()
    return progress


async def _run(args: argparse.Namespace, config: GeneratorConfig) -> None:
    bootstrap = _bootstrap(args.bootstrap)
    await _ensure_topics(bootstrap, config, args.create_topics)
    if args.record is None:
        progress = await _produce(bootstrap, config, args.speed, None)
    else:
        with RecordWriter(args.record) as writer:
            progress = await _produce(bootstrap, config, args.speed, writer)
    _say(progress.summary())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the generator CLI; return its exit code.

    0: done; 1: a send failed mid-run; 2: bad arguments, no broker, or topics
    missing or with another partition count; 130: interrupted.
    """
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # we report failures ourselves
    try:
        args = _parser().parse_args(argv)
        if not (math.isfinite(args.speed) and args.speed >= 0):
            raise CliError(f"--speed must be >= 0, got {args.speed}")
        if args.record is not None and not args.record.parent.is_dir():
            raise CliError(f"--record: directory {str(args.record.parent)!r} does not exist")
        config = config_from_args(args)
        asyncio.run(_run(args, config))
    except GeneratorConfigError as exc:
        flag = "--duration" if exc.field == "duration_ms" else "--" + exc.field.replace("_", "-")
        _say(f"error: {flag}: {exc.problem}")
        return 2
    except KafkaError as exc:
        _say(f"error: broker: {_short(exc)}")
        return 2
    except CliError as exc:
        _say(f"error: {exc}")
        return exc.code
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
