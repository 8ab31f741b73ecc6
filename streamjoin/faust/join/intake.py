"""A join's input records taken in bulk from faust's consumer, and acked by offset ranges.

faust delivers a fetched record to an agent through a per-record path: a
``Message``, the conductor's callback awaited under ``wait_first``, an
``Event`` in a channel queue, the stream's iteration, then a per-record ack.
A join applies its records in batches, so none of that is needed: the
:class:`Intake` hooks into the consumer's fetch (one hook on the fetch chain,
:mod:`streamjoin.faust.kafka.fetch_chain`) and hands the join the lists of
records of its partitions,
as aiokafka returned them. Records of a topic only the join reads are taken
out of the fetch; those of a topic another agent reads too are copied, and
faust delivers them to every reader as usual (the join's agent included,
which holds them, see below). The join reads nothing through faust's
per-record path: that path can lose records right after a rebalance or a
seek (an iteration over an older fetch raises faust's read offset past the
records read again, which faust then drops as already read).

The records are taken whenever faust itself would deliver them: flow active
(no rebalance under way). A fetch that was waiting while a rebalance ran
returns records of the new assignment at the positions it set (aiokafka
drops what a seek made stale), so they are taken too, as are those of a
partition faust took out of the active ones because a reader's stream buffer
is full (faust delivers those too). Every record the join gets out of a fetch
but cannot accept (revoking, or a partition paused meanwhile) is read again:
its partition is sought back to it. Taken records
move faust's read offset as faust's own delivery does.

Acks keep faust's offset commits where they are, a committed offset never
passing the join state's position: records of a join-only topic are acked
once the batch that applied them is durable, by offset ranges in faust's own
bookkeeping (:func:`~streamjoin.faust.kafka.consumer.ack_range`); a record of
a shared topic is acked through faust's reference count (every reader acks),
so the join's agent holds the event faust delivered it and acks it once the
join applied that offset (:meth:`Intake.hold`, :meth:`Intake.ack`).

Flow control is per input partition, so one task's backlog never holds up
another's records, and an input that waits for the other one (its records
too far ahead in time, :mod:`~streamjoin.faust.join.alignment`) never stops
that other one's fetches: once a task has ``high_water`` records of one input
waiting, that input's partition leaves the set faust fetches
(:func:`~streamjoin.faust.kafka.incremental.hold_partitions`, as faust does
for a partition whose reader's buffer is full) and comes back after a batch
took them below it. Fetches go on for the others, so a record of a task
without a backlog is in the next batch after its fetch, however much a task
taken over with a backlog still has to read. Only when no partition of the
join is left to fetch (every one held, or the others paused for a restore)
does the fetch itself wait for a batch to make room (the consumer's prefetch
keeps at most one response per partition).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from streamjoin.faust.join.types import InputRecord
from streamjoin.faust.kafka.consumer import (
    ack_range,
    active_partitions,
    buffered_partitions,
    least_behind_first_fetches,
    read_offsets,
    readers,
    shorten_fetch_response,
    shorten_fetch_wait,
    shorten_partition_fetch,
)
from streamjoin.faust.kafka.fetch_chain import INTAKE, Fetch, Records, fetch_chain
from streamjoin.faust.kafka.incremental import hold_partitions, release_partitions
from streamjoin.faust.kafka.session import aiokafka_consumer

if TYPE_CHECKING:
    from faust.transport.consumer import Consumer
    from faust.types import TP, AppT, ConsumerT, EventT

__all__ = [
    "FETCH_MAX_WAIT_MS",
    "FETCH_PARTITION_BYTES",
    "FETCH_RESPONSE_BYTES",
    "HELD_FETCH_WAIT_S",
    "Intake",
]

logger = logging.getLogger(__name__)

#: seconds between looks at the inboxes while a fetch waits for room
ROOM_POLL_S = 0.2
#: the longest a fetch request of an app with a join waits on the broker (ms)
FETCH_MAX_WAIT_MS = 50
#: the most a fetch request of an app with a join asks of one partition (bytes):
#: what a task's inbox may take beyond its high water
FETCH_PARTITION_BYTES = 256 * 1024
#: the most a fetch request of an app with a join asks in all (bytes): four
#: partitions' worth. The embedded broker keeps to this limit where it does
#: not to the partition's; fewer fetched records wait in the inboxes, for each
#: young collection of the cyclic collector to look at (docs/benchmarks.rst)
FETCH_RESPONSE_BYTES = 4 * FETCH_PARTITION_BYTES

#: the longest a fetch waits for records (s) while a partition of the join is held:
#: faust's waits up to a second, asking only for the partitions live when it
#: started, and a held partition comes back when a batch made room
#: (tens of ms), with the response aiokafka kept for it read only by the
#: next fetch. With one task left reading a backlog, that second came after
#: every fetch of it: 16,000 records/s instead of 100,000 (docs/benchmarks.rst)
HELD_FETCH_WAIT_S = 0.05

#: receives one partition's fetched records: (topic, partition, records)
Receiver = Callable[[str, int, Sequence[InputRecord]], None]


class Intake:
    """Takes *topics*' records out of the fetches of an app's consumer.

    Args:
        app: the faust app.
        sides: topic -> the join's name of that input; their records are taken.
        receive: called with each partition's records, in fetch order.
        high_water: records of one input waiting in one task above which that
            input's partition is not fetched until a batch took some.
        waiting: the number of records of an input (the join's name of it)
            waiting in the task of a partition: ``waiting(side, partition)``.
        accepting: whether records may be taken now (false while revoking).
    """

    def __init__(
        self,
        app: AppT,
        sides: Mapping[str, str],
        receive: Receiver,
        *,
        high_water: int,
        waiting: Callable[[str, int], int],
        accepting: Callable[[], bool],
    ) -> None:
        self.app = app
        self.topics = frozenset(sides)
        self._topic_of = {side: topic for topic, side in sides.items()}
        self._side_of = dict(sides)
        self.receive = receive
        self.high_water = high_water
        self.waiting = waiting
        self.accepting = accepting
        self.installed_on: ConsumerT | None = None
        #: the topics taken out of fetches (see :meth:`_exclusive`); the others
        #: are copied (other agents read them too)
        self.exclusive: frozenset[str] = frozenset()
        #: per partition of a shared topic: events faust delivered to the
        #: join's agent, (offset, event), acked once the join applied them
        self._held: dict[TP, list[tuple[int, EventT[Any]]]] = {}  # Any: the events' values
        #: per partition of a shared topic: the next offset the join has not applied
        self._applied: dict[TP, int] = {}
        #: partitions of the join not fetched (a task's inbox full of their records)
        self.holding: set[TP] = set()
        #: times a partition was held
        self.holds = 0
        self._room = asyncio.Event()
        self._room.set()
        #: fetched records of the join not accepted, whose partition was sought back to them
        self.sought_back = 0
        #: shared topics already warned about (see :meth:`_warn_shared`)
        self._warned: set[str] = set()

    def install(self) -> None:
        """Register the intake on the app's consumer's fetch chain; called at each
        rebalance, it also looks again at which topics other agents read and
        fetches every held partition again (the next fetches hold them anew)."""
        self.exclusive = self._exclusive()
        self.release(sorted(self.holding))
        self._warn_shared()
        consumer = self.app.consumer
        if self.installed_on is consumer:
            return
        intake = self

        async def take(fetch: Fetch, active: Collection[TP] | None, timeout: float) -> Records:
            if intake.holding:  # see HELD_FETCH_WAIT_S
                timeout = min(timeout, HELD_FETCH_WAIT_S)
            records = await fetch(active, timeout)
            if records:
                # the live set: the one faust delivers by (a copy may have been fetched with)
                live = None if active is None else active_partitions(consumer)
                await intake.take(consumer, records, live)
            return records

        name = "join-intake:" + ",".join(sorted(self.topics))
        fetch_chain(consumer).register(name, INTAKE, take)
        self.installed_on = consumer
        shorten_fetch_wait(consumer, FETCH_MAX_WAIT_MS)
        shorten_partition_fetch(consumer, FETCH_PARTITION_BYTES)
        shorten_fetch_response(consumer, FETCH_RESPONSE_BYTES)
        # a task's records are not starved by another task's backlog in a response
        least_behind_first_fetches(aiokafka_consumer(consumer))

    async def take(
        self, consumer: ConsumerT, records: Records, active: Collection[TP] | None
    ) -> None:
        """Hand the join its records of *records* (a fetch: TP -> records): taken
        out of it for join-only topics, copied for shared ones."""
        # flow_active: declared on faust's transport Consumer, not on ConsumerT
        if not cast("Consumer", consumer).flow_active or consumer.should_stop:
            return  # faust does not deliver them either: it seeks back to the committed offsets
        mine = sorted(tp for tp in records if tp.topic in self.topics)
        if not mine:
            return
        accepting = self.accepting()
        read_offset = read_offsets(consumer)
        # what faust delivers: partitions still active, or taken out of the
        # active ones because a reader's stream buffer is full
        buffered = buffered_partitions(consumer)
        holding = self.holding
        for tp in mine:
            exclusive = tp.topic in self.exclusive
            batch = records.pop(tp) if exclusive else records[tp]
            if not batch:
                continue
            live = active is None or tp in active or tp in buffered
            # (a fetch under way when its partition was held is taken all the same)
            if accepting and (live or tp in holding):
                self.receive(tp.topic, tp.partition, batch)
                if exclusive:
                    read_offset[tp] = batch[-1].offset
            else:
                if not exclusive:
                    records.pop(tp)
                if tp in consumer.assignment():  # (not given up meanwhile)
                    self.sought_back += 1
                    await consumer.seek(tp, batch[0].offset)
        if accepting:
            self._hold_full(consumer, mine)
        while self._nothing_to_fetch(consumer) and self.accepting():
            if consumer.should_stop:
                return
            self._room.clear()
            # a revoke drops the inboxes without a batch: look again now and then
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._room.wait(), ROOM_POLL_S)

    def _hold_full(self, consumer: ConsumerT, partitions: Collection[TP]) -> None:
        """Stop fetching each of *partitions* whose task's inbox is full of its
        records (``high_water`` waiting)."""
        from faust.types import TP

        for fetched in sorted(partitions):
            tp = TP(fetched.topic, fetched.partition)  # (aiokafka's in a fetch)
            if tp in self.holding or not self._full(tp):
                continue
            self.holding.add(tp)
            self.holds += 1
            hold_partitions(consumer, [tp])

    def _full(self, tp: TP) -> bool:
        return self.waiting(self._side_of[tp.topic], tp.partition) >= self.high_water

    def _nothing_to_fetch(self, consumer: ConsumerT) -> bool:
        """Is a task held and no partition of the join left in faust's live set
        (every other one held too, or paused for a restore)? The next fetch
        would then ask for nothing of the join, and the fetch loop would go
        round empty (faust's consumer sleeps a second per round, streamjoin's
        looks again every 10 ms): it waits for a batch to make room instead."""
        if not self.holding:
            return False
        return not any(tp.topic in self.topics for tp in active_partitions(consumer))

    def release(self, partitions: Collection[TP]) -> None:
        """Fetch the held ones of *partitions* again."""
        consumer = self.installed_on
        for tp in sorted(partitions):
            if tp in self.holding:
                self.holding.discard(tp)
                if consumer is not None:
                    release_partitions(consumer, [tp])
        self._room.set()

    def _exclusive(self) -> frozenset[str]:
        """The topics no other agent or channel reads: taken out of fetches. A
        topic that another one reads too is copied, and faust delivers it to
        every reader."""
        counts = {t: readers(self.app, t) for t in self.topics}
        return frozenset(t for t, n in counts.items() if n is not None and n <= 1)

    def _warn_shared(self) -> None:
        """Say once per topic that another agent reads a topic of the join: faust
        asks for the next fetch only once it has handed every record of the
        previous one to every reader of it (waiting while a reader's stream
        buffer is full), so the join, whose records come from those fetches,
        runs no faster than faust delivers that topic to its slowest reader,
        and in bursts (all of one fetch at once, then nothing while faust
        delivers it record by record)."""
        for topic in sorted(self.topics - self.exclusive - self._warned):
            self._warned.add(topic)
            others = sorted(
                str(getattr(agent, "name", agent))
                for agent in getattr(self.app, "agents", {}).values()
                if topic in _topic_names(agent)
                and not str(getattr(agent, "name", "")).startswith("streamjoin.join.")
            )
            logger.warning(
                "join input %s is also read by %s: the join gets its records only as "
                "fast as faust delivers that topic record by record to every reader "
                "(the slowest agent's pace, in bursts), its other input included. "
                "For the join's own pace, read the topic in another app (its own "
                "consumer group) or read the join's outputs instead",
                topic,
                ", ".join(others) or "another channel",
            )

    def ack(self, side: str, partition: int, first: int, last: int) -> None:
        """The join applied offsets ``first..last`` of input *side*'s *partition*,
        durably: ack them (:func:`ack_range`), or, for a shared topic, ack the
        held events up to *last*."""
        from faust.types import TP

        tp = TP(self._topic_of[side], partition)
        if tp.topic in self.exclusive:
            ack_range(self.app.consumer, tp, first, last)
            return
        self._applied[tp] = max(self._applied.get(tp, 0), last + 1)
        kept = []
        for offset, event in self._held.get(tp, ()):
            if offset <= last:
                event.ack()
            else:
                kept.append((offset, event))
        self._held[tp] = kept

    def hold(self, tp: TP, offset: int, event: EventT[Any]) -> None:
        """An event of a shared topic reached the join's agent: ack it once the
        join applied its offset (at once if it did already)."""
        if offset < self._applied.get(tp, 0):
            event.ack()
        else:
            self._held.setdefault(tp, []).append((offset, event))

    def reset(self, partitions: set[int] | None = None) -> None:
        """Partitions are revoked (``None``: all): their held events are dropped
        unacknowledged (their next owner reads them again from the committed
        offset)."""
        for tp in sorted(set(self._held) | set(self._applied)):
            if partitions is None or tp.partition in partitions:
                self._held.pop(tp, None)
                self._applied.pop(tp, None)
        self.release(
            [tp for tp in self.holding if partitions is None or tp.partition in partitions]
        )

    def counters(self) -> dict[str, int]:
        """``sought_back`` and ``holds``, for the join's page."""
        return {"sought_back": self.sought_back, "holds": self.holds}

    def drained(self) -> None:
        """A batch took records of the inboxes: fetch again every held partition
        whose task's inbox has room for it now."""
        self.release([tp for tp in self.holding if not self._full(tp)])


def _topic_names(agent: object) -> frozenset[str]:
    """The topic names *agent* reads (none when it reads a plain channel)."""
    names = getattr(agent, "get_topic_names", None)
    return frozenset(names()) if callable(names) else frozenset()
