"""Task ownership over time, as the demo's report draws it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from streamjoin.ads.demo.timeline import (
    Handover,
    Interval,
    Pace,
    Sample,
    demo_time,
    longest_restoring,
    ownership_intervals,
    rebalance_outcomes,
    rebalances,
    restoring_intervals,
    stop_intervals,
    warmup_intervals,
)

#: time.time() when the demo started, in the tests below
WALL = 1_767_225_600.0


def test_a_task_moving_between_workers_gives_two_bars_and_one_rebalance() -> None:
    samples = [
        Sample(0.0, "w1", (0, 1)),
        Sample(0.0, "w2", (2,)),
        Sample(1.0, "w1", (0, 1)),
        Sample(1.0, "w2", (2,)),
        Sample(2.0, "w1", (0,)),  # mid-rebalance: task 1 has no owner for a moment
        Sample(2.0, "w2", (2,)),
        Sample(3.0, "w1", (0,)),
        Sample(3.0, "w2", (1, 2)),
    ]
    bars = ownership_intervals(samples, end=5.0)
    assert bars == [
        Interval(0, "w1", 0.0, 5.0),
        Interval(1, "w1", 0.0, 2.0),
        Interval(1, "w2", 3.0, 5.0),
        Interval(2, "w2", 0.0, 5.0),
    ]
    assert rebalances(samples) == [3.0]


def test_no_samples_no_bars() -> None:
    assert ownership_intervals([], end=1.0) == []
    assert rebalances([]) == []


def test_a_cold_move_is_a_restoring_bar_on_the_new_owner() -> None:
    """Task 1 moves from w1 to w2 cold: w2 owns it at 3 s but restores it until 5 s."""
    samples = [
        Sample(0.0, "w1", (0, 1)),
        Sample(0.0, "w2", (), restoring=()),
        Sample(3.0, "w1", (0,)),
        Sample(3.0, "w2", (1,), restoring=(1,)),
        Sample(4.0, "w1", (0,)),
        Sample(4.0, "w2", (1,), restoring=(1,)),
        Sample(5.0, "w1", (0,)),
        Sample(5.0, "w2", (1,)),
    ]
    assert restoring_intervals(samples, end=8.0) == [Interval(1, "w2", 3.0, 5.0)]
    assert longest_restoring(samples, end=8.0) == {1: 2.0}
    assert warmup_intervals(samples, end=8.0) == []


def test_a_warm_move_has_a_warmup_bar_and_no_restoring_one() -> None:
    """w2 warms task 1 up from 1 s to 4 s while w1 runs it; then it moves, warm."""
    samples = [
        Sample(0.0, "w1", (0, 1)),
        Sample(1.0, "w1", (0, 1)),
        Sample(1.0, "w2", (), warmups=(1,)),
        Sample(2.0, "w1", (0, 1)),
        Sample(2.0, "w2", (), warmups=(1,)),
        Sample(4.0, "w1", (0,)),
        Sample(4.0, "w2", (1,)),
    ]
    assert warmup_intervals(samples, end=6.0) == [Interval(1, "w2", 1.0, 4.0)]
    assert restoring_intervals(samples, end=6.0) == []
    assert longest_restoring(samples, end=6.0) == {}
    assert ownership_intervals(samples, end=6.0)[1:] == [
        Interval(1, "w1", 0.0, 4.0),
        Interval(1, "w2", 4.0, 6.0),
    ]


def test_restoring_until_the_end_and_a_worker_that_stops_answering() -> None:
    samples = [
        Sample(0.0, "w1", (0,), restoring=(0,)),
        Sample(0.0, "w2", (1,), restoring=(1,)),
        Sample(1.0, "w1", (0,), restoring=(0,)),  # w2 killed: no sample
        # a task listed as restoring but not owned is not counted
        Sample(2.0, "w1", (0,), restoring=(0, 3)),
    ]
    assert restoring_intervals(samples, end=3.0) == [
        Interval(0, "w1", 0.0, 3.0),
        Interval(1, "w2", 0.0, 1.0),
    ]


def test_the_assignment_page_says_which_actives_are_restoring_and_which_warm_up() -> None:
    from streamjoin.ads.demo.watch import restore_state

    page = {
        "actives": {"impressions": [0, 2, 5]},
        "warmups": {"ads-billing-state-changelog": [3], "ads-stats-changelog": [3, 4]},
        "restored_at": {"0": 1_700_000_000.5, "1": 1_700_000_000.5},
    }
    assert restore_state(page, (0, 2, 5)) == ((2, 5), (3, 4))
    # a worker without streamjoin's TableManager: nothing known, nothing marked
    assert restore_state({"actives": {"impressions": [0]}}, (0,)) == ((), ())


# matplotlib's font-config parser uses pyparsing names that pyparsing 3.3 deprecates
@pytest.mark.filterwarnings("ignore:.* deprecated - use:DeprecationWarning")
def test_the_report_draws_restoring_and_warm_up_bars_and_names_the_longest(
    tmp_path: Path,
) -> None:
    from streamjoin.ads.demo.report import write_report

    samples = [
        Sample(0.0, "w1", (0, 1)),
        Sample(2.0, "w1", (0,)),
        Sample(2.0, "w2", (1,), restoring=(1,)),
        Sample(6.0, "w1", (0,), warmups=(1,)),
        Sample(6.0, "w2", (1,)),
    ]
    options = SimpleNamespace(seed=1, duration=10.0, speed=1.0, partitions=2)
    page = write_report(
        tmp_path,
        samples=samples,
        events=[(2.0, "w2 started")],
        end=8.0,
        verdict=None,
        options=options,
        wall_start=WALL,
    )
    text = page.read_text()
    assert "task 1 4 s" in text
    assert (tmp_path / "report" / "tasks.png").stat().st_size > 0
    # no worker said how its tasks processed: nothing is claimed
    assert "<td>1 w1&rarr;w2 ?</td><td>not known</td>" in text


def _paced(
    t: float,
    worker: str,
    paces: dict[int, tuple[float, float, list[float]]],
    tasks: tuple[int, ...] | None = None,
) -> Sample:
    """A sample of *worker* at *t* whose joins page shows *paces*: task ->
    (first step, last step, stops as start, end, start, end...), in demo
    seconds; *tasks*: its actives (``None``: those of *paces*)."""
    return Sample(
        t,
        worker,
        tuple(sorted(paces)) if tasks is None else tasks,
        paces=tuple(
            Pace(
                task,
                processed=100,
                processing=(WALL + first, WALL + last),
                stops=tuple(
                    (WALL + start, WALL + end)
                    for start, end in zip(stops[::2], stops[1::2], strict=True)
                ),
            )
            for task, (first, last, stops) in sorted(paces.items())
        ),
    )


#: w3 joins at 9.5 s; task 1 moves from w1 to w3 in the rebalance seen at 12 s.
#: Task 0 (w1) runs through; task 2 (w2) stops 0.8 s during the rebalance, and
#: once long before it (not the rebalance's). w1 last processed task 1 at
#: 10.6 s, w3 first at 11.9 s.
MOVE = [
    _paced(9.0, "w1", {0: (1.0, 8.9, []), 1: (1.0, 8.95, [])}),
    _paced(9.0, "w2", {2: (1.0, 8.9, [3.0, 4.5])}),
    _paced(10.0, "w1", {0: (1.0, 9.9, []), 1: (1.0, 9.95, [])}),
    _paced(10.0, "w2", {2: (1.0, 9.9, [3.0, 4.5])}),
    _paced(11.0, "w1", {0: (1.0, 10.9, [])}),  # task 1 given up
    _paced(11.0, "w2", {2: (1.0, 10.1, [3.0, 4.5])}),  # stopped since 10.1 s
    Sample(11.0, "w3", ()),
    # its joins page still shows task 1 (the task is closed at the assignment)
    _paced(12.0, "w1", {0: (1.0, 11.9, []), 1: (1.0, 10.6, [])}, tasks=(0,)),
    _paced(12.0, "w2", {2: (1.0, 11.95, [3.0, 4.5, 10.1, 10.9])}),
    _paced(12.0, "w3", {1: (11.9, 11.95, [])}),
    _paced(13.0, "w1", {0: (1.0, 12.9, [])}),
    _paced(13.0, "w2", {2: (1.0, 12.9, [3.0, 4.5, 10.1, 10.9])}),
    _paced(13.0, "w3", {1: (11.9, 12.95, [])}),
]


def test_a_workers_wall_clock_goes_on_the_demos_axis() -> None:
    assert demo_time(WALL + 12.25, WALL) == 12.25
    assert demo_time(WALL - 1.0, WALL) == -1.0  # before the start: a worker of an earlier run
    assert [(i.task, i.worker, i.start, i.end) for i in stop_intervals(MOVE, WALL)] == [
        (2, "w2", 3.0, 4.5),
        (2, "w2", pytest.approx(10.1), pytest.approx(10.9)),
    ]


def test_at_a_rebalance_kept_tasks_give_their_longest_stop_moved_ones_their_handover() -> None:
    (outcome,) = rebalance_outcomes(MOVE, [(0.0, "w1 started"), (9.5, "w3 started")], WALL)
    assert (outcome.t, outcome.cause, outcome.began) == (12.0, "w3 started", 10.0)
    assert outcome.kept == {0: 0.0, 2: pytest.approx(0.8)}
    assert outcome.moved == {
        1: Handover(1, "w1", "w3", pytest.approx(10.6), pytest.approx(11.9)),
    }
    assert outcome.moved[1].seconds == pytest.approx(1.3)
    assert outcome.longest_kept_stop() == (2, pytest.approx(0.8))
    assert outcome.longest_handover() == outcome.moved[1]


def test_a_task_opened_again_on_its_worker_stopped_in_between() -> None:
    """Task 0 stays on w1 but runs anew from 11.5 s (dropped and reopened):
    it stopped from its last step before, 10.2 s, even with no stop reported."""
    samples = [
        _paced(10.0, "w1", {0: (1.0, 9.9, []), 1: (1.0, 9.9, [])}),
        _paced(11.0, "w1", {0: (1.0, 10.2, [])}),
        _paced(12.0, "w1", {0: (11.5, 11.9, [])}),
        _paced(12.0, "w2", {1: (11.8, 11.9, [])}),
    ]
    (outcome,) = rebalance_outcomes(samples, [], WALL)
    assert outcome.cause is None
    assert outcome.kept == {0: pytest.approx(1.3)}
    assert stop_intervals(samples, WALL) == [
        Interval(0, "w1", pytest.approx(10.2), pytest.approx(11.5))
    ]


def test_no_handover_when_only_a_page_missed_a_round_and_unknown_is_not_zero() -> None:
    samples = [
        Sample(0.0, "w1", (0, 1)),
        Sample(0.0, "w2", (2,)),
        Sample(1.0, "w1", (0, 1)),
        Sample(1.0, "w2", (2,)),
        Sample(2.0, "w2", (2,)),  # w1's page did not answer in time
        Sample(3.0, "w1", (0, 1)),  # same owner again: no handover
        Sample(3.0, "w2", (2,)),
        Sample(4.0, "w1", (0,)),
        Sample(4.0, "w2", (1, 2)),  # no paces: a worker that does not report them
    ]
    assert rebalances(samples) == [3.0, 4.0]
    (outcome,) = rebalance_outcomes(samples, [(3.5, "w2 started")], WALL)
    assert outcome.t == 4.0 and outcome.kept == {0: None, 2: None}
    assert outcome.moved == {1: Handover(1, "w1", "w2", None, None)}
    assert outcome.longest_kept_stop() is None and outcome.longest_handover() is None


def test_the_joins_page_gives_each_tasks_pace() -> None:
    from streamjoin.ads.demo.watch import task_paces

    page = {
        "tasks": {
            "10": {"processed": 5, "processing": [WALL, WALL + 2], "stops": [[WALL, WALL + 1]]},
            "2": {"processed": 0, "processing": None, "stops": []},
        }
    }
    assert task_paces(page) == (
        Pace(2, 0, None, ()),
        Pace(10, 5, (WALL, WALL + 2), ((WALL, WALL + 1),)),
    )
    assert task_paces({}) == ()
    assert task_paces({"tasks": {"1": {}}}) == (Pace(1),)


@pytest.mark.filterwarnings("ignore:.* deprecated - use:DeprecationWarning")
def test_the_report_lists_each_rebalance_with_kept_and_moved_tasks(tmp_path: Path) -> None:
    from streamjoin.ads.demo.report import write_report

    page = write_report(
        tmp_path,
        samples=MOVE,
        events=[(9.5, "w3 started")],
        end=14.0,
        verdict=None,
        options=SimpleNamespace(seed=1, duration=10.0, speed=1.0, partitions=3),
        wall_start=WALL,
    )
    text = page.read_text()
    assert "Rebalances: kept tasks ran through" in text
    row = (
        "<tr><td>12.0 s</td><td>w3 started</td><td>2</td><td>task 2: 0.80 s</td>"
        "<td>1 w1&rarr;w3 1.30 s</td><td>task 1: 1.30 s</td></tr>"
    )
    assert row in text
