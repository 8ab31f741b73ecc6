"""What the consumer knows of its group session and of its fetches, read from aiokafka.

Private attributes used (faust-streaming 0.15.3, aiokafka 0.14.0):

* ``faust.App._consumer`` (the app's consumer, once created: the ``consumer``
  property would create one);
* ``faust.transport.drivers.aiokafka.Consumer._thread`` (the consumer thread)
  and ``AIOKafkaConsumerThread._consumer`` (its aiokafka consumer, once created);
* ``AIOKafkaConsumer._coordinator`` (the ``GroupCoordinator``) and its
  ``_send_req(request)``, the one coroutine every group request (JoinGroup,
  SyncGroup, Heartbeat, OffsetCommit, LeaveGroup) goes through, wrapped here
  once per coordinator for the lease (marked ``_streamjoin_lease``: the lease
  it renews), and by :func:`refuse_stale_commits` and :func:`offer_protocols`
  (cooperative members);
* ``JoinGroupRequest._group_protocols`` (the protocols a JoinGroup offers,
  completed by :func:`offer_protocols` before it is sent);
* ``AIOKafkaConsumerThread.thread_loop`` (public on the thread) and the
  coordinator's public ``request_rejoin()``, called in that loop by
  :func:`request_rebalance`;
* public: ``AIOKafkaConsumer.last_poll_timestamp(tp)`` (wall ms of the latest
  fetch response that carried the partition), ``assignment()``, and its
  ``pause``/``resume``, called in the thread's loop by :func:`hold_fetches`;
  streamjoin's mark ``_streamjoin_fetch_holds`` on faust's consumer (why each
  partition is held).

:func:`install_lease` renews a :class:`~streamjoin.membership.lease.SessionLease`
with the send time of every JoinGroup, SyncGroup and Heartbeat the
coordinator answered without error (a heartbeat answered "rebalance in
progress" renews too: the coordinator keeps the member for the rebalance),
and loses it when an answer says the member is unknown or its generation is
not current, or when a JoinGroup or SyncGroup sent after the lease ran out
is answered (the member may have been expired and taken back); a JoinGroup
or SyncGroup sent under a valid lease renews it when sent (see
:mod:`streamjoin.membership.lease`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from streamjoin.membership.lease import SessionLease

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.protocol.api import Request, Response
    from faust.types import TP, AppT, ConsumerT

__all__ = [
    "FAULT",
    "HELD",
    "PAUSED",
    "aiokafka_consumer",
    "app_aiokafka_consumer",
    "call_in_consumer_thread",
    "group_coordinator",
    "hold_fetches",
    "install_lease",
    "last_fetch_ms",
    "offer_protocols",
    "refuse_stale_commits",
    "request_rebalance",
]

logger = logging.getLogger(__name__)

#: request classes whose answer renews the session (aiokafka's class names)
_RENEWING = ("JoinGroupRequest", "SyncGroupRequest", "HeartbeatRequest")
#: requests the coordinator may hold, keeping the member alive meanwhile: they
#: renew the session when sent (see streamjoin.membership.lease)
_HELD = ("JoinGroupRequest", "SyncGroupRequest")
#: error codes: none, rebalance in progress (the member stays in the group)
_RENEWED = (0, 27)
#: error codes saying the member's session or generation is gone: illegal
#: generation, unknown member id, fenced instance id
_GONE = (22, 25, 82)


# aiokafka has no type information: mypy sees its classes as Any; they name what is meant


def aiokafka_consumer(consumer: ConsumerT) -> AIOKafkaConsumer | None:
    """The aiokafka consumer behind faust's *consumer*, ``None`` when there is none yet
    (never created here: that opens connections)."""
    thread = getattr(consumer, "_thread", None)
    found: AIOKafkaConsumer | None = getattr(thread, "_consumer", None)
    return found


async def call_in_consumer_thread(consumer: ConsumerT, fun: Any, *args: Any) -> Any:
    """``await fun(*args)`` in faust's consumer thread (where the aiokafka
    consumer lives), as faust's own calls to it do. Any: aiokafka is untyped."""
    thread = getattr(consumer, "_thread", None)
    if thread is None:
        return await fun(*args)
    return await thread.call_thread(fun, *args)


