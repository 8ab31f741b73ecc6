"""What one broker puts in a fetch response when one partition has a backlog.

``python -m benchmarks.broker_fetch`` starts the embedded broker (or uses
``--bootstrap``), writes ``--backlog`` records of ``--size`` bytes to
partition 0 of a new two-partition topic and 20 records to partition 1, then
reads both from the start with a bare aiokafka consumer, once per fetch
setting, and prints what each ``getmany`` returned of each partition, in
order. Partition 1 stands for a task kept through a takeover: how many
responses of partition 0's backlog come before its 20 records says how long
it would wait. Each setting is ``max_partition_fetch_bytes`` (the
per-partition limit a request asks for) and ``fetch_max_bytes`` (the
response's limit); aiokafka shuffles the partitions of each request.

Loopback only; the loops are bounded by ``--rounds``.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import Sequence

from benchmarks.harness.kafka import create_topics

#: (max_partition_fetch_bytes, fetch_max_bytes): the worker's settings with a
#: join, the same with a 1 MiB response, and faust's defaults
SETTINGS = ((256 * 1024, 52_428_800), (256 * 1024, 1024 * 1024), (1024 * 1024, 52_428_800))
KEPT_RECORDS = 20


async def _fill(bootstrap: str, topic: str, backlog: int, size: int) -> None:
    from aiokafka import AIOKafkaProducer

    await create_topics(bootstrap, [topic], 2)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        value = b"x" * size
        for _ in range(backlog):
            await producer.send(topic, value, partition=0)
        for _ in range(KEPT_RECORDS):
            await producer.send(topic, b"kept", partition=1)
        await producer.flush()
    finally:
        await producer.stop()


async def _read(
    bootstrap: str, topic: str, per_partition: int, per_response: int, backlog: int, rounds: int
) -> list[tuple[int, int]]:
    """What each ``getmany`` call returned, (partition 0, partition 1), until both
    are read to their end or *rounds* calls."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        max_partition_fetch_bytes=per_partition,
        fetch_max_bytes=per_response,
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        seen: list[tuple[int, int]] = []
        for _ in range(rounds):
            got = await consumer.getmany(timeout_ms=2000)
            seen.append((len(got.get(tps[0], [])), len(got.get(tps[1], []))))
            if sum(a for a, _ in seen) >= backlog and sum(b for _, b in seen) >= KEPT_RECORDS:
                break
        return seen
    finally:
        await consumer.stop()


def _report(per_partition: int, per_response: int, seen: list[tuple[int, int]]) -> str:
    before = next((i for i, (_, kept) in enumerate(seen) if kept), None)
    shown = ", ".join(f"{a:,}/{b}" for a, b in seen if a or b)
    where = "never" if before is None else f"in read {before + 1}"
    return (
        f"per partition {per_partition // 1024:,} KiB, per response "
        f"{per_response // 1024:,} KiB: partition 0/1 records per read: {shown}; "
        f"partition 1's records came {where}; largest read of partition 0: "
        f"{max(a for a, _ in seen):,}"
    )


async def _run(bootstrap: str, backlog: int, size: int, rounds: int) -> None:
    for per_partition, per_response in SETTINGS:
        topic = f"broker-fetch-{uuid.uuid4().hex[:8]}"
        await _fill(bootstrap, topic, backlog, size)
        seen = await _read(bootstrap, topic, per_partition, per_response, backlog, rounds)
        print(_report(per_partition, per_response, seen), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.broker_fetch", description=__doc__)
    parser.add_argument("--bootstrap", help="a broker to use (default: start the embedded one)")
    parser.add_argument("--backlog", type=int, default=60_000, help="records on partition 0")
    parser.add_argument("--size", type=int, default=200, help="bytes per record value")
    parser.add_argument("--rounds", type=int, default=40, help="most getmany calls per setting")
    args = parser.parse_args(argv)
    if args.bootstrap:
        asyncio.run(_run(args.bootstrap, args.backlog, args.size, args.rounds))
        return
    from streamjoin.dev.broker import BrokerOptions, EmbeddedBroker

    with EmbeddedBroker(BrokerOptions(port=0, quiet=True)) as broker:
        print(f"embedded broker at {broker.bootstrap}", flush=True)
        asyncio.run(_run(broker.bootstrap, args.backlog, args.size, args.rounds))


if __name__ == "__main__":
    main()
