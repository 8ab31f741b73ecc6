"""faust's side of a cooperative rebalance: only what moves stops.

faust's ``App._on_partitions_revoked`` stops every agent's flow, clears every
stream buffer and pauses every partition, and its ``_on_partitions_assigned``
pauses every assigned partition until the tables are recovered, which then
seeks every partition back to its committed offset. That is right for an
eager rebalance (everything was revoked). In a cooperative one
(:mod:`streamjoin.faust.kafka.cooperative`) the partitions not given up kept
running, so the worker's consumer (:mod:`streamjoin.faust.kafka.transport`)
calls these instead:

* :func:`revoke`: with nothing given up, it only tells the tables (the
  restorer stops its session) and sends faust's ``on_partitions_revoked``
  signal. Otherwise it pauses the partitions given up, drops their records
  still queued for an agent (unacknowledged: their next owner reads them
  again), waits (bounded) until the agents acked or dropped those in flight,
  flushes the producer and commits what was acknowledged of them; only then
  does faust's consumer forget them. The flow of every other partition goes
  on: nothing is stopped, cleared or rewound.
* :func:`assign`: faust's own steps of ``_on_partitions_assigned`` (agents,
  topics, tables, the signal), but only the partitions newly assigned are
  paused (until their tables are restored); the ones kept stay active.

:func:`hold_partitions` and :func:`release_partitions` take partitions out
of faust's live set (what it fetches and delivers) between rebalances and
put them back, never a paused one: a join's task with a full inbox
(:mod:`streamjoin.faust.join.intake`); the set is changed here only.

:func:`rebalance_kind` says how the member takes the rebalance under way
(the one answer to "is this rebalance incremental?", for the consumer, the
tables and the restorer alike): ``COOPERATIVE`` while such a rebalance's
listener calls are made (the restorer then restores only what was added and
seeks only the partitions added, :func:`seek_to_committed`, and a join parks
only the tasks given up), ``LOST`` after the member lost its membership,
``EAGER`` otherwise. :func:`incremental` is ``COOPERATIVE`` as a yes or no.

Private attributes used (faust-streaming 0.15.3), owned here:
``Consumer._active_partitions``, ``_paused_partitions``, ``_gap``,
``_unacked_messages`` and ``_set_active_tps``; ``App._update_assignment`` and
``_producer_flush``; ``FlowControlEvent._queues`` and each queue's ``_queue``
(the deque of events, which faust's own ``clear`` empties). The offsets
faust notes per partition are changed through
:mod:`~streamjoin.faust.kafka.consumer` and the consumer thread reached
through :mod:`~streamjoin.faust.kafka.session`; the consumer's
``cooperation`` is the :class:`~.cooperative.Cooperation` the transport
installed. aiokafka 0.14: ``AIOKafkaConsumer.seek_to_committed`` with
partitions (public).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, cast

from streamjoin.faust.kafka.consumer import forget_offsets, note_committed
from streamjoin.faust.kafka.session import (
    HELD,
    aiokafka_consumer,
    call_in_consumer_thread,
    hold_fetches,
)
from streamjoin.lifecycle.rebalance import RebalanceKind

if TYPE_CHECKING:
    from faust.transport.consumer import Consumer
    from faust.types import TP, AppT, ConsumerT

__all__ = [
    "Generations",
    "assign",
    "drop_queued",
    "hold_partitions",
    "incremental",
    "rebalance_kind",
    "release_partitions",
    "restamp_queued",
    "revoke",
    "seek_to_committed",
]

logger = logging.getLogger(__name__)

#: share of the session timeout a revoke waits for in-flight records of what it gives up
IN_FLIGHT_SHARE = 0.25
#: seconds between looks at the in-flight records
IN_FLIGHT_POLL_S = 0.02


class Generations:
    """Which rebalance generations a fetched record stays valid in.

    faust stamps every record it fetches with the generation of the
    assignment it was fetched in, and its streams skip a record of an older
    generation (after an eager rebalance every partition is read again from
    its committed offset, so the record comes again). A partition kept
    through a cooperative rebalance is not read again: its records of the
    generation before stay valid in the new one, unless it was given up on
    the way. :meth:`restamp` moves a record's stamp forward along such
    rebalances.
    """

    #: generations remembered (older ones are forgotten)
    KEEP = 64

    def __init__(self) -> None:
        self.current: int | None = None
        self._next: dict[int, int] = {}
        self._revoked: dict[int, frozenset[Any]] = {}

    def eager(self, generation: int) -> None:
        """An eager rebalance reached *generation*: older records are stale."""
        self.current = generation

    def carried(self, generation: int, revoked: set[Any]) -> None:
        """A cooperative rebalance reached *generation*, giving up *revoked*."""
        if self.current is not None and self.current != generation:
            self._next[self.current] = generation
            self._revoked[generation] = frozenset(revoked)
        self.current = generation
        for old in sorted(self._next)[: max(0, len(self._next) - self.KEEP)]:
            self._revoked.pop(self._next.pop(old), None)

    def restamp(self, message: Any) -> None:  # Any: a faust Message
        """Stamp *message* with the latest generation it is valid in."""
        generation = message.generation_id
        while generation != self.current and generation in self._next:
            following = self._next[generation]
            if message.tp in self._revoked.get(following, frozenset()):
                break
            generation = following
        message.generation_id = generation


def rebalance_kind(app_or_consumer: AppT | ConsumerT) -> RebalanceKind:
    """How the member takes the rebalance under way, read from the
    :class:`~.cooperative.Cooperation` of the app's (or this) consumer:

    * ``COOPERATIVE``: its coordinator completes a cooperative rebalance (the
      listener's revoke and assign calls are being made; the partitions not
      given up kept running), unless the app is stopping: a stopping app
      gives everything up, as faust does;
    * ``LOST``: the coordinator reset the member's generation (its session
      expired, or it was fenced) and no join has completed since: everything
      it owned is given up, as in an eager rebalance (another member may run
      it already);
    * ``EAGER``: anything else (an eager group, faust's own transport, a
      consumer not started).

    A loss while a cooperative rebalance's calls are made does not change
    them: ``COOPERATIVE`` until they are done, then ``LOST``.
    """
    from faust.types import ConsumerT as FaustConsumer

    if isinstance(app_or_consumer, FaustConsumer):
        consumer, app = app_or_consumer, cast("Consumer", app_or_consumer).app
    else:
        consumer, app = app_or_consumer.consumer, app_or_consumer
    cooperation = getattr(consumer, "cooperation", None)
    if cooperation is None:
        return RebalanceKind.EAGER
    if cooperation.incremental and not app.should_stop:
        return RebalanceKind.COOPERATIVE
    if cooperation.membership_lost:
        return RebalanceKind.LOST
    return RebalanceKind.EAGER


def incremental(app: AppT) -> bool:
    """Is a cooperative rebalance under way in which the partitions not given
    up kept running (:func:`rebalance_kind` is ``COOPERATIVE``)?"""
    return rebalance_kind(app) is RebalanceKind.COOPERATIVE


async def revoke(consumer: ConsumerT, revoked: set[TP]) -> None:
    """faust's consumer and app side of giving up *revoked* (possibly none) while
    every other partition keeps running (see the module docstring)."""
    faust_consumer = cast("Consumer", consumer)
    app = faust_consumer.app
    try:
        app.tables.on_partitions_revoked(revoked)
        if revoked:
            consumer.pause_partitions(revoked)
            dropped = drop_queued(app, revoked)
            waited = await _wait_in_flight(faust_consumer, revoked, app)
            logger.info(
                "cooperative revoke of %d partition(s): %d queued record(s) dropped, "
                "in-flight ones done after %.3f s",
                len(revoked),
                dropped,
                waited,
            )
        # a join waits here for its batch in flight (its records are acked once durable)
        await app.on_partitions_revoked.send(revoked)
        if revoked:
            await app._producer_flush(logger)  # type: ignore[attr-defined]
            await consumer.commit(revoked)
    except Exception as exc:
        logger.exception("cooperative revoke failed")
        await app.crash(exc)
    finally:
        _forget(faust_consumer, revoked)


def _forget(consumer: Consumer, revoked: set[TP]) -> None:
    """faust's consumer bookkeeping of partitions no longer assigned (what its
    ``on_partitions_revoked`` does before it calls the app)."""
    if consumer._active_partitions is not None:
        consumer._active_partitions.difference_update(revoked)
    consumer._paused_partitions.difference_update(revoked)
    for tp in revoked:
        consumer._gap.pop(tp, None)
    forget_offsets(consumer, revoked)


def _stream_buffers(app: AppT) -> list[deque[Any]]:
    """The events waiting in every stream buffer (faust's flow control knows
    them all), one deque per buffer. Any: faust's events."""
    buffers = (getattr(queue, "_queue", None) for queue in list(app.flow_control._queues))
    return [events for events in buffers if isinstance(events, deque)]


