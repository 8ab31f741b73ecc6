"""Which tasks a cooperative rebalance keeps running: keyed by (group, partition),
so a task of one co-partitioned group is not restored again under its own feet
because another group's task of the same partition number arrived."""

from __future__ import annotations

from faust.types import TP

from streamjoin.faust.restore.kept import kept_tasks, named, task_key

GROUPS = {"imp": 0, "clk": 0, "billing-changelog": 0, "rep": 1, "stats-changelog": 1}


def task(tp: TP) -> tuple[int, int]:
    """The task key streamjoin's assignor gives (see task_key): group, partition."""
    return (GROUPS.get(tp.topic, -1), tp.partition)


JOIN = {TP("billing-changelog", 2)}
STATS = {TP("stats-changelog", 2)}


def test_another_groups_task_of_the_same_number_does_not_unkeep_a_running_task() -> None:
    # the join's task 2 ran here, restored; the aggregate's task 2 arrives
    actives = JOIN | STATS
    running = {TP("imp", 2), TP("clk", 2)}
    added = {task(TP("rep", 2))}
    kept = kept_tasks(actives, running, JOIN, {2}, set(), task) - added
    assert kept == {(0, 2)}
    assert {tp for tp in actives if task(tp) not in kept} == STATS  # only it is restored


def test_a_kept_task_stays_ready_while_another_groups_task_of_its_number_restores() -> None:
    actives = JOIN | STATS
    # partition 2's restored time was dropped while the aggregate's task 2 restored;
    # the join's task 2 was kept by the previous rebalance: it is still ready
    kept = kept_tasks(actives, {TP("imp", 2)}, actives, set(), {(0, 2)}, task)
    assert kept == {(0, 2)}
    # and without having been kept or restored, nothing is kept
    assert kept_tasks(actives, {TP("imp", 2)}, actives, set(), set(), task) == set()


def test_a_task_with_a_changelog_partition_new_here_is_not_kept() -> None:
    both = {TP("billing-changelog", 2), TP("billing-changelog", 3)}
    kept = kept_tasks(both, set(), {TP("billing-changelog", 2)}, {2, 3}, set(), task)
    assert kept == {(0, 2)}


def test_a_stateless_task_that_ran_is_kept_and_a_global_table_counts_apart() -> None:
    kept = kept_tasks({TP("global-changelog", 1)}, {TP("rep", 1)}, set(), {1}, set(), task)
    assert kept == {(1, 1)}


def test_with_another_assignor_a_partition_number_is_one_task() -> None:
    task = task_key(object())
    assert task(TP("imp", 4)) == task(TP("rep", 4)) == (0, 4)
    assert named({(0, 4), (0, 1)}) == "[1, 4]"
    assert named({(0, 4), (1, 1)}) == "group 0: [4]; group 1: [1]"
