"""Which tasks a cooperative rebalance keeps running on this worker, and what
each rebalance restores (:func:`plan_rebalance`).

A task is (its co-partitioned group, its partition number): partition 2 of
the join's inputs and partition 2 of a repartitioned aggregate are two
tasks, which the assignor places independently. A task is kept when every
active changelog partition of it stays here and was restored already (or it
has no table and ran), and none of its input partitions was added; the
restorer restores only the others, so a task kept running is never restored
under its own feet because another group's task of the same number arrived.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from faust.types import TP

__all__ = ["RestorePlan", "TaskKey", "kept_tasks", "named", "plan_rebalance", "task_key"]

TaskKey = tuple[int, int]  # (group index, partition); group -1: a topic of no group
#: a partition number: what a join's task readiness is noted by
Partition = int


def task_key(assignor: Any) -> Callable[[TP], TaskKey]:  # Any: faust's or ours
    """A partition's task, from streamjoin's assignor (``group_for_topic``); a
    topic of no group (a global table's changelog) is a group of its own
    (-1); with another assignor every partition number is one task."""
    group_for_topic = getattr(assignor, "group_for_topic", None)
    if group_for_topic is None or not hasattr(assignor, "assigned_warmups"):
        return lambda tp: (0, tp.partition)

    def key(tp: TP) -> TaskKey:
        try:
            return (int(group_for_topic(tp.topic)), tp.partition)
        except KeyError:
            return (-1, tp.partition)

    return key


def kept_tasks(
    actives: set[TP],
    running: set[TP],
    previous: set[TP],
    restored: set[int],
    kept_before: set[TaskKey],
    task: Callable[[TP], TaskKey],
) -> set[TaskKey]:
    """Tasks whose *actives* (changelog partitions) were all active here before
    (*previous*) and ready: kept by the previous rebalance (*kept_before*) or
    restored since (their partition number in *restored*); and the tasks of
    *running* stream partitions (assigned before) with no table that were
    ready. The caller takes out the tasks with an added input partition."""

    def ready(tp: TP) -> bool:
        return tp.partition in restored or task(tp) in kept_before

    by_task: dict[TaskKey, bool] = {}
    for tp in sorted(actives):
        stays = tp in previous and ready(tp)
        key = task(tp)
        by_task[key] = by_task.get(key, True) and stays
    no_tables = {task(tp) for tp in running if ready(tp)} - set(by_task)
    return {k for k, stays in by_task.items() if stays} | no_tables


def named(tasks: AbstractSet[TaskKey]) -> str:
    """Tasks for a log line: partition numbers, by group when there are several."""
    groups = sorted({g for g, _ in tasks})
    if len(groups) == 1:
        return str(sorted(p for _, p in tasks))
    return "; ".join(f"group {g}: {sorted(p for gg, p in tasks if gg == g)}" for g in groups)


@dataclass(frozen=True)
class RestorePlan:
    """What one rebalance restores and what it leaves running.

    Attributes:
        kept: tasks that keep running untouched (cooperative only).
        renewed: kept tasks whose state is restored again all the same (a
            join's batch was abandoned, or its changelog is taken over anew):
            their inputs are read again from the committed offset.
        restore: active changelog partitions to restore.
        waiting: input partitions that wait until their task's tables are restored.
        reread: input partitions of the renewed tasks (paused, queue dropped,
            offsets forgotten: read again from the committed offset).
        seek: input partitions to seek to their committed offsets (``None``:
            every one, as faust does after an eager rebalance).
        still_ready: partition numbers whose readiness stands (kept, not restored).
    """

    kept: frozenset[TaskKey]
    renewed: frozenset[TaskKey]
    restore: frozenset[TP]
    waiting: frozenset[TP]
    reread: frozenset[TP]
    seek: frozenset[TP] | None
    still_ready: frozenset[Partition]


def plan_rebalance(
    *,
    cooperative: bool,
    actives: set[TP],
    streams: set[TP],
    added: set[TP],
    previous_actives: set[TP],
    ready: set[Partition],
    kept_before: set[TaskKey],
    again: set[TP],
    task: Callable[[TP], TaskKey],
) -> RestorePlan:
    """Decide what a rebalance restores (see :class:`RestorePlan`).

    *actives* and *streams* are the changelog and input partitions assigned
    now, *added* the partitions new to this worker, *previous_actives* the
    active changelog partitions before, *ready* the partition numbers
    restored (or kept) before, *kept_before* the tasks the previous rebalance
    kept, *again* the active changelog partitions a join or the ownership
    wants restored again. An eager rebalance keeps nothing.
    """
    kept: set[TaskKey] = set()
    if cooperative:
        running = streams - added
        new_tasks = {task(tp) for tp in streams if tp in added}
        kept = kept_tasks(actives, running, previous_actives, ready, kept_before, task) - new_tasks
    # a task kept here whose batch was abandoned or whose changelog is taken
    # over anew: its state again, its inputs from the committed offset (never
    # past the state's position)
    restored_again = {tp for tp in again if tp in actives and task(tp) in kept}
    renewed = {task(tp) for tp in restored_again}
    reread = {tp for tp in streams if task(tp) in renewed}
    restore = {tp for tp in actives if task(tp) not in kept} | restored_again
    restoring = {tp.partition for tp in restore}
    seek = None
    if cooperative:
        seek = frozenset({tp for tp in streams if tp in added} | reread)
    return RestorePlan(
        kept=frozenset(kept - renewed),
        renewed=frozenset(renewed),
        restore=frozenset(restore),
        waiting=frozenset({tp for tp in streams if task(tp) not in kept} | reread),
        reread=frozenset(reread),
        seek=seek,
        still_ready=frozenset({p for _, p in kept} - restoring),
    )
