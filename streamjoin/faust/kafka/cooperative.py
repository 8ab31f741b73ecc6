"""Cooperative rebalancing on aiokafka's classic group protocol (KIP-429's way).

aiokafka 0.14 rebalances eagerly: at every rebalance its ``GroupCoordinator``
revokes every partition before it rejoins (``_on_join_prepare``, which also
holds back every fetched record until the new assignment is in), and
replaces the whole assignment, positions included, when the rebalance
completes (``_on_join_complete``). :func:`install_cooperative` changes both
steps of one consumer's coordinator:

* **prepare**: a member that rebalanced cooperatively last time (every member
  of the group offered :data:`PROTOCOL`, the broker chose it) and has not lost
  its membership since revokes nothing and keeps fetching; its assignor is
  told (``on_rebalance_prepare(True)``) so that its metadata says the member
  still owns its partitions (see :mod:`streamjoin.assignment.cooperative`);
* **complete**: only the partitions the new assignment drops are revoked
  (the listener's ``on_partitions_revoked`` with just those, possibly none:
  it is called at every rebalance, as in an eager one), the kept
  partitions keep their fetch state (position, high watermark, pause), the
  listener's ``on_partitions_assigned`` gets the whole new assignment, and a
  member that gave up an owned (active) partition rejoins: the follow-up
  rebalance hands them to their new owner (the leader withholds them until
  then; replicas are never withheld, so giving up only a standby needs no
  follow-up);
* **pace**: a rejoin asked for less than :data:`REJOIN_PACE_S` after the
  member got its assignment (the follow-up, a warm-up that caught up, a
  subscription change) waits until then, so that the other members of the
  generation get their own assignment first. Kafka answers every member's
  SyncGroup once the leader's arrives; the embedded broker answers a
  follower's up to about a second later, and a JoinGroup meanwhile made
  that SyncGroup fail: the generation then completed without that member,
  whose rejoin started the next one, and so on (a scale-out of the
  rebalance benchmark once took 12 rebalances). A member that lost its
  membership rejoins at once;
* **lost**: after the coordinator reset the member's generation (its session
  expired, or it was fenced) everything it owned is revoked before it
  rejoins, as in an eager rebalance; the next rebalance after that is eager.

The member offers two protocols, :data:`PROTOCOL` first and then its
assignor's own name (streamjoin's ``"streamjoin"``) with the same metadata: a
group with a member that offers only the latter (an older streamjoin worker)
agrees on it and rebalances eagerly, and once every member
offers :data:`PROTOCOL` the group turns cooperative without a stop (the
rolling upgrade). Both protocols run the same assignor.

Private attributes used (aiokafka 0.14.0), on the coordinator that
:func:`~streamjoin.faust.kafka.session.group_coordinator` finds:

* ``GroupCoordinator._assignors`` (the protocols offered in JoinGroup: the
  wrapper alone, the others are added to the request by
  :func:`~streamjoin.faust.kafka.session.offer_protocols`),
  ``_lookup_assignor`` (replaced on the instance: it finds every protocol
  offered), ``_subscription`` (the ``SubscriptionState``),
  ``_group_subscription``, ``_on_join_prepare`` and ``_on_join_complete``
  (replaced on the instance),
  ``_stop_commit_offsets_refresh_task``, and streamjoin's mark
  ``_streamjoin_cooperation`` (the :class:`Cooperation` installed);
* ``Assignment._tp_state`` and ``TopicPartitionState._assignment`` (a kept
  partition's fetch state moves into the new assignment);
* through :func:`~streamjoin.faust.kafka.session.refuse_stale_commits`:
  ``_send_req`` (a commit answered "illegal generation" or "rebalance in
  progress" while the member rebalances cooperatively, or after its
  generation moved on, fails without resetting the generation);
* public: ``Assignment.state_value(tp).pause()`` (a partition given up
  hands out no record while the listener gives it up),
  ``GroupCoordinator.reset_generation()`` (wrapped: it marks the
  membership lost), ``request_rejoin()`` (wrapped: paced),
  ``start_commit_offsets_refresh_task``,
  ``SubscriptionState.assign_from_subscribed``, ``subscription``,
  ``listener``, ``assigned_partitions()``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streamjoin.faust.kafka.session import (
    group_coordinator,
    offer_protocols,
    refuse_stale_commits,
)

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

__all__ = ["PROTOCOL", "REJOIN_PACE_S", "Cooperation", "install_cooperative"]

logger = logging.getLogger(__name__)

#: the protocol name a cooperative member offers first
PROTOCOL = "streamjoin-cooperative"
#: seconds after the member got its assignment before a rejoin it asks for is sent
REJOIN_PACE_S = 1.2


@dataclass
class Cooperation:
    """How one consumer's rebalances went (read by tests and the worker's log)."""

    #: the protocol the group agreed on in the latest completed rebalance
    protocol: str | None = None
    #: the member lost its membership since its latest rebalance
    lost: bool = False
    #: the rebalance under way kept the member's partitions at prepare
    kept: bool = False
    #: rebalances completed, and how many of them were cooperative
    rebalances: int = 0
    cooperative_rebalances: int = 0
    #: partitions given up in the latest cooperative rebalance
    revoked: frozenset[TopicPartition] = field(default_factory=frozenset)
    #: the listener's calls of a cooperative rebalance are under way: the
    #: partitions not given up kept running (see :mod:`.incremental`)
    incremental: bool = False
    #: the eager revocation of everything, started when the membership was
    #: lost in the middle of a rebalance that had kept the partitions
    giving_up: asyncio.Task[None] | None = None
    #: the event loop's time when the member last got its assignment
    #: (``None``: not yet)
    assigned_at: float | None = None


class _CooperativeProtocol:
    """The assignor offered under :data:`PROTOCOL`: the member's own assignor
    under another name (same metadata, same assignment)."""

    def __init__(self, assignor: Any) -> None:  # Any: an aiokafka assignor (untyped)
        self.assignor = assignor
        self.name = PROTOCOL

    def metadata(self, topics: Any) -> Any:
        return self.assignor.metadata(topics)

    def assign(self, cluster: Any, members: Any) -> Any:
        return self.assignor.assign(cluster, members)

    def on_assignment(self, assignment: Any) -> None:
        self.assignor.on_assignment(assignment)


async def _call(result: Any) -> None:
    if inspect.isawaitable(result):
        await result


def install_cooperative(aio: AIOKafkaConsumer) -> Cooperation | None:
    """Make *aio*'s group coordinator rebalance cooperatively (see the module
    docstring); returns its :class:`Cooperation`, or ``None`` when *aio* has
    no group coordinator (yet). Installing twice returns the first one."""
    coordinator = group_coordinator(aio)
    if coordinator is None or not hasattr(coordinator, "_on_join_prepare"):
        return None
    installed: Cooperation | None = getattr(coordinator, "_streamjoin_cooperation", None)
    if installed is not None:
        return installed
    state = Cooperation()
    own = list(coordinator._assignors)
    if own:
        offered = [_CooperativeProtocol(own[0]), *own]
        # one JoinGroup per rebalance: the coordinator lists only the first
        # protocol, the request gets the others (see offer_protocols)
        coordinator._assignors = offered[:1]
        offer_protocols(coordinator, lambda: [a.name for a in offered[1:]])

        def lookup(name: str) -> Any:  # Any: an aiokafka assignor
            return next((a for a in offered if a.name == name), None)

        coordinator._lookup_assignor = lookup
    prepare_eagerly = coordinator._on_join_prepare
    complete_eagerly = coordinator._on_join_complete
    reset_generation = coordinator.reset_generation
    request_rejoin = coordinator.request_rejoin
    subscriptions = coordinator._subscription

    def tell_assignors(kept: bool, lost: bool) -> None:
        for assignor in own:  # (the wrapper offers own[0] under another name)
            hook = getattr(assignor, "on_rebalance_prepare", None)
            if hook is not None:
                hook(kept, lost)

    def _reset_generation() -> None:
        state.lost = True
        reset_generation()
        if state.kept and state.giving_up is None:
            # lost in the middle of a rebalance that kept the partitions: give
            # them all up now, while the generation is reset (no commit goes
            # through), and finish this rebalance eagerly
            state.kept = False
            owned = subscriptions.subscription.assignment
            state.giving_up = asyncio.ensure_future(prepare_eagerly(owned))

    async def _on_join_prepare(previous_assignment: Any) -> None:
        state.kept = (
            state.protocol == PROTOCOL
            and not state.lost
            and previous_assignment is not None
            and previous_assignment.active
        )
        tell_assignors(state.kept, state.lost)
        if not state.kept:
            state.lost = False
            await prepare_eagerly(previous_assignment)
            return
        coordinator._group_subscription = None
        logger.info(
            "cooperative rebalance: keeping %d partition(s) running while the group rebalances",
            len(previous_assignment.tps),
        )

    def _request_rejoin() -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not from the consumer's loop: nothing to pace by
            request_rejoin()
            return
        since = None if state.assigned_at is None else loop.time() - state.assigned_at
        if since is None or since >= REJOIN_PACE_S or state.lost:
            request_rejoin()
            return
        asked = state.rebalances

        def later() -> None:
            # a rebalance completed meanwhile carried what the rejoin was for
            # (the partitions given up, the warm-ups' offsets, the subscription)
            if state.rebalances == asked:
                request_rejoin()

        loop.call_later(REJOIN_PACE_S - since, later)

    async def _on_join_complete(
        generation: int, member_id: str, protocol: str, member_assignment_bytes: bytes
    ) -> None:
        state.assigned_at = asyncio.get_running_loop().time()
        state.rebalances += 1
        kept_through = state.kept
        state.kept = False
        if state.giving_up is not None:
            giving_up, state.giving_up = state.giving_up, None
            await giving_up
        if not kept_through:
            # a join that completed is a membership of its own: a loss before it is over
            state.protocol, state.lost, state.revoked = protocol, False, frozenset()
            await complete_eagerly(generation, member_id, protocol, member_assignment_bytes)
            return
        from aiokafka.coordinator.protocol import ConsumerProtocol

        listener = subscriptions.listener
        previous = subscriptions.subscription.assignment
        owned = set(previous.tps) if previous is not None else set()
        assignment = ConsumerProtocol.ASSIGNMENT.decode(member_assignment_bytes)
        new = set(assignment.partitions())
        # the group turned eager (a member offering only the eager protocol joined):
        # everything is given up before the new assignment comes in
        lost = protocol != PROTOCOL
        revoked = owned if lost else owned - new
        if revoked:
            logger.info(
                "%s rebalance: giving up %d partition(s): %s",
                "eager" if lost else "cooperative",
                len(revoked),
                sorted(revoked),
            )
        # the follow-up is needed only when an owned (active) partition is given
        # up: the leader withholds those, never a replica (standby, warm-up)
        followup = not lost and gives_up_an_owner(revoked)
        state.incremental = not lost
        try:
            await complete_incrementally(
                assignment, protocol, lost, previous, owned, revoked, new, listener
            )
        finally:
            state.incremental = False
        if followup:
            # the partitions given up go to their new owner in the follow-up,
            # paced: the other members of this generation may still be syncing
            _request_rejoin()

    def gives_up_an_owner(revoked: set[Any]) -> bool:
        """Is one of *revoked* an active partition of the member's assignor (read
        before the new assignment replaces them)? Without that hook: any."""
        read = getattr(own[0], "assigned_actives", None) if own else None
        if read is None:
            return bool(revoked)
        actives = set(read())
        return any(tp in actives for tp in revoked)

    async def complete_incrementally(
        assignment: Any,
        protocol: str,
        lost: bool,
        previous: Any,
        owned: set[Any],
        revoked: set[Any],
        new: set[Any],
        listener: Any,
    ) -> None:
        if previous is not None:
            # the fetcher hands out no more records of a partition given up: the
            # listener reads its position to commit it, and a record handed out
            # after that (the kept partitions' consumer runs on) would be read
            # again by its new owner. Kafka's consumer calls the listener inside
            # poll(), so there nothing is handed out meanwhile
            for tp in sorted(revoked):
                previous.state_value(tp).pause()
        if listener is not None:
            # called even with nothing to give up, as aiokafka's eager rebalance
            # does: faust starts its rebalance there (app.on_rebalance_start)
            await _call(listener.on_partitions_revoked(revoked))
        carried = {
            tp: previous.state_value(tp) for tp in sorted(owned - revoked) if tp in new
        } if previous is not None else {}  # fmt: skip
        subscriptions.assign_from_subscribed(new)
        fresh = subscriptions.subscription.assignment
        for tp, tp_state in carried.items():
            tp_state._assignment = fresh
            fresh._tp_state[tp] = tp_state
        assignor = coordinator._lookup_assignor(protocol)
        if assignor is not None:
            assignor.on_assignment(assignment)
        await coordinator._stop_commit_offsets_refresh_task()
        coordinator.start_commit_offsets_refresh_task(fresh)
        state.protocol = protocol
        state.revoked = frozenset(revoked)
        state.lost = False
        if not lost:
            state.cooperative_rebalances += 1
        assigned = set(subscriptions.assigned_partitions())
        logger.info(
            "cooperative rebalance complete: %d kept, %d added, %d given up",
            len(carried),
            len(assigned - set(carried)),
            len(revoked),
        )
        if listener is not None:
            await _call(listener.on_partitions_assigned(assigned))

    coordinator._on_join_prepare = _on_join_prepare
    coordinator._on_join_complete = _on_join_complete
    coordinator.reset_generation = _reset_generation
    coordinator.request_rejoin = _request_rejoin
    refuse_stale_commits(coordinator, lambda: state.kept)
    coordinator._streamjoin_cooperation = state
    return state
