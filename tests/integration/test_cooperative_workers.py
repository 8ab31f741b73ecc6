"""Cooperative rebalancing in real workers: the tasks that stay where they are keep running.

Real ``streamjoin worker`` processes of ``apps/keeper.py`` (a RocksDB table fed
by a topic, one standby, every processed record logged with its wall time) on
the embedded broker, under steady input from a producer thread. Two workers
run, a third joins (2 -> 3), then it stops (3 -> 2). From the workers' logs:

* every produced offset is processed (no hole);
* a partition's records are processed by one worker at a time: its
  sequence of workers, in time order, changes only at handovers (at most
  there and back), never back and forth;
* a task that kept its owner through a phase never stopped longer than
  :data:`KEPT_GAP_S` (the contract's bound, docs/assignment.rst);
* the moved tasks' longest stop is reported.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from kafka_util import create_topic, encode, end_offsets, run, wait_until

from streamjoin.dev.broker import EmbeddedBroker

pytestmark = [pytest.mark.broker, pytest.mark.slow]

PARTITIONS = 6
#: records per second over all partitions
RATE = 150
#: the longest a task that keeps its owner may stop. The contract aims at 0.5 s;
#: measured 0.26-0.47 s in most phases, but on two cores shared by three
#: workers, the broker and the producer, a worker that takes a task over
#: starts its restore consumers on its event loop, and its kept tasks then
#: waited up to 0.8 s once (docs/assignment.rst, "In workers")
KEPT_GAP_S = 1.0
#: the longest from a worker's first restore's end to its first processed record:
#: faust's fetch sleeps a whole second when every partition is paused for a
#: restore (0.8 s measured here before streamjoin's consumer looked again sooner)
START_GAP_S = 0.6
#: the longest the producer may run (every load loop is bounded)
MAX_PRODUCE_S = 240.0

#: (worker, partition, offset, wall time)
Record = tuple[str, int, int, float]


class SteadyInput:
    """Produces RATE records/s over every partition from a thread, until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    async def _run(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        await producer.start()
        try:
            started = time.monotonic()
            tick = 0.02
            for step in itertools.count():
                if self._stop.is_set() or time.monotonic() - started > MAX_PRODUCE_S:
                    break
                due = int((step + 1) * tick * RATE)
                while self.sent < due:
                    i = self.sent
                    await producer.send(
                        self.topic, encode(1), key=encode(f"k{i % 60}"), partition=i % PARTITIONS
                    )
                    self.sent += 1
                await asyncio.sleep(max(0.0, started + (step + 1) * tick - time.monotonic()))
            await producer.flush()
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            await producer.stop()


def processed(tmp_path: Path, names: list[str]) -> list[Record]:
    """Every record the workers logged, in time order."""
    out: list[Record] = []
    for name in names:
        path = tmp_path / name / "processed.jsonl"
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            try:
                partition, offset, at = json.loads(line)
            except ValueError:
                continue  # a line being written when the worker was stopped
            out.append((name, int(partition), int(offset), float(at)))
    return sorted(out, key=lambda r: r[3])


def progressing(records: list[Record], since: float) -> dict[int, str]:
    """Partition -> the worker that processed it last, among those with a record since *since*."""
    out: dict[int, str] = {}
    for name, partition, _, at in records:
        if at >= since:
            out[partition] = name
    return out


def runs(records: list[Record], partition: int) -> list[tuple[str, float, float]]:
    """The partition's maximal stretches processed by one worker: (worker, first, last)."""
    out: list[tuple[str, float, float]] = []
    for name, p, _, at in records:
        if p != partition:
            continue
        if out and out[-1][0] == name:
            out[-1] = (name, out[-1][1], at)
        else:
            out.append((name, at, at))
    return out


def first_restore_end(log: str) -> float:
    """The wall time (s) of the worker log's first "tables restored" line."""
    for line in log.splitlines():
        if "tables restored" in line:
            stamp = line[1 : line.index("]")]  # [2026-11-29 00:34:52,862]
            return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
    raise AssertionError("the worker logged no restore")


def phase_gaps(records: list[Record], start: float, end: float) -> dict[int, tuple[float, bool]]:
    """Per partition: its longest stretch without a processed record in
    ``[start, end]`` (the last record before *start* counts), and whether it
    kept its owner (one worker, the one that ran it before *start*)."""
    out: dict[int, tuple[float, bool]] = {}
    for partition in range(PARTITIONS):
        mine = [(n, at) for n, p, _, at in records if p == partition and at <= end]
        before = [x for x in mine if x[1] < start]
        inside = [x for x in mine if x[1] >= start]
        last_before = before[-1] if before else None
        owners = {n for n, _ in inside}
        kept = last_before is not None and owners <= {last_before[0]}
        marks = [last_before[1] if last_before else start, *(at for _, at in inside), end]
        gap = max(b - a for a, b in itertools.pairwise(marks))
        out[partition] = (gap, kept)
    return out


def test_scale_out_and_in_keep_the_staying_tasks_running(
    broker: EmbeddedBroker, workers: Any, tmp_path: Path
) -> None:
    topic = f"{workers.app_id}-events"
    run(create_topic(broker.bootstrap, topic, PARTITIONS))
    steady = SteadyInput(broker.bootstrap, topic)
    env = {"STREAMJOIN_COOPERATIVE": "1"}
    names = ["w1", "w2", "w3"]
    spawned = {}
    steady.start()
    try:
        for name in ("w1", "w2"):
            spawned[name] = workers.spawn(
                name, env=env, partitions=PARTITIONS, app="apps.keeper:app"
            )

        def every_task_runs() -> bool:
            now = time.time()
            return len(progressing(processed(tmp_path, names), now - 1.0)) == PARTITIONS

        wait_until(every_task_runs, 120, "every task processing on two workers")
        time.sleep(6)
        scale_out = time.time()
        spawned["w3"] = workers.spawn("w3", env=env, partitions=PARTITIONS, app="apps.keeper:app")

        def w3_runs_its_share() -> bool:
            now = time.time()
            last = progressing(processed(tmp_path, names), now - 1.0)
            return len(last) == PARTITIONS and sum(1 for n in last.values() if n == "w3") >= 2

        wait_until(w3_runs_its_share, 120, "w3 running two tasks (warm-up, then handover)")
        time.sleep(8)
        scale_in = time.time()
        spawned["w3"].stop()

        def back_on_two() -> bool:
            now = time.time()
            last = progressing(processed(tmp_path, names), now - 1.0)
            return len(last) == PARTITIONS and "w3" not in last.values()

        wait_until(back_on_two, 120, "every task back on w1 and w2")
        time.sleep(6)
        ended = time.time()
    finally:
        steady.stop()
    assert steady.error is None, steady.error
    ends = run(end_offsets(broker.bootstrap, topic, PARTITIONS))

    def all_processed() -> bool:
        seen = {(p, o) for _, p, o, _ in processed(tmp_path, names)}
        return all((p, o) in seen for p, end in ends.items() for o in range(end))

    wait_until(all_processed, 60, "every produced record processed")
    for name in ("w1", "w2"):
        spawned[name].stop()
    records = processed(tmp_path, names)

    # one worker at a time: at most there and back (w3 took it, then gave it back)
    for partition in range(PARTITIONS):
        stretches = runs(records, partition)
        assert len(stretches) <= 3, (partition, stretches)
        assert len({n for n, _, _ in stretches}) == len(stretches) or (
            len(stretches) == 3 and stretches[1][0] == "w3"
        ), (partition, stretches)

    # the workers did rebalance cooperatively
    for name in ("w1", "w2"):
        log = spawned[name].log_text()
        assert "cooperative rebalance complete" in log, name
        assert "keep running" in log, name

    # each worker fetches as soon as its first restore is over, not a second later
    for name in ("w1", "w2"):
        restored = first_restore_end(spawned[name].log_text())
        first = min(at for n, _, _, at in records if n == name)
        assert first - restored < START_GAP_S, f"{name}: first record {first - restored:.2f} s"

    report = []
    for label, start, end in (("scale-out", scale_out, scale_in), ("scale-in", scale_in, ended)):
        gaps = phase_gaps(records, start, end)
        kept = {p: g for p, (g, k) in gaps.items() if k}
        moved = {p: g for p, (g, k) in gaps.items() if not k}
        report.append((label, kept, moved))
        assert kept, f"{label}: no task kept its owner"
        assert moved, f"{label}: no task moved"
    print("\n".join(f"{label}: kept {kept}, moved {moved}" for label, kept, moved in report))
    for label, kept, _ in report:
        worst = max(kept.values())
        assert worst < KEPT_GAP_S, f"{label}: a kept task stopped {worst:.2f} s: {kept}"
