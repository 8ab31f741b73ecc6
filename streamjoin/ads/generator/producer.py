"""Producing a generator run to Kafka with aiokafka: topic checks, pacing, record file.

The I/O shell around the pure core: :func:`run` checks (and optionally
creates) both topics, produces :func:`~streamjoin.ads.generator.core.generate`'s
events in order, paced against the wall clock, and writes each acknowledged
record to the record file. Failures it can name are :class:`CliError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from streamjoin.ads.generator.config import GeneratorConfig
from streamjoin.ads.generator.core import Event, generate
from streamjoin.ads.generator.records import RecordWriter, record_row

__all__ = [
    "CONNECT_TIMEOUT_S",
    "MAX_IN_FLIGHT",
    "PROGRESS_EVERY_S",
    "CliError",
    "Progress",
    "ensure_topics",
    "produce",
    "run",
    "short",
]

CONNECT_TIMEOUT_S: Final = 10.0
PROGRESS_EVERY_S: Final = 2.0
MAX_IN_FLIGHT: Final = 10_000

#: Reports one line to the user (the CLI prefixes it with its name).
Say = Callable[[str], None]


class CliError(Exception):
    """A condition the CLI reports as one line and an exit code."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def short(exc: BaseException) -> str:
    """An exception as one line, led by its type name."""
    name = type(exc).__name__
    text = " ".join(str(exc).split())
    if not text:
        return name
    return text if text.startswith(name) else f"{name}: {text}"


async def ensure_topics(bootstrap: str, config: GeneratorConfig, create: bool) -> None:
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
            raise CliError(f"cannot reach a Kafka broker at {bootstrap} ({short(exc)})") from exc
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


class Progress:
    """Counts what was sent; says a progress line every ~2 s; makes the summary."""

    def __init__(self, config: GeneratorConfig, say: Say) -> None:
        self.config = config
        self.say = say
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
            self.say(f"{self.sent} records sent, {rate:,.0f}/s, event time +{seconds:,.1f}s")

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


async def produce(
    bootstrap: str,
    config: GeneratorConfig,
    speed: float,
    writer: RecordWriter | None,
    say: Say,
) -> Progress:
    """Produce the run's events in order; ``speed`` > 0 paces event time against the wall."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=30_000
    )
    progress = Progress(config, say)
    try:
        try:
            await asyncio.wait_for(producer.start(), CONNECT_TIMEOUT_S)
        except Exception as exc:
            raise CliError(f"cannot connect the producer to {bootstrap} ({short(exc)})") from exc
        in_flight: deque[tuple[Event, asyncio.Future[Any]]] = deque()

        async def settle(limit: int) -> None:
            """Record acknowledged sends, in order; wait until at most ``limit`` are pending."""
            while in_flight and (in_flight[0][1].done() or len(in_flight) > limit):
                event, fut = in_flight.popleft()
                try:
                    meta = await fut
                except Exception as exc:
                    raise CliError(f"sending to {event.topic!r} failed ({short(exc)})", 1) from exc
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


async def run(
    bootstrap: str,
    config: GeneratorConfig,
    *,
    create_topics: bool,
    speed: float,
    record: Path | None,
    say: Say,
) -> Progress:
    """Check the topics, then produce the run (and write ``record`` if given, atomically)."""
    await ensure_topics(bootstrap, config, create_topics)
    if record is None:
        return await produce(bootstrap, config, speed, None, say)
    with RecordWriter(record) as writer:
        return await produce(bootstrap, config, speed, writer, say)
