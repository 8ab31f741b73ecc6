"""Who is caught up: every task's changelog lag, from the offsets members report.

Caught-up-ness comes only from the changelog offsets members report: no broker
round trip. :func:`read_lags` reads the reports; :class:`Lags` answers from them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from streamjoin.assignment.model import MemberState, TaskGroup

__all__ = ["Lags", "read_lags"]

Task = tuple[int, int]  # (group index, partition)

#: per group, per partition: member -> its offset (one changelog) or the list of
#: its offsets of each of the task's changelogs (None in the list: not reported);
#: None: nobody reported
Reports = list[list[dict[int, Any] | None]]


def read_lags(
    members: Sequence[MemberState], groups: Sequence[TaskGroup], eligible: Sequence[frozenset[int]]
) -> Lags:
    """Every task's changelog lags, from the offsets its group's eligible members report.

    ``eligible``: per group, its eligible members. Offsets of a topic that is
    no group's changelog, or of a partition the group does not have, are ignored.
    """
    reports: Reports = [[None] * g.partitions for g in groups]
    # changelog topic -> (its group's eligible members or None for everyone, its
    # group's report rows, partitions, changelogs, its index among them)
    slots = {
        t: (
            None if len(g.eligible) == len(members) else eligible[g.index],
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
                _report_bare(rows, m, offsets, limit)
            else:
                _report_one_of(rows, m, offsets, limit, width, ci)
    return Lags(reports, [len(g.changelogs) for g in groups])


def _report_bare(
    rows: list[dict[int, Any] | None], m: int, offsets: Mapping[int, int], limit: int
) -> None:
    """A one-changelog group keeps member ``m``'s bare offset per partition."""
    for p, offset in offsets.items():
        if 0 <= p < limit:
            single = rows[p]
            if single is None:
                rows[p] = {m: offset}
            else:
                single[m] = offset


def _report_one_of(
    rows: list[dict[int, Any] | None],
    m: int,
    offsets: Mapping[int, int],
    limit: int,
    width: int,
    ci: int,
) -> None:
    """Member ``m``'s offsets of changelog ``ci`` of ``width``, in its list per partition."""
    for p, offset in offsets.items():
        if 0 <= p < limit:
            by_member = rows[p]
            if by_member is None:
                by_member = rows[p] = {}
            own = by_member.get(m)
            if own is None:
                own = by_member[m] = [None] * width
            own[ci] = offset


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
