"""Every task whose active changes member, with the reason, for ``--explain`` and stats."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from streamjoin.assignment.fencing import History
from streamjoin.assignment.model import MemberState, Move, TaskGroup

__all__ = ["actual_moves"]


def actual_moves(
    groups: Sequence[TaskGroup],
    owners: Sequence[Sequence[int]],
    history: History,
    members: Sequence[MemberState],
    acceptable_lag: int,
    rack_moved: Collection[tuple[int, int]] = (),
) -> list[Move]:
    """The moves from the fenced previous owners (or none) to ``owners``.

    ``rack_moved``: tasks whose target the rack step (:mod:`.racks`) changed.

    A task nobody owned counts when its owner left or its claims were
    contested; the tasks of a fresh group are not moves.
    """
    moves: list[Move] = []
    for group, owner in zip(groups, owners, strict=True):
        previous = history.owner[group.index]
        for p, target in enumerate(owner):
            source = previous[p]
            task = (group.index, p)
            if source == target:
                continue
            if source < 0 and task not in history.contested and not _held_before(history, task):
                continue
            lag = history.warm.of(task).get(target) if group.stateful else None
            warm = lag is not None and lag <= acceptable_lag
            if source >= 0:
                if history.warmup_holder.get(task) == target:
                    reason = f"its warm-up on {members[target].id} caught up"
                elif task in rack_moved:
                    reason = "to a rack with more of its partitions' replicas (less traffic)"
                else:
                    reason = (
                        f"{members[source].id} held more than its balanced share of {group.name}"
                    )
            elif task in history.contested:
                reason = "conflicting claims of the same generation were dropped"
            else:
                reason = "its previous owner is gone"
            moves.append(
                Move(
                    group=group.index,
                    partition=p,
                    source=members[source].id if source >= 0 else None,
                    target=members[target].id,
                    reason=reason,
                    warm=warm,
                    lag=lag if warm else None,
                )
            )
    return moves


def _held_before(history: History, task: tuple[int, int]) -> bool:
    """Did anyone hold the task before (a departed owner's standby, a former owner)?"""
    return bool(history.standby_holders.get(task) or history.former.get(task))