def app_aiokafka_consumer(app: AppT) -> AIOKafkaConsumer | None:
    """The aiokafka consumer of *app*, ``None`` when the app has not created it yet."""
    consumer: ConsumerT | None = getattr(app, "_consumer", None)
    return None if consumer is None else aiokafka_consumer(consumer)


def _thread_loop(consumer: ConsumerT) -> asyncio.AbstractEventLoop | None:
    """The event loop of *consumer*'s thread, where aiokafka's objects live."""
    loop: asyncio.AbstractEventLoop | None = getattr(
        getattr(consumer, "_thread", None), "thread_loop", None
    )
    return loop


def group_coordinator(aio: AIOKafkaConsumer) -> Any:  # Any: aiokafka's GroupCoordinator
    """*aio*'s group coordinator, ``None`` before it started (or without a group)."""
    return getattr(aio, "_coordinator", None)


def install_lease(aio: AIOKafkaConsumer, lease: SessionLease) -> bool:
    """Make *aio*'s group coordinator keep *lease*; returns whether it was wrapped now."""
    coordinator = group_coordinator(aio)
    if coordinator is None or getattr(coordinator, "_streamjoin_lease", None) is lease:
        return False
    original = coordinator._send_req

    async def _send_req(request: Request) -> Response:
        sent = time.monotonic()
        name = type(request).__name__
        if name.startswith(_HELD):
            # the coordinator may hold it for seconds, keeping the member alive
            lease.renew_on_send(sent)
        response = await original(request)
        if name.startswith(_RENEWING):
            code = getattr(response, "error_code", None)
            if code in _RENEWED and name.startswith(_HELD):
                if lease.rejoined(sent):  # after a lapse: a loss, then renewed
                    logger.warning(
                        "group session: %s answered after the session lease ran out; "
                        "this worker takes every task it owns over anew at this rebalance",
                        name,
                    )
            elif code in _RENEWED:
                lease.renew(sent)
            elif code in _GONE:
                lease.lose()
                logger.warning(
                    "group session: the coordinator answered %s with error %s; "
                    "this worker writes nothing for its tasks until it has rejoined",
                    name,
                    code,
                )
        return response

    coordinator._send_req = _send_req
    coordinator._streamjoin_lease = lease
    return True


#: Kafka error codes of a commit refused for its generation: illegal
#: generation, rebalance in progress
_REFUSED_FOR_GENERATION = frozenset({22, 27})


def refuse_stale_commits(coordinator: Any, rebalancing: Callable[[], bool]) -> None:
    """Make a commit of *coordinator* that the broker refused for its generation
    fail alone when the member is *rebalancing* (cooperatively, its partitions
    kept) or its generation moved on since the commit was sent.

    aiokafka resets the generation for such an answer: the member would give
    every partition up as lost (kept tasks stopped and read again, the next
    rebalance eager), for a commit that only queued behind a rebalance. Kafka's
    own consumer resets only when its generation is unchanged. The commit is
    refused as a rebalance in progress instead: aiokafka raises
    ``CommitFailedError`` ("already rebalanced"), faust's commit returns
    ``False``, and the next commit covers the same offsets.
    """
    send_req = coordinator._send_req

    async def _send_req(request: Request) -> Response:
        generation = coordinator.generation
        response = await send_req(request)
        if not type(request).__name__.startswith("OffsetCommitRequest"):
            return response
        codes = {code for _, parts in response.topics for _, code in parts}
        if codes & _REFUSED_FOR_GENERATION and (
            rebalancing() or coordinator.generation != generation
        ):
            from aiokafka.errors import RebalanceInProgressError

            raise RebalanceInProgressError(
                f"offset commit of generation {generation} answered after the group moved on"
            )
        return response

    coordinator._send_req = _send_req


