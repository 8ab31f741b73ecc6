"""A join task parked across a rebalance, on a real RocksDB database.

The operator parks every task when partitions are revoked and resumes the ones
that stay on this worker without rebuilding their indexes, but only when the
database under them is the one they left.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import rocksdict

from streamjoin.ads.policy import AdAttribution
from streamjoin.faust.join_tasks import LEFT, RIGHT, JoinTask
from streamjoin.join import keys
from streamjoin.join.window import JoinWindow

OFFSET_KEY = b"__faust\0offset__"
POLICY = AdAttribution(JoinWindow(before=0, after=2_000, grace=500))


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
