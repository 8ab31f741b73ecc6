"""The join batch's sender over a fake aiokafka producer: grouping, batch splits, offsets."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import faust
import pytest

from streamjoin.faust.join.batch import acknowledged
from streamjoin.faust.kafka.producer import Sender, exactly_once


class _Builder:
    def __init__(self, room: int) -> None:
        self.records: list[tuple[Any, Any, Any]] = []
        self.room = room

    def append(self, *, timestamp: Any, key: Any, value: Any, headers: Any) -> Any:
        if len(self.records) >= self.room:
            return None
        self.records.append((key, value, headers))
        return object()


class _Producer:
    """aiokafka's producer as the sender uses it: 2 records per batch."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, list[tuple[Any, Any, Any]]]] = []
        self.ends: dict[tuple[str, int], int] = {}

        async def wait(topic: str) -> None:
            return None

        self.client = SimpleNamespace(_wait_on_metadata=wait)
        # a partitioner of the app's own: the sender asks _partition
        self._partitioner = object()
        self._metadata = SimpleNamespace(partitions_for_topic=lambda topic: {0, 1, 2})

    def create_batch(self) -> _Builder:
        return _Builder(2)

    def _partition(self, topic: str, partition: Any, key: bytes, *_: Any) -> int:
        return len(key) % 3

    async def send_batch(self, builder: _Builder, topic: str, *, partition: int) -> Any:
        base = self.ends.get((topic, partition), 0)
        self.ends[(topic, partition)] = base + len(builder.records)
        self.sent.append((topic, partition, builder.records))
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(SimpleNamespace(offset=base))
        return fut


def _sender(producer: _Producer) -> Sender:
    app = SimpleNamespace(
        conf=SimpleNamespace(processing_guarantee="at_least_once"),
        producer=SimpleNamespace(_ensure_producer=lambda: producer),
    )
    return Sender(app)


def test_records_go_out_in_batches_per_partition_in_order_with_their_last_offsets() -> None:
    producer = _Producer()
    records = [
        ("out", None, b"k1", b"a", None),
        ("log", 1, b"x", b"1", None),
        ("out", None, b"k22", b"b", [("h", b"v")]),
        ("log", 1, b"y", b"2", None),
        ("log", 1, b"z", b"3", None),
        ("out", None, b"k1", b"c", None),
    ]

    async def run() -> dict[int, int]:
        return await acknowledged(await _sender(producer).send(records), "log")

    last = asyncio.run(run())
    assert last == {1: 2}  # three changelog records at offsets 0, 1, 2
    by_partition = {(t, p): [] for t, p, _ in producer.sent}
    for t, p, recs in producer.sent:
        by_partition[(t, p)].extend(v for _, v, _ in recs)
    assert by_partition == {("out", 2): [b"a", b"c"], ("log", 1): [b"1", b"2", b"3"],
                            ("out", 0): [b"b"]}  # fmt: skip
    assert max(len(recs) for _, _, recs in producer.sent) == 2
    assert ("out", 0, [(b"k22", b"b", [("h", b"v")])]) in producer.sent


def test_exactly_once_apps_send_through_faust_one_record_at_a_time() -> None:
    sent: list[tuple[Any, ...]] = []

    async def send(*args: Any) -> Any:
        sent.append(args)
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(SimpleNamespace(offset=len(sent) - 1))
        return fut

    # faust's own settings: the guarantee is an enum member there, not the string given
    conf = faust.App("eos", broker="kafka://127.0.0.1:9", processing_guarantee="exactly_once").conf
    # a bulk-capable aiokafka producer is there: it must not be used
    producer = SimpleNamespace(send=send, _ensure_producer=_Producer)
    app = SimpleNamespace(conf=conf, producer=producer)

    async def run() -> dict[int, int]:
        records = [("log", 0, b"k", b"v", None), ("log", 0, b"k", b"w", None)]
        return await acknowledged(await Sender(app).send(records), "log")

    assert asyncio.run(run()) == {0: 1}
    assert [a[0] for a in sent] == ["log", "log"]


@pytest.mark.parametrize(
    ("guarantee", "transactional"),
    [("exactly_once", True), ("at_least_once", False), (None, False)],
)
def test_the_guarantee_is_read_from_faust_s_settings(
    guarantee: str | None, transactional: bool
) -> None:
    options = {} if guarantee is None else {"processing_guarantee": guarantee}
    conf = faust.App("g", broker="kafka://127.0.0.1:9", **options).conf
    assert exactly_once(conf) is transactional
    assert exactly_once(SimpleNamespace(processing_guarantee=guarantee or "at_least_once")) is (
        transactional
    )
