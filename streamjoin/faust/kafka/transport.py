"""faust's aiokafka transport, with the member's rack and cooperative rebalancing.

:class:`RackAwareTransport` is faust's ``kafka://`` transport, except that its
worker consumer fetches as the member's rack: the rack streamjoin's assignor
advertises (``--rack``, ``STREAMJOIN_RACK``) becomes the aiokafka consumer's
``client_rack``, which every FetchRequest carries (KIP-392), so brokers with a
rack-aware ``replica.selector.class`` serve the worker's fetches from a replica
on its rack. A member without a rack passes nothing: aiokafka's default.

:class:`CooperativeTransport` is that transport whose worker consumer also
rebalances cooperatively:

* its group coordinator
  (:func:`~streamjoin.faust.kafka.cooperative.install_cooperative`) is
  installed right after the aiokafka consumer started and before it
  subscribes, so that its very first JoinGroup already offers the
  cooperative protocol;
* in a cooperative rebalance its ``on_partitions_revoked`` and
  ``on_partitions_assigned`` take faust's steps only for what was given up
  and what was added (:mod:`~streamjoin.faust.kafka.incremental`); in an
  eager one (the group has an eager member, or this member lost its
  membership) they are faust's own.

A partition faust pauses
------------------------

faust pauses a partition (``pause_partitions``) by no longer delivering it:
the partitions of a task whose tables are being restored, and every
changelog partition assigned to the worker (streamjoin restores and tails
changelogs with a consumer of its own). Its aiokafka fetcher keeps fetching
them all the same, and the first response of each, never consumed, stays in
the fetcher: it fills fetch responses (a changelog is fetched from offset 0,
a taken-over input from far behind) and holds back every fetch to that
broker for aiokafka's prefetch back-off (0.1 s). With one broker a kept
task's next records then came 0.3-0.6 s late after a takeover (the join
benchmark's kill -9, docs/benchmarks.rst). Both transports' consumers
therefore pause in the fetcher too what faust pauses, and resume it when
faust does (:func:`~streamjoin.faust.kafka.session.hold_fetches`).

``streamjoin.App`` uses the cooperative one unless cooperative rebalancing is
turned off, then the rack-aware one; a plain faust app opts in with the broker
URL scheme ``streamjoin-kafka://`` (an entry point of ``faust.transports``).

Subclassed (faust-streaming 0.15.3): ``faust.transport.drivers.aiokafka``'s
``Transport`` (its ``Consumer`` class attribute), ``Consumer``
(``_new_consumer_thread``, faust's factory of its consumer thread;
``_wait_next_records``, its fetch step, which sleeps a second when no
partition is live; ``pause_partitions`` and ``resume_partitions``;
``getmany``; ``on_partitions_revoked`` and ``on_partitions_assigned``) and
``AIOKafkaConsumerThread`` (``_create_worker_consumer``, which builds the
aiokafka consumer with options of its own choosing: the rack is set on the
built consumer's ``_client_rack`` (aiokafka 0.14.0), which ``start()`` hands to
its fetcher; and ``on_start``) and ``ConsumerRebalanceListener``
(``on_partitions_assigned``, through the consumer's ``RebalanceListener``
class attribute: in a cooperative rebalance the app's generation is set by
the consumer on the event loop, not by the listener in the consumer thread);
the consumer it creates is read through
:func:`~streamjoin.faust.kafka.session.aiokafka_consumer`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from faust.transport.drivers import aiokafka as driver
from faust.types import TP

from streamjoin.faust.kafka import incremental
from streamjoin.faust.kafka.consumer import active_partitions
from streamjoin.faust.kafka.cooperative import Cooperation, install_cooperative
from streamjoin.faust.kafka.session import (
    PAUSED,
    aiokafka_consumer,
    group_coordinator,
    hold_fetches,
)
from streamjoin.membership.settings import MemberSettings

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer
    from faust.types import AppT

__all__ = ["CooperativeTransport", "RackAwareTransport", "member_rack"]

logger = logging.getLogger(__name__)

#: how often a fetch with no live partition looks again (faust waits a second)
LIVE_LOOK_S = 0.01


def _member_settings(app: AppT) -> MemberSettings | None:
    """The member settings of *app*'s assignor (``None``: not streamjoin's assignor)."""
    settings = getattr(app.assignor, "settings", None)
    return settings if isinstance(settings, MemberSettings) else None


def member_rack(app: AppT) -> str | None:
    """The rack *app*'s assignor advertises for this member (``None``: none, or
    not streamjoin's assignor)."""
    settings = _member_settings(app)
    return None if settings is None else settings.rack


