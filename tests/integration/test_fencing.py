"""A zombie's late changelog writes are skipped by whoever restores the changelog.

A real worker restores a fenced table whose changelog holds, in this order,
the first owner's marker and records, its successor's marker, records the
first owner wrote after it lost the partition (and a marker of a takeover it
never completed, held back in its buffers), the successor's records, and
plain records without owner headers. Its RocksDB ends with exactly the
successor's state, and it fences the partition for itself on top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from kafka_util import OFFSET_KEY, create_topic, encode, read_rocksdb, run

from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.restore.owner_tokens import (
    FENCE_HEADER,
    OWNER_HEADER,
    OWNER_KEY,
    Owner,
    fence_key,
)

pytestmark = [pytest.mark.broker]

PARTITIONS = 4
A, B, STALE = b"owner-a1", b"owner-b2", b"owner-a3"


def _marker(owner: Owner) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    return fence_key(owner.token), b"{}", [(FENCE_HEADER, owner.encode())]


def _by(token: bytes | None, key: str, value: int) -> tuple[bytes, bytes, list[Any]]:
    headers = [] if token is None else [(OWNER_HEADER, token)]
    return encode(key), encode(value), headers


async def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes, Any]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for key, value, headers in records:  # one by one: the log order is the test
            await (await producer.send(topic, value, key=key, partition=0, headers=headers))
    finally:
        await producer.stop()


def test_a_restore_skips_what_a_former_owner_wrote_after_its_successors_marker(
    broker: EmbeddedBroker, workers: Any
) -> None:
    topic = f"{workers.app_id}-latest-changelog"
    run(create_topic(broker.bootstrap, topic, PARTITIONS))
    log = [
        _marker(Owner(A, 1)),
        _by(A, "k1", 1),
        _by(A, "k2", 2),
        _marker(Owner(B, 2)),  # B took over: A is a zombie from here on
        _by(A, "k1", 99),
        _by(A, "k3", 99),
        _marker(Owner(STALE, 2)),  # a takeover marker held back, delivered late
        _by(STALE, "k4", 99),
        _by(B, "k2", 20),
        _by(B, "k5", 5),
        _by(A, "k5", 99),
        _by(None, "k6", 6),  # no owner header: applied as before
    ]
    run(_produce(broker.bootstrap, topic, log))
    expected = {encode("k1"): encode(1), encode("k2"): encode(20)}
    expected.update({encode("k5"): encode(5), encode("k6"): encode(6)})

    worker = workers.spawn("w1", env={"SJ_TEST_FENCED": "1"})
    worker.wait_for_log(r"tables restored:", 90)
    worker.wait_for_log(rf"{topic}\[0\] fenced at epoch 3 ", 30)
    skipped = worker.wait_for_log(rf"changelog {topic}\[0\]: skipped", 5)
    assert "skipped 4 record(s) and 1 stale fence marker(s)" in skipped[0], skipped
    assert worker.stop(timeout=30) == 0

    local, offset = _state(worker.datadir, 0)
    owner = Owner.decode(local.pop(OWNER_KEY, None))
    assert local == expected
    assert owner is not None and owner.epoch == 3 and owner.token not in (A, B, STALE)
    assert offset == len(log)  # the worker's own marker is the last record

    # a restart is a new membership: it fences again, on top of its own marker
    worker.start()
    worker.wait_for_log(rf"{topic}\[0\] fenced at epoch 4 ", 90)
    assert worker.stop(timeout=30) == 0
    local, _ = _state(worker.datadir, 0)
    assert Owner.decode(local.pop(OWNER_KEY, None)).epoch == 4  # type: ignore[union-attr]
    assert local == expected


def _state(datadir: Path, partition: int) -> tuple[dict[bytes, bytes], int | None]:
    local, offset = read_rocksdb(datadir, "latest", partition)
    local.pop(OFFSET_KEY, None)
    return local, offset
