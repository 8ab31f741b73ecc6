"""faust's consumer bookkeeping, read and changed here only: delivery, offsets, acks.

A join takes its records out of fetches and acks them by offset ranges
(:mod:`streamjoin.faust.join.intake`); the fetch guard seeks back what faust
would not deliver (:mod:`~streamjoin.faust.kafka.fetch_guard`). Both need
faust's own notes on which partitions it delivers and where it read,
committed and acked.

Private attributes it depends on (faust-streaming 0.15.3, aiokafka 0.14.0):

* faust ``Consumer._get_active_partitions()`` (the live set faust delivers)
  and ``Consumer._buffered_partitions`` (taken out of it while a reader's
  buffer is full, delivered all the same);
* faust ``Consumer._read_offset`` (the last offset delivered, per partition)
  and ``Consumer._committed_offset`` (faust's note of the group's commit);
* faust ``Consumer._acked``, ``_acked_index``, ``_n_acked``,
  ``_waiting_for_ack`` and the module lock ``faust.transport.consumer.ack_lock``
  (what ``Consumer.ack`` updates per record);
* faust ``TopicConductor._topic_name_index`` (topic -> the channels reading it);
* aiokafka ``AIOKafkaConsumer._fetcher`` and its ``Fetcher._fetch_max_wait_ms``,
  ``Fetcher._max_partition_fetch_bytes``, ``Fetcher._fetch_max_bytes`` and
  ``Fetcher._pending_tasks`` (the fetch requests in flight) and
  ``Fetcher._fetch_task`` (its fetch loop); the fetcher whose ``close`` was
  mended is marked ``_streamjoin_mended_close``;
* aiokafka ``Fetcher._proc_fetch_request(assignment, node_id, request)`` (sends
  one fetch request and reads its response), wrapped once per fetcher (marked
  ``_streamjoin_fetch_order``) to reorder the request first; there the public
  ``FetchRequest.topics`` is reordered in place (the list the request is built
  from) and ``Assignment.state_value(tp).highwater`` read;
* faust ``App._fetcher`` (the service that runs the consumer's fetches;
  started again once tables are restored, as faust's recovery does).

:func:`forget_offsets` and :func:`note_committed` are the offset steps of
faust's ``on_partitions_revoked`` and ``perform_seek``, for a cooperative
rebalance that gives up or adds only some partitions
(:mod:`~streamjoin.faust.kafka.incremental`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping, MutableMapping, MutableSet, Sequence
from typing import TYPE_CHECKING, Any, cast

from aiokafka.structs import TopicPartition

from streamjoin.faust.kafka.session import aiokafka_consumer
from streamjoin.join.fetch_order import least_behind_first

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.consumer.fetcher import Fetcher
    from faust.app.base import App
    from faust.transport.consumer import Consumer
    from faust.types import TP, AppT, ConsumerT, TopicT

__all__ = [
    "ack_range",
    "active_partitions",
    "buffered_partitions",
    "committed_offset",
    "forget_offsets",
    "least_behind_first_fetches",
    "mend_fetcher_close",
    "note_committed",
    "read_offsets",
    "readers",
    "shorten_fetch_response",
    "shorten_fetch_wait",
    "shorten_partition_fetch",
    "start_fetcher",
]


logger = logging.getLogger(__name__)

# faust declares the private attributes read here on its classes (transport
# ``Consumer``, ``App``), not on the abstract types (``ConsumerT``, ``AppT``) the
# app hands out: the casts name the declaring class.
# aiokafka has no type information: its objects are typed as mypy sees them (Any).


def active_partitions(consumer: ConsumerT) -> Collection[TP]:
    """The partitions faust delivers now (its live set: do not keep it)."""
    return cast("Consumer", consumer)._get_active_partitions()


def buffered_partitions(consumer: ConsumerT) -> Collection[TP]:
    """Partitions taken out of the active ones because a reader's buffer is
    full; faust delivers their fetched records all the same."""
    buffered: Collection[TP] = getattr(consumer, "_buffered_partitions", ())
    return buffered


def read_offsets(consumer: ConsumerT) -> MutableMapping[TP, int | None]:
    """faust's last delivered offset per partition (records taken from a fetch
    move it as faust's own delivery does)."""
    return cast("Consumer", consumer)._read_offset


