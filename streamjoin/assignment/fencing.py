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
    own offset). Returned per task as ``(lag, member)`` pairs, best first.
    """
    changelog_group: dict[str, TaskGroup] = {}
    for group in groups:
        for topic in group.changelogs:
            changelog_group[topic] = group
    # task -> [(member, topic, offset)] in member order
    reported: dict[Task, list[tuple[int, str, int]]] = {}
    for m, member in enumerate(members):
        for topic, offsets in member.offsets.items():
            target = changelog_group.get(topic)
            if target is None or m not in eligible_sets[target.index]:
                continue
            gi, limit = target.index, target.partitions
            for p, offset in offsets.items():
                if 0 <= p < limit:
                    entry = reported.get((gi, p))
                    if entry is None:
                        reported[(gi, p)] = [(m, topic, offset)]
                    else:
                        entry.append((m, topic, offset))
    warm: dict[Task, tuple[tuple[int, int], ...]] = {}
    for task, entries in reported.items():
        topics = groups[task[0]].changelogs
        if len(topics) == 1:  # the common case: one changelog per task
            if len(entries) == 1:
                warm[task] = ((0, entries[0][0]),)
            elif len(entries) == 2:
                (m1, _, o1), (m2, _, o2) = entries
                best = max(o1, o2)
                first, second = (best - o1, m1), (best - o2, m2)
                warm[task] = (first, second) if first <= second else (second, first)
            else:
                best = max(offset for _, _, offset in entries)
                warm[task] = tuple(sorted((best - offset, m) for m, _, offset in entries))
            continue
        own: dict[int, dict[str, int]] = {}
        top: dict[str, int] = {}
        for m, topic, offset in entries:
            own.setdefault(m, {})[topic] = offset
            top[topic] = max(offset, top.get(topic, offset))
        ranked = sorted(
            (sum(top[t] - offsets[t] for t in topics), m)
            for m, offsets in own.items()
            if len(offsets) == len(topics)
        )
        if ranked:
            warm[task] = tuple(ranked)
    return warm
