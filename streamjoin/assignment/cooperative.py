"""Cooperative rebalancing: one owner at a time (KIP-429's rule). Pure.

An eager member gives up every task before it rejoins, so the leader may
place its tasks anywhere. A **cooperative** member keeps running the tasks it
reports as its ``actives`` through the rebalance (it says so in its
metadata, each time). A task is then given to a member only in a generation
where no other member still owns it:

* the **live owners** of a task are the members that may be running it now:
  the cooperative members of the latest generation (the highest any member
  reports, or the leader's own last assignment's, whichever is higher) that
  claim it, and the members whose report is older than that, for what they
  may still run. A broker may hand the leader the metadata a member sent
  for an earlier rebalance (the embedded broker does, when the member's
  JoinGroup comes late): the member has lost nothing, it still runs what it
  claimed then (if it was cooperative then) and what the leader gave it in
  the latest generation (:class:`~streamjoin.assignment.model.LastAssignment`,
  known when this leader made it). A partition a member of the latest
  generation claims is not held for such a member: it was revoked from it
  before it could move. A member that lost its membership rejoins
  non-cooperative (it gave everything up) and an eager member gave its
  tasks up, so their own claims only help stickiness;
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
from streamjoin.assignment.model import LastAssignment, MemberState, TaskGroup

__all__ = ["check_one_owner", "latest_generation", "live_owners", "protocol", "withhold"]

Task = tuple[int, int]  # (group index, partition)


def protocol(members: Sequence[MemberState]) -> str:
    """``"cooperative"`` when every member is, ``"eager"`` when none is, else ``"mixed"``."""
    flags = {m.cooperative for m in members}
    if flags == {True}:
        return "cooperative"
    return "eager" if True not in flags else "mixed"


def latest_generation(members: Sequence[MemberState], last: LastAssignment | None) -> int | None:
    """The highest generation any member reports or the leader's last assignment
    made (``None``: neither says one)."""
    reported = [m.generation for m in members if m.generation is not None]
    if last is not None:
        reported.append(last.generation)
    return max(reported, default=None)


def _live_claims(
    members: Sequence[MemberState], last: LastAssignment | None
) -> list[tuple[int, dict[str, set[int]]]]:
    """(member index, topic -> partitions it may be running now), by member index."""
    latest = latest_generation(members, last)
    if latest is None:
        return []
    remembered = last.actives if last is not None and last.generation == latest else {}
    fresh = {i for i, m in enumerate(members) if m.cooperative and m.generation == latest}
    taken = {(t, p) for i in fresh for t, parts in members[i].actives.items() for p in parts}
    out: list[tuple[int, dict[str, set[int]]]] = []
    for i, member in enumerate(members):
        if i in fresh:
            out.append((i, {t: set(parts) for t, parts in member.actives.items()}))
            continue
        if member.generation is not None and member.generation >= latest:
            continue  # of the latest generation, not cooperative: it gave everything up
        claims: dict[str, set[int]] = {}
        sources = [remembered.get(member.id, {})]
        if member.cooperative:
            sources.append(member.actives)
        for source in sources:
            for topic, parts in source.items():
                left = {p for p in parts if (topic, p) not in taken}
                if left:
                    claims.setdefault(topic, set()).update(left)
        if claims:
            out.append((i, claims))
    return out


def live_owners(
    members: Sequence[MemberState],
    groups: Sequence[TaskGroup],
    last: LastAssignment | None = None,
) -> dict[Task, tuple[int, ...]]:
    """Task -> the indices (into *members*) of its live owners, sorted; tasks
    nobody may be running now are left out."""
    group_of = {topic: g.index for g in groups for topic in g.topics}
    found: dict[Task, set[int]] = {}
    for m, claims in _live_claims(members, last):
        for topic, parts in claims.items():
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
    last: LastAssignment | None = None,
) -> None:
    """Raise :class:`UnsafeHandoverError` if *actives* (member id -> topic ->
    partitions, the new assignment) gives a partition to a member while
    another member may still be running it (a live owner, above); global
    changelog topics (every member reads them) are left out."""
    claimed: dict[tuple[str, int], list[str]] = {}
    for m, claims in _live_claims(members, last):
        member_id = members[m].id
        for topic, parts in claims.items():
            if topic in global_topics:
                continue
            for p in parts:
                claimed.setdefault((topic, p), []).append(member_id)
    if not claimed:
        return
    for member_id in sorted(actives):
        for topic, given in sorted(actives[member_id].items()):
            if topic in global_topics:
                continue
            for p in given:
                others = tuple(sorted(o for o in claimed.get((topic, p), ()) if o != member_id))
                if others:
                    raise UnsafeHandoverError(topic, p, member_id, others)
