"""The rebalance benchmark's Kafka side: the state, the steady input, each task's progress.

* :func:`prefill` writes the table's changelog before any worker starts, so a
  task restored from nothing has many records to read.
* :class:`Traffic` runs in a thread with its own event loop: it produces input
  records at a steady rate over all partitions and reads the changelog from
  its end, keeping the timestamp of every record per partition (the time the
  worker running that task sent it).
* :func:`task_gaps` turns those timestamps into each task's longest stretch
  without progress within a phase. Pure.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence

from benchmarks.harness.kafka import create_topics, write_changelog

#: live keys per partition (the live input rewrites them; the state stays its size)
LIVE_KEYS = 1_000


def changelog_topic(app_id: str) -> str:
    """The changelog of the rebalance app's table."""
    return f"{app_id}-state-changelog"


def input_topic(app_id: str) -> str:
    """The input topic of the rebalance app."""
    return f"{app_id}-input"


def task_gaps(
    times: Mapping[int, Sequence[float]], start: float, end: float, tasks: Iterable[int]
) -> dict[int, float]:
    """Each task's longest stretch in ``[start, end]`` without a progress time.

    *times*: per task, the times (seconds) it made progress, in any order;
    times outside the window are ignored, and the window's bounds count as
    progress, so a task with none in the window has the whole window as gap.
    """
    out: dict[int, float] = {}
    for task in tasks:
        inside = sorted(t for t in times.get(task, ()) if start <= t <= end)
        marks = [start, *inside, end]
        out[task] = max(b - a for a, b in itertools.pairwise(marks))
    return out


def prefill(bootstrap: str, app_id: str, partitions: int, records: int, value_size: int) -> None:
    """Create the app's topics and write *records* distinct keys to its changelog
    (see :func:`benchmarks.harness.kafka.write_changelog`)."""

    async def fill() -> None:
        await create_topics(bootstrap, [input_topic(app_id)], partitions)
        await write_changelog(
            bootstrap,
            changelog_topic(app_id),
            partitions,
            records,
            json.dumps("s" * value_size).encode(),
            lambda i: json.dumps(f"state-{i:09d}").encode(),
        )

    asyncio.run(fill())


class Traffic:
    """Steady input at *rate* records/s and the changelog's progress times, in a thread."""

    def __init__(
        self, bootstrap: str, app_id: str, partitions: int, rate: float, value_size: int
    ) -> None:
        self.bootstrap = bootstrap
        self.app_id = app_id
        self.partitions = partitions
        self.rate = rate
        self.value_size = value_size
        self._times: dict[int, list[float]] = {p: [] for p in range(partitions)}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        #: time.time() at the start of the latest fetch after which the reader had
        #: every partition read up to the high watermark that fetch reported
        self._caught_up_since = 0.0
        self._thread = threading.Thread(target=self._run, name="traffic", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        """Start producing and reading; returns once the changelog reader is positioned."""
        self._thread.start()
        if not self._ready.wait(60):
            raise TimeoutError("the changelog reader did not start within 60s")

    def stop(self) -> None:
        """Stop both and wait for the thread."""
        self._stop.set()
        self._thread.join(timeout=30)

    def times(self) -> dict[int, list[float]]:
        """A copy of every partition's progress times so far."""
        with self._lock:
            return {p: list(ts) for p, ts in self._times.items()}

    def wait_read_up_to(self, moment: float, timeout: float = 30.0) -> bool:
        """Wait until the reader has read the changelog to its end as of *moment*.

        The embedded broker hands out one-record batches about one per fetch, so
        the reader can trail the workers; gaps computed before it caught up
        would count its lag as the tasks' own. False when it did not within
        *timeout* seconds.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self._caught_up_since >= moment:
                    return True
            time.sleep(0.05)
        return False

    def progressing(self, since: float) -> set[int]:
        """The partitions with progress after *since*."""
        with self._lock:
            return {p for p, ts in self._times.items() if ts and ts[-1] >= since}

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported by the caller; the thread must not die silently
            self.error = exc
            self._ready.set()

    async def _main(self) -> None:
        await asyncio.gather(self._read(), self._produce())

    async def _read(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = [TopicPartition(changelog_topic(self.app_id), p) for p in range(self.partitions)]
            consumer.assign(tps)
            await consumer.seek_to_end(*tps)
            for tp in tps:
                await consumer.position(tp)
            self._ready.set()
            while not self._stop.is_set():
                asked = time.time()
                fetched = await consumer.getmany(timeout_ms=100)
                read_all = True
                for tp in tps:
                    end = consumer.highwater(tp)
                    if end is None or await consumer.position(tp) < end:
                        read_all = False
                        break
                with self._lock:
                    for tp, records in fetched.items():
                        self._times[tp.partition].extend(r.timestamp / 1000 for r in records)
                    if read_all:
                        self._caught_up_since = asked
        finally:
            await consumer.stop()

    async def _produce(self) -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks=1, linger_ms=5)
        await producer.start()
        value = json.dumps("v" * self.value_size).encode()
        topic = input_topic(self.app_id)
        started = time.monotonic()
        sent = 0
        try:
            while not self._stop.is_set():
                due = int((time.monotonic() - started) * self.rate)
                while sent < due:
                    partition = sent % self.partitions
                    key = json.dumps(f"live-{partition}-{sent // self.partitions % LIVE_KEYS}")
                    await producer.send(topic, value, key=key.encode(), partition=partition)
                    sent += 1
                await asyncio.sleep(0.01)
        finally:
            await producer.stop()
