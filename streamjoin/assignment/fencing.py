"""Who owned what before, and who is caught up.

Ownership claims are fenced by generation (KIP-315 / KIP-341 rules): for each
task the claim with the highest generation wins; when several members claim a
task with the same highest generation, nobody keeps it. Caught-up-ness comes
only from the changelog offsets members report: no broker round trip.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from streamjoin.assignment.model import MemberState, TaskGroup

__all__ = ["History", "TaskRows", "read_history"]

Task = tuple[int, int]  # (group index, partition)


@dataclass(frozen=True)
class History:
    """The previous state of the group, as far as the new assignment needs it."""

    #: per group, per partition: member index of the fenced previous owner, or -1
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
        return sum(len(o) - o.count(-1) for o in self.owner)


_CONTESTED = -2


def read_history(members: Sequence[MemberState], groups: Sequence[TaskGroup]) -> History:
    """Resolve ownership claims and changelog lag for every task."""
    eligible_sets = [frozenset(g.eligible) for g in groups]
    claim_index = {topic: g.index for g in groups for topic in g.topics}  # topic -> group

    owner = tuple([-1] * g.partitions for g in groups)
    top = [[-1] * g.partitions for g in groups]
    contested: dict[Task, list[int]] = {}
    former: dict[Task, list[int]] = {}
    fenced = 0
    # per group, per partition: members holding a standby (None: nobody)
    standby_rows: list[list[list[int] | None]] = [[None] * g.partitions for g in groups]
    changelog_group = {t: g for g in groups for t in g.changelogs}
    # a stateful group's topic -> its standby rows, partitions, eligible members (None: all)
    held_slots = {
        topic: (
            standby_rows[g.index],
            g.partitions,
            None if len(g.eligible) == len(members) else eligible_sets[g.index],
        )
        for g in groups
        if g.stateful
        for topic in g.topics
    }
    # per group, per partition: member -> its offset of each of the task's
    # changelogs (None: not reported); one-changelog groups keep the bare offset
    reports: list[list[dict[int, Any] | None]] = [[None] * g.partitions for g in groups]
    latest = max((m.generation for m in members if m.generation is not None), default=None)
    warmups: dict[Task, list[int]] = {}
    # changelog topic -> (its group's eligible members or None for everyone, its
    # group's report rows, partitions, changelogs, its index among them)
    slots = {
        t: (
            None if len(g.eligible) == len(members) else eligible_sets[g.index],
            reports[g.index],
            g.partitions,
            len(g.changelogs),
            i,
        )
        for g in groups
        for i, t in enumerate(g.changelogs)
    }
    for m, member in enumerate(members):
        for topic, offsets in member.offsets.items():
            slot = slots.get(topic)
            if slot is None:
                continue
            allowed, rows, limit, width, ci = slot
            if allowed is not None and m not in allowed:
                continue
            if width == 1:
                for p, offset in offsets.items():
                    if 0 <= p < limit:
                        single = rows[p]
                        if single is None:
                            rows[p] = {m: offset}
                        else:
                            single[m] = offset
                continue
            for p, offset in offsets.items():
                if 0 <= p < limit:
                    by_member = rows[p]
                    if by_member is None:
                        by_member = rows[p] = {}
                    own = by_member.get(m)
                    if own is None:
                        own = by_member[m] = [None] * width
                    own[ci] = offset
        gen = member.generation
        if gen is not None and gen == latest:
            # warm-ups count only from the latest assignment: an older one is stale
            for topic, partitions in member.warmups.items():
                warm_group = changelog_group.get(topic)
                if warm_group is None or m not in eligible_sets[warm_group.index]:
                    continue
                for p in partitions:
                    if 0 <= p < warm_group.partitions:
                        entry = warmups.setdefault((warm_group.index, p), [])
                        if not entry or entry[-1] != m:
                            entry.append(m)
        if gen is not None:
            # a group's topics mostly claim the same partitions: merge only when not
            claimed: dict[int, Sequence[int]] = {}
            for topic, partitions in member.actives.items():
                claim_gi = claim_index.get(topic)
                if claim_gi is not None:
                    had = claimed.get(claim_gi)
                    if had is None:
                        claimed[claim_gi] = partitions
                    elif had != partitions:
                        claimed[claim_gi] = sorted({*had, *partitions})
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
            held = held_slots.get(topic)
            if held is None:
                continue
            held_rows, limit, allowed_to_hold = held
            if allowed_to_hold is not None and m not in allowed_to_hold:
                continue
            for p in partitions:
                if 0 <= p < limit:
                    # members come in index order: lists stay sorted, and a
                    # member listing a task under several changelogs counts once
                    holding = held_rows[p]
                    if holding is None:
                        held_rows[p] = [m]
                    elif holding[-1] != m:
                        holding.append(m)

    for gi, p in contested:
        owner[gi][p] = -1
    fenced += sum(len(claimants) for claimants in contested.values())
    formers = {t: tuple(sorted(ms)) for t, ms in former.items()}
    return History(
        owner=owner,
        standby_holders=TaskRows(standby_rows),
        warm=Lags(reports, [len(g.changelogs) for g in groups]),
        contested=frozenset(contested),
        fenced=fenced,
        former=formers,
        # two members claiming one warm-up of the same generation: neither counts
        warmup_holder={t: ms[0] for t, ms in sorted(warmups.items()) if len(ms) == 1},
    )


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


class Lags:
    """Per-task changelog lag of the eligible members that hold the task's state.

    A member counts when it reported offsets for every changelog partition of
    the task. lag = sum over the task's changelogs of (best reported offset -
    own offset). A member is *caught up* when its lag is at most the group's
    ``acceptable_recovery_lag``.
    """

    def __init__(
        self, reports: Sequence[Sequence[Mapping[int, Any] | None]], widths: Sequence[int]
    ) -> None:
        #: per group, per partition: member -> offset (one changelog) or the
        #: list of its offsets of each changelog (None: not reported)
        self._reports = reports
        self._widths = widths
        self._cache: dict[Task, tuple[tuple[int, int], ...] | None] = {}
        self._dicts: dict[Task, dict[int, int]] = {}

    def get(
        self, task: Task, default: tuple[tuple[int, int], ...] | None = None
    ) -> tuple[tuple[int, int], ...] | None:
        """``(lag, member)`` pairs, best first; ``default`` when nobody reported offsets."""
        if task in self._cache:
            found = self._cache[task]
        else:
            found = self._cache[task] = self._compute(task)
        return default if found is None else found

    def of(self, task: Task) -> dict[int, int]:
        """Member -> lag of every member that reported offsets for all of the task."""
        found = self._dicts.get(task)
        if found is None:
            found = self._dicts[task] = {m: lag for lag, m in self.get(task) or ()}
        return found

    def reported(self, task: Task) -> bool:
        """Did any member report offsets for the task's changelogs? (Cheap.)"""
        return bool(self._reports[task[0]][task[1]])

    def caught_up_row(
        self, gi: int, members: Sequence[int], acceptable_lag: int
    ) -> list[bool | None]:
        """For every partition ``p`` of group ``gi``: is ``members[p]`` caught up on it?

        None where nobody reported offsets for the task. The same answers as
        :meth:`reported` and :meth:`is_caught_up`, for a whole group at once.
        """
        rows = self._reports[gi]
        if self._widths[gi] != 1:
            return [
                self.is_caught_up((gi, p), m, acceptable_lag) if rows[p] else None
                for p, m in enumerate(members)
            ]
        answers: list[bool | None] = []
        for by_member, m in zip(rows, members, strict=True):
            if not by_member:
                answers.append(None)
                continue
            own = by_member.get(m)
            if own is None:
                answers.append(False)
                continue
            floor = own + acceptable_lag
            answers.append(max(by_member.values()) <= floor)
        return answers

    def is_caught_up(self, task: Task, m: int, acceptable_lag: int) -> bool:
        """Is member ``m`` caught up on ``task``? (The common question, answered cheaply.)"""
        gi, p = task
        by_member = self._reports[gi][p]
        if not by_member:
            return False
        own = by_member.get(m)
        if own is None:
            return False
        if self._widths[gi] == 1:
            floor = own + acceptable_lag
            return all(theirs <= floor for theirs in by_member.values())
        if None in own:
            return False
        return self.of(task).get(m, acceptable_lag + 1) <= acceptable_lag

    def _compute(self, task: Task) -> tuple[tuple[int, int], ...] | None:
        gi, p = task
        by_member = self._reports[gi][p]
        if not by_member:
            return None
        if self._widths[gi] == 1:  # one changelog: the common case, kept cheap
            best = max(by_member.values())
            return tuple(sorted((best - own, m) for m, own in by_member.items()))
        # members that reported every changelog of the task (no None left)
        reported = cast(
            list[tuple[int, Sequence[int]]],
            [(m, own) for m, own in by_member.items() if None not in own],
        )
        if not reported:
            return None
        width = len(reported[0][1])
        top = [max(own[i] for _, own in reported) for i in range(width)]
        return tuple(
            sorted((sum(b - o for b, o in zip(top, own, strict=True)), m) for m, own in reported)
        )
