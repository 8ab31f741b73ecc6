"""Kafka side of the benchmarks: topics, a changelog written before any worker starts,
the generator's backlog produced as fast as the broker takes it, and its events
sent in real time (:func:`send_paced`)."""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.harness.report import Progress, say

#: topic configs set explicitly on the throughput backlog's topics: the embedded broker
#: reports only the configs a topic was created with, and Quix Streams derives its
#: changelogs' configs from its inputs' ``retention.ms`` (a topic without one fails)
RETAIN_ALL = {"retention.ms": "-1", "retention.bytes": "-1"}


async def create_topics(
    bootstrap: str,
    names: Sequence[str],
    partitions: int,
    config: Mapping[str, str] | None = None,
) -> None:
    """Create those of *names* that do not exist, *partitions* partitions each (replication 1),
    with the topic *config* (for example :data:`RETAIN_ALL`)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [
            NewTopic(n, partitions, 1, topic_configs=dict(config or {}))
            for n in names
            if n not in existing
        ]
        if missing:
            await admin.create_topics(missing)
    finally:
        await admin.close()


#: records sent before waiting for their acknowledgements
WRITE_WINDOW = 50_000


async def write_changelog(
    bootstrap: str,
    topic: str,
    partitions: int,
    records: int,
    value: bytes,
    key: Callable[[int], bytes],
    *,
    one_per_batch: bool = False,
    headers: list[tuple[str, bytes]] | None = None,
) -> float:
    """Write *records* records to *topic* (created if missing); return the seconds taken.

    Record ``i`` has key ``key(i)`` and goes to partition ``i % partitions``.  Large
    batches, except that each partition's last record is written alone: the embedded
    broker answers ``ListOffsets(latest)`` right only after a one-record batch, and
    faust's recovery trusts it.  *one_per_batch*: every record in its own batch.
    """
    from aiokafka import AIOKafkaProducer

    await create_topics(bootstrap, [topic], partitions)
    if one_per_batch:
        # max_batch_size below two records: every batch holds exactly one
        options = {"linger_ms": 0, "max_batch_size": len(value) + 40}
    else:
        options = {"linger_ms": 20, "max_batch_size": 512 * 1024}
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, **options)
    await producer.start()
    started = time.monotonic()
    tail_from = records if one_per_batch else records - min(records, partitions)
    try:
        window: list[asyncio.Future[Any]] = []
        for i in range(records):
            future = await producer.send(
                topic, value, key=key(i), partition=i % partitions, headers=headers
            )
            if i >= tail_from:
                await asyncio.gather(*window)
                window.clear()
                await future  # alone in its batch
                continue
            window.append(future)
            if len(window) >= WRITE_WINDOW:
                await asyncio.gather(*window)
                window.clear()
        await asyncio.gather(*window)
    finally:
        await producer.stop()
    return time.monotonic() - started


@dataclass
class Backlog:
    """What was produced for the throughput runs."""

    records: int = 0
    impressions: int = 0
    clicks: int = 0
    seconds: float = 0.0
    ends: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def records_per_impression(self) -> float:
        """Records produced per impression (clicks included)."""
        return self.records / self.impressions if self.impressions else math.nan


async def produce_backlog(bootstrap: str, config: Any) -> Backlog:
    """Produce every event of the generator's *config* as fast as the broker takes them."""
    from aiokafka import AIOKafkaProducer

    from streamjoin.ads import generator

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=20, max_batch_size=512 * 1024
    )
    await producer.start()
    backlog = Backlog()
    started = time.monotonic()
    progress = Progress(started)
    window: list[asyncio.Future[Any]] = []

    async def settle() -> None:
        for meta in await asyncio.gather(*window):
            key = (meta.topic, meta.partition)
            backlog.ends[key] = max(backlog.ends.get(key, 0), meta.offset + 1)
        window.clear()

    try:
        for event in generator.generate(config):
            window.append(
                await producer.send(
                    event.topic, event.value, key=event.key, timestamp_ms=event.timestamp_ms
                )
            )
            backlog.records += 1
            if event.topic == config.impressions_topic:
                backlog.impressions += 1
            else:
                backlog.clicks += 1
            if len(window) >= 20_000:
                await settle()
                now = time.monotonic()
                if progress.due(now):
                    rate = backlog.records / (now - started)
                    say(f"  {backlog.records:,} records produced ({rate:,.0f}/s)")
        await settle()
    finally:
        await producer.stop()
    backlog.seconds = time.monotonic() - started
    return backlog


async def topic_records(bootstrap: str, topic: str, rounds: int = 10) -> int | None:
    """The records *topic* holds: the sum of its partitions' high watermarks.

    The fetch response's high watermark is the one trusted (the embedded broker's
    ``ListOffsets(latest)`` can lag after a many-record batch): each partition is read
    from just before its ``ListOffsets`` end, at most *rounds* fetches of 0.5 s, and the
    larger of the two ends is taken.  ``None``: the topic does not exist.
    """
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, max_partition_fetch_bytes=2**16
    )
    await consumer.start()
    try:
        if topic not in await consumer.topics():
            return None
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        listed = await consumer.end_offsets(tps)
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, max(listed[tp] - 1, 0))
        for _ in range(rounds):
            if all(consumer.highwater(tp) is not None for tp in tps):
                break
            await consumer.getmany(timeout_ms=500, max_records=1)
        return sum(max(int(listed[tp]), int(consumer.highwater(tp) or 0)) for tp in tps)
    finally:
        await consumer.stop()


async def send_paced(
    producer: Any,  # Any: aiokafka's AIOKafkaProducer (untyped)
    events: Iterable[Any],
    before_send: Callable[[Any], None] = lambda event: None,
) -> AsyncIterator[tuple[Any, asyncio.Future[Any], float]]:
    """Send the generator's *events*, each at its arrival time on the wall clock
    (``arrival_ms``), and yield ``(event, its send future, seconds it was sent
    late)`` for each; *before_send* is called with each right before it is sent.
    A failed send raises here, at most one event later than its own; the last
    sends are awaited before the iteration ends."""
    in_flight: collections.deque[asyncio.Future[Any]] = collections.deque()
    for event in events:
        delay = event.arrival_ms / 1000 - time.time()
        if delay > 0.002:
            await asyncio.sleep(delay)
        before_send(event)
        future = await producer.send(
            event.topic, event.value, key=event.key, timestamp_ms=event.timestamp_ms
        )
        in_flight.append(future)
        while in_flight and in_flight[0].done():
            in_flight.popleft().result()  # raises a failed send
        yield event, future, max(0.0, -delay)
    await asyncio.gather(*in_flight)