class _RackConsumerThread(driver.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: driver.Transport) -> AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        rack = member_rack(self.app)
        if rack:
            consumer._client_rack = rack
            logger.info(
                "client rack %r: brokers whose replica.selector.class is rack-aware "
                "serve this worker's fetches from a replica on that rack",
                rack,
            )
        return consumer


class _RackConsumer(driver.Consumer):
    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        return _RackConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def pause_partitions(self, tps: Iterable[TP]) -> None:
        """faust's, and the fetcher stops fetching them too (see the module's
        *A partition faust pauses*)."""
        tpset = set(tps)
        super().pause_partitions(tpset)
        hold_fetches(self, tpset, True, PAUSED)

    def resume_partitions(self, tps: Iterable[TP]) -> None:
        """faust's, and the fetcher fetches them again."""
        tpset = set(tps)
        super().resume_partitions(tpset)
        hold_fetches(self, tpset, False, PAUSED)

    async def _wait_next_records(self, timeout: float) -> Any:  # Any: faust's (records, active)
        """faust's, except when no partition is live (none assigned yet, or all
        paused while their tables are restored): faust then sleeps a whole
        second before it fetches again, so a worker whose restore ends just
        after that starts almost a second late. Here the fetch looks again every
        :data:`LIVE_LOOK_S` within that second and starts as soon as one is."""
        if self.flow_active and not self.app.client_only and not active_partitions(self):
            deadline = time.monotonic() + 1.0
            while not active_partitions(self) and self.flow_active and not self.should_stop:
                if time.monotonic() >= deadline:
                    return {}, set()  # what faust's own wait returns
                await asyncio.sleep(LIVE_LOOK_S)
        return await super()._wait_next_records(timeout)


class RackAwareTransport(driver.Transport):
    """faust's aiokafka transport whose worker consumer fetches as the member's rack."""

    Consumer: ClassVar[Any] = _RackConsumer  # Any: faust's ConsumerT class


class _CooperativeConsumerThread(_RackConsumerThread):
    async def on_start(self) -> None:
        await super().on_start()
        aio = aiokafka_consumer(self.consumer)
        settings = _member_settings(self.app)
        pace_ms = None if settings is None else settings.rejoin_pace_ms
        pace = None if pace_ms is None else pace_ms / 1000
        installed = None if aio is None or self.app.client_only else install_cooperative(aio, pace)
        if installed is not None:
            self.consumer.cooperation = installed  # type: ignore[attr-defined]
            logger.info(
                "cooperative rebalancing: on (protocol offered first; rejoins paced %s)",
                "after a missed generation"
                if pace is None
                else f"{pace:g} s after each assignment",
            )


class _CooperativeListener(driver.ConsumerRebalanceListener):
    """faust's rebalance listener, except that in a cooperative rebalance it
    leaves the app's generation to the consumer on the event loop.

    faust's listener sets ``app.consumer_generation_id`` in the consumer
    thread before the event loop hears of the assignment. faust's streams
    skip, and acknowledge, a record stamped with another generation than the
    app's: in between, an agent taking a queued record of a kept partition
    skipped it, and the next commit went past it (one record lost now and
    then at the first cooperative rebalance). The consumer sets the
    generation in the same event-loop step in which it restamps the queued
    records (:meth:`_CooperativeConsumer.on_partitions_assigned`)."""

    def __init__(self, thread: driver.AIOKafkaConsumerThread) -> None:
        super().__init__(thread)
        self.consumer_thread = thread

    async def on_partitions_assigned(self, assigned: Any) -> None:  # Any: aiokafka's TPs
        thread = self.consumer_thread
        cooperation = getattr(thread.consumer, "cooperation", None)
        aio = aiokafka_consumer(thread.consumer)
        coordinator = None if aio is None else group_coordinator(aio)
        if cooperation is None or not cooperation.incremental or coordinator is None:
            await super().on_partitions_assigned(assigned)
            return
        tps = {TP(tp.topic, tp.partition) for tp in assigned}
        await thread.on_partitions_assigned(tps, coordinator.generation)


