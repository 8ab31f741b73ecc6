"""A batch one of whose tasks is no longer owned mid-way: that task is dropped,
the others complete the batch.

A cooperative rebalance that gives up one task while a batch touching it and
kept tasks is on the way used to drop every task of the batch; the kept ones
then stopped until their state was restored again (about 15 s in the demo).
Here, on the real broker and real RocksDB, the batch's task 1 loses its owner
token right after the batch's outputs are acknowledged (step 1): task 0 writes
its positions, commits RocksDB and acks its inputs; task 1 writes nothing more
and is dropped. A task lost before step 1 still drops the whole batch: its
outputs cannot be told apart by task.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import rocksdict
from aiokafka import AIOKafkaProducer
from faust.types import TP
from kafka_util import create_topic, read_topics, run

import streamjoin
from streamjoin.ads.policy import AdAttribution
from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.faust.join.batch import Batch, make_durable
from streamjoin.faust.join.registry import TaskRegistry
from streamjoin.faust.join.router import RecordRouter
from streamjoin.faust.join.stats import JoinStats
from streamjoin.faust.join.types import LEFT, RIGHT, Chunk, Fetched, JoinConfig
from streamjoin.faust.kafka.producer import Sender
from streamjoin.faust.restore.owner_tokens import TaskOwnership
from streamjoin.join import keys
from streamjoin.join.window import JoinWindow

pytestmark = [pytest.mark.broker]

OFFSET_KEY = b"__faust\0offset__"
WINDOW = JoinWindow(before=0, after=2_000, grace=500)
POLICY = AdAttribution(WINDOW)
BASE = 1_767_225_600_000


def _config(prefix: str) -> JoinConfig:
    return JoinConfig(
        name="billing",
        left_topic=f"{prefix}-impressions",
        right_topic=f"{prefix}-clicks",
        partitions=2,
        window=WINDOW,
        changelog_topic=f"{prefix}-changelog",
        outputs={name: f"{prefix}-out-{name}" for name in POLICY.outputs},
        dead_letters=f"{prefix}-dead",
        max_idle_ms=1_000,
        batch_max=1_000,
        batch_interval=0.1,
        max_record_bytes=1 << 20,
    )


def _received(config: JoinConfig, partition: int) -> list[Chunk]:
    """Ten impressions and a click on each, of *partition*, one record at a time."""
    chunks: list[Chunk] = []
    for i in range(10):
        ts = BASE + i * 300
        auction = f"a{partition}-{i}"
        impression = {
            "auction_id": auction,
            "impression_id": f"i{partition}-{i}",
            "campaign": "c",
            "cost": 0.5,
            "ts_ms": ts,
        }
        click = {"auction_id": auction, "click_id": f"k{partition}-{i}", "ts_ms": ts + 100}
        for side, doc in ((LEFT, impression), (RIGHT, click)):
            record = Fetched(
                config.topics[side], partition, i, doc["auction_id"].encode(),
                json.dumps(doc).encode(), doc["ts_ms"],
            )  # fmt: skip
            chunks.append((side, [record]))
    return chunks


class _Run:
    """Two tasks of one join, owned by a real ownership book, and one batch of both."""

    def __init__(self, tmp_path: Path, prefix: str, session_timeout: float = 6.0) -> None:
        self.config = _config(prefix)
        app = streamjoin.App(f"{prefix}-app", broker="kafka://127.0.0.1:1")
        self.ownership = TaskOwnership(app, app.tables)
        self.ownership.lease.renew(time.monotonic())
        self.tps = [TP(self.config.changelog_topic, p) for p in (0, 1)]
        self._generation = 1
        self.ownership.book.begin(self._generation, self.tps, 0)
        for tp in self.tps:
            self.ownership.book.marked(tp)
        self.dbs = {
            p: rocksdict.Rdict(str(tmp_path / f"db{p}"), options=rocksdict.Options(raw_mode=True))
            for p in (0, 1)
        }
        self.rejoins = 0
        self.tasks = TaskRegistry(
            self.config, POLICY, JoinStats(), asyncio.Lock(),
            open_db=self.dbs.__getitem__, offset_key=lambda: OFFSET_KEY,
            ownership=lambda: self.ownership, restored_at=None,
            session_timeout=lambda: session_timeout, rejoin=self._rejoin,
        )  # fmt: skip
        router = RecordRouter(
            "billing", POLICY, JoinStats(), dict(self.config.outputs), self.config.dead_letters
        )
        self.batch = Batch()
        for partition in (0, 1):
            task = self.tasks.task(partition)  # opened from its database, owned
            received = _received(self.config, partition)
            for side, records in received:
                task.see(side, records[0].offset)
            self.batch.touched.append(task)
            self.batch.outputs.extend(router.stage(task, received, []))
        self.acked: list[tuple[str, int, int, int]] = []

    def _rejoin(self) -> None:
        self.rejoins += 1

    def give_up_task_1(self) -> None:
        """A cooperative rebalance: the next generation keeps task 0 only."""
        self._generation += 1
        self.ownership.book.begin(self._generation, self.tps[:1], 0)

    def revoke_without_waiting(self, partitions: set[int] | None) -> None:
        """A revoke of *partitions* (``None``: eager, every one) that stops
        waiting for the batch in flight (it holds the lock) after its bound."""

        async def go() -> None:
            tasks = self.tasks
            await tasks.lock.acquire()
            try:
                tasks.revoke(partitions)
                await tasks.handover()
            finally:
                tasks.lock.release()

        run(go())

    def make_durable(self, bootstrap: str, crash: Callable[[str], None]) -> bool:
        async def go() -> bool:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
            await producer.start()
            try:
                app: Any = SimpleNamespace(
                    conf=SimpleNamespace(processing_guarantee="at_least_once"),
                    producer=SimpleNamespace(_ensure_producer=lambda: producer),
                )
                return await make_durable(
                    Sender(app), self.config.changelog_topic, self.batch, OFFSET_KEY,
                    self.dbs.__getitem__, lambda *a: self.acked.append(a),
                    lambda touched, whole: self.tasks.still_owned(0, touched, whole), crash,
                )  # fmt: skip
            finally:
                await producer.stop()

        return bool(run(go()))

    def changelog(self, bootstrap: str) -> dict[int, list[bytes]]:
        """The changelog's record keys, per partition."""
        found: dict[int, list[bytes]] = {0: [], 1: []}
        for _, record in run(read_topics(bootstrap, [self.config.changelog_topic])):
            found[record.partition].append(record.key)
        return found

    def outputs(self, bootstrap: str) -> int:
        return len(run(read_topics(bootstrap, sorted(self.config.outputs.values()))))