def committed_offset(consumer: ConsumerT, tp: TP) -> int | None:
    """faust's note of the group's committed offset of *tp* (``None``: unknown)."""
    committed: MutableMapping[TP, int | None] | None = getattr(consumer, "_committed_offset", None)
    return None if committed is None else committed.get(tp)


def readers(app: AppT, topic: str) -> int | None:
    """How many agents and channels of *app* read *topic* (``None``: unknown)."""
    index: Mapping[str, MutableSet[TopicT]] | None = getattr(app.topics, "_topic_name_index", None)
    return None if index is None else len(index.get(topic, ()))


def shorten_fetch_wait(consumer: ConsumerT, wait_ms: int) -> bool:
    """Make the consumer's fetch requests wait at most *wait_ms* on the broker.

    faust creates its aiokafka consumer with ``fetch_max_wait_ms=1500``. Kafka
    answers a fetch as soon as it has data, but a broker may hold it until the
    wait is over (the embedded one does, measured: a fetch every ~150 ms at
    1,000 records/s, the join's decisions 0.9 s behind the wall clock instead
    of 0.4 s); a join's latency then includes that wait. Returns whether the
    setting was found (faust's aiokafka driver) and changed.
    """
    return _lower_fetcher_setting(consumer, "_fetch_max_wait_ms", wait_ms)


def shorten_partition_fetch(consumer: ConsumerT, max_bytes: int) -> bool:
    """Make the consumer's fetch requests ask for at most *max_bytes* of each
    partition (never more than the app's ``consumer_max_fetch_size``, which
    faust sets as aiokafka's ``max_partition_fetch_bytes``: 1 MiB by default).

    A join takes a partition's whole fetch into its task's inbox, so a task
    may hold that much beyond its ``2 × batch_max`` until its batches take
    it: at 1 MiB, 80,000-140,000 fetched records waited in a worker's
    inboxes, and each young collection of the cyclic collector looked at all
    of them (docs/benchmarks.rst). A record larger than *max_bytes* is
    still fetched (a broker always answers with at least one record batch).
    Apache Kafka honours the limit; the embedded broker only in some
    responses (``python -m benchmarks.broker_fetch``). Returns whether the
    setting was found and changed.
    """
    return _lower_fetcher_setting(consumer, "_max_partition_fetch_bytes", max_bytes)


def shorten_fetch_response(consumer: ConsumerT, max_bytes: int) -> bool:
    """Make the consumer's fetch requests ask for at most *max_bytes* in all
    (aiokafka's ``fetch_max_bytes``, 50 MiB by default; only ever lowered).

    The embedded broker does not always keep to the per-partition limit
    (:func:`shorten_partition_fetch`) but keeps to this one: a response of
    one partition's backlog held up to 33,000 records with 256 KiB asked per
    partition, and 6,600 with 1 MiB asked in all (``python -m
    benchmarks.broker_fetch``). Apache Kafka keeps to both, answering
    at least one record batch, and the partitions left out of a full
    response are in the next request. Returns whether the setting was found
    and changed.
    """
    return _lower_fetcher_setting(consumer, "_fetch_max_bytes", max_bytes)


def _lower_fetcher_setting(consumer: ConsumerT, name: str, value: int) -> bool:
    """Set the fetcher's *name* (read when the next fetch request is built) to
    *value* if that lowers it; returns whether it did."""
    fetcher: Fetcher | None = getattr(aiokafka_consumer(consumer), "_fetcher", None)
    current = getattr(fetcher, name, None)
    if fetcher is None or not isinstance(current, int) or current <= value:
        return False
    setattr(fetcher, name, value)
    return True


def least_behind_first_fetches(aio: AIOKafkaConsumer | None) -> bool:
    """Make the aiokafka consumer's fetch requests list the partitions with the fewest
    records behind first (:mod:`streamjoin.join.fetch_order`), instead of
    aiokafka's random order; returns whether it was changed now (once per
    fetcher). A partition's records behind are its high watermark, as of the
    last response that carried it, less the offset fetched from.
    """
    fetcher = getattr(aio, "_fetcher", None)
    if fetcher is None or getattr(fetcher, "_streamjoin_fetch_order", False):
        return False
    send = fetcher._proc_fetch_request

    async def send_ordered(assignment: Any, node_id: int, request: Any) -> bool:  # Any: aiokafka's
        def behind(topic: str, partition: int, offset: int) -> int:
            state = assignment.state_value(TopicPartition(topic, partition))
            highwater = getattr(state, "highwater", None)
            return 0 if highwater is None else highwater - offset

        request.topics[:] = least_behind_first(request.topics, behind)
        return cast("bool", await send(assignment, node_id, request))

    fetcher._proc_fetch_request = send_ordered
    fetcher._streamjoin_fetch_order = True
    return True


