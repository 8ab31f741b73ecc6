"""Task ownership over time, as the demo's report draws it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from streamjoin.ads.demo.timeline import (
    Interval,
    Pace,
    Sample,
    demo_time,
    longest_restoring,
    ownership_intervals,
    rebalances,
    restoring_intervals,
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
    assert "No rebalance while tasks processed." in text


def test_a_workers_wall_clock_goes_on_the_demos_axis() -> None:
    assert demo_time(WALL + 12.25, WALL) == 12.25
    assert demo_time(WALL - 1.0, WALL) == -1.0  # before the start: a worker of an earlier run


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