def _topics(broker: EmbeddedBroker, config: JoinConfig) -> None:
    for topic in [config.changelog_topic, *config.outputs.values(), config.dead_letters]:
        run(create_topic(broker.bootstrap, topic, 2))


def test_a_task_lost_after_the_outputs_is_dropped_and_the_others_complete_the_batch(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    batch = _Run(tmp_path, "lost-mid-batch")
    _topics(broker, batch.config)
    positions = {keys.position_key(LEFT), keys.position_key(RIGHT)}

    def crash(point: str) -> None:
        if point == "outputs-acked":
            batch.give_up_task_1()

    assert batch.make_durable(broker.bootstrap, crash)
    assert batch.outputs(broker.bootstrap) > 0, "step 1 sent the batch's outputs"
    changelog = batch.changelog(broker.bootstrap)
    # task 0 completed: positions in its changelog, RocksDB committed, inputs acked
    assert positions <= set(changelog[0])
    assert batch.dbs[0].get(OFFSET_KEY) is not None
    assert {(side, p) for side, p, _, _ in batch.acked} == {(LEFT, 0), (RIGHT, 0)}
    assert list(batch.tasks.live) == [0]
    # task 1 was dropped after step 1: its content went out, nothing after it
    assert changelog[1] and not positions & set(changelog[1])
    assert batch.dbs[1].get(OFFSET_KEY) is None
    assert batch.tasks.abandoned() == {1}
    assert batch.tasks.stats.batches_abandoned == 1
    assert batch.rejoins == 1


def test_a_task_lost_before_the_outputs_drops_the_whole_batch(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    batch = _Run(tmp_path, "lost-before-batch")
    _topics(broker, batch.config)
    batch.give_up_task_1()

    assert not batch.make_durable(broker.bootstrap, lambda point: None)
    assert batch.outputs(broker.bootstrap) == 0
    assert batch.changelog(broker.bootstrap) == {0: [], 1: []}
    assert batch.acked == [] and batch.tasks.live == {}
    assert batch.tasks.abandoned() == {0, 1}


@pytest.mark.parametrize("eager", [False, True], ids=["cooperative", "eager"])
def test_a_handover_that_did_not_wait_drops_the_tasks_it_took(tmp_path: Path, eager: bool) -> None:
    """A revoke stops waiting for a slow batch (half the session): a cooperative
    one took only its own tasks, and the batch's kept tasks go on; an eager
    one took every task."""
    batch = _Run(tmp_path, "handover-mid-batch", session_timeout=0.05)
    tasks = batch.tasks
    epoch = tasks.epoch
    batch.revoke_without_waiting(None if eager else {1})
    assert tasks.epoch == epoch + 1
    touched = list(batch.batch.touched)
    if eager:
        assert tasks.still_owned(epoch, touched, False) == []
        assert tasks.abandoned() == {0, 1}
        return
    assert tasks.still_owned(epoch, touched, False) == touched[:1]
    assert tasks.abandoned() == {1}
    # before the outputs are sent the batch still goes on whole or not at all
    assert tasks.still_owned(epoch, touched[:1], True) == touched[:1]
    assert tasks.still_owned(epoch, touched, True) == []
