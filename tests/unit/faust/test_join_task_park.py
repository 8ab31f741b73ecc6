"""A join task parked across a rebalance, on a real RocksDB database.

The operator parks every task when partitions are revoked and resumes the ones
that stay on this worker without rebuilding their indexes, but only when the
database under them is the one they left.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import rocksdict

from streamjoin._progress import ProgressLog
from streamjoin.ads.policy import AdAttribution
from streamjoin.faust.join.router import RecordRouter
from streamjoin.faust.join.stats import JoinStats, log_progress
from streamjoin.faust.join.tasks import JoinTask
from streamjoin.faust.join.types import LEFT, RIGHT, Chunk, Fetched, Output
from streamjoin.join import keys
from streamjoin.join.window import JoinWindow

OFFSET_KEY = b"__faust\0offset__"
POLICY = AdAttribution(JoinWindow(before=0, after=2_000, grace=500))
BASE = 1_767_225_600_000
TOPICS = {LEFT: "impressions", RIGHT: "clicks"}


def _db(path: Path) -> rocksdict.Rdict:
    return rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True))


def _opened(db: rocksdict.Rdict, left: int, right: int) -> JoinTask:
    """A task opened on *db* whose state says its inputs resume at *left* and *right*."""
    db[keys.position_key(LEFT)] = left.to_bytes(8, "big")
    db[keys.position_key(RIGHT)] = right.to_bytes(8, "big")
    task = JoinTask(0, POLICY, max_idle_ms=1_000)
    task.open(db, 0)
    return task


def test_parking_goes_back_to_the_position_so_a_consumer_beyond_it_is_noticed(
    tmp_path: Path,
) -> None:
    task = _opened(_db(tmp_path / "db"), left=10, right=4)
    for offset in (10, 11, 12):  # delivered, then dropped by the rebalance
        assert task.see(LEFT, offset) is None
    task.park()
    assert task.next_seen == {LEFT: 10, RIGHT: 4}
    # delivered again from the committed offset (before the position): no gap
    assert task.see(LEFT, 7) is None
    task.park()
    # a consumer that starts beyond the position skipped records never applied
    assert task.see(LEFT, 12) == 10


def test_a_parked_task_resumes_only_on_the_database_it_left(tmp_path: Path) -> None:
    db = _db(tmp_path / "db")
    db[OFFSET_KEY] = b"41"
    task = _opened(db, left=3, right=3)
    assert not task.can_resume(db, OFFSET_KEY), "not parked: never resumed"
    task.park()
    task.mark_parked(db, OFFSET_KEY)
    assert task.can_resume(db, OFFSET_KEY)
    assert not task.can_resume(_db(tmp_path / "other"), OFFSET_KEY), "another handle"
    # a restore applied changes another worker made while this one was away;
    # a later rebalance that keeps the task parked keeps the first mark
    db[OFFSET_KEY] = b"57"
    task.mark_parked(db, OFFSET_KEY)
    assert not task.can_resume(db, OFFSET_KEY)


def test_a_task_parked_before_its_first_changelog_write_resumes(tmp_path: Path) -> None:
    db = _db(tmp_path / "db")
    task = _opened(db, left=0, right=0)
    task.park()
    task.mark_parked(db, OFFSET_KEY)
    assert task.can_resume(db, OFFSET_KEY)
    task.resume(5)
    assert task.last_record_ms == {LEFT: 5, RIGHT: 5}
    assert task.parked_at is None and not task.can_resume(db, OFFSET_KEY)


def test_a_resumed_task_forgets_idleness_as_a_reopened_one_does(tmp_path: Path) -> None:
    """The consumer starts again from the committed offset: an input idle before
    the rebalance must be seen caught up and silent again before it counts as
    idle (a record arriving meanwhile on the other input decides nothing)."""
    db = _db(tmp_path / "db")
    task = _opened(db, left=0, right=0)
    logic: Any = task.logic
    assert logic.set_idle(LEFT, True) == []
    task.idle.add(LEFT)
    task.park()
    task.mark_parked(db, OFFSET_KEY)
    task.resume(9)
    assert task.idle == set()
    assert logic.logic.marks.idle == set()


@pytest.fixture
def router() -> RecordRouter:
    outputs = {name: f"out-{name}" for name in POLICY.outputs}
    return RecordRouter("billing", POLICY, JoinStats(), outputs, "dead")


def _db(path: Path) -> rocksdict.Rdict:
    return rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True))


def _inputs(n: int) -> dict[str, list[bytes]]:
    """Values of both inputs, in offset order: an impression every 300 ms, most
    with a click 100 ms later, some with a second one (a duplicate)."""
    impressions, clicks = [], []
    for i in range(n):
        ts = BASE + i * 300
        impressions.append(
            json.dumps(
                {
                    "auction_id": f"a{i}",
                    "impression_id": f"i{i}",
                    "campaign": "c",
                    "cost": 0.5,
                    "ts_ms": ts,
                }
            ).encode()
        )
        for k in range(1 + (i % 4 == 0) if i % 3 else 0):
            doc = {"auction_id": f"a{i}", "click_id": f"k{i}-{k}", "ts_ms": ts + 100 + k}
            clicks.append(json.dumps(doc).encode())
    # a click with no impression, so not every outcome is attributed
    clicks.append(json.dumps({"auction_id": "zz", "click_id": "orphan", "ts_ms": BASE}).encode())
    return {LEFT: impressions, RIGHT: clicks}


def _record(side: str, offset: int, value: bytes) -> Fetched:
    doc = json.loads(value)
    return Fetched(TOPICS[side], 0, offset, doc["auction_id"].encode(), value, doc["ts_ms"])


def _interleaved(inputs: dict[str, list[bytes]], start: dict[str, int]) -> list[Chunk]:
    """Both inputs from *start* on, one record at a time, alternately (as a
    consumer may deliver them)."""
    chunks: list[Chunk] = []
    cursors = dict(start)
    while any(cursors[s] < len(inputs[s]) for s in (LEFT, RIGHT)):
        for side in (LEFT, RIGHT):
            if cursors[side] < len(inputs[side]):
                chunks.append((side, [_record(side, cursors[side], inputs[side][cursors[side]])]))
                cursors[side] += 1
    return chunks


def _batch(
    task: JoinTask, router: RecordRouter, received: list[Chunk], changelog: int
) -> list[Output]:
    """Apply *received* as one batch and make it durable in RocksDB (no broker here)."""
    for side, records in received:
        task.see(side, records[0].offset)
    out = router.stage(task, received, [])
    task.state.commit(OFFSET_KEY, changelog)
    task.unacked_range.clear()
    return out


def _outcomes(outputs: list[Output]) -> list[tuple[str, bytes | None, bytes]]:
    return [(topic, key, value) for topic, key, value, _ in outputs]


def test_a_parked_task_skips_what_it_applied_and_applies_the_rest_once(
    router: RecordRouter, tmp_path: Path
) -> None:
    inputs = _inputs(60)
    everything = _interleaved(inputs, {LEFT: 0, RIGHT: 0})
    reference_task = JoinTask(0, POLICY, max_idle_ms=1_000)
    reference_task.open(_db(tmp_path / "reference"), 0)
    reference = _batch(reference_task, router, everything, 0)
    assert reference, "the inputs decide some clicks"

    db = _db(tmp_path / "parked")
    task = JoinTask(0, POLICY, max_idle_ms=1_000)
    task.open(db, 0)
    first, buffered = everything[:50], everything[50:70]
    got = _batch(task, router, first, 0)
    for side, records in buffered:  # received, not applied yet when the rebalance starts
        task.see(side, records[0].offset)
        task.receive(side, records, 1)
    position = dict(task.position)

    assert task.park() == len(buffered)
    assert task.inbox == [] and task.next_seen == position
    task.mark_parked(db, OFFSET_KEY)
    assert task.can_resume(db, OFFSET_KEY)
    task.resume(5)
    assert task.last_record_ms == {LEFT: 5, RIGHT: 5}

    # the consumer goes back to the committed offset, before the position
    committed = {side: max(0, (position[side] or 0) - 7) for side in (LEFT, RIGHT)}
    again = _interleaved(inputs, committed)
    skipped_before = router.stats.skipped_replays
    got += _batch(task, router, again, 1)
    assert router.stats.skipped_replays - skipped_before == sum(
        (position[s] or 0) - committed[s] for s in (LEFT, RIGHT)
    )
    assert _outcomes(got) == _outcomes(reference)
    clicks = [key for _, key, _ in _outcomes(got)]
    assert len(clicks) == len(set(clicks)), "a click got two outcomes"


def test_an_input_that_starts_beyond_the_state_is_read_again_three_times_at_most(
    tmp_path: Path,
) -> None:
    """The state says where an input resumes: a consumer beyond it is sent back
    there, records fetched before it went back are dropped meanwhile, and a
    gap that stays (the records are gone) is accepted after three tries."""
    task = _opened(_db(tmp_path / "db"), left=10, right=4)
    assert task.gap_before(LEFT, 25) == 10
    assert task.rewind(LEFT, 10, now_ms=0)
    # records fetched before the seek went through: dropped while rewinding
    assert task.rewinding(LEFT, 26, now_ms=100)
    # the records read again start at the position: the rewind is over
    assert not task.rewinding(LEFT, 10, now_ms=200)
    assert task.see(LEFT, 10) is None and task.next_seen[LEFT] == 11
    # the other input is not concerned
    assert not task.rewinding(RIGHT, 50, now_ms=100)
    # a topic truncated past the position: beyond it again after every rewind
    task.park()
    assert task.rewinds == {}
    for attempt in range(3):
        assert task.gap_before(LEFT, 40) == 10
        assert task.rewind(LEFT, 10, now_ms=attempt * 10_000)
        assert task.rewinding(LEFT, 40, now_ms=attempt * 10_000 + 1)
    assert not task.rewinding(LEFT, 40, now_ms=40_000)  # the last window is over
    assert not task.rewind(LEFT, 10, now_ms=40_000)  # accepted: a gap
    assert task.see(LEFT, 40) == 10


def test_the_progress_line_says_when_tasks_are_parked_for_a_rebalance(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = ProgressLog(logging.getLogger("test.join"), interval=0.0)
    stats = JoinStats()
    caplog.set_level(logging.INFO, logger="test.join")
    stats.processed = 10
    assert log_progress(log, "billing", 10**9, stats, 0, 0, parked=2)
    assert not log_progress(log, "billing", 2 * 10**9, stats, 0, 0)  # nothing processed since
    stats.processed = 20
    assert log_progress(log, "billing", 3 * 10**9, stats, 2, 0)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("join billing: 0 tasks (2 parked while the group rebalances), 10 ")
    assert lines[1].startswith("join billing: 2 tasks, 20 records processed")
