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

A warm-up may share the active's host (issue 29: several workers per host). It
is a temporary copy on the member the task is headed to, not a failure-isolation
replica: it does not count toward ``standby_replicas``, and standbys stay off
the active's host. Were it kept off that host, a task whose balanced target is
its active's host-mate (the only caught-up member) could be neither warmed up
there nor moved, and would be held back for ever. Kafka Streams places its
warm-ups on the destination client wherever that runs, too.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass

from streamjoin.assignment.fencing import History
from streamjoin.assignment.model import TaskGroup

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
    #: tasks that stayed off their target without a warm-up (the cap)
    held_back: int


def settle(
    groups: Sequence[TaskGroup],
    targets: Sequence[Sequence[int]],
    history: History,
    acceptable_lag: int,
    cap: int | None,
) -> Settled:
    """Place every task's active on a caught-up member when one exists."""
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
                chosen = _holder(lags, t, previous[p], acceptable_lag)
                if chosen != t and cap != 0:
                    if budget is None or budget > 0:
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


def _holder(lags: dict[int, int], target: int, previous: int, acceptable_lag: int) -> int:
    """Who runs the task while ``target`` (when it is another member) warms it up."""
    if not lags or lags.get(target, acceptable_lag + 1) <= acceptable_lag:
        return target
    if lags.get(previous, acceptable_lag + 1) <= acceptable_lag:
        return previous  # the previous owner first, then the most caught up
    best = min((lag, m) for m, lag in lags.items())
    if best[0] > acceptable_lag and lags.get(target) == best[0]:
        return target  # nobody caught up, and the target has the fewest records to restore
    return best[1]
