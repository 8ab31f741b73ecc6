"""Reading a partition's offset range past the app's consumer, on the real broker."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kafka_util import create_topic, produce, run
from yarl import URL

from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.faust.kafka.range_read import read_range

pytestmark = pytest.mark.broker


def _conf(broker: EmbeddedBroker) -> Any:
    """The fields of a faust app's ``conf`` that :func:`read_range` reads."""
    return SimpleNamespace(
        broker=[URL(broker.url)],
        broker_client_id="range-test",
        broker_request_timeout=10.0,
        broker_credentials=None,
        ssl_context=None,
        processing_guarantee="at_least_once",
    )


async def _read(conf: Any, topic: str, start: int, stop: int) -> list[tuple[int, bytes]]:
    found = []
    async for records in read_range(conf, topic, 0, start, stop, timeout=10):
        found.extend((r.offset, r.value) for r in records)
    return found


def test_a_range_reads_exactly_its_offsets_and_stops_at_the_partition_end(
    broker: EmbeddedBroker,
) -> None:
    topic = "range-read-a"
    run(create_topic(broker.bootstrap, topic, 1))
    run(produce(broker.bootstrap, topic, [(b"k", b"v%d" % i, 0) for i in range(10)]))
    conf = _conf(broker)
    assert run(_read(conf, topic, 3, 7)) == [(o, b"v%d" % o) for o in range(3, 7)]
    # the partition ends before stop: what is there, then the end
    assert [o for o, _ in run(_read(conf, topic, 8, 100))] == [8, 9]
    assert run(_read(conf, topic, 5, 5)) == []
    assert run(_read(conf, topic, 10, 20)) == []  # nothing past the end
