"""Which tasks a cooperative rebalance keeps running: keyed by (group, partition),
so a task of one co-partitioned group is not restored again under its own feet
because another group's task of the same partition number arrived."""

from __future__ import annotations

from faust.types import TP

from streamjoin.faust.restore.kept import RestorePlan, kept_tasks, named, plan_rebalance, task_key

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


CHANGELOG = [TP("billing-changelog", p) for p in range(3)]
INPUTS = [TP(t, p) for t in ("imp", "clk") for p in range(3)]


def _plan(
    cooperative: bool, again: set[TP] | None = None, added: set[TP] | None = None
) -> RestorePlan:
    """Tasks 0-2 of the join ran here, restored; now 0-2 are assigned again (task
    2's inputs new unless *added* says otherwise)."""
    return plan_rebalance(
        cooperative=cooperative,
        actives=set(CHANGELOG),
        streams=set(INPUTS),
        added={TP("imp", 2), TP("clk", 2)} if added is None else added,
        previous_actives=set(CHANGELOG[:2]),
        ready={0, 1},
        kept_before=set(),
        again=again or set(),
        task=task,
    )


def test_a_cooperative_plan_restores_only_what_it_does_not_keep() -> None:
    plan = _plan(cooperative=True)
    assert plan.kept == {(0, 0), (0, 1)} and plan.renewed == frozenset()
    assert plan.restore == {CHANGELOG[2]}
    assert plan.waiting == {TP("imp", 2), TP("clk", 2)}
    assert plan.seek == {TP("imp", 2), TP("clk", 2)}
    assert plan.still_ready == {0, 1} and plan.reread == frozenset()


def test_a_kept_task_asked_again_is_restored_and_read_again_from_its_offset() -> None:
    plan = _plan(cooperative=True, again={CHANGELOG[1]})
    assert plan.kept == {(0, 0)} and plan.renewed == {(0, 1)}
    assert plan.restore == {CHANGELOG[1], CHANGELOG[2]}
    assert plan.reread == {TP("imp", 1), TP("clk", 1)}
    assert plan.waiting == {TP(t, p) for t in ("imp", "clk") for p in (1, 2)}
    assert plan.seek == {TP(t, p) for t in ("imp", "clk") for p in (1, 2)}
    assert plan.still_ready == {0}


def test_an_eager_plan_keeps_nothing_and_seeks_everything() -> None:
    plan = _plan(cooperative=False, again={CHANGELOG[1]})
    assert plan.kept == frozenset() and plan.renewed == frozenset()
    assert plan.restore == set(CHANGELOG) and plan.waiting == set(INPUTS)
    assert plan.seek is None and plan.still_ready == frozenset()
