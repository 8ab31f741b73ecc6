"""A join task's activity: records processed and the stops between its steps, as the
worker's joins page shows them (router and description, on a real RocksDB database)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import rocksdict

from streamjoin.ads.policy import AdAttribution
from streamjoin.faust.join.router import RecordRouter
from streamjoin.faust.join.stats import JoinStats, describe_join
from streamjoin.faust.join.tasks import JoinTask
from streamjoin.faust.join.types import LEFT, Chunk, Fetched, JoinConfig
from streamjoin.join.activity import STOP_SECONDS, STOPS_KEPT, TaskActivity
from streamjoin.join.window import JoinWindow

WINDOW = JoinWindow(before=0, after=2_000, grace=500)
POLICY = AdAttribution(WINDOW)
BASE = 1_767_225_600_000
#: a wall-clock second of the test's steps
T0 = 1_767_225_600.0


def _config() -> JoinConfig:
    return JoinConfig(
        name="billing",
        left_topic="impressions",
        right_topic="clicks",
        partitions=1,
        window=WINDOW,
        changelog_topic="billing-state-changelog",
        outputs={name: f"out-{name}" for name in POLICY.outputs},
        dead_letters="dead",
        max_idle_ms=1_000,
        batch_max=2_000,
        batch_interval=0.05,
        max_record_bytes=512 * 1024,
    )


def _impressions(first: int, n: int) -> Chunk:
    records = []
    for offset in range(first, first + n):
        doc = {
            "auction_id": f"a{offset}",
            "impression_id": f"i{offset}",
            "campaign": "c",
            "cost": 0.5,
            "ts_ms": BASE + offset * 100,
        }
        value = json.dumps(doc).encode()
        records.append(Fetched("impressions", 0, offset, doc["auction_id"].encode(), value, 0))
    return (LEFT, records)


def test_the_joins_page_shows_each_tasks_records_processed_and_its_stops(
    tmp_path: Path,
) -> None:
    stats = JoinStats()
    router = RecordRouter("billing", POLICY, stats, _config().outputs, "dead")
    task = JoinTask(0, POLICY, max_idle_ms=1_000)
    task.open(rocksdict.Rdict(str(tmp_path / "db"), options=rocksdict.Options(raw_mode=True)), 0)
    before = describe_join(_config(), {0: task}, stats, {"sought_back": 0})["tasks"]["0"]
    assert (before["processed"], before["stops"], before["processing"]) == (0, [], None)

    # steps at 0, 0.1, 0.2 s: no stop; then a rebalance-long pause to 1.7 s
    for n, now in enumerate((0.0, 0.1, 0.2)):
        router.stage(task, [_impressions(3 * n, 3)], [], T0 + now)
    router.stage(task, [], [LEFT], T0 + 0.9)  # an idle input alone is no step
    router.stage(task, [_impressions(0, 9)], [], T0 + 1.2)  # only replays: no step either
    router.stage(task, [_impressions(9, 2)], [], T0 + 1.7)
    # a wait just at the threshold is not a stop
    router.stage(task, [_impressions(11, 1)], [], T0 + 1.7 + STOP_SECONDS)

    page = describe_join(_config(), {0: task}, stats, {"sought_back": 0})
    json.dumps(page)  # JSON-ready
    described = page["tasks"]["0"]
    assert described["processed"] == 12 == stats.processed
    # to the millisecond
    assert described["stops"] == [[pytest.approx(T0 + 0.2), pytest.approx(T0 + 1.7)]]
    assert described["processing"] == pytest.approx([T0, T0 + 1.7 + STOP_SECONDS])
    assert task.position[LEFT] == 12


def test_a_task_keeps_its_most_recent_stops_only() -> None:
    activity = TaskActivity()
    for n in range(STOPS_KEPT + 5):
        activity.step(float(n), 1)
    assert activity.processed == STOPS_KEPT + 5
    assert len(activity.stops) == STOPS_KEPT
    assert activity.stops[0] == (4.0, 5.0) and activity.stops[-1] == (
        STOPS_KEPT + 3.0,
        STOPS_KEPT + 4.0,
    )
