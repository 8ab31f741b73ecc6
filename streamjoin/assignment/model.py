"""Plain frozen values the assignment core takes and returns.

Everything here is immutable and ordered deterministically (tuples of sorted
items), so the same group state always produces the same assignment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "Assignment",
    "GroupState",
    "LastAssignment",
    "MemberAssignment",
    "MemberState",
    "Move",
    "ReportedPartitions",
    "TaskGroup",
    "TopicPartitions",
]

#: topic -> sorted partition numbers
TopicPartitions = Mapping[str, tuple[int, ...]]
#: what a member reports: topic -> partitions, sorted and distinct
ReportedPartitions = Mapping[str, Sequence[int]]


@dataclass(frozen=True)
class MemberState:
    """What one group member reports when it joins a rebalance.

    ``generation`` is the generation of the assignment its ``actives`` came
    from; ``None`` means the member claims nothing. ``offsets`` are the
    changelog offsets persisted in its local stores (topic -> partition ->
    offset), used to tell which members are caught up.
    """

    id: str
    topics: tuple[str, ...]
    host: str
    rack: str | None = None
    capacity: int = 1
    generation: int | None = None
    actives: ReportedPartitions = field(default_factory=dict)
    standbys: ReportedPartitions = field(default_factory=dict)
    offsets: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    #: warm-up replicas it was given by the assignment of ``generation``
    warmups: ReportedPartitions = field(default_factory=dict)
    #: it rebalances cooperatively this time: it kept running its ``actives``
    #: through the rebalance, so they are what it owns *now* (see
    #: :mod:`streamjoin.assignment.cooperative`)
    cooperative: bool = False


@dataclass(frozen=True)
class LastAssignment:
    """The actives the leader itself gave each member in the assignment it made last.

    A broker may answer the leader's JoinGroup with the metadata a member sent
    for an earlier rebalance (the embedded broker does, for a member whose
    JoinGroup comes late): that member's claims then lag behind what it runs.
    The leader's own record of generation ``generation`` fills the gap (see
    :mod:`streamjoin.assignment.cooperative`).
    """

    generation: int
    #: member id -> topic -> partitions
    actives: Mapping[str, ReportedPartitions]


@dataclass(frozen=True)
class GroupState:
    """The whole input of one assignment: topics, declarations and members."""

    topics: Mapping[str, int]
    members: tuple[MemberState, ...]
    copartition: tuple[tuple[str, ...], ...] = ()
    changelogs: frozenset[str] = frozenset()
    global_changelogs: frozenset[str] = frozenset()
    standby_replicas: int = 0
    acceptable_recovery_lag: int = 10_000
    #: warm-up replicas the whole group may hold at once; ``None``: no cap;
    #: 0: no warm-ups (a task moves to its target at once, cold if need be)
    max_warmup_replicas: int | None = None
    #: what this leader gave each member last time (``None``: nothing known)
    last_assignment: LastAssignment | None = None
    #: topic -> per partition, the racks its replicas are on (sorted, distinct; an
    #: empty tuple or a missing topic: not known). Actives go where their
    #: partitions have a replica (:mod:`.racks`)
    partition_racks: Mapping[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    #: topic -> per partition, the traffic it carries (records or bytes per second,
    #: any unit shared by all topics); 1 per partition where not given
    partition_weights: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: what one unit of cross-rack traffic costs, against ``rack_move_cost`` per
    #: task moved beyond what balance needs; 0 turns rack-aware actives off
    rack_traffic_cost: int = 10
    rack_move_cost: int = 1


@dataclass(frozen=True)
class TaskGroup:
    """Topics that are consumed together, partition by partition.

    Task ``(index, p)`` is partition ``p`` of every topic in ``topics``.
    ``eligible`` are the indices (into the sorted member list) of the members
    subscribed to every topic of the group.
    """

    index: int
    topics: tuple[str, ...]
    partitions: int
    changelogs: tuple[str, ...]
    eligible: tuple[int, ...]

    @property
    def stateful(self) -> bool:
        return bool(self.changelogs)

    @property
    def name(self) -> str:
        return "+".join(self.topics)


@dataclass(frozen=True)
class Move:
    """One task that changed owner, and why."""

    group: int
    partition: int
    source: str | None
    target: str
    reason: str
    warm: bool
    lag: int | None


@dataclass(frozen=True)
class MemberAssignment:
    """What one member owns after the rebalance."""

    actives: TopicPartitions
    standbys: TopicPartitions
    #: changelog partitions restored here while the task stays active on a
    #: caught-up member; the task moves here once they catch up
    warmups: TopicPartitions = field(default_factory=dict)


@dataclass(frozen=True)
class Assignment:
    """The result of one rebalance."""

    members: Mapping[str, MemberAssignment]
    generation: int
    groups: tuple[TaskGroup, ...]
    moves: tuple[Move, ...]
    stats: Mapping[str, object]
    #: tasks (group index, partition) given to nobody this round because
    #: another member still owns them (cooperative groups); sorted
    withheld: tuple[tuple[int, int], ...] = ()
    #: tasks whose active reads a partition with no replica in its member's
    #: rack: (group index, partition, member id, traffic, reason), sorted (:mod:`.racks`)
    cross_rack: tuple[tuple[int, int, str, int, str], ...] = ()
