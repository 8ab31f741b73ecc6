"""Who owned what before, and who is caught up.

Ownership claims are fenced by generation (KIP-315 / KIP-341 rules): for each
task the claim with the highest generation wins; when several members claim a
task with the same highest generation, nobody keeps it. Caught-up-ness comes
only from the changelog offsets members report: no broker round trip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from streamjoin.assignment.model import MemberState, TaskGroup

__all__ = ["History", "read_history"]

Task = tuple[int, int]  # (group index, partition)


@dataclass(frozen=True)
class History:
    """The previous state of the group, as far as the new assignment needs it."""

    #: per group, per partition: member index of the fenced previous owner, or -1
    owner: tuple[list[int], ...]
    #: task -> member indices that held a standby for it, sorted
    standby_holders: Mapping[Task, tuple[int, ...]]
    #: task -> [(lag, member index)] of members with state for it, best first
    warm: Mapping[Task, tuple[tuple[int, int], ...]]
    #: tasks whose claims were dropped (equal-generation conflict)
    contested: frozenset[Task]
    #: number of claims that lost to a higher generation or a conflict
    fenced: int
    #: task -> members whose claim lost to a newer generation (former owners,
    #: e.g. a worker that restarted after its tasks moved on), sorted
    former: Mapping[Task, tuple[int, ...]] = field(default_factory=dict)

    @property
    def owned(self) -> int:
        """Tasks with a surviving previous owner."""
        return sum(len(o) - o.count(-1) for o in self.owner)


_CONTESTED = -2


def read_history(members: Sequence[MemberState], groups: Sequence[TaskGroup]) -> History:
    """Resolve ownership claims and changelog lag for every task."""
    group_of: dict[str, TaskGroup] = {}
    for group in groups:
        for topic in group.topics:
            group_of[topic] = group
    eligible_sets = [frozenset(group.eligible) for group in groups]

    owner = tuple([-1] * g.partitions for g in groups)
    top = [[-1] * g.partitions for g in groups]
    contested: dict[Task, list[int]] = {}
    former: dict[Task, list[int]] = {}
    fenced = 0
    standby_holders: dict[Task, list[int]] = {}
    for m, member in enumerate(members):
        gen = member.generation
        if gen is not None:
            claimed: dict[int, set[int]] = {}
            for topic, partitions in member.actives.items():
                claim_group = group_of.get(topic)
                if claim_group is not None:
                    claimed.setdefault(claim_group.index, set()).update(partitions)
            for gi, parts in claimed.items():
                if m not in eligible_sets[gi]:
                    continue
                owners, gens, limit = owner[gi], top[gi], groups[gi].partitions
                for p in parts:
                    if not 0 <= p < limit:
                        continue
                    best = gens[p]
                    if gen > best:
                        current = owners[p]
                        if current >= 0:
                            fenced += 1
                            former.setdefault((gi, p), []).append(current)
                        elif current == _CONTESTED:
                            fenced += len(contested.pop((gi, p)))
                        owners[p] = m
                        gens[p] = gen
                    elif gen == best:
                        current = owners[p]
                        if current >= 0:
                            contested[(gi, p)] = [current, m]
                            owners[p] = _CONTESTED
                        else:
                            contested[(gi, p)].append(m)
                    else:
                        fenced += 1
                        former.setdefault((gi, p), []).append(m)
        for topic, partitions in member.standbys.items():
            held_group = group_of.get(topic)
            if (
                held_group is None
                or not held_group.stateful
                or m not in eligible_sets[held_group.index]
            ):
                continue
            gi, limit = held_group.index, held_group.partitions
            for p in partitions:
                if 0 <= p < limit:
                    # members come in index order: lists stay sorted, and a
                    # member listing a task under several changelogs counts once
                    entry = standby_holders.setdefault((gi, p), [])
                    if not entry or entry[-1] != m:
                        entry.append(m)

    for gi, p in contested:
        owner[gi][p] = -1
    fenced += sum(len(claimants) for claimants in contested.values())
    warm = _lags(members, groups, eligible_sets)
    return History(
        owner=owner,
        standby_holders={t: tuple(s) for t, s in standby_holders.items()},
        warm=warm,
        contested=frozenset(contested),
        fenced=fenced,
        former={t: tuple(sorted(ms)) for t, ms in former.items()},
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
