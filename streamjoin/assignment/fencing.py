"""Who owned what before, and who is caught up.

Ownership claims are fenced by generation (KIP-315 / KIP-341 rules): for each
task the claim with the highest generation wins; when several members claim a
task with the same highest generation, nobody keeps it. Caught-up-ness comes
only from the changelog offsets members report: no broker round trip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streamjoin.assignment.model import MemberState, TaskGroup

__all__ = ["History", "read_history"]

Task = tuple[int, int]  # (group index, partition)


@dataclass(frozen=True)
class History:
    """The previous state of the group, as far as the new assignment needs it."""

    #: task -> member index of its fenced previous owner
    owner: Mapping[Task, int]
    #: task -> member indices that held a standby for it, sorted
    standby_holders: Mapping[Task, tuple[int, ...]]
    #: task -> [(lag, member index)] of members with state for it, best first
    warm: Mapping[Task, tuple[tuple[int, int], ...]]
    #: tasks whose claims were dropped (equal-generation conflict)
    contested: tuple[Task, ...]
    #: claims that lost to a higher generation: (task, member index)
    fenced: tuple[tuple[Task, int], ...]


def read_history(members: Sequence[MemberState], groups: Sequence[TaskGroup]) -> History:
    """Resolve ownership claims and changelog lag for every task."""
    group_of: dict[str, TaskGroup] = {}
    for group in groups:
        for topic in group.topics:
            group_of[topic] = group
    eligible_sets = [frozenset(group.eligible) for group in groups]

    best: dict[Task, tuple[int, list[int]]] = {}
    losers: list[tuple[Task, int]] = []
    standby_holders: dict[Task, set[int]] = {}
    for m, member in enumerate(members):
        gen = member.generation
        if gen is not None:
            claimed: dict[int, set[int]] = {}
            for topic, partitions in member.actives.items():
                claim_group = group_of.get(topic)
                if claim_group is not None:
                    claimed.setdefault(claim_group.index, set()).update(partitions)
            for gi in sorted(claimed):
                if m not in eligible_sets[gi]:
                    continue
                limit = groups[gi].partitions
                for p in sorted(claimed[gi]):
                    if not 0 <= p < limit:
                        continue
                    task = (gi, p)
                    current = best.get(task)
                    if current is None:
                        best[task] = (gen, [m])
                    elif gen > current[0]:
                        losers.extend((task, loser) for loser in current[1])
                        best[task] = (gen, [m])
                    elif gen == current[0]:
                        current[1].append(m)
                    else:
                        losers.append((task, m))
        for topic, partitions in member.standbys.items():
            held_group = group_of.get(topic)
            if (
                held_group is None
                or not held_group.stateful
                or m not in eligible_sets[held_group.index]
            ):
                continue
            for p in partitions:
                if 0 <= p < held_group.partitions:
                    standby_holders.setdefault((held_group.index, p), set()).add(m)

    owner: dict[Task, int] = {}
    contested: list[Task] = []
    for task, (_, claimants) in best.items():
        if len(claimants) == 1:
            owner[task] = claimants[0]
        else:
            contested.append(task)
            losers.extend((task, m) for m in claimants)

    warm = _lags(members, groups, eligible_sets)
    return History(
        owner=owner,
        standby_holders={t: tuple(sorted(s)) for t, s in standby_holders.items()},
        warm=warm,
        contested=tuple(sorted(contested)),
        fenced=tuple(sorted(losers)),
    )


def _lags(
    members: Sequence[MemberState],
    groups: Sequence[TaskGroup],
    eligible_sets: Sequence[frozenset[int]],
) -> dict[Task, tuple[tuple[int, int], ...]]:
    """Lag of every member that reported offsets for all of a task's changelogs.

    lag = sum over the task's changelog partitions of (best reported offset -
    own offset).
    """
    changelog_group: dict[str, TaskGroup] = {}
    for group in groups:
        for topic in group.changelogs:
            changelog_group[topic] = group
    # task -> member -> {topic: offset}
    reported: dict[Task, dict[int, dict[str, int]]] = {}
    for m, member in enumerate(members):
        for topic, offsets in member.offsets.items():
            target = changelog_group.get(topic)
            if target is None or m not in eligible_sets[target.index]:
                continue
            for p, offset in offsets.items():
                if 0 <= p < target.partitions:
                    reported.setdefault((target.index, p), {}).setdefault(m, {})[topic] = offset
    warm: dict[Task, tuple[tuple[int, int], ...]] = {}
    for task, by_member in reported.items():
        topics = groups[task[0]].changelogs
        best = {t: max((o.get(t, -1) for o in by_member.values()), default=-1) for t in topics}
        ranked = sorted(
            (sum(best[t] - own[t] for t in topics), m)
            for m, own in by_member.items()
            if all(t in own for t in topics)
        )
        if ranked:
            warm[task] = tuple(ranked)
    return warm
