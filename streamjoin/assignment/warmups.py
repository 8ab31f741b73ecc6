"""From the target assignment to the actual one: never cold when warm exists.

The target (balanced, sticky: :mod:`.quotas` and :mod:`.actives`) says where
every task should run. A stateful task whose target member is not caught up
on it, while another live eligible member is, stays active on a caught-up
member (its previous owner when that one is) and the target member gets a
**warm-up replica**: it restores the task's changelogs like a standby, and
the task moves once a later rebalance finds it caught up. Nobody caught up:
the task goes to the member with the fewest records to restore (the target
on a tie), and the target gets a warm-up when that is another member.

``max_warmup_replicas`` caps the warm-ups of the whole group: 0 turns them
off (every task goes to its target at once, warm or cold); beyond the cap a
task stays on a caught-up member without a warm-up, to get one in a later
round. Warm-ups are handed out task by task in (group, partition) order.
A warm-up never shares a host with the task's active: when every caught-up
member shares the target's host, the task stays where it is warm without one.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass

from streamjoin.assignment.fencing import History
from streamjoin.assignment.model import MemberState, TaskGroup

__all__ = ["Settled", "settle"]


@dataclass(frozen=True)
class Settled:
    """The actual assignment: per group and partition, the active and the warm-up holder."""

    #: member index of every task's active
    owners: list[list[int]]
    #: member index of every task's warm-up replica, or -1
    warmups: list[list[int]]
    #: stateful tasks made active on a member that was not / was caught up
    cold: int
    warm: int
    #: tasks that stayed off their target without a warm-up (cap or hosts)
    held_back: int


def settle(
    groups: Sequence[TaskGroup],
    targets: Sequence[Sequence[int]],
    history: History,
    members: Sequence[MemberState],
    acceptable_lag: int,
    cap: int | None,
) -> Settled:
    """Place every task's active on a caught-up member when one exists."""
    hosts = [m.host for m in members]
    budget = cap
    owners: list[list[int]] = []
    warmups: list[list[int]] = []
    cold = warm = held_back = 0
    for group, target in zip(groups, targets, strict=True):
        previous = history.owner[group.index]
        owner = list(target)
        warmup = [-1] * group.partitions
        if group.stateful:
            lags_of = history.warm.of
            caught_up = history.warm.caught_up_row(group.index, target, acceptable_lag)
            if None not in caught_up and False not in caught_up:  # mostly: all caught up
                warm += sum(map(operator.ne, target, previous))
                owners.append(owner)
                warmups.append(warmup)
                continue
            for p, t in enumerate(target):
                ready = caught_up[p]
                if ready is None:  # nobody has state: the target starts it
                    if t != previous[p]:
                        cold += 1
                    continue
                if ready:
                    if t != previous[p]:
                        warm += 1
                    continue
                task = (group.index, p)
                # (only eligible members report offsets: fencing leaves out the others)
                lags = lags_of(task)
                chosen, wants_warmup = _holder(lags, t, previous[p], acceptable_lag, hosts)
                if chosen != t and cap != 0:
                    if wants_warmup and (budget is None or budget > 0):
                        warmup[p] = t
                        if budget is not None:
                            budget -= 1
                    else:
                        held_back += 1
                    owner[p] = chosen
                if owner[p] != previous[p]:
                    lag = lags.get(owner[p])
                    if lag is not None and lag <= acceptable_lag:
                        warm += 1
                    else:
                        cold += 1
        owners.append(owner)
        warmups.append(warmup)
    return Settled(owners, warmups, cold, warm, held_back)


def _holder(
    lags: dict[int, int], target: int, previous: int, acceptable_lag: int, hosts: Sequence[str]
) -> tuple[int, bool]:
    """Who runs the task, and whether ``target`` may get a warm-up of it."""
    if not lags or lags.get(target, acceptable_lag + 1) <= acceptable_lag:
        return target, False
    caught = sorted((lag, m) for m, lag in lags.items() if lag <= acceptable_lag)
    if caught:
        # the previous owner first, then the most caught up; a member on the
        # target's host cannot leave a warm-up there
        order = [m for _, m in caught]
        if previous in order:
            order.remove(previous)
            order.insert(0, previous)
        for m in order:
            if hosts[m] != hosts[target]:
                return m, True
        return order[0], False
    best = min((lag, m) for m, lag in lags.items())
    if lags.get(target) == best[0]:
        return target, False
    return best[1], hosts[best[1]] != hosts[target]
