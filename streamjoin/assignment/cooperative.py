"""Cooperative rebalancing: one owner at a time (KIP-429's rule). Pure.

In an eager group every member gives up every task before it rejoins, so the
leader may place tasks anywhere. In a cooperative group (every member says it
is cooperative) a member keeps running the tasks it reports as its
``actives`` through the rebalance. A task is then given to a member only in a
generation where no other member still owns it:

* the **live owners** of a task are the members of the latest generation
  (the highest any member reports) that claim it. A member reporting an older
  generation was dropped from the group and has lost its tasks (it writes
  nothing for them until it has rejoined), so its claim only helps stickiness;
* a task whose placed owner is not its only live owner is **withheld**: no
  member gets it this round. Its live owners see it revoked, give it up
  (flush, commit, close) and rejoin at once; the follow-up rebalance gives it
  to its target. Meanwhile the target restores it as a warm-up, so it takes
  the task warm (it is then the task's warm-up holder, which the target
  sticks to). Two live owners at once (an ambiguous claim) withhold the task
  from everyone for a round, whoever the target is.

Standbys, warm-ups and global changelogs are replicas, not owners: nothing
here holds them back. :func:`check_one_owner` checks an assignment against
the members' claims partition by partition, independently of how it was
made: the leader runs it before it sends anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from streamjoin.assignment.errors import UnsafeHandoverError
from streamjoin.assignment.model import MemberState, TaskGroup

__all__ = ["check_one_owner", "is_cooperative", "live_owners", "withhold"]

Task = tuple[int, int]  # (group index, partition)


def is_cooperative(members: Sequence[MemberState]) -> bool:
    """Whether the group rebalances cooperatively: every member does (as Kafka
    picks the protocol every member supports; one eager member makes it eager)."""
    return bool(members) and all(m.cooperative for m in members)


def _latest(members: Sequence[MemberState]) -> int | None:
    return max((m.generation for m in members if m.generation is not None), default=None)


def live_owners(
    members: Sequence[MemberState], groups: Sequence[TaskGroup]
) -> dict[Task, tuple[int, ...]]:
    """Task -> the indices (into *members*) of its live owners, sorted; tasks
    nobody of the latest generation claims are left out."""
    latest = _latest(members)
    if latest is None:
        return {}
    group_of = {topic: g.index for g in groups for topic in g.topics}
    found: dict[Task, set[int]] = {}
    for m, member in enumerate(members):
        if member.generation != latest:
            continue
        for topic, parts in member.actives.items():
            gi = group_of.get(topic)
            if gi is None:
                continue
            for p in parts:
                if p < groups[gi].partitions:
                    found.setdefault((gi, p), set()).add(m)
    return {task: tuple(sorted(found[task])) for task in sorted(found)}


def withhold(
    owners: Sequence[Sequence[int]],
    live: Mapping[Task, tuple[int, ...]],
) -> list[Task]:
    """The tasks to give to nobody this round, sorted: those whose placed owner
    in *owners* (per group, per partition) is not their only live owner."""
    return [task for task, holders in live.items() if holders != (owners[task[0]][task[1]],)]


def check_one_owner(
    members: Sequence[MemberState],
    actives: Mapping[str, Mapping[str, Sequence[int]]],
    global_topics: frozenset[str],
) -> None:
    """Raise :class:`UnsafeHandoverError` if *actives* (member id -> topic ->
    partitions, the new assignment) gives a partition to a member while
    another member of the latest generation still claims it; global
    changelog topics (every member reads them) are left out."""
    latest = _latest(members)
    if latest is None:
        return
    claimed: dict[tuple[str, int], list[str]] = {}
    for member in members:
        if member.generation != latest:
            continue
        for topic, parts in member.actives.items():
            if topic in global_topics:
                continue
            for p in parts:
                claimed.setdefault((topic, p), []).append(member.id)
    if not claimed:
        return
    for member_id in sorted(actives):
        for topic, parts in sorted(actives[member_id].items()):
            if topic in global_topics:
                continue
            for p in parts:
                others = tuple(sorted(o for o in claimed.get((topic, p), ()) if o != member_id))
                if others:
                    raise UnsafeHandoverError(topic, p, member_id, others)
