"""Place every task's target owner within the balanced quotas.

Given the quotas (how many tasks of each group each member runs), members
first keep the tasks they owned before, up to their quota. The tasks that
must move then go warm first: to the member with the smallest changelog lag
that still has room; the rest fill the remaining room in member order.
:mod:`.warmups` then turns this target into the actual assignment.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from itertools import repeat

from streamjoin.assignment.fencing import NO_OWNER, History
from streamjoin.assignment.model import TaskGroup
from streamjoin.assignment.racks import RackCosts, deal_by_racks

__all__ = ["place_actives"]


def place_actives(
    groups: Sequence[TaskGroup],
    quotas: Sequence[Mapping[int, int]],
    history: History,
    acceptable_lag: int,
    previous_counts: Sequence[Mapping[int, int]],
    racks: Sequence[RackCosts | None] | None = None,
) -> list[list[int]]:
    """Return the owner (member index) of every task, per group.

    ``previous_counts``: per group, member -> tasks it owned before (``history.owner``).
    ``racks``: per group, the traffic of its tasks per rack (:mod:`.racks`); tasks
    nobody is warm for then go to a member in their least-traffic rack when one
    has room.
    """
    owners: list[list[int]] = []
    for group, quota, counts in zip(groups, quotas, previous_counts, strict=True):
        room = dict(quota)
        owner = _keep_previous(group, room, counts, history, acceptable_lag)
        cold = _place_warm(group, owner, room, history, acceptable_lag)
        costs = racks[group.index] if racks is not None else None
        if cold and costs is not None and costs.choice:
            deal_by_racks(cold, owner, room, costs)
        elif cold:
            _fill_in_member_order(cold, owner, room)
        owners.append(owner)
    return owners


def _keep_previous(
    group: TaskGroup,
    room: dict[int, int],
    counts: Mapping[int, int],
    history: History,
    acceptable_lag: int,
) -> list[int]:
    """The group's owner row with every previous owner keeping its tasks up to its quota.

    ``room`` (member -> quota) is left with what each member still takes. A
    member over its quota gives up first the tasks a former owner can take back
    warm, then those someone else can take over warm (:func:`_release_rank`).
    """
    earlier = history.owner[group.index]
    if all(map(operator.le, counts.values(), map(room.get, counts, repeat(0)))):
        # mostly: every previous owner keeps all its tasks
        for m, count in counts.items():
            room[m] -= count
        return list(earlier)
    owner = [NO_OWNER] * group.partitions
    held: dict[int, list[int]] = {}
    for p, previous in enumerate(earlier):
        if previous >= 0:
            held.setdefault(previous, []).append(p)
    for m in sorted(held):
        tasks = held[m]
        keep = room.get(m, 0)
        if len(tasks) > keep:
            tasks = sorted(
                tasks,
                key=lambda p, m=m: (  # type: ignore[misc]
                    _release_rank(history, group.index, p, m, acceptable_lag),
                    p,
                ),
            )
            tasks = tasks[:keep]
        for p in tasks:
            owner[p] = m
        if m in room:
            room[m] -= len(tasks)
    return owner


def _place_warm(
    group: TaskGroup,
    owner: list[int],
    room: dict[int, int],
    history: History,
    acceptable_lag: int,
) -> list[int]:
    """Give every task without an owner to a warm member with room (:func:`_warm_target`).

    Returns the tasks nobody warm could take (cold), in partition order.
    """
    cold: list[int] = []
    for p in range(group.partitions) if NO_OWNER in owner else ():
        if owner[p] >= 0:
            continue
        target = _warm_target(history, group.index, p, room, acceptable_lag)
        if target is None:
            cold.append(p)
            continue
        owner[p] = target
        room[target] -= 1
    return cold


def _fill_in_member_order(cold: Sequence[int], owner: list[int], room: dict[int, int]) -> None:
    """Deal the ``cold`` tasks round the members with room left, in member order."""
    open_members = [m for m in sorted(room) if room[m] > 0]
    slot = 0
    for p in cold:
        while room[open_members[slot]] <= 0:
            slot = (slot + 1) % len(open_members)
        target = open_members[slot]
        owner[p] = target
        room[target] -= 1
        slot = (slot + 1) % len(open_members)


def _release_rank(history: History, g: int, p: int, m: int, acceptable_lag: int) -> int:
    """-1: its warm-up (kept above all: targets stay on warm-ups), 0: nobody else
    is warm, 1: another member is warm, 2: a former owner is."""
    if history.warmup_holder.get((g, p)) == m:
        return -1
    warm = {other for lag, other in history.warm.get((g, p)) or () if lag <= acceptable_lag}
    warm.discard(m)
    if not warm:
        return 0
    return 2 if warm.intersection(history.former.get((g, p), ())) else 1


def _warm_target(
    history: History, g: int, p: int, room: Mapping[int, int], acceptable_lag: int
) -> int | None:
    ranked = history.warm.get((g, p)) if history.warm.reported((g, p)) else None
    if ranked:
        former = history.former.get((g, p), ())
        for lag, m in ranked:
            if lag <= acceptable_lag and m in former and room.get(m, 0) > 0:
                return m  # a restarted owner takes its task back
        for lag, m in ranked:
            if lag > acceptable_lag:
                break
            if room.get(m, 0) > 0:
                return m
        return None
    # nobody reported offsets: a previous standby holder is the best we know
    for m in history.standby_holders.get((g, p), ()):
        if room.get(m, 0) > 0:
            return m
    return None
