"""The follow-up rebalance request: once per warm-up set, with back-off, only when caught up."""

from __future__ import annotations

from streamjoin.faust.restore.warmup_watch import (
    MAX_DELAY,
    REPEAT_DELAY,
    WarmupWatch,
    reported_lag,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _watch() -> tuple[WarmupWatch, list[int], Clock]:
    calls: list[int] = []
    clock = Clock()

    def request() -> bool:
        calls.append(1)
        return True

    return WarmupWatch(request, clock), calls, clock


def test_requests_only_when_every_warmup_task_is_caught_up() -> None:
    watch, calls, _ = _watch()
    # task (0, 3) has two changelogs: 40 + 70 records behind > 100
    assert not watch.check({(0, 1): [0], (0, 3): [40, 70]}, acceptable_lag=100)
    assert not watch.check({(0, 1): [0], (0, 3): [None]}, acceptable_lag=100)  # unknown lag
    assert calls == []
    assert watch.check({(0, 1): [0], (0, 3): [40, 60]}, acceptable_lag=100)
    assert calls == [1] and watch.requests == 1


def test_one_request_per_set_then_backoff_doubling_to_a_cap() -> None:
    watch, calls, clock = _watch()
    tasks = {(0, 1): [0]}
    assert watch.check(tasks, 10)
    for _ in range(50):  # every fetch round sees the same set: no second request
        assert not watch.check(tasks, 10)
    clock.now += REPEAT_DELAY + 1  # the rebalance left the same warm-ups: ask again, later
    assert watch.check(tasks, 10)
    clock.now += REPEAT_DELAY + 1  # the delay doubled
    assert not watch.check(tasks, 10)
    clock.now += REPEAT_DELAY
    assert watch.check(tasks, 10)
    for _ in range(10):
        clock.now += MAX_DELAY
        watch.check(tasks, 10)
    assert watch._delay == MAX_DELAY
    # a new set is asked for at once
    assert watch.check({(0, 2): [0]}, 10)
    assert len(calls) == watch.requests


def test_nothing_to_watch_and_a_failed_request() -> None:
    watch, _, _ = _watch()
    assert not watch.check({}, 10)
    failing = WarmupWatch(lambda: False, Clock())
    assert not failing.check({(0, 1): [0]}, 10)
    assert failing.requests == 0


def test_a_warmup_counts_as_the_leader_will_see_it() -> None:
    """Lag as the leader computes it from the offsets the member reports: a member
    with nothing applied of a non-empty changelog reports no offset, and the
    leader takes it for not caught up, however short the changelog."""
    assert reported_lag(None, None) is None  # no fetch answered yet
    assert reported_lag(None, 40) is None
    assert reported_lag(8_300, None) is None  # shorter than any acceptable lag, none read
    assert reported_lag(0, None) == 0  # an empty changelog: nothing to read
    assert reported_lag(8_300, 99) == 8_200
    assert reported_lag(8_300, 8_299) == 0
    assert reported_lag(8_300, 9_000) == 0  # (applied past a lagging high watermark)
    watch, calls, _ = _watch()
    tasks = {(0, 1): [reported_lag(8_300, None)]}
    assert not watch.check(tasks, acceptable_lag=10_000) and calls == []
    assert watch.check({(0, 1): [reported_lag(8_300, 10)]}, acceptable_lag=10_000)
