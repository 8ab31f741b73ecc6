"""A consumer with a join lists the partitions least behind first in its fetch
requests, so a backlog never starves a caught-up partition of a response.

aiokafka shuffles the partitions of each fetch request, and a broker fills a
response in request order up to its byte limit (the embedded broker also
answers more than the per-partition limit for a partition with a backlog).
After a worker took a dead worker's tasks over, a response could hold only
the backlog, and its own tasks' records waited for a later one.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from kafka_util import create_topic, run

from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.faust.kafka.consumer import least_behind_first_fetches

pytestmark = [pytest.mark.broker]

BACKLOG = 3_000
VALUE = b"x" * 1_000
#: small responses: the backlog takes tens of fetches
RESPONSE_BYTES = 64 * 1024


async def _produce(bootstrap: str, sends: list[tuple[str, int, int]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        futures = [
            await producer.send(topic, VALUE, partition=partition)
            for topic, partition, n in sends
            for _ in range(n)
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


#: a fetch request's partitions in order, and the backlog's records behind then
Request = tuple[list[tuple[str, int]], int]


async def _read(bootstrap: str, a: str, b: str) -> tuple[list[Request], list[float]]:
    """Read *a*[0]'s backlog to its end while *a*[1] and *b*[0] get a record every
    20 ms; returns each fetch request, and each of those records' wait from
    its append to its delivery (s)."""
    backlog, small, other = TopicPartition(a, 0), TopicPartition(a, 1), TopicPartition(b, 0)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        fetch_max_wait_ms=50,
        fetch_max_bytes=RESPONSE_BYTES,
        max_partition_fetch_bytes=RESPONSE_BYTES // 4,
    )
    await consumer.start()
    requests: list[Request] = []
    send = consumer._client.send

    async def spy(node_id: int, request: Any, **kwargs: Any) -> Any:
        if type(request).__name__ == "FetchRequest":
            order = [(t, p) for t, parts in request.topics for p, _, _ in parts]
            at = {(t, p): offset for t, parts in request.topics for p, offset, _ in parts}
            state = consumer._subscription.subscription.assignment.state_value(backlog)
            end = state.highwater
            behind = 0 if end is None or (a, 0) not in at else end - at[(a, 0)]
            requests.append((order, behind))
        return await send(node_id, request, **kwargs)

    consumer._client.send = spy
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        assert least_behind_first_fetches(consumer)
        assert not least_behind_first_fetches(consumer)  # once per fetcher
        consumer.assign([backlog, small, other])
        await consumer.seek_to_beginning(backlog, small, other)
        sent: dict[tuple[TopicPartition, int], float] = {}
        waits: list[float] = []
        read = 0
        deadline = time.monotonic() + 60
        while read < BACKLOG and time.monotonic() < deadline:
            for tp in (small, other):
                meta = await producer.send_and_wait(tp.topic, VALUE, partition=tp.partition)
                sent[(tp, meta.offset)] = time.monotonic()
            got = await consumer.getmany(timeout_ms=200)
            now = time.monotonic()
            for tp, records in got.items():
                if tp == backlog:
                    read += len(records)
                else:
                    waits += [now - sent[(tp, r.offset)] for r in records if (tp, r.offset) in sent]
            await asyncio.sleep(0.02)
        assert read == BACKLOG, f"read {read} of the backlog's {BACKLOG} records in 60 s"
        return requests, waits
    finally:
        await producer.stop()
        await consumer.stop()


def test_a_backlog_is_listed_after_the_partitions_that_are_caught_up(
    broker: EmbeddedBroker,
) -> None:
    a, b = "fetch-order-a", "fetch-order-b"
    run(create_topic(broker.bootstrap, a, 2))
    run(create_topic(broker.bootstrap, b, 1))
    run(_produce(broker.bootstrap, [(a, 0, BACKLOG)]))
    requests, waits = run(_read(broker.bootstrap, a, b))
    # while the backlog is far behind (its high watermark known), it is listed
    # last, after the other partition of its topic, and its topic after the
    # topic that is caught up (a request leaves out a partition whose last
    # response was not read yet)
    behind = [order for order, n in requests if n > 100]
    assert len(behind) >= 10, requests
    rank = {(b, 0): 0, (a, 1): 1, (a, 0): 2}
    assert all([rank[tp] for tp in order] == sorted(rank[tp] for tp in order) for order in behind)
    assert sum((a, 0) in order and len(order) > 1 for order in behind) >= 5, behind
    # and the small partitions' records were each delivered while the backlog
    # was read, none after it (a few fetches at most: 50 ms each on the broker)
    assert waits and max(waits) < 1.0, sorted(waits)[-5:]