def offer_protocols(coordinator: Any, more: Callable[[], Iterable[str]]) -> None:
    """Make every JoinGroup of *coordinator* that offers one protocol offer the
    protocols named by *more* after it, with the same metadata.

    aiokafka 0.14 sends one JoinGroup per assignor, each with the protocols of
    the assignors so far (aio-libs/aiokafka#1168): a member offering two sent
    two JoinGroups per rebalance, the first with the cooperative protocol only.
    The embedded broker held each for half the session (a rebalance took
    twice as long as an eager one); Kafka would take the second, whose
    protocols differ from the first, for a change of the member's metadata
    and start another rebalance. The coordinator lists only the first
    assignor, so it sends one JoinGroup, and it is completed here.
    """
    send_req = coordinator._send_req

    async def _send_req(request: Request) -> Response:
        if type(request).__name__.startswith("JoinGroupRequest"):
            offered = list(request._group_protocols)
            if len(offered) == 1:
                name, metadata = offered[0]
                offered += [(other, metadata) for other in more() if other != name]
                request._group_protocols = offered
        return await send_req(request)

    coordinator._send_req = _send_req


def last_fetch_ms(consumer: ConsumerT, topic: str, partition: int) -> float | None:
    """Monotonic ms of the latest fetch response carrying ``topic[partition]``
    (``None``: none since it was assigned)."""
    from aiokafka.structs import TopicPartition

    aio = aiokafka_consumer(consumer)
    if aio is None:
        return None
    try:
        stamp = aio.last_poll_timestamp(TopicPartition(topic, partition))
    except Exception:  # not assigned (any more)
        return None
    if stamp is None:
        return None
    # aiokafka stamps wall time; idleness counts in monotonic time
    return time.monotonic() * 1000 - (time.time() * 1000 - float(stamp))


#: why the fetcher itself holds a partition (:func:`hold_fetches`): faust paused
#: it (a table restoring, a changelog it never delivers), a join's task has a
#: full inbox (:func:`~streamjoin.faust.kafka.incremental.hold_partitions`), or
#: a test's fault
PAUSED, HELD, FAULT = "paused", "held", "fault"


def hold_fetches(consumer: ConsumerT, tps: Iterable[TP], held: bool, reason: str = FAULT) -> bool:
    """Stop (*held*) or restart every fetch of *tps* by the fetcher itself, for
    *reason*; a partition is fetched again once no reason holds it.

    faust's own ``pause_partitions`` only stops delivering a partition: its
    fetcher keeps fetching it, and with one broker that costs every other
    partition (see :mod:`~streamjoin.faust.kafka.transport`), so the worker's
    consumer holds those here too (:data:`PAUSED`). As a fault for tests
    (:data:`FAULT`): the partitions' high watermarks and fetch times stay as
    they were while the broker's logs move on (a starved fetcher).
    Partitions not assigned (any more) when the consumer's thread gets to
    them are left alone. Returns whether the consumer was running to take it.
    """
    from aiokafka.structs import TopicPartition

    aio = aiokafka_consumer(consumer)
    loop = _thread_loop(consumer)
    if aio is None or loop is None:
        return False
    holds: dict[TP, set[str]] | None = getattr(consumer, "_streamjoin_fetch_holds", None)
    if holds is None:
        holds = {}
        consumer._streamjoin_fetch_holds = holds  # type: ignore[attr-defined]
    pause: list[TopicPartition] = []
    resume: list[TopicPartition] = []
    for tp in sorted(tps):
        reasons = holds.setdefault(tp, set())
        part = TopicPartition(tp.topic, tp.partition)
        if held:
            reasons.add(reason)
            pause.append(part)
        else:
            reasons.discard(reason)
            if not reasons:
                del holds[tp]
                resume.append(part)

    def apply() -> None:  # in the consumer's thread, where aiokafka's objects live
        assigned = aio.assignment()
        paused = [tp for tp in pause if tp in assigned]
        resumed = [tp for tp in resume if tp in assigned]
        if paused:
            aio.pause(*paused)
        if resumed:
            aio.resume(*resumed)

    if pause or resume:
        loop.call_soon_threadsafe(apply)
    return True


def request_rebalance(app: AppT) -> bool:
    """Make this worker's Kafka consumer rejoin its group (from any thread)."""
    aio = aiokafka_consumer(app.consumer)
    coordinator = None if aio is None else group_coordinator(aio)
    loop = _thread_loop(app.consumer)
    if coordinator is None or loop is None:
        logger.warning("streamjoin: cannot request a rebalance: the consumer is not running")
        return False
    loop.call_soon_threadsafe(coordinator.request_rejoin)
    return True