def drop_queued(app: AppT, revoked: set[TP]) -> int:
    """Take the events of *revoked* out of every stream buffer; returns how
    many were dropped."""
    dropped = 0
    for events in _stream_buffers(app):
        if not events:
            continue
        keep = [e for e in events if _tp_of(e) not in revoked]
        dropped += len(events) - len(keep)
        if len(keep) != len(events):
            events.clear()
            events.extend(keep)
    return dropped


def _tp_of(event: Any) -> Any:  # Any: an event (or anything else a queue holds)
    message = getattr(event, "message", None)
    return getattr(message, "tp", None)


async def _wait_in_flight(consumer: Consumer, revoked: set[TP], app: AppT) -> float:
    """Wait until no record of *revoked* is delivered and unacknowledged (an
    agent is processing it), at most a share of the session timeout."""
    started = time.monotonic()
    bound = IN_FLIGHT_SHARE * float(app.conf.broker_session_timeout)
    while True:
        busy = [m for m in list(consumer._unacked_messages) if m.tp in revoked and not m.acked]
        if not busy:
            break
        if time.monotonic() - started > bound:
            logger.warning(
                "cooperative revoke: %d record(s) of the partitions given up still "
                "in flight after %.1f s; giving them up unacknowledged",
                len(busy),
                bound,
            )
            break
        await asyncio.sleep(IN_FLIGHT_POLL_S)
    return time.monotonic() - started


