"""The one owner of the task lifecycle on a worker: every rebalance reaches the
joins and the restorer through it, in one order.

faust's consumer (or, in a cooperative rebalance, streamjoin's
:mod:`~streamjoin.faust.kafka.incremental`) calls the table manager
(:class:`~streamjoin.faust.restore.tables.TableManager`), which turns the call
into one typed event of :mod:`streamjoin.lifecycle.rebalance` and hands it
to the worker's :class:`RebalanceOwner`::

    revoke ─▶ Revoked ──▶ owner.revoke ──▶ every join's revoke (park / revoke tasks)
                                   ──▶ the restorer stops its session
       (faust waits for its agents, flushes the producer)
    app.on_partitions_revoked ──▶ owner.handover ──▶ every join's handover
                                   (the batch in flight made durable)
    assign ─▶ Assigned ─▶ owner.assign ──▶ ownership (which fenced tasks were kept)
                                   ──▶ every join's assign (close what left)
                                   ──▶ faust's tables
                                   ──▶ the restorer (restores what is not kept)

A join registers itself (:meth:`RebalanceOwner.register`) through the
explicit :class:`RebalanceParticipant` interface; there is no other path
into a join's rebalance handling. Joins are called in the order of their
names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from streamjoin.join.errors import JoinConfigError
from streamjoin.lifecycle.rebalance import Assigned, Revoked

if TYPE_CHECKING:
    from faust.types import TP

    from streamjoin.faust.restore.owner_tokens import TaskOwnership

__all__ = ["RebalanceOwner", "RebalanceParticipant"]


class RebalanceParticipant(Protocol):
    """What the rebalance owner asks of a join (of anything that runs tasks)."""

    @property
    def name(self) -> str:
        """A unique name: participants are called in the order of their names."""
        ...

    def revoke(self, event: Revoked) -> None:
        """Stop what *event* revokes, before the member rejoins (no awaiting)."""
        ...

    async def handover(self, event: Revoked) -> None:
        """Wait (bounded) until the work in flight for what *event* revoked is durable."""
        ...

    async def assign(self, event: Assigned) -> None:
        """Close what left, keep what stays, before the tables and the restorer hear of it."""
        ...

    def restore_again(self) -> set[tuple[str, int]]:
        """(changelog topic, partition) of kept tasks whose state must be restored again."""
        ...


class RebalanceOwner:
    """Hands each rebalance event to the worker's ownership and joins, in order.

    Args:
        ownership: the worker's task ownership (owner tokens and session lease).
    """

    def __init__(self, ownership: TaskOwnership) -> None:
        self.ownership = ownership
        self._participants: dict[str, RebalanceParticipant] = {}
        #: the revoke under way, until its handover
        self._revoking: Revoked | None = None

    def register(self, participant: RebalanceParticipant) -> None:
        """Call *participant* at every rebalance from now on."""
        name = participant.name
        if name in self._participants:
            raise JoinConfigError(
                f"two joins are named {name!r} in one app: give each join its own name"
            )
        self._participants[name] = participant

    @property
    def participants(self) -> list[RebalanceParticipant]:
        """The registered participants, in the order they are called."""
        return [p for _, p in sorted(self._participants.items())]

    def revoke(self, event: Revoked) -> None:
        """The member stops what *event* revokes: every participant's revoke."""
        self._revoking = event
        for participant in self.participants:
            participant.revoke(event)

    async def handover(self, *_: object, **__: object) -> None:
        """faust's ``on_partitions_revoked`` signal (the revoke's last step): every
        participant's handover of the revoke under way."""
        event, self._revoking = self._revoking, None
        if event is None:
            return
        for participant in self.participants:
            await participant.handover(event)

    async def assign(self, event: Assigned) -> None:
        """The new assignment: the ownership first (which fenced tasks were kept
        without interruption), then every participant's assign."""
        self._revoking = None
        self.ownership.begin(event.generation)
        for participant in self.participants:
            await participant.assign(event)

    def restore_again(self) -> set[TP]:
        """Active changelog partitions to restore again though their task is kept:
        a join's whose batch was abandoned, and a fenced one taken over anew (the
        lease ran out; it opens once restored and marked)."""
        from faust.types import TP

        again: set[TP] = self.ownership.taken_over()
        for participant in self.participants:
            again |= {TP(topic, partition) for topic, partition in participant.restore_again()}
        return again
