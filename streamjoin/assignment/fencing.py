"""Who owned what before, and who is caught up.

Task claims (a member saying it ran a task in a generation) are fenced by
generation (KIP-315 / KIP-341 rules): for each task the claim with the highest
generation wins; when several members claim a task with the same highest
generation, nobody keeps it. Caught-up-ness comes
only from the changelog offsets members report (:mod:`.lags`): no broker round
trip.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from streamjoin.assignment.lags import Lags, read_lags
from streamjoin.assignment.model import MemberState, TaskGroup

__all__ = ["NO_OWNER", "History", "TaskRows", "read_history"]

Task = tuple[int, int]  # (group index, partition)

#: ``History.owner`` where no member survives fencing as the task's previous owner
NO_OWNER: Final = -1
#: an owner row's mark, while claims are read, for a task that members of the
#: same highest generation claim: after the last claim it reads ``NO_OWNER``
_CONTESTED: Final = -2
#: the generation of a task nobody claimed yet: below every generation (>= 0)
_UNCLAIMED: Final = -1


@dataclass(frozen=True)
class History:
    """The previous state of the group, as far as the new assignment needs it."""

    #: per group, per partition: member index of the fenced previous owner, or
    #: ``NO_OWNER``
    owner: tuple[list[int], ...]
    #: task -> member indices that held a standby for it, sorted
    standby_holders: Mapping[Task, Sequence[int]]
    #: task -> [(lag, member index)] of its standby holders, former and
    #: previous owners that reported offsets for it, best first (computed on
    #: demand: only the tasks that move or need standbys are looked at)
    warm: Lags
    #: tasks whose claims were dropped (equal-generation conflict)
    contested: frozenset[Task]
    #: number of claims that lost to a higher generation or a conflict
    fenced: int
    #: task -> members whose claim lost to a newer generation (former owners,
    #: e.g. a worker that restarted after its tasks moved on), sorted
    former: Mapping[Task, tuple[int, ...]] = field(default_factory=dict)
    #: task -> the member holding its warm-up replica in the latest generation
    warmup_holder: Mapping[Task, int] = field(default_factory=dict)

    @property
    def owned(self) -> int:
        """Tasks with a surviving previous owner."""
        return sum(len(o) - o.count(NO_OWNER) for o in self.owner)


def read_history(members: Sequence[MemberState], groups: Sequence[TaskGroup]) -> History:
    """Resolve task claims and changelog lag for every task.

    Four questions, each answered from every member's report, in member order:
    who owned each task before (:func:`_fence_claims`), whose changelog offsets
    count (:func:`.lags.read_lags`), who holds a standby (:func:`_standby_rows`)
    and who holds a warm-up replica (:func:`_warmup_holders`).
    """
    eligible = [frozenset(g.eligible) for g in groups]
    claims = _fence_claims(members, groups, eligible)
    return History(
        owner=claims.owner,
        standby_holders=TaskRows(_standby_rows(members, groups, eligible)),
        warm=read_lags(members, groups, eligible),
        contested=frozenset(claims.contested),
        fenced=claims.fenced,
        former={t: tuple(sorted(ms)) for t, ms in claims.former.items()},
        warmup_holder=_warmup_holders(members, groups, eligible),
    )


@dataclass
class _Claims:
    """The task claims read so far, fenced by generation (KIP-315 / KIP-341)."""

    #: per group, per partition: the member whose claim wins so far, ``NO_OWNER``
    #: or ``_CONTESTED``
    owner: tuple[list[int], ...]
    #: per group, per partition: the generation of the claims in ``owner``
    generation: list[list[int]]
    #: task -> the members that claim it with the same highest generation
    contested: dict[Task, list[int]] = field(default_factory=dict)
    #: task -> members whose claim lost to a newer generation
    former: dict[Task, list[int]] = field(default_factory=dict)
    #: claims that lost to a newer generation or to a conflict
    fenced: int = 0

    def claim(self, gi: int, partitions: Sequence[int], limit: int, m: int, gen: int) -> None:
        """Member ``m`` claims partitions of group ``gi`` from the assignment of ``gen``.

        A newer generation fences the task's claimants so far; the same
        generation as the best so far contests the task; an older one is fenced.
        """
        owners, gens, former, contested = (
            self.owner[gi],
            self.generation[gi],
            self.former,
            self.contested,
        )
        fenced = 0
        for p in partitions:
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
        self.fenced += fenced

    def drop_contested(self) -> None:
        """Nobody keeps a contested task: every one of its claims is fenced."""
        for gi, p in self.contested:
            self.owner[gi][p] = NO_OWNER
        self.fenced += sum(len(claimants) for claimants in self.contested.values())


def _fence_claims(
    members: Sequence[MemberState], groups: Sequence[TaskGroup], eligible: Sequence[frozenset[int]]
) -> _Claims:
    """Every task's previous owner: the eligible member with the newest claim on it.

    A member without a generation claims nothing; a claim on a partition the
    group does not have is ignored.
    """
    claims = _Claims(
        owner=tuple([NO_OWNER] * g.partitions for g in groups),
        generation=[[_UNCLAIMED] * g.partitions for g in groups],
    )
    topic_group = {topic: g.index for g in groups for topic in g.topics}
    for m, member in enumerate(members):
        gen = member.generation
        if gen is None:
            continue
        for gi, partitions in _claimed_per_group(member.actives, topic_group).items():
            if m in eligible[gi]:
                claims.claim(gi, partitions, groups[gi].partitions, m, gen)
    claims.drop_contested()
    return claims


def _claimed_per_group(
    actives: Mapping[str, Sequence[int]], topic_group: Mapping[str, int]
) -> dict[int, Sequence[int]]:
    """Group index -> the partitions a member claims of any of the group's topics."""
    # a group's topics mostly claim the same partitions: merge only when not
    claimed: dict[int, Sequence[int]] = {}
    for topic, partitions in actives.items():
        gi = topic_group.get(topic)
        if gi is not None:
            had = claimed.get(gi)
            if had is None:
                claimed[gi] = partitions
            elif had != partitions:
                claimed[gi] = sorted({*had, *partitions})
    return claimed


