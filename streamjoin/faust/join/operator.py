"""``app.join(...)``: a windowed stream-stream join running inside faust workers.

One faust agent reads both joined topics (raw bytes). Records of a task (the
same partition of both topics) are applied in arrival order at the next
batch: the task's logic decides against the minimum of the two inputs'
watermarks (:mod:`streamjoin.join.watermarks`), so one input fetched ahead of
the other never makes the other's records late. An input that is caught up
with its partition and silent for ``max_idle_ms`` is reported idle and left
out of that minimum until its next record. Records are decoded by the policy
(bad ones go to the dead-letter topic with the reason) and fed to the task's
logic, whose state
lives in the task's RocksDB database (a faust table's store, so it is
restored before the task runs, replicated to standbys and placed by the
assignor like any table).

Each batch is made durable in the order that survives a crash anywhere
(:mod:`~streamjoin.faust.join.batch`; the contract is in docs/joins.rst,
"Delivery: effectively once, by key"), and only while this worker owns its
tasks ("A worker frozen past its session").

This module holds :class:`Join`, which wires the pieces into faust and runs
batches; the pieces are :mod:`~streamjoin.faust.join.declare` (checks and
declarations), :mod:`~streamjoin.faust.join.intake` (every input record taken in
bulk from faust's consumer's fetches; acks that never let faust commit past
the state),
:mod:`~streamjoin.faust.join.tasks` (per-task runtime),
:mod:`~streamjoin.faust.join.router` (records applied to a task's logic),
:mod:`~streamjoin.faust.join.batch` (the durability steps) and
:mod:`~streamjoin.faust.join.stats` (counters, progress lines, the web
page's view).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from faust.exceptions import NotReady

from streamjoin.faust.join.fault_points import FaultPoints
from streamjoin.faust.join.batch import Batch, Sender, make_durable
from streamjoin.faust.join.declare import (
    check_batching,
    check_outputs,
    check_record_limit,
    check_sides,
    check_table_manager,
    declare_copartitioned,
    declare_dead_letters,
    declare_outputs,
    declare_source,
    declare_state_table,
    hook_rebalance,
    join_partitions,
)
from streamjoin.faust.join.intake import Intake
from streamjoin.faust.join.lifecycle import TaskLifecycle, now_ms
from streamjoin.faust.join.router import RecordRouter
from streamjoin.faust.join.stats import JoinStats, ProgressLog, describe_join
from streamjoin.faust.join.tasks import LEFT, RIGHT, JoinTask
from streamjoin.join.errors import JoinConfigError
from streamjoin.join.policy import JoinPolicy

__all__ = ["Join", "JoinStats"]

logger = logging.getLogger(__name__)


class Join(TaskLifecycle):
    """A windowed join of two co-partitioned topics; build it with ``App.join``.

    Attributes:
        name: the join's name (its state table is ``<name>-state``).
        outputs: output name -> faust topic the join's results go to.
        dead_letters: topic of records that cannot be joined, with the reason
            in the ``streamjoin-reason`` header and ``topic:partition:offset``
            of the original in ``streamjoin-source``.
        stats: counters on this worker.
    """

    def __init__(
        self,
        app: Any,
        left: Any,
        right: Any,
        *,
        policy: JoinPolicy,
        name: str,
        outputs: Mapping[str, Any] | None = None,
        dead_letters: Any = None,
        partitions: int | None = None,
        max_idle_ms: int = 2000,
        batch_max: int = 2000,
        batch_interval: float = 0.05,
        max_record_bytes: int = 512 * 1024,
    ) -> None:
        self.app = app
        self.max_record_bytes = check_record_limit(name, max_record_bytes)
        self.name = name
        self.policy = policy
        wanted = self._validate(
            left, right, partitions, max_idle_ms, batch_max, batch_interval, outputs
        )
        self._declare_topics(wanted, dead_letters)
        self._declare_state_table()
        self._init_runtime()
        self._wire_agent()

    # -- declaration (in this order: nothing is declared unless every check passed) ------

    def _validate(
        self,
        left: Any,
        right: Any,
        partitions: int | None,
        max_idle_ms: int,
        batch_max: int,
        batch_interval: float,
        outputs: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """Check the declaration; returns the output overrides. Declares nothing."""
        self.left_topic, self.right_topic, counts = check_sides(self.name, left, right)
        self.partitions = join_partitions(self.app, partitions, counts)
        check_batching(self.name, max_idle_ms, batch_max, batch_interval)
        check_table_manager(self.app, self.name)
        self.max_idle_ms = max_idle_ms
        self.batch_max = batch_max
        self.batch_interval = batch_interval
        return check_outputs(self.name, self.policy, outputs)

    def _declare_topics(self, wanted: Mapping[str, Any], dead_letters: Any) -> None:
        """The output, dead-letter and source topics (raw bytes)."""
        app = self.app
        self.outputs: dict[str, Any] = declare_outputs(app, self.name, self.policy, wanted)
        self.dead_letters = declare_dead_letters(app, self.name, dead_letters)
        self.source = declare_source(app, self.left_topic, self.right_topic, self.partitions)

    def _declare_state_table(self) -> None:
        """The changelogged state table, co-partitioned with both sides."""
        self.table = declare_state_table(self.app, self.name, self.partitions)
        self.changelog_topic = self.table.changelog_topic.get_topic_name()
        declare_copartitioned(self.app, (self.left_topic, self.right_topic, self.changelog_topic))

    def _init_runtime(self) -> None:
        """Counters, tasks and the batch lock of this worker."""
        self.stats = JoinStats()
        self._tasks: dict[int, JoinTask] = {}
        #: tasks kept open across a rebalance, until their next record (see _task)
        self._parked: dict[int, JoinTask] = {}
        #: the partitions (tasks) this worker was assigned at the last rebalance
        self._assigned: frozenset[int] = frozenset()
        self._router = RecordRouter(
            self.name, self.policy, self.stats, self.outputs, self.dead_letters,
            max_record_bytes=self.max_record_bytes,
        )  # fmt: skip
        self._lock = asyncio.Lock()
        self._buffered = 0
        #: seconds between progress log lines
        self.log_interval = 10.0
        self._progress = ProgressLog(logger, self.name)
        self._revoking = False
        self._sides = {self.left_topic: LEFT, self.right_topic: RIGHT}
        self._sender = Sender(self.app)
        self._wake = asyncio.Event()
        #: seeks under way (inputs read again from a task's position)
        self._seeks: set[asyncio.Future[None]] = set()
        #: bumped when a revoke stops waiting for the batch in flight (see on_revoked):
        #: a batch begun before it is not made durable after it
        self._epoch = 0
        #: whether the lapse of the session lease was logged (once per lapse)
        self._lapse_logged = False
        #: crash points for tests (STREAMJOIN_FAULT_POINT; see fault_points)
        self._faults = FaultPoints()
        #: partition -> time.time() its batch was abandoned (see _abandon)
        self._abandoned: dict[int, float] = {}
        #: takes the join's records from faust's consumer (see join_intake)
        self.intake = Intake(
            self.app, self._sides, self._take, high_water=2 * self.batch_max,
            buffered=self._waiting, accepting=lambda: not self._revoking,
        )  # fmt: skip

    def _wire_agent(self) -> None:
        """The agent reading both sides, the batch ticker and the rebalance hook."""
        app = self.app
        self.agent = app.agent(self.source, name=f"streamjoin.join.{self.name}")(self._consume)
        # a task loop, not app.timer: faust stops timers before it waits for
        # in-flight records on shutdown, and this loop makes them durable
        app.task(self._ticker)
        hook_rebalance(self)

    # -- introspection -------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """The join's configuration, tasks and counters (JSON-ready)."""
        return describe_join(self, self._tasks)

    # -- input --------------------------------------------------------------------

    async def _consume(self, stream: Any) -> Any:
        # records reach the join through its intake; faust delivers the join's
        # agent only events of topics another agent reads too (see _receive)
        async for event in stream.noack().events():
            self._receive(event)

    async def _ticker(self) -> None:
        # faust creates the topics agents read, not the ones we produce to
        for topic in [*self.outputs.values(), self.dead_letters]:
            try:
                await topic.maybe_declare()
            except NotReady:
                if self.app.should_stop:  # stopped while starting: nothing to declare for
                    return
                raise
        while not self.app.should_stop:
            # a batch as soon as records wait and the previous one is durable
            # (what arrives meanwhile makes the next batch: batches grow with
            # the load), else every batch_interval (inputs may go idle)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.batch_interval)
            self._wake.clear()
            await self._on_timer()

    async def _on_timer(self) -> None:
        # also with nothing received: an input may have gone idle, which lets
        # the other input's decisions out
        self._open_ready_tasks()
        if self._tasks and not self._revoking:
            await self._tick()
        self._progress.maybe_log(
            time.monotonic(),
            self.log_interval,
            self.stats,
            len(self._tasks),
            self._buffered,
            len(self._parked),
        )

    def _waiting(self) -> int:
        """Records received and not yet in a batch, over every task."""
        return sum(task.waiting for task in self._tasks.values())

    def _db(self, partition: int) -> Any:
        store = self.table.data
        db_for = getattr(store, "_db_for_partition", None)
        if db_for is None or not getattr(store, "use_rocksdict", False):
            raise JoinConfigError(
                f"join {self.name!r} keeps its state in RocksDB: give the app "
                "store='rocksdb://' (streamjoin.App's default) and install rocksdict"
            )
        return db_for(partition)

    def _receive(self, event: Any) -> None:
        """An event faust delivered to the join's agent: the join took its record
        from the fetch already (:mod:`~streamjoin.faust.join.intake`).

        Of a topic another agent reads too, it is held and acked once the join
        applied its offset (faust acks a shared record when every reader has).
        Otherwise (in flight while partitions are revoked, or queued before a
        rebalance made the intake take this topic out of fetches) it is
        dropped unacknowledged: the rebalance sought the consumer back to the
        committed offset, so it is read again.
        """
        message = event.message
        if self._revoking or message.topic in self.intake.exclusive:
            return
        self.intake.hold(message.tp, message.offset, event)

    def _take(self, topic: str, partition: int, records: Any) -> None:
        """Records of one partition from the intake (never while revoking)."""
        self._accept(topic, partition, records)
        self._wake.set()

    def _accept(self, topic: str, partition: int, records: Any) -> None:
        side = self._sides[topic]
        self.stats.received[side] += len(records)
        if not self._owned(partition):
            # not fenced for this worker (being taken over, or lost): never acked;
            # once the task opens, its state's position sends the consumer back
            return
        task = self._task(partition)
        offset = records[0].offset
        now = now_ms()
        if task.rewinding(side, offset, now):
            return  # fetched before the consumer went back: never acked, read again
        position = task.gap_before(side, offset)
        if position is not None and task.rewind(side, position, now):
            # The consumer starts beyond the task's state: records in between
            # were never applied (they may have been committed all the same,
            # e.g. acknowledged by another agent reading the topic). The
            # state says where the input resumes: read it again from there.
            # From the committed offset when it is behind the position: the
            # records in between (replays, skipped) are then acked too, and
            # faust's commits, which stop at the first unacked offset, go on.
            committed = self._committed(topic, partition)
            start = position if committed is None else min(position, committed)
            self.stats.rewinds += 1
            logger.warning(
                "join %s: %s[%d] starts at offset %d but the task's state ends at %d "
                "(the consumer's committed offset: %s); reading it again from %d",
                self.name,
                topic,
                partition,
                offset,
                position,
                committed,
                start,
            )
            self._seek(topic, partition, start)
            return
        if position is not None:
            # Records are acked only once applied, so faust never commits past
            # the state's position; if the consumer starts beyond it anyway,
            # even after reading again from there (a topic truncated or
            # deleted), records in between are not in the state, and nothing
            # can bring them back: say so.
            self.stats.gaps += 1
            logger.warning(
                "join %s: %s[%d] starts at offset %d but the task's state ends at %d; "
                "records %d..%d were never applied to it (read again %d times)",
                self.name,
                topic,
                partition,
                offset,
                position,
                position,
                offset - 1,
                task.rewinds[side][1],
            )
        task.receive(side, records, now)
        self._buffered += len(records)

    def _seek(self, topic: str, partition: int, offset: int) -> None:
        """Make the consumer read ``topic[partition]`` again from *offset*."""
        from faust.types import TP

        seek = asyncio.ensure_future(self.app.consumer.seek(TP(topic, partition), offset))
        self._seeks.add(seek)
        seek.add_done_callback(self._seeks.discard)

    def _committed(self, topic: str, partition: int) -> int | None:
        """faust's note of the group's committed offset of ``topic[partition]``."""
        from faust.types import TP

        committed = getattr(self.app.consumer, "_committed_offset", None)
        return None if committed is None else committed.get(TP(topic, partition))

    # -- a batch ------------------------------------------------------------------

    async def _tick(self) -> None:
        async with self._lock:
            try:
                await self._run_batch()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a batch that cannot be made durable stops the worker
                if self.app.should_stop:  # stopping already (its producer first): not a crash
                    logger.info(
                        "join %s: batch cut short by the shutdown (%r); its records were "
                        "not acked and are read again",
                        self.name,
                        exc,
                    )
                    return
                logger.exception("join %s: batch failed, stopping the worker", self.name)
                await self.app.crash(exc)

    async def _run_batch(self) -> None:
        """Release and apply what every task can, then make it durable (see join_batch),
        only while this worker owns the tasks (:meth:`_may_write`, :meth:`_still_owner`)."""
        if not self._may_write():
            return
        epoch = self._epoch
        batch = self._release()
        if not batch.touched:
            return
        durable = await make_durable(
            self._sender, self.changelog_topic, batch, self.table.data.offset_key, self._db,
            self.intake.ack, lambda: self._still_owner(epoch, batch.touched), self._faults.reached,
        )  # fmt: skip
        if durable:
            self.stats.batches += 1

    def _release(self) -> Batch:
        """Every task's received records and idle inputs, applied to its batch
        state (nothing sent yet)."""
        now = now_ms()
        batch = Batch()
        topics = {LEFT: self.left_topic, RIGHT: self.right_topic}
        consumer = self.app.consumer
        for partition in sorted(self._tasks):
            task = self._tasks[partition]
            received = task.take_inbox(self.batch_max)
            idle = task.going_idle(now, consumer, topics)
            if not received and not idle:
                continue
            batch.touched.append(task)
            batch.outputs.extend(task.stage(received, idle, self._router))
        self._buffered = self._waiting()
        if self._buffered:
            self._wake.set()  # more than batch_max were waiting: next batch now
        self.intake.drained()
        return batch
