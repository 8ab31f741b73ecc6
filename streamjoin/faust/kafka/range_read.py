"""Reading one partition's offsets ``[start, stop)`` straight from the brokers.

A sink that keeps its own record of what it wrote (the ad example's archive)
can find that the app's consumer delivers a partition from beyond it: faust
counted records as done that the sink never saw (faust acks a record that a
stream skips during a rebalance, and takes a jump in offsets for a gap it may
commit over). The sink's files are the truth, so it reads the records in
between itself, with a consumer of no group that is assigned the partition
by hand (:func:`read_range`), and leaves the app's consumer where it is (a
seek would make every other agent of the app read those records again).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth, server_list
from faust.types.enums import ProcessingGuarantee

from streamjoin.errors import StreamjoinError

if TYPE_CHECKING:
    from faust.types.settings import Settings

__all__ = ["RangeReadError", "no_group_consumer", "read_range"]

#: how long one fetch waits for records (ms)
POLL_MS = 200


def no_group_consumer(
    conf: Settings, name: str, *, auto_offset_reset: str, **options: Any
) -> AIOKafkaConsumer:
    """An aiokafka consumer of the app's brokers in no group (partitions are
    assigned by hand), reading committed records only when the app produces in
    transactions; *options* go to ``AIOKafkaConsumer`` as they are."""
    # faust's setting declares the enum class; the value is one of its members
    guarantee = cast(ProcessingGuarantee, conf.processing_guarantee)
    exactly_once = guarantee == ProcessingGuarantee.EXACTLY_ONCE
    return AIOKafkaConsumer(
        bootstrap_servers=server_list(conf.broker, 9092),
        client_id=f"{conf.broker_client_id}-{name}",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset=auto_offset_reset,
        isolation_level="read_committed" if exactly_once else "read_uncommitted",
        request_timeout_ms=int(conf.broker_request_timeout * 1000),
        **credentials_to_aiokafka_auth(conf.broker_credentials, conf.ssl_context),
        **options,
    )


class RangeReadError(StreamjoinError):
    """Records of a partition range could not be read from the brokers in time."""


async def read_range(
    conf: Settings, topic: str, partition: int, start: int, stop: int, *, timeout: float = 30.0
) -> AsyncIterator[list[ConsumerRecord[bytes, bytes]]]:
    """Yield the records of ``topic[partition]`` with offsets in ``[start, stop)``,
    in offset order, one fetch at a time (aiokafka ``ConsumerRecord``\\ s).

    Offsets with no record (transaction markers, compacted or deleted records)
    are simply absent. Reading ends once the position reaches *stop*, or when
    the partition ends before it.

    Raises:
        RangeReadError: the position did not reach *stop* (nor the partition's
            end) within *timeout* seconds without progress.
    """
    if stop <= start:
        return
    # records deleted by retention: go on from the oldest one left
    consumer = no_group_consumer(conf, "range", auto_offset_reset="earliest")
    tp = TopicPartition(topic, partition)
    await consumer.start()
    try:
        consumer.assign([tp])
        consumer.seek(tp, start)
        progress_at = time.monotonic()
        while True:
            fetched = (await consumer.getmany(tp, timeout_ms=POLL_MS)).get(tp, [])
            wanted = [r for r in fetched if r.offset < stop]
            if wanted:
                yield wanted
            position = await consumer.position(tp)
            if position >= stop or len(wanted) < len(fetched):
                return
            highwater = consumer.highwater(tp)
            if not fetched and highwater is not None and position >= highwater:
                return  # the partition ends before stop
            if fetched:
                progress_at = time.monotonic()
            elif time.monotonic() - progress_at > timeout:
                raise RangeReadError(
                    f"{topic}[{partition}]: could not read offsets {start}..{stop - 1} "
                    f"(stuck at {position} for {timeout:.0f} s); check the brokers"
                )
    finally:
        await consumer.stop()