def _warmup_holders(
    members: Sequence[MemberState], groups: Sequence[TaskGroup], eligible: Sequence[frozenset[int]]
) -> dict[Task, int]:
    """Task -> the one eligible member holding its warm-up in the latest generation.

    A warm-up from an older assignment is stale; when two members claim one
    warm-up in the same generation, neither counts.
    """
    latest = max((m.generation for m in members if m.generation is not None), default=None)
    changelog_group = {t: g for g in groups for t in g.changelogs}
    warmups: dict[Task, list[int]] = {}
    for m, member in enumerate(members):
        gen = member.generation
        if gen is None or gen != latest:
            continue
        for topic, partitions in member.warmups.items():
            group = changelog_group.get(topic)
            if group is None or m not in eligible[group.index]:
                continue
            for p in partitions:
                if 0 <= p < group.partitions:
                    entry = warmups.setdefault((group.index, p), [])
                    if not entry or entry[-1] != m:
                        entry.append(m)
    return {t: ms[0] for t, ms in sorted(warmups.items()) if len(ms) == 1}


def _standby_rows(
    members: Sequence[MemberState], groups: Sequence[TaskGroup], eligible: Sequence[frozenset[int]]
) -> list[list[list[int] | None]]:
    """Per group, per partition: the eligible members holding a standby (None: nobody).

    Only stateful groups have standbys; members come in index order, so each
    list is sorted, and a member listing a task under several topics counts once.
    """
    rows: list[list[list[int] | None]] = [[None] * g.partitions for g in groups]
    # a stateful group's topic -> its standby rows, partitions, eligible members (None: all)
    held_slots = {
        topic: (
            rows[g.index],
            g.partitions,
            None if len(g.eligible) == len(members) else eligible[g.index],
        )
        for g in groups
        if g.stateful
        for topic in g.topics
    }
    for m, member in enumerate(members):
        for topic, partitions in member.standbys.items():
            held = held_slots.get(topic)
            if held is None:
                continue
            held_rows, limit, allowed = held
            if allowed is not None and m not in allowed:
                continue
            for p in partitions:
                if 0 <= p < limit:
                    holding = held_rows[p]
                    if holding is None:
                        held_rows[p] = [m]
                    elif holding[-1] != m:
                        holding.append(m)
    return rows


class TaskRows(Mapping[Task, Sequence[int]]):
    """Task -> members, kept as one row per group: no tuple key per task.

    Read-only; iterates tasks in (group, partition) order.
    """

    __slots__ = ("_rows",)

    def __init__(self, rows: Sequence[Sequence[Sequence[int] | None]]) -> None:
        self._rows = rows

    def __getitem__(self, task: Task) -> Sequence[int]:
        found: Sequence[int] | None = self.get(task)
        if found is None:
            raise KeyError(task)
        return found

    def get(self, task: Task, default: Any = None) -> Any:
        gi, p = task
        try:
            found = self._rows[gi][p] if gi >= 0 and p >= 0 else None
        except IndexError:
            found = None
        return default if found is None else found

    def row(self, gi: int, partitions: int) -> list[Sequence[int]]:
        """Group ``gi``'s members per partition, ``()`` where there are none."""
        found = self._rows[gi] if 0 <= gi < len(self._rows) else ()
        row = [() if m is None else m for m in found[:partitions]]
        row.extend(() for _ in range(partitions - len(row)))
        return row

    def __iter__(self) -> Iterator[Task]:
        for gi, row in enumerate(self._rows):
            for p, found in enumerate(row):
                if found is not None:
                    yield (gi, p)

    def __len__(self) -> int:
        return sum(len(row) - row.count(None) for row in self._rows)

    def __bool__(self) -> bool:
        return any(row.count(None) != len(row) for row in self._rows)

    def __contains__(self, task: object) -> bool:
        if not isinstance(task, tuple) or len(task) != 2:
            return False
        return self.get(task) is not None
