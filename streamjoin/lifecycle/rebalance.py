"""The rebalance event: what one rebalance does to this worker's partitions.

aiokafka and faust report a rebalance through several calls (the listener's
revoke and assign, faust's table manager, the consumer's generation);
the adapter layer (:mod:`streamjoin.faust.rebalance`) turns them into two
values of this module, handed in this order to the one owner of the task
lifecycle:

* :class:`Revoked`, before the member rejoins: the partitions it stops
  running now;
* :class:`Assigned`, once the new assignment is known: the whole assignment
  and how it differs from the previous one.

:class:`RebalanceKind` says how the group rebalanced, asked once per
rebalance (:func:`streamjoin.faust.kafka.incremental.rebalance_kind`):

========================= ==============================================================
kind                      what the member does
========================= ==============================================================
``EAGER``                 revokes every partition, then takes the whole new assignment
                          (faust's own protocol, or a group with an older member)
``COOPERATIVE``           revokes only what the new assignment drops; kept partitions
                          run on untouched (KIP-429 on the classic protocol)
``LOST``                  lost its membership (session expired, fenced): everything it
                          owned is revoked, as in an eager rebalance (another member
                          may run it already); the next rebalance is eager
========================= ==============================================================
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Assigned", "RebalanceKind", "Revoked", "TopicPartition"]

#: a topic partition (faust's ``TP`` is such a named tuple)
TopicPartition = tuple[str, int]


class RebalanceKind(enum.Enum):
    """How the member rebalances (see the module's table)."""

    EAGER = "eager"
    COOPERATIVE = "cooperative"
    LOST = "lost"

    @property
    def revokes_all(self) -> bool:
        """Does the member stop every partition it runs (eager or lost)?"""
        return self is not RebalanceKind.COOPERATIVE


@dataclass(frozen=True)
class Revoked:
    """The member stops running *partitions* (every one it had when
    :attr:`kind` revokes all) before it rejoins."""

    kind: RebalanceKind
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class Assigned:
    """The new assignment of generation :attr:`generation`.

    Attributes:
        kind: how the group rebalanced.
        generation: the group generation the assignment belongs to.
        assigned: every partition assigned to the member now.
        revoked: partitions it had before and not now.
        added: partitions it did not have before.
    """

    kind: RebalanceKind
    generation: int
    assigned: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]
    added: frozenset[TopicPartition]

    @property
    def kept(self) -> frozenset[TopicPartition]:
        """Partitions the member had before and has now."""
        return self.assigned - self.added
