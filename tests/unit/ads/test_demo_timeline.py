"""Task ownership over time, as the demo's report draws it."""

from __future__ import annotations

from streamjoin.ads.demo.timeline import Interval, Sample, ownership_intervals, rebalances


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
