"""Cooperative rebalancing on aiokafka's classic group protocol (KIP-429's way).

aiokafka 0.14 rebalances eagerly: at every rebalance its ``GroupCoordinator``
revokes every partition before it rejoins (``_on_join_prepare``, which also
holds back every fetched record until the new assignment is in), and
replaces the whole assignment, positions included, when the rebalance
completes (``_on_join_complete``). :func:`install_cooperative` changes both
steps of one consumer's coordinator, and two calls around them; each
replaced step is a method of one ``_CooperativeCoordinator``, named for what
it decides, over the consumer's :class:`Cooperation`:

* **prepare** (``prepare``; ``keeps_partitions`` decides): a member that
  rebalanced cooperatively last time (every member of the group offered
  :data:`PROTOCOL`, the broker chose it) and has not lost its membership
  since revokes nothing and keeps fetching; its assignor is told
  (``on_rebalance_prepare(True)``) so that its metadata says the member
  still owns its partitions (see :mod:`streamjoin.assignment.cooperative`);
* **complete** (``complete``; ``complete_incrementally`` when the partitions
  were kept, in the steps ``give_up``, ``carry_kept``, ``take_assignment``
  and ``announce``): only the partitions the new assignment drops are
  revoked (the listener's ``on_partitions_revoked`` with just those,
  possibly none: it is called at every rebalance, as in an eager one), the
  kept partitions keep their fetch state (position, high watermark, pause),
  the listener's ``on_partitions_assigned`` gets the whole new assignment,
  and a member that gave up an owned (active) partition rejoins
  (``gives_up_an_owner`` decides): the follow-up rebalance hands them to
  their new owner (the leader withholds them until then; replicas are never
  withheld, so giving up only a standby needs no follow-up);
* **pace** (``request_rejoin``; ``rejoin_delay`` decides): a rejoin the
  member asks for (the follow-up, a warm-up that caught up, a subscription
  change) is sent at once, unless a generation lately completed without
  the member (``paces``); see *The rejoin pace* below. A member that lost its membership
  rejoins at once;
* **membership lost** (``lose_membership``): after the coordinator reset the
  member's generation (its session expired, or it was fenced) everything it
  owned is revoked before it rejoins, as in an eager rebalance; the next
  rebalance after that is eager (:attr:`Cooperation.membership_lost`);
* **protocol lookup** (``assignor_of``): the assignor of the protocol the
  group agreed on, whichever of the offered ones it is.

A cooperative rebalance whose group *turned eager* (the broker chose the
eager protocol: a member offering only that one joined) gives every
partition up before it takes the new assignment; that is not a lost
membership: the member kept it, and the group turns cooperative again once
every member offers :data:`PROTOCOL`.

The rejoin pace
---------------

Kafka answers every member's SyncGroup once the leader's arrives, so a
member that has its assignment can rejoin at once: the others have theirs.
The embedded broker (Tansu) answers a follower's SyncGroup up to about a
second after the leader's, and a JoinGroup meanwhile fails it ("rebalance in
progress"): the generation completes without that member, whose rejoin
then starts the next one, and so on (a scale-out of the rebalance benchmark
once took 12 rebalances, when every follow-up was sent 0.5 s after the
assignment). The rule:

* a member that **missed a generation** paces its rejoins for its next
  :data:`MISSED_MEMORY` rebalances: one asked for less than
  :data:`REJOIN_PACE_S` after it got its assignment waits until then (and
  is dropped if a rebalance completed meanwhile, which carried what it was
  for); every other rejoin is sent at once, so on Kafka a cooperative move
  waits for nothing;
* it missed a generation when its SyncGroup failed (aiokafka asks for a
  rejoin between the answers to its JoinGroup and its SyncGroup:
  ``note_failed_sync``, the coordinator's generation is then newer than
  the one the member completed last) or when its next completed join skips
  a generation (the group formed one without it: ``note_generation``); a
  generation reset (a lost membership) is not such a miss.

Each member learns from its own SyncGroups only (no member hears of
another's). On the embedded broker the old owners' SyncGroups are usually
answered at once (the leader's always), and the new owner's is the late one:
the old owners' follow-ups, sent at once, fail it (the new owner paces its
own rejoins from then on), and a scale-out takes one or two rebalances more than with every rejoin
paced (the rebalance benchmark, docs/benchmarks.rst). On Kafka a SyncGroup
fails when a member joins while the others sync (a deployment): the members
it failed then pace for :data:`MISSED_MEMORY` rebalances.

So a member may be told to pace every rejoin it asks for itself
(:attr:`Cooperation.fixed_pace`, from ``STREAMJOIN_REJOIN_PACE_MS``): the
launcher of workers on the embedded broker (``streamjoin/dev/process.py``:
tests, benchmarks, the demo) sets 1.2 s, what every member did before the
rule above.

The member offers two protocols, :data:`PROTOCOL` first and then its
assignor's own name (streamjoin's ``"streamjoin"``) with the same metadata: a
group with a member that offers only the latter (an older streamjoin worker)
agrees on it and rebalances eagerly, and once every member
offers :data:`PROTOCOL` the group turns cooperative without a stop (the
rolling upgrade). Both protocols run the same assignor.

It is long because the coordinator's steps it replaces share one state and
the private attributes that ``tests/architecture`` lets this module alone
touch; the pace's rule (``rejoin_delay``, ``paces`` and the two notes) reads
public ones only, and could move to a module of its own.

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
  membership lost), ``request_rejoin()`` (wrapped: paced; aiokafka calls it
  after a failed SyncGroup too), ``generation`` (read: the generation the
  member's latest JoinGroup got),
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

__all__ = ["MISSED_MEMORY", "PROTOCOL", "REJOIN_PACE_S", "Cooperation", "install_cooperative"]

logger = logging.getLogger(__name__)

#: the protocol name a cooperative member offers first
PROTOCOL = "streamjoin-cooperative"
#: seconds after the member got its assignment before a rejoin it asks for is
#: sent, in a group that has shown late SyncGroup answers (see the module docstring)
REJOIN_PACE_S = 1.2
#: rebalances after the member missed a generation during which its rejoins are paced
MISSED_MEMORY = 8


@dataclass
class Cooperation:
    """How one consumer's rebalances go (read by
    :func:`~streamjoin.faust.kafka.incremental.rebalance_kind`, tests and the log)."""

    #: the protocol the group agreed on in the latest completed rebalance
    protocol: str | None = None
    #: the member lost its membership (the coordinator reset its generation: its
    #: session expired, or it was fenced) since its latest join completed
    membership_lost: bool = False
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
    #: the generation of the member's latest completed join (``None``: none yet)
    generation: int | None = None
    #: the latest generation that completed without the member (its SyncGroup
    #: failed, or the group formed it without the member), and ``rebalances``
    #: then: its rejoins are paced for :data:`MISSED_MEMORY` rebalances
    missed: int | None = None
    missed_at: int = 0
    #: seconds every self-asked rejoin waits after the assignment, whatever was
    #: missed (``STREAMJOIN_REJOIN_PACE_MS``; ``None``: the rule above)
    fixed_pace: float | None = None


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


def install_cooperative(
    aio: AIOKafkaConsumer, fixed_pace: float | None = None
) -> Cooperation | None:
    """Make *aio*'s group coordinator rebalance cooperatively (see the module
    docstring); returns its :class:`Cooperation`, or ``None`` when *aio* has
    no group coordinator (yet). Installing twice returns the first one.

    *fixed_pace* (seconds): pace every rejoin the member asks for itself by
    that much after its assignment, as a broker that answers followers'
    SyncGroups late needs (``None``: only after a missed generation)."""
    coordinator = group_coordinator(aio)
    if coordinator is None or not hasattr(coordinator, "_on_join_prepare"):
        return None
    installed: Cooperation | None = getattr(coordinator, "_streamjoin_cooperation", None)
    if installed is not None:
        return installed
    state = Cooperation(fixed_pace=fixed_pace)
    _CooperativeCoordinator(coordinator, state).install()
    return state


class _CooperativeCoordinator:
    """One coordinator's replaced rebalance steps, each a method named for what it
    decides, over its :class:`Cooperation` (aiokafka's own steps kept for eager ones)."""

    def __init__(self, coordinator: Any, state: Cooperation) -> None:  # Any: aiokafka's
        self.coordinator = coordinator
        self.state = state
        #: the member's own assignors (the wrapper offers the first one as PROTOCOL)
        self.own = list(coordinator._assignors)
        #: every protocol offered, PROTOCOL first
        self.offered = [_CooperativeProtocol(self.own[0]), *self.own] if self.own else []
        self.subscriptions = coordinator._subscription
        # aiokafka's own steps, bound before they are replaced
        self.prepare_eagerly = coordinator._on_join_prepare
        self.complete_eagerly = coordinator._on_join_complete
        self.reset_generation = coordinator.reset_generation
        self.rejoin_now = coordinator.request_rejoin

    def install(self) -> None:
        """Replace the coordinator's steps with this object's methods."""
        coordinator = self.coordinator
        if self.offered:
            # one JoinGroup per rebalance: the coordinator lists only the first
            # protocol, the request gets the others (see offer_protocols)
            coordinator._assignors = self.offered[:1]
            offer_protocols(coordinator, lambda: [a.name for a in self.offered[1:]])
            coordinator._lookup_assignor = self.assignor_of
        coordinator._on_join_prepare = self.prepare
        coordinator._on_join_complete = self.complete
        coordinator.reset_generation = self.lose_membership
        coordinator.request_rejoin = self.request_rejoin
        refuse_stale_commits(coordinator, lambda: self.state.kept)
        coordinator._streamjoin_cooperation = self.state

    def assignor_of(self, name: str) -> Any:  # Any: an aiokafka assignor
        """The assignor offered under *name* (``None``: none is)."""
        return next((a for a in self.offered if a.name == name), None)

    async def prepare(self, previous_assignment: Any) -> None:  # Any: aiokafka's Assignment
        """aiokafka's ``_on_join_prepare``: a member that may keep its partitions
        (:meth:`keeps_partitions`) revokes nothing; any other revokes them all."""
        state = self.state
        state.kept = self.keeps_partitions(previous_assignment)
        self.tell_assignors(state.kept, state.membership_lost)
        if not state.kept:
            await self.prepare_eagerly(previous_assignment)
            return
        self.coordinator._group_subscription = None
        logger.info(
            "cooperative rebalance: keeping %d partition(s) running while the group rebalances",
            len(previous_assignment.tps),
        )

    def keeps_partitions(self, previous_assignment: Any) -> bool:
        """Does the member keep its partitions running through the rebalance now
        starting? If the group rebalanced cooperatively last time and it did not
        lose its membership since (and it runs partitions)."""
        state = self.state
        return (
            state.protocol == PROTOCOL
            and not state.membership_lost
            and previous_assignment is not None
            and previous_assignment.active
        )

    def tell_assignors(self, kept: bool, membership_lost: bool) -> None:
        """Tell each own assignor how this rebalance starts (its metadata says so)."""
        for assignor in self.own:  # (the wrapper offers own[0] under another name)
            hook = getattr(assignor, "on_rebalance_prepare", None)
            if hook is not None:
                hook(kept, membership_lost)

    def lose_membership(self) -> None:
        """aiokafka's ``reset_generation`` (its session expired, or it was fenced): the
        member lost its membership. Lost in a rebalance that kept the partitions, it
        gives them all up now, while the generation is reset (no commit goes
        through), and the rebalance finishes eagerly."""
        state = self.state
        state.membership_lost = True
        self.reset_generation()
        if state.kept and state.giving_up is None:
            state.kept = False
            owned = self.subscriptions.subscription.assignment
            state.giving_up = asyncio.ensure_future(self.prepare_eagerly(owned))

    def request_rejoin(self) -> None:
        """aiokafka's ``request_rejoin`` (the member's own, or aiokafka's after a
        failed SyncGroup: :meth:`note_failed_sync`), paced: sent now, or once the
        other members can have their assignment (:meth:`rejoin_delay`)."""
        self.note_failed_sync()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not from the consumer's loop: nothing to pace by
            self.rejoin_now()
            return
        delay = self.rejoin_delay(loop.time())
        if delay <= 0:
            self.rejoin_now()
            return
        asked = self.state.rebalances

        def later() -> None:
            # a rebalance completed meanwhile carried what the rejoin was for
            # (the partitions given up, the warm-ups' offsets, the subscription)
            if self.state.rebalances == asked:
                self.rejoin_now()

        loop.call_later(delay, later)

    def rejoin_delay(self, now: float) -> float:
        """Seconds a rejoin asked for at *now* (the loop's time) waits: in a group
        that has shown late SyncGroup answers (:meth:`paces`), until
        :data:`REJOIN_PACE_S` after the member got its assignment; otherwise
        none, nor for a member that lost its membership or has no assignment."""
        state = self.state
        if state.assigned_at is None or state.membership_lost:
            return 0.0
        pace = state.fixed_pace
        if pace is None:
            if not self.paces():
                return 0.0
            pace = REJOIN_PACE_S
        return max(0.0, pace - (now - state.assigned_at))

    def paces(self) -> bool:
        """Did a generation complete without this member (the sign of late
        SyncGroup answers) in its last :data:`MISSED_MEMORY` rebalances?"""
        state = self.state
        return state.missed is not None and state.rebalances - state.missed_at <= MISSED_MEMORY

    def note_failed_sync(self) -> None:
        """A rejoin asked for between the answers to the member's JoinGroup and
        to its SyncGroup (its generation is newer than the one it completed
        last) is aiokafka's, after that SyncGroup failed: that generation
        completes without the member (a lost membership aside)."""
        state = self.state
        joined = self.coordinator.generation
        completed = -1 if state.generation is None else state.generation
        if not state.membership_lost and joined > completed:
            self.missed(joined)

    def note_generation(self, generation: int) -> None:
        """The member's join of *generation* completed; if its previous one was
        older than the generation before, that one completed without it."""
        state = self.state
        previous = state.generation
        if previous is not None and generation > previous + 1 and not state.membership_lost:
            self.missed(generation - 1)
        state.generation = generation

    def missed(self, generation: int) -> None:
        """*generation* completed without the member: pace its rejoins for a while."""
        state = self.state
        if state.missed == generation:
            return
        state.missed, state.missed_at = generation, state.rebalances
        logger.info(
            "generation %d completes without this member (its SyncGroup failed, or the "
            "group formed it without it): for %d rebalances, a rejoin it asks for waits "
            "until %.1f s after its assignment",
            generation,
            MISSED_MEMORY,
            REJOIN_PACE_S,
        )

    async def complete(
        self, generation: int, member_id: str, protocol: str, member_assignment_bytes: bytes
    ) -> None:
        """aiokafka's ``_on_join_complete``: a rebalance that kept the partitions
        completes incrementally (:meth:`complete_incrementally`), any other as
        aiokafka's eager one."""
        state = self.state
        self.note_generation(generation)
        state.assigned_at = asyncio.get_running_loop().time()
        state.rebalances += 1
        kept_through = state.kept
        state.kept = False
        if state.giving_up is not None:
            giving_up, state.giving_up = state.giving_up, None
            await giving_up
        if not kept_through:
            # a join that completed is a membership of its own: a loss before it is over
            state.protocol, state.membership_lost, state.revoked = protocol, False, frozenset()
            await self.complete_eagerly(generation, member_id, protocol, member_assignment_bytes)
            return
        from aiokafka.coordinator.protocol import ConsumerProtocol

        assignment = ConsumerProtocol.ASSIGNMENT.decode(member_assignment_bytes)
        await self.complete_incrementally(assignment, protocol)

    async def complete_incrementally(self, assignment: Any, protocol: str) -> None:
        """Give up only what *assignment* drops (everything, if the group turned
        eager), keep the rest running with its fetch state, and rejoin when an
        owned partition was given up (the follow-up, paced)."""
        state = self.state
        listener = self.subscriptions.listener
        previous = self.subscriptions.subscription.assignment
        owned = set(previous.tps) if previous is not None else set()
        new = set(assignment.partitions())
        # the group turned eager (a member offering only the eager protocol
        # joined): everything is given up before the new assignment comes in
        turned_eager = protocol != PROTOCOL
        revoked = owned if turned_eager else owned - new
        if revoked:
            logger.info(
                "%s rebalance: giving up %d partition(s): %s",
                "eager" if turned_eager else "cooperative",
                len(revoked),
                sorted(revoked),
            )
        # the follow-up is needed only when an owned (active) partition is given
        # up: the leader withholds those, never a replica (standby, warm-up)
        followup = not turned_eager and self.gives_up_an_owner(revoked)
        state.incremental = not turned_eager
        try:
            await self.give_up(listener, previous, revoked)
            carried = self.carry_kept(previous, owned - revoked, new)
            await self.take_assignment(assignment, protocol)
            state.protocol = protocol
            state.revoked = frozenset(revoked)
            state.membership_lost = False
            if not turned_eager:
                state.cooperative_rebalances += 1
            await self.announce(listener, carried, revoked)
        finally:
            state.incremental = False
        if followup:
            # the partitions given up go to their new owner in the follow-up,
            # paced: the other members of this generation may still be syncing
            self.request_rejoin()

    def gives_up_an_owner(self, revoked: set[Any]) -> bool:
        """Is one of *revoked* an active partition of the member's assignor (read
        before the new assignment replaces them)? Without that hook: any."""
        read = getattr(self.own[0], "assigned_actives", None) if self.own else None
        if read is None:
            return bool(revoked)
        actives = set(read())
        return any(tp in actives for tp in revoked)

    async def give_up(self, listener: Any, previous: Any, revoked: set[Any]) -> None:
        """Stop handing out records of *revoked* and tell the listener (called even
        with nothing to give up, as aiokafka's eager rebalance does: faust
        starts its rebalance there, ``app.on_rebalance_start``)."""
        if previous is not None:
            # the fetcher hands out no more records of a partition given up: the
            # listener reads its position to commit it, and a record handed out
            # after that (the kept partitions' consumer runs on) would be read
            # again by its new owner. Kafka's consumer calls the listener inside
            # poll(), so there nothing is handed out meanwhile
            for tp in sorted(revoked):
                previous.state_value(tp).pause()
        if listener is not None:
            await _call(listener.on_partitions_revoked(revoked))

    def carry_kept(self, previous: Any, kept: set[Any], new: set[Any]) -> dict[Any, Any]:
        """Assign *new*, moving the fetch state (position, high watermark, pause) of
        each partition in *kept* and *new* from *previous*; returns those states."""
        carried = (
            {tp: previous.state_value(tp) for tp in sorted(kept) if tp in new}
            if previous is not None
            else {}
        )
        self.subscriptions.assign_from_subscribed(new)
        fresh = self.subscriptions.subscription.assignment
        for tp, tp_state in carried.items():
            tp_state._assignment = fresh
            fresh._tp_state[tp] = tp_state
        return carried

    async def take_assignment(self, assignment: Any, protocol: str) -> None:
        """The assignor's and the commit refresh's part of the new assignment."""
        coordinator = self.coordinator
        fresh = self.subscriptions.subscription.assignment
        assignor = coordinator._lookup_assignor(protocol)
        if assignor is not None:
            assignor.on_assignment(assignment)
        await coordinator._stop_commit_offsets_refresh_task()
        coordinator.start_commit_offsets_refresh_task(fresh)

    async def announce(self, listener: Any, carried: dict[Any, Any], revoked: set[Any]) -> None:
        """Log what the rebalance did and hand the listener the whole new assignment."""
        assigned = set(self.subscriptions.assigned_partitions())
        logger.info(
            "cooperative rebalance complete: %d kept, %d added, %d given up",
            len(carried),
            len(assigned - set(carried)),
            len(revoked),
        )
        if listener is not None:
            await _call(listener.on_partitions_assigned(assigned))