class _CooperativeConsumer(_RackConsumer):
    #: how this consumer's rebalances went (``None`` until its thread started)
    cooperation: Cooperation | None = None
    #: the current fetch's first and last offset per partition (faust delivers from it)
    _fetched: dict[TP, tuple[int, int]] | None = None
    #: the record faust's fetch loop is delivering (it may reach a stream's
    #: queue only after a rebalance completed: stamped anew then)
    _delivering: Any = None

    RebalanceListener: ClassVar[Any] = _CooperativeListener  # Any: faust's listener class

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: which generations a fetched record stays valid in
        self.generations = incremental.Generations()
        deliver = self.callback
        restamp = self.generations.restamp

        async def callback(message: Any) -> Any:  # Any: faust's Message, the callback's result
            restamp(message)  # a record of a partition kept through a rebalance stays valid
            return await deliver(message)

        self.callback = callback

    async def _wait_next_records(self, timeout: float) -> Any:  # Any: faust's (records, active)
        records, active = await super()._wait_next_records(timeout)
        batches = (records or {}).items()
        self._fetched = {tp: (b[0].offset, b[-1].offset) for tp, b in batches if b}
        return records, active

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Any]]:
        """faust's ``getmany``, then: a partition whose fetched records faust did
        not all deliver (it stops a fetch's delivery when the generation changed
        or the flow stopped) is sought back to the first one it did not, if it
        is still assigned. faust's eager rebalance seeks every partition back to
        its committed offset anyway; after a cooperative one the kept
        partitions keep their positions, and would otherwise skip those."""
        delivered: dict[TP, int] = {}
        self._fetched = None
        async for tp, message in super().getmany(timeout):
            delivered[tp] = message.offset
            self._delivering = message
            yield tp, message
        self._delivering = None
        fetched: dict[TP, tuple[int, int]] = self._fetched or {}
        self._fetched = None
        if self.should_stop:
            return
        assigned = self.assignment()
        for tp, (first, last) in sorted(fetched.items()):
            done = delivered.get(tp)
            if (done is None or done < last) and tp in assigned:
                resume = first if done is None else done + 1
                logger.info(
                    "%s: %d fetched record(s) not delivered (a rebalance completed); "
                    "reading them again from offset %d",
                    tp,
                    last - resume + 1,
                    resume,
                )
                await self.seek(tp, resume)

    async def commit(self, topics: Any = None, start_new_transaction: bool = True) -> bool:
        """faust's commit, except while the group rebalances with this member's
        partitions kept running: the broker refuses (Kafka) or holds (the
        embedded broker) a commit then, and faust's fetch loop commits inline,
        so it would stop every task; the next commit after the rebalance
        covers the same offsets."""
        cooperation = self.cooperation
        if cooperation is not None and cooperation.kept:
            return False
        return await super().commit(topics, start_new_transaction=start_new_transaction)

    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        return _CooperativeConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def _incremental(self) -> bool:
        """Is the rebalance under way cooperative (:func:`~.incremental.rebalance_kind`)?"""
        return incremental.incremental(self.app)

    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        if self._incremental():
            await incremental.revoke(self, revoked)
            return
        await super().on_partitions_revoked(revoked)

    async def on_partitions_assigned(self, assigned: set[TP], generation_id: int = 0) -> None:
        cooperation = self.cooperation
        if cooperation is not None and self._incremental():
            # the coordinator noted what this rebalance gave up before assigning
            self.generations.carried(generation_id, set(cooperation.revoked))
            if self._delivering is not None:
                self.generations.restamp(self._delivering)
            incremental.restamp_queued(self.app, self.generations)
            # no await since the restamps: no agent sees a record of a kept
            # partition stamped with the old generation under the new one
            self.app.consumer_generation_id = generation_id
            await incremental.assign(self, assigned, generation_id)
            return
        # faust's listener set it already, unless it took the rebalance for a
        # cooperative one that the stopping app takes eagerly (_incremental)
        self.app.consumer_generation_id = generation_id
        self.generations.eager(generation_id)
        await super().on_partitions_assigned(assigned, generation_id)


class CooperativeTransport(RackAwareTransport):
    """faust's aiokafka transport whose worker consumer fetches as the member's
    rack and rebalances cooperatively."""

    Consumer: ClassVar[Any] = _CooperativeConsumer  # Any: faust's ConsumerT class
