"""The join's bulk sender puts a keyed record where aiokafka's own ``send`` would.

:class:`~streamjoin.faust.kafka.producer.Sender` computes the partition of a
keyed record itself (Kafka's murmur2, compiled) when the producer's
partitioner is aiokafka's default one, and asks the producer otherwise. Both
are checked on the embedded broker: every record is read back from the
partition it landed on.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from kafka_util import create_topic, read_topics, run

from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.faust.join.batch import acknowledged
from streamjoin.faust.kafka.producer import Record, Sender

pytestmark = [pytest.mark.broker]

PARTITIONS = 7


def _keys(n: int) -> list[bytes]:
    """Keys of every length from 0 to 40 bytes, arbitrary bytes, and click ids."""
    rnd = random.Random(38)
    keys = [rnd.randbytes(rnd.randrange(0, 41)) for _ in range(n)]
    keys += [f"click-{i:010d}-{rnd.getrandbits(24):06x}".encode() for i in range(n)]
    return keys


async def _send_and_read(
    broker: EmbeddedBroker, topic: str, keys: Sequence[bytes], **options: Any
) -> tuple[dict[bytes, int], dict[bytes, int]]:
    """Send one record per key through the sender; where each landed, and where
    the producer's own ``_partition`` puts it."""
    await create_topic(broker.bootstrap, topic, PARTITIONS)
    aio = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, **options)
    await aio.start()
    try:
        app = SimpleNamespace(
            conf=SimpleNamespace(processing_guarantee="at_least_once"),
            producer=SimpleNamespace(_ensure_producer=lambda: aio),
        )
        records: list[Record] = [(topic, None, key, b"%d" % i, None) for i, key in enumerate(keys)]
        last = await acknowledged(await Sender(app).send(records), topic)
        assert sum(offset + 1 for offset in last.values()) == len(keys)
        expected = {key: aio._partition(topic, None, key, None, key, None) for key in keys}
    finally:
        await aio.stop()
    landed: dict[bytes, int] = {}
    for _, record in await read_topics(broker.bootstrap, [topic]):
        landed[keys[int(record.value)]] = record.partition
    return landed, expected


def test_keyed_records_land_where_aiokafka_s_default_partitioner_puts_them(
    broker: EmbeddedBroker,
) -> None:
    keys = _keys(400)
    landed, expected = run(_send_and_read(broker, "sender-default-partitioner", keys))
    assert len(landed) == len(set(keys))
    assert landed == expected
    assert len(set(landed.values())) == PARTITIONS  # the keys spread over every partition


def test_a_producer_s_own_partitioner_is_still_asked(broker: EmbeddedBroker) -> None:
    def last_partition(key: bytes, all_partitions: list[int], available: list[int]) -> int:
        return all_partitions[-1]

    keys = _keys(50)
    landed, expected = run(
        _send_and_read(broker, "sender-own-partitioner", keys, partitioner=last_partition)
    )
    assert set(landed.values()) == {PARTITIONS - 1}
    assert landed == expected
