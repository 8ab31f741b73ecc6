"""The bulk producer: records sent in aiokafka record batches, one future per batch.

A join sends thousands of records per batch; faust's producer makes a future
per record. :class:`Sender` builds aiokafka record batches per partition
instead, and falls back to faust's producer record by record when the app
produces in transactions (``processing_guarantee="exactly_once"``).

Private attributes it depends on (faust-streaming 0.15.3, aiokafka 0.14.0):

* faust ``Producer._ensure_producer()``: the running aiokafka producer;
* aiokafka ``AIOKafkaProducer._partition(...)``: the partition the producer's
  partitioner picks for a key (what ``send`` would pick);
* aiokafka ``AIOKafkaProducer._partitioner`` and ``._metadata``: when the
  partitioner is aiokafka's ``DefaultPartitioner``, a keyed record's partition
  is computed here as it would (Kafka's murmur2, compiled:
  :mod:`streamjoin.partitioner`) over the topic's partitions as ``_partition``
  lists them;
* aiokafka ``AIOKafkaClient._wait_on_metadata(topic)``: the topic's metadata,
  needed before ``_partition``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, TypeAlias, cast

from aiokafka.partitioner import DefaultPartitioner

from streamjoin.partitioner import partition_for_key

if TYPE_CHECKING:
    from aiokafka import AIOKafkaProducer
    from aiokafka.producer.message_accumulator import BatchBuilder
    from faust.transport.drivers.aiokafka import Producer
    from faust.types import AppT, RecordMetadata
    from faust.types.settings import Settings

__all__ = ["Record", "Sender", "Sent", "exactly_once"]

#: a record to send: (topic, partition or None: by key, key, value, headers)
Record = tuple[str, int | None, bytes | None, bytes | None, Sequence[tuple[str, bytes]] | None]
#: records sent: (topic, partition, future of the first one's metadata, how many);
#: aiokafka's batch futures give its own RecordMetadata, which has faust's fields
Sent: TypeAlias = "tuple[str, int, Awaitable[RecordMetadata], int]"


class Sender:
    """Sends records and waits for their acknowledgements, in bulk when it can."""

    def __init__(self, app: AppT) -> None:
        self.app = app

    def _bulk(self) -> AIOKafkaProducer | None:
        """aiokafka's producer when its batch API may be used, else ``None``."""
        if exactly_once(self.app.conf):
            return None  # faust sends in its transactions
        try:
            # declared on faust's aiokafka Producer, not on ProducerT
            aio = cast("Producer", self.app.producer)._ensure_producer()
        except Exception:  # not started, or not the aiokafka driver
            return None
        return aio if hasattr(aio, "create_batch") and hasattr(aio, "send_batch") else None

    async def send(self, records: Sequence[Record]) -> list[Sent]:
        """Send *records* (each partition's in the given order); nothing awaited
        beyond the producer's own buffering."""
        aio = self._bulk()
        if aio is None:
            producer = self.app.producer
            sent: list[Sent] = []
            for topic, partition, key, value, headers in records:
                # faust declares headers a list or a mapping; any sequence of pairs is
                # sent as it is (aiokafka iterates over them)
                listed = cast("list[tuple[str, bytes]] | None", headers)
                fut = await producer.send(topic, key, value, partition, None, listed)
                sent.append((topic, -1 if partition is None else partition, fut, 1))
            return sent
        groups: dict[tuple[str, int], list[Record]] = {}
        #: topic -> its partitions, as aiokafka lists them for its partitioner
        known: dict[str, list[int]] = {}
        default = type(aio._partitioner) is DefaultPartitioner
        for record in records:
            topic, chosen, key = record[0], record[1], record[2]
            if chosen is None:
                parts = known.get(topic)
                if parts is None:
                    await aio.client._wait_on_metadata(topic)
                    parts = known[topic] = list(aio._metadata.partitions_for_topic(topic))
                if default and key is not None:
                    # what DefaultPartitioner picks, with a compiled murmur2
                    chosen = parts[partition_for_key(key, len(parts))]
                else:
                    chosen = aio._partition(topic, None, key, None, key, None)
            groups.setdefault((topic, chosen), []).append(record)
        sent = []
        for (topic, partition), group in groups.items():
            builder, n = aio.create_batch(), 0
            for _, _, key, value, headers in group:
                if _append(builder, key, value, headers):
                    n += 1
                    continue
                fut = await aio.send_batch(builder, topic, partition=partition)
                sent.append((topic, partition, fut, n))
                builder, n = aio.create_batch(), 1
                if not _append(builder, key, value, headers):
                    raise ValueError(f"a record for {topic}[{partition}] does not fit in a batch")
            if n:
                fut = await aio.send_batch(builder, topic, partition=partition)
                sent.append((topic, partition, fut, n))
        return sent


def _append(
    builder: BatchBuilder,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes]] | None,
) -> bool:
    """Add a record to an aiokafka record batch; ``False`` when the batch is full."""
    return builder.append(timestamp=None, key=key, value=value, headers=headers or []) is not None


def exactly_once(conf: Settings) -> bool:
    """Does the app produce in transactions (``processing_guarantee="exactly_once"``)?

    faust's settings hold the guarantee as a :class:`ProcessingGuarantee`
    member (whose ``str()`` is its name, not its value); a plain string is
    read the same way."""
    from faust.types.enums import ProcessingGuarantee

    guarantee = getattr(conf, "processing_guarantee", ProcessingGuarantee.AT_LEAST_ONCE)
    return ProcessingGuarantee(guarantee) is ProcessingGuarantee.EXACTLY_ONCE