def restamp_queued(app: AppT, generations: Generations) -> None:
    """Stamp the records queued for an agent with the latest generation they
    are valid in (:meth:`Generations.restamp`)."""
    for events in _stream_buffers(app):
        for event in list(events):
            message = getattr(event, "message", None)
            if message is not None:
                generations.restamp(message)


async def assign(consumer: ConsumerT, assigned: set[TP], generation_id: int) -> None:
    """faust's consumer and app side of the new assignment *assigned*: what it
    adds waits for its tables; what it kept is not touched (the consumer
    restamped its records queued for an agent first: :func:`restamp_queued`)."""
    faust_consumer = cast("Consumer", consumer)
    app = faust_consumer.app
    # the app's note of its previous assignment says what is new
    revoked, newly_assigned = app._update_assignment(assigned)  # type: ignore[attr-defined]
    # faust's consumer bookkeeping, the added partitions paused from the start
    faust_consumer._paused_partitions.intersection_update(assigned)
    faust_consumer._paused_partitions.update(newly_assigned)
    faust_consumer._set_active_tps(assigned)
    app.unassigned = not assigned
    try:
        await app.agents.on_rebalance(revoked, newly_assigned)
        await app.topics.maybe_wait_for_subscriptions()
        consumer.pause_partitions(newly_assigned)
        await app.topics.on_partitions_assigned(assigned)
        await app.tables.on_rebalance(assigned, revoked, newly_assigned, generation_id)
        await app.on_partitions_assigned.send(assigned)
    except Exception as exc:
        logger.exception("cooperative assignment failed")
        await app.crash(exc)
    app.on_rebalance_return()


async def seek_to_committed(consumer: ConsumerT, tps: set[TP]) -> None:
    """Seek *tps* (assigned) to their committed offsets, as faust's
    ``perform_seek`` does for every partition, and note the offsets in faust's
    bookkeeping; the other partitions keep their positions."""
    if not tps:
        return
    from aiokafka.structs import TopicPartition

    aio = aiokafka_consumer(consumer)
    if aio is None:
        await consumer.perform_seek()
        return
    wanted = [TopicPartition(tp.topic, tp.partition) for tp in sorted(tps)]
    committed = await call_in_consumer_thread(consumer, aio.seek_to_committed, *wanted)
    from faust.types import TP as FaustTP

    note_committed(
        consumer, {FaustTP(tp.topic, tp.partition): offset for tp, offset in committed.items()}
    )


def hold_partitions(consumer: ConsumerT, tps: Collection[TP]) -> None:
    """Stop fetching *tps* for now, as faust does for a partition whose reader's
    buffer is full: they leave the live set the next fetches ask for, and the
    fetcher stops fetching them too (:data:`~.session.HELD`; the one response
    of each it may have is kept for when they come back)."""
    active = cast("Consumer", consumer)._active_partitions
    if active is not None:  # (None: not fetched yet, nothing to hold)
        active.difference_update(tps)
        hold_fetches(consumer, tps, True, HELD)


def release_partitions(consumer: ConsumerT, tps: Collection[TP]) -> None:
    """Fetch *tps* again after :func:`hold_partitions`: those still assigned and
    not paused (a restore under way) go back into the live set."""
    faust_consumer = cast("Consumer", consumer)
    active = faust_consumer._active_partitions
    if active is None:  # faust builds it from the assignment, less the paused
        return
    paused = faust_consumer._paused_partitions
    assigned = consumer.assignment()
    active.update(tp for tp in tps if tp in assigned and tp not in paused)
    hold_fetches(consumer, tps, False, HELD)
