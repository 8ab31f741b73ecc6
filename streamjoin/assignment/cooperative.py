"""Cooperative rebalancing: one owner at a time (KIP-429's rule). Pure.

An eager member gives up every task before it rejoins, so the leader may
place its tasks anywhere. A **cooperative** member keeps running the tasks it
reports as its ``actives`` through the rebalance (it says so in its
metadata, each time). A task is then given to a member only in a generation
where no other member still owns it:

* the **live owners** of a task are the cooperative members of the latest
  generation (the highest any member reports) that claim it. A member
  reporting an older generation was dropped from the group and has lost its
  tasks (it writes nothing for them until it has rejoined), and an eager
  member gave its tasks up, so their claims only help stickiness;
* a task whose placed owner is not its only live owner is **withheld**: no
  member gets it this round. Its live owners see it revoked, give it up
  (flush, commit, close) and rejoin at once; the follow-up rebalance gives it
  to its target. Meanwhile the target restores it as a warm-up, so it takes
  the task warm (it is then the task's warm-up holder, which the target
  sticks to). Two live owners at once (an ambiguous claim) withhold the task
  from everyone for a round, whoever the target is.

The rule is per member, so a group where some members are cooperative and
some eager (a rolling upgrade, a worker with cooperative rebalancing turned
off) is safe too: only the cooperative members' tasks wait for a handover.
Standbys, warm-ups and global changelogs are replicas, not owners: nothing
here holds them back. :func:`check_one_owner` checks an assignment against
the members' claims partition by partition, independently of how it was
made: the leader runs it before it sends anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from streamjoin.assignment.errors import UnsafeHandoverError
from streamjoin.assignment.model import MemberState, TaskGroup

__all__ = ["check_one_owner", "live_owners", "protocol", "withhold"]

Task = tuple[int, int]  # (group index, partition)


def protocol(members: Sequence[MemberState]) -> str:
    """``"cooperative"`` when every member is, ``"eager"`` when none is, else ``"mixed"``."""
    flags = {m.cooperative for m in members}
    if flags == {True}:
        return "cooperative"
    return "eager" if True not in flags else "mixed"


def _live(members: Sequence[MemberState]) -> list[int]:
    """Indices of the members whose claims are live: cooperative, of the latest generation."""
    latest = max((m.generation for m in members if m.generation is not None), default=None)
    if latest is None:
        return []
    return [i for i, m in enumerate(members) if m.cooperative and m.generation == latest]


def live_owners(
    members: Sequence[MemberState], groups: Sequence[TaskGroup]
) -> dict[Task, tuple[int, ...]]:
    """Task -> the indices (into *members*) of its live owners, sorted; tasks
    no cooperative member of the latest generation claims are left out."""
    group_of = {topic: g.index for g in groups for topic in g.topics}
    found: dict[Task, set[int]] = {}
    for m in _live(members):
        for topic, parts in members[m].actives.items():
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
    another cooperative member of the latest generation still claims it; global
    changelog topics (every member reads them) are left out."""
    claimed: dict[tuple[str, int], list[str]] = {}
    for m in _live(members):
        member = members[m]
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
