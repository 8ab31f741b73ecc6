"""Which tasks a cooperative rebalance keeps running on this worker.

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
from typing import Any

from faust.types import TP

__all__ = ["TaskKey", "kept_tasks", "named", "task_key"]

TaskKey = tuple[int, int]  # (group index, partition); group -1: a topic of no group


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


def named(tasks: set[TaskKey]) -> str:
    """Tasks for a log line: partition numbers, by group when there are several."""
    groups = sorted({g for g, _ in tasks})
    if len(groups) == 1:
        return str(sorted(p for _, p in tasks))
    return "; ".join(f"group {g}: {sorted(p for gg, p in tasks if gg == g)}" for g in groups)
