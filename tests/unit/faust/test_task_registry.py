"""The task registry: every rebalance step moves tasks along the state machine
only, queries change nothing, and the views agree with the states (real RocksDB)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import rocksdict

from streamjoin.ads.policy import AdAttribution
from streamjoin.faust.join.registry import TaskRegistry
from streamjoin.faust.join.stats import JoinStats
from streamjoin.faust.join.types import JoinConfig
from streamjoin.join.window import JoinWindow
from streamjoin.lifecycle.errors import InvalidTransition
from streamjoin.lifecycle.states import TaskState

S = TaskState
WINDOW = JoinWindow(before=0, after=2_000, grace=500)
POLICY = AdAttribution(WINDOW)
OFFSET_KEY = b"__faust\0offset__"


def _config() -> JoinConfig:
    return JoinConfig(
        name="billing",
        left_topic="imps",
        right_topic="clicks",
        partitions=4,
        window=WINDOW,
        changelog_topic="billing-state-changelog",
        outputs={name: f"out-{name}" for name in POLICY.outputs},
        dead_letters="dead",
        max_idle_ms=1_000,
        batch_max=1_000,
        batch_interval=0.1,
        max_record_bytes=1 << 20,
    )


class _Worker:
    def __init__(self, tmp_path: Path) -> None:
        self.dbs = {
            p: rocksdict.Rdict(str(tmp_path / f"db{p}"), options=rocksdict.Options(raw_mode=True))
            for p in range(4)
        }
        self.restored: dict[int, float] = {}
        self.tasks = TaskRegistry(
            _config(), POLICY, JoinStats(), asyncio.Lock(),
            open_db=self.dbs.__getitem__, offset_key=lambda: OFFSET_KEY,
            ownership=lambda: None, restored_at=lambda: self.restored,
            session_timeout=lambda: 6.0, rejoin=lambda: None,
        )  # fmt: skip

    def assign(self, partitions: set[int], restored: bool = True) -> None:
        asyncio.run(self.tasks.assign(partitions))
        now = time.time()
        self.restored = {p: now for p in sorted(partitions)} if restored else {}
        self.tasks.open_ready()

    def consistent(self) -> dict[int, TaskState]:
        """The states, after checking that the views agree with them."""
        states = self.tasks.states()
        running = {p for p, s in states.items() if s is S.RUNNING}
        held = {p for p, s in states.items() if s in (S.PARKED, S.REVOKED)}
        assert set(self.tasks.live) == running
        assert set(self.tasks.parked) <= held
        return states


@pytest.fixture
def worker(tmp_path: Path) -> _Worker:
    return _Worker(tmp_path)


def test_assigned_tasks_restore_then_run(worker: _Worker) -> None:
    worker.assign({0, 1}, restored=False)
    assert worker.consistent() == {0: S.RESTORING, 1: S.RESTORING}
    worker.restored = {0: time.time()}
    worker.tasks.open_ready()
    assert worker.consistent() == {0: S.RUNNING, 1: S.RESTORING}


def test_an_eager_rebalance_parks_everything_and_keeps_what_stays(worker: _Worker) -> None:
    worker.assign({0, 1, 2})
    kept = worker.tasks.live[1]
    worker.tasks.revoke(None)
    assert worker.consistent() == {0: S.PARKED, 1: S.PARKED, 2: S.PARKED}
    assert worker.tasks.revoking
    worker.assign({1, 3}, restored=False)
    assert worker.consistent() == {1: S.PARKED, 3: S.RESTORING}
    worker.restored = {1: time.time(), 3: time.time()}
    worker.tasks.open_ready()
    assert worker.consistent() == {1: S.RUNNING, 3: S.RUNNING}
    assert worker.tasks.live[1] is kept, "a kept task goes on with its open state"


def test_a_cooperative_revoke_stops_only_what_is_given_up(worker: _Worker) -> None:
    worker.assign({0, 1, 2})
    running = dict(worker.tasks.live)
    worker.tasks.revoke({2})
    assert worker.consistent() == {0: S.RUNNING, 1: S.RUNNING, 2: S.REVOKED}
    assert not worker.tasks.revoking
    assert not worker.tasks.owned(2), "no record is accepted for a task given up"
    worker.assign({0, 1})
    assert worker.consistent() == {0: S.RUNNING, 1: S.RUNNING}
    assert worker.tasks.live[0] is running[0] and worker.tasks.live[1] is running[1]


def test_an_abandoned_task_opens_only_from_state_restored_after(worker: _Worker) -> None:
    worker.assign({0, 1})
    task = worker.tasks.live[1]
    worker.tasks.abandon([task], "a test", [])
    assert worker.consistent() == {0: S.RUNNING, 1: S.ABANDONED}
    # queries change nothing: asked twice, the same answers, the same states
    for _ in range(2):
        assert not worker.tasks.owned(1)
        assert worker.tasks.abandoned() == {1}
    assert worker.consistent()[1] is S.ABANDONED
    worker.tasks.open_ready()
    assert worker.consistent()[1] is S.ABANDONED, "not restored since"
    worker.restored[1] = time.time() + 1
    assert worker.tasks.owned(1) and worker.tasks.abandoned() == set()
    worker.tasks.open_ready()
    assert worker.consistent() == {0: S.RUNNING, 1: S.RUNNING}
    assert worker.tasks.live[1] is not task


def test_a_task_given_up_cannot_be_opened(worker: _Worker) -> None:
    worker.assign({0})
    worker.tasks.revoke({0})
    with pytest.raises(InvalidTransition, match=r"billing/0.*revoked.*running"):
        worker.tasks.task(0)
    assert worker.consistent() == {0: S.REVOKED}
