"""Small, bounded Kafka and RocksDB helpers for the broker tests."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import rocksdict
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

OFFSET_KEY = b"__faust\0offset__"


def run(coro: Any, timeout: float = 60.0) -> Any:
    """Run *coro* to completion on a fresh loop, at most *timeout* seconds."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def encode(obj: Any) -> bytes:
    """JSON bytes, as the test app's serializers write them."""
    return json.dumps(obj).encode()


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create *topic* (no error if it exists)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        if topic not in await admin.list_topics():
            await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


async def delete_topic(bootstrap: str, topic: str) -> None:
    """Delete *topic* and wait until the broker no longer lists it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([topic])
        for _ in range(100):
            if topic not in await admin.list_topics():
                return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"topic {topic} still listed after delete")
    finally:
        await admin.close()


async def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[
        tuple[bytes, bytes | None, int | None] | tuple[bytes, bytes | None, int | None, int]
    ],
    *,
    linger_ms: int = 20,
    max_batch_size: int = 512 * 1024,
) -> int:
    """Send ``(key, value, partition)`` records (or ``(key, value, partition,
    timestamp ms)``), batched by the producer; return the count."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=linger_ms, max_batch_size=max_batch_size
    )
    await producer.start()
    count = 0
    try:
        futures = []
        for key, value, partition, *stamp in records:
            ts = stamp[0] if stamp else None
            futures.append(
                await producer.send(topic, value, key=key, partition=partition, timestamp_ms=ts)
            )
            count += 1
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return count


async def produce_events(bootstrap: str, events: list[Any]) -> list[tuple[Any, int, int]]:
    """Send generator events (``topic``, ``key``, ``value``, ``timestamp_ms``) in
    order; return ``(event, partition, offset)`` for each, once all are acknowledged."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    await producer.start()
    try:
        futures = [
            await producer.send(e.topic, e.value, key=e.key, timestamp_ms=e.timestamp_ms)
            for e in events
        ]
        metas = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return [(e, m.partition, m.offset) for e, m in zip(events, metas, strict=True)]


async def read_topics(bootstrap: str, topics: list[str]) -> list[tuple[str, Any]]:
    """Every record of the existing ones among *topics*, read from the start to the end."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        existing = await consumer.topics()
        tps = [
            TopicPartition(t, p)
            for t in topics
            if t in existing
            for p in sorted(consumer.partitions_for_topic(t) or ())
        ]
        if not tps:
            return []
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        out: list[tuple[str, Any]] = []
        idle = 0
        while idle < 2:  # two empty fetches in a row: caught up
            batch = await consumer.getmany(timeout_ms=500)
            idle = 0 if batch else idle + 1
            for tp, records in sorted(batch.items()):
                out.extend((tp.topic, r) for r in records)
        return out
    finally:
        await consumer.stop()


async def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """``ListOffsets(latest)`` per partition (may lag on the embedded broker)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.end_offsets(tps)
        return {tp.partition: off for tp, off in ends.items()}
    finally:
        await consumer.stop()


async def topic_names(bootstrap: str) -> set[str]:
    """The topics the broker has (asks for all of them: creates none)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        return set(await consumer.topics())
    finally:
        await consumer.stop()


async def replay_changelog(
    bootstrap: str, topic: str, partitions: int, timeout: float = 60.0
) -> tuple[dict[int, dict[bytes, bytes]], dict[int, int]]:
    """Replay *topic* to its fetch high watermark.

    Returns ``(state, highwaters)``: the latest value of every key per
    partition (tombstones delete), and the fetch high watermark per partition.
    """
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=8 * 1024 * 1024,
    )
    await consumer.start()
    state: dict[int, dict[bytes, bytes]] = {p: {} for p in range(partitions)}
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        done: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(done) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"replay of {topic} incomplete: done {sorted(done)}")
            fetched = await consumer.getmany(timeout_ms=200)
            for tp, records in fetched.items():
                for r in records:
                    if r.value is None:
                        state[tp.partition].pop(r.key, None)
                    else:
                        state[tp.partition][r.key] = r.value
            for tp in tps:
                hw = consumer.highwater(tp)
                if hw is not None and await consumer.position(tp) >= hw:
                    done.add(tp.partition)
        highwaters = {tp.partition: consumer.highwater(tp) or 0 for tp in tps}
        return state, highwaters
    finally:
        await consumer.stop()


def table_dir(datadir: Path) -> Path:
    """Where faust keeps the app's RocksDB tables under a worker's data directory."""
    return datadir / "v1" / "tables"


def read_rocksdb(
    datadir: Path, table: str, partition: int
) -> tuple[dict[bytes, bytes], int | None]:
    """Read one stopped worker's table partition: ``(key -> value, persisted offset)``."""
    path = table_dir(datadir) / f"{table}-{partition}.db"
    if not path.exists():
        return {}, None
    db = rocksdict.Rdict(
        str(path),
        options=rocksdict.Options(raw_mode=True),
        access_type=rocksdict.AccessType.read_only(),
    )
    try:
        items = {bytes(k): bytes(v) for k, v in db.items()}
    finally:
        db.close()
    raw = items.pop(OFFSET_KEY, None)
    return items, None if raw is None else int(raw)


def read_status(datadir: Path) -> dict[str, Any] | None:
    """The test app's status.json, ``None`` if not written yet."""
    path = datadir / "status.json"
    try:
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def first_processed(datadir: Path) -> list[dict[str, Any]]:
    """Lines the test app wrote when it processed a partition's first record."""
    path = datadir / "first_processed.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_until(predicate: Any, timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll *predicate* until it returns a truthy value, at most *timeout* seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
