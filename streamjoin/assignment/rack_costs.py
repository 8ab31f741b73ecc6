"""What a task's reads cost per rack, and a first rack-aware deal. Pure.

A task reads its input partitions and its changelogs. A partition read from a
member with no replica of it in the member's rack crosses racks. The task's
**traffic** on a rack is the weight of its partitions
(``GroupState.partition_weights``, 1 where not given) that have known replica
racks (``GroupState.partition_racks``), none of them that rack. A member
without a rack is in no rack. :mod:`.racks` says how placement uses it.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from streamjoin.assignment.model import GroupState, MemberState, TaskGroup

__all__ = ["RackCosts", "RackIndex", "deal_by_racks", "task_costs"]


@dataclass(frozen=True)
class RackIndex:
    """The racks of a group's members: ``racks`` sorted (``None`` last: no rack), and
    per member index, its rack's position in ``racks``."""

    racks: tuple[str | None, ...]
    of_member: list[int]

    @staticmethod
    def of(members: Sequence[MemberState]) -> RackIndex:
        racks = tuple(sorted({m.rack for m in members}, key=_rack_key))
        index = {rack: i for i, rack in enumerate(racks)}
        return RackIndex(racks, [index[m.rack] for m in members])


@dataclass(frozen=True)
class RackCosts:
    """One group's traffic per task and rack: ``traffic[p][i]`` on rack ``i`` of
    ``index.racks``; ``present`` the racks with an eligible member."""

    index: RackIndex
    present: tuple[int, ...]
    traffic: list[tuple[int, ...]]
    #: per task, its least traffic on a present rack
    least: list[int]
    #: some task's traffic differs between the present racks: placement can cut it
    choice: bool

    def on(self, target: Sequence[int]) -> list[int]:
        """Every task's traffic on its member in ``target``."""
        return list(
            map(operator.getitem, self.traffic, map(self.index.of_member.__getitem__, target))
        )


def task_costs(state: GroupState, group: TaskGroup, index: RackIndex) -> RackCosts | None:
    """The traffic of ``group``'s tasks on each rack, or ``None`` when none of its
    partitions has known replica racks."""
    known = [
        (state.partition_racks[t], state.partition_weights.get(t))
        for t in dict.fromkeys((*group.topics, *group.changelogs))  # (a changelog may be both)
        if t in state.partition_racks
    ]
    if not known:
        return None
    if len(group.eligible) == len(index.of_member):
        present = tuple(range(len(index.racks)))
    else:
        present = tuple(sorted({index.of_member[m] for m in group.eligible}))
    # per task: its partitions' (replica racks, weight); most tasks share theirs, as
    # the same objects (the document's parser shares equal rows): keyed by identity
    keys = list(
        zip(
            *(
                zip(map(id, replica_racks), weights or itertools.repeat(1), strict=False)
                for replica_racks, weights in known
            ),
            strict=True,
        )
    )
    objects = {id(where): where for replica_racks, _ in known for where in replica_racks}
    rows: dict[tuple[tuple[int, int], ...], tuple[int, ...]] = {}
    for key in set(keys):
        counted = [0] * len(index.racks)
        for ident, weight in key:
            where = objects[ident]
            if where:
                for i, rack in enumerate(index.racks):
                    if rack not in where:
                        counted[i] += weight
        rows[key] = tuple(counted)
    least_of = {row: min(row[i] for i in present) for row in rows.values()}
    choice = any(max(row[i] for i in present) != low for row, low in least_of.items())
    traffic = list(map(rows.__getitem__, keys))
    return RackCosts(index, present, traffic, list(map(least_of.__getitem__, traffic)), choice)


def deal_by_racks(
    cold: Sequence[int], owner: list[int], room: dict[int, int], costs: RackCosts
) -> None:
    """Give each task of ``cold`` (nobody is warm for it) a member with ``room``,
    in its least-traffic rack while that rack has room left.

    Tasks with the same traffic row go together, those with the fewest best
    racks first; a row's tasks are shared among its best racks by the room
    they have left, then its next best. Within a rack, tasks go to its members
    in turn, one slot each round, as :mod:`.actives` deals tasks without racks.
    The trades of :func:`place_by_racks` then fix what this greedy deal missed.
    """
    of_member = costs.index.of_member
    members: dict[int, list[int]] = {}
    for m in sorted(room):
        if room[m] > 0:
            members.setdefault(of_member[m], []).append(m)
    cap = {rack: sum(room[m] for m in listed) for rack, listed in members.items()}
    classes: dict[tuple[int, ...], list[int]] = {}
    for p in cold:
        classes.setdefault(costs.traffic[p], []).append(p)
    tiers_of = {row: _tiers(row, sorted(members)) for row in classes}
    dealt: dict[int, list[int]] = {rack: [] for rack in members}
    for row in sorted(classes, key=lambda r: (len(tiers_of[r][0]), r)):
        remaining = classes[row]
        for tier in tiers_of[row]:
            while remaining:
                open_racks = [r for r in tier if cap[r] > 0]
                if not open_racks:
                    break
                rack = max(open_racks, key=lambda r: (cap[r], -r))
                take = min(cap[rack], -(-len(remaining) // len(open_racks)))
                dealt[rack] += remaining[:take]
                remaining = remaining[take:]
                cap[rack] -= take
    for rack, tasks in dealt.items():
        tasks.sort()
        for p, m in zip(tasks, _turns(members[rack], room), strict=False):
            owner[p] = m
    for m, used in Counter(owner[p] for p in cold).items():
        room[m] -= used


def _tiers(row: tuple[int, ...], racks: Sequence[int]) -> list[list[int]]:
    """``racks`` grouped by their traffic in ``row``, least first."""
    levels = sorted({row[r] for r in racks})
    return [[r for r in racks if row[r] == level] for level in levels]


def _turns(listed: Sequence[int], room: Mapping[int, int]) -> Iterator[int]:
    """The members of ``listed`` in turn, each as many times as its room."""
    left = {m: room[m] for m in listed}
    while left:
        for m in listed:
            if left.get(m, 0) > 0:
                left[m] -= 1
                yield m
        left = {m: n for m, n in left.items() if n > 0}


def _rack_key(rack: str | None) -> tuple[bool, str]:
    return rack is None, rack or ""