def mend_fetcher_close(aio: AIOKafkaConsumer | None) -> bool:
    """Make the aiokafka fetcher's ``close()`` finish whatever its fetches do;
    returns whether it was changed now (once per fetcher).

    aiokafka 0.14's ``Fetcher.close`` has two faults that left a stopped
    worker hanging until it was killed (both seen when a worker was stopped
    while a rebalance completed and the broker closed its fetch connection;
    ``tests/integration/test_consumer_close.py`` shows each):

    * It cancels its fetch loop and waits for it to end. When the assignment
      has just changed, the loop is cancelling its fetches in flight and
      waits for each, suppressing their ``CancelledError``: its own
      cancellation, delivered there, is suppressed too, and the loop runs
      on. Here the loop is cancelled until it has ended.
    * It then cancels each fetch still in flight and awaits it. A fetch
      whose connection had just failed sleeps out ``retry_backoff_ms``
      outside its cancellation handler, so it ends cancelled and the
      ``CancelledError`` escapes ``close()``: the consumer never closes its
      client, and faust's consumer thread dies without telling the event
      loop. Here such a ``CancelledError`` ends the close instead, unless
      the closing task itself was cancelled.
    """
    fetcher = getattr(aio, "_fetcher", None)
    if fetcher is None or getattr(fetcher, "_streamjoin_mended_close", False):
        return False
    close = fetcher.close

    async def close_mended() -> None:
        routine = fetcher._fetch_task
        while not routine.done():  # cancelled until it ends (see above)
            routine.cancel()
            await asyncio.wait([routine], timeout=0.1)
        try:
            await close()
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            rest = [task for task in fetcher._pending_tasks if not task.done()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
            logger.info("consumer closed; a fetch cut short in its retry back-off was dropped")

    fetcher.close = close_mended
    fetcher._streamjoin_mended_close = True
    return True


async def start_fetcher(app: AppT) -> None:
    """Start *app*'s fetcher again if it is not running (after a restore)."""
    await cast("App", app)._fetcher.maybe_start()


def ack_range(consumer: ConsumerT, tp: TP, first: int, last: int) -> int:
    """Ack offsets ``first..last`` of *tp* in faust's consumer as one call.

    The same bookkeeping as faust's ``Consumer.ack`` for each offset (offsets
    below the committed one and offsets already acked are left out), without
    a message object per offset. Returns the number of offsets acked.
    """
    from faust.transport import consumer as faust_consumer
    from mode.utils.futures import notify

    consumer = cast("Consumer", consumer)  # ConsumerT declares no app
    if last < first or not consumer.app.topics.acks_enabled_for(tp.topic):
        return 0
    with faust_consumer.ack_lock:  # type: ignore[attr-defined]
        committed = consumer._committed_offset[tp]
        if committed is not None:
            first = max(first, committed)
        if last < first:
            return 0
        offsets: Sequence[int] = range(first, last + 1)
        index = consumer._acked_index[tp]
        if not index.isdisjoint(offsets):
            offsets = [o for o in offsets if o not in index]
        index.update(offsets)
        consumer._acked[tp].extend(offsets)
        consumer._n_acked += len(offsets)
        notify(consumer._waiting_for_ack)
        return len(offsets)


def forget_offsets(consumer: ConsumerT, tps: Collection[TP]) -> None:
    """Drop faust's read, committed and acked notes of *tps* (no longer assigned)."""
    faust_consumer = cast("Consumer", consumer)
    for tp in tps:
        faust_consumer._acked.pop(tp, None)
        faust_consumer._acked_index.pop(tp, None)
        faust_consumer._read_offset.pop(tp, None)
        faust_consumer._committed_offset.pop(tp, None)


def note_committed(consumer: ConsumerT, offsets: Mapping[TP, int | None]) -> None:
    """Note the group's committed *offsets* (just sought to) as faust's
    ``perform_seek`` does: read from there, committed there."""
    faust_consumer = cast("Consumer", consumer)
    for tp, offset in offsets.items():
        faust_consumer._read_offset[tp] = offset if offset is not None and offset >= 0 else None
        if offset:
            faust_consumer._committed_offset[tp] = offset
