"""``app.join(...)``: a windowed stream-stream join running inside faust workers.

One faust agent reads both joined topics (raw bytes). Records of a task (the
same partition of both topics) are applied in arrival order at the next
batch: the task's logic decides against the minimum of the two inputs'
watermarks (:mod:`streamjoin.join.watermarks`), so one input fetched ahead of
the other never makes the other's records late. An input that is caught up
with its partition and silent for ``max_idle_ms`` is reported idle and left
out of that minimum until its next record. Records are decoded by the policy
(bad ones go to the dead-letter topic with the reason) and fed to the task's
logic, whose state lives in the task's RocksDB database (a faust table's
store, so it is restored before the task runs, replicated to standbys and
placed by the assignor like any table).

Each batch is made durable in the order that survives a crash anywhere
(:mod:`~streamjoin.faust.join.batch`; the contract is in docs/joins.rst,
"Delivery: effectively once, by key"), and only while this worker owns its
tasks ("A worker frozen past its session").

This module holds :class:`Join`, which wires the pieces into faust and runs
batches; the pieces are :mod:`~streamjoin.faust.join.declare` (checks and
declarations, the frozen :class:`~streamjoin.faust.join.types.JoinConfig`),
:mod:`~streamjoin.faust.join.intake` (input records taken in bulk from
faust's fetches; acks that never let faust commit past the state),
:mod:`~streamjoin.faust.join.registry` (each task's state across rebalances),
:mod:`~streamjoin.faust.join.tasks` (per-task runtime),
:mod:`~streamjoin.faust.join.router` (a task's records applied to its logic),
:mod:`~streamjoin.faust.join.batch` (the durability steps) and
:mod:`~streamjoin.faust.join.stats` (counters, progress, the web page's view).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from faust.exceptions import NotReady

from streamjoin._gc import BATCH_SCHEDULE, gc_paused_async
from streamjoin._progress import ProgressLog
from streamjoin._supervise import crash_on_failure
from streamjoin.faust.join.batch import Batch, make_durable
from streamjoin.faust.join.declare import declare_join
from streamjoin.faust.join.fault_points import FaultPoints
from streamjoin.faust.join.intake import Intake
from streamjoin.faust.join.registry import TaskRegistry, now_ms
from streamjoin.faust.join.router import RecordRouter
from streamjoin.faust.join.stats import JoinStats, describe_join, log_progress
from streamjoin.faust.join.types import JoinConfig
from streamjoin.faust.kafka.consumer import committed_offset
from streamjoin.faust.kafka.producer import Sender
from streamjoin.faust.kafka.session import request_rebalance
from streamjoin.faust.kafka.stores import db_for_partition, is_rocksdict, state_bytes
from streamjoin.join.errors import JoinConfigError
from streamjoin.join.policy import JoinPolicy
from streamjoin.lifecycle.rebalance import Assigned, Revoked

if TYPE_CHECKING:
    from faust.streams import Stream
    from faust.tables.base import Collection
    from faust.types import AppT, EventT, StreamT
    from rocksdict import Rdict

    from streamjoin.faust.join.types import InputRecord, TopicArg
    from streamjoin.faust.restore.tables import TableManager

# faust declares a table's store (``data``) on its Collection; TableT's ``data`` is the
# dict it also is: the casts to Collection below read the store

__all__ = ["Join", "JoinStats"]

logger = logging.getLogger(__name__)


class Join:
    """A windowed join of two co-partitioned topics; build it with ``App.join``.

    Attributes:
        name: the join's name (its state table is ``<name>-state``).
        config: its checked configuration (:class:`~streamjoin.faust.join.types.JoinConfig`).
        outputs: output name -> faust topic the join's results go to.
        dead_letters: topic of records that cannot be joined, with the reason
            in the ``streamjoin-reason`` header and ``topic:partition:offset``
            of the original in ``streamjoin-source``.
        table: the join's state table (``<name>-state``, changelogged).
        stats: counters on this worker.
        tasks: the join's tasks on this worker
            (:class:`~streamjoin.faust.join.registry.TaskRegistry`).
        intake: takes the join's records from faust's consumer.
    """

    # long because: the constructor wires the join's pieces, one statement each
    def __init__(
        self,
        app: AppT,
        left: TopicArg,
        right: TopicArg,
        *,
        policy: JoinPolicy,
        name: str,
        outputs: Mapping[str, TopicArg] | None = None,
        dead_letters: TopicArg | None = None,
        partitions: int | None = None,
        max_idle_ms: int = 2000,
        batch_max: int = 2000,
        batch_interval: float = 0.05,
        max_record_bytes: int = 512 * 1024,
    ) -> None:
        # nothing is declared on the app unless every check passed
        declared = declare_join(
            app, left, right, policy=policy, name=name, outputs=outputs,
            dead_letters=dead_letters, partitions=partitions, max_idle_ms=max_idle_ms,
            batch_max=batch_max, batch_interval=batch_interval,
            max_record_bytes=max_record_bytes,
        )  # fmt: skip
        self.app = app
        self.name = name
        self.policy = policy
        self.config: JoinConfig = declared.config
        self.outputs = declared.outputs
        self.dead_letters = declared.dead_letters
        self.source = declared.source
        self.table = declared.table
        self.stats = JoinStats()
        self._lock = asyncio.Lock()
        manager = cast("TableManager", app.tables)  # streamjoin's: declare_join checked
        self.tasks = TaskRegistry(
            self.config, policy, self.stats, self._lock, open_db=self._db,
            offset_key=lambda: bytes(cast("Collection", self.table).data.offset_key),
            ownership=lambda: manager.ownership, restored_at=manager.restored_at,
            session_timeout=lambda: float(app.conf.broker_session_timeout),
            rejoin=lambda: request_rebalance(app),
        )  # fmt: skip
        self._router = RecordRouter(
            name, policy, self.stats, self.config.outputs, self.config.dead_letters,
            max_record_bytes=self.config.max_record_bytes,
        )  # fmt: skip
        #: progress lines (its interval: seconds between them)
        self.progress = ProgressLog(logger)
        self._sides = self.config.sides
        self._sender = Sender(app)
        self._wake = asyncio.Event()
        #: seeks under way (inputs read again from a task's position)
        self._seeks: set[asyncio.Future[None]] = set()
        #: crash points for tests (STREAMJOIN_FAULT_POINT; see fault_points)
        self._faults = FaultPoints()
        #: takes the join's records from faust's consumer (see intake)
        self.intake = Intake(
            app, self._sides, self._take, high_water=2 * self.config.batch_max,
            waiting=self.tasks.waiting_in, accepting=lambda: not self.tasks.revoking,
        )  # fmt: skip
        self.agent = app.agent(self.source, name=f"streamjoin.join.{name}")(self._consume)
        # a task loop, not app.timer: faust stops timers before it waits for
        # in-flight records on shutdown, and this loop makes them durable
        app.task(self._ticker)
        manager.register(self)  # every rebalance reaches the join through the owner

    # -- rebalances -----------------------------------------------------------------

    def revoke(self, event: Revoked) -> None:
        """Partitions are being revoked: buffered records are dropped unacknowledged;
        every task is parked when *event* revokes everything, else the tasks of
        the join's partitions it revokes are (:meth:`TaskRegistry.revoke`)."""
        topics = self.config.topics
        partitions = (
            None
            if event.kind.revokes_all
            else {partition for topic, partition in event.partitions if topic in topics}
        )
        self.intake.reset(partitions)
        self.tasks.revoke(partitions)

    async def handover(self, event: Revoked) -> None:
        """Wait (bounded) until the batch in flight is durable (:meth:`TaskRegistry.handover`)."""
        await self.tasks.handover()

    async def assign(self, event: Assigned) -> None:
        """The new assignment: close the tasks that left (:meth:`TaskRegistry.assign`)."""
        self.intake.install()  # before the first fetch of the join's partitions
        left = self.config.left_topic
        await self.tasks.assign({partition for topic, partition in event.assigned if topic == left})

    def restore_again(self) -> set[tuple[str, int]]:
        """(changelog topic, partition) of every task of this join whose batch was
        abandoned since its state was last restored: the task opens again only
        from a state restored after that, so a cooperative rebalance that keeps
        the task on this worker restores its state again."""
        topic = self.config.changelog_topic
        return {(topic, partition) for partition in self.tasks.abandoned()}

    # -- introspection -------------------------------------------------------------

    def describe(self) -> dict[str, Any]:  # Any: JSON values
        """The join's configuration, tasks and counters (JSON-ready)."""
        return describe_join(self.config, self.tasks.live, self.stats, self.intake.counters())

    # -- input --------------------------------------------------------------------

    async def _consume(self, stream: StreamT[Any]) -> None:  # Any: the events' values
        # records reach the join through its intake; faust delivers the join's
        # agent only events of topics another agent reads too (see _receive)
        # noack() is declared on faust's Stream, not on StreamT
        async for event in cast("Stream[Any]", stream).noack().events():
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
                await asyncio.wait_for(self._wake.wait(), self.config.batch_interval)
            self._wake.clear()
            await self._on_timer()

    async def _on_timer(self) -> None:
        # also with nothing received: an input may have gone idle, which lets
        # the other input's decisions out
        tasks = self.tasks
        tasks.open_ready()
        if tasks.live and not tasks.revoking:
            await self._tick()
        log_progress(
            self.progress,
            self.name,
            time.monotonic(),
            self.stats,
            len(tasks.live),
            tasks.buffered,
            len(tasks.parked),
        )

    def state_sizes(self) -> dict[int, int]:
        """Each live task's state in bytes (``stores.state_bytes``), for ``/metrics``;
        a task whose database cannot answer (closing in a rebalance) is left out."""
        sizes: dict[int, int] = {}
        for partition in sorted(self.tasks.live):
            try:
                size = state_bytes(self._db(partition))
            except Exception:
                continue
            if size is not None:
                sizes[partition] = size
        return sizes

    def _db(self, partition: int) -> Rdict:
        store = cast("Collection", self.table).data
        if not is_rocksdict(store):
            raise JoinConfigError(
                f"join {self.name!r} keeps its state in RocksDB: give the app "
                "store='rocksdb://' (streamjoin.App's default) and install rocksdict"
            )
        return db_for_partition(store, partition)

    def _receive(self, event: EventT[Any]) -> None:
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
        if self.tasks.revoking or message.topic in self.intake.exclusive:
            return
        self.intake.hold(message.tp, message.offset, event)

    def _take(self, topic: str, partition: int, records: Sequence[InputRecord]) -> None:
        """Records of one partition from the intake (never while revoking)."""
        self._accept(topic, partition, records)
        self._wake.set()

    def _accept(self, topic: str, partition: int, records: Sequence[InputRecord]) -> None:
        side = self._sides[topic]
        self.stats.received[side] += len(records)
        if not self.tasks.owned(partition):
            # not fenced for this worker (being taken over, or lost): never acked;
            # once the task opens, its state's position sends the consumer back
            return
        task = self.tasks.task(partition)
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
        self.tasks.buffered += len(records)

    def _seek(self, topic: str, partition: int, offset: int) -> None:
        """Make the consumer read ``topic[partition]`` again from *offset*."""
        from faust.types import TP

        seek = asyncio.ensure_future(self.app.consumer.seek(TP(topic, partition), offset))
        self._seeks.add(seek)
        seek.add_done_callback(self._seeks.discard)

    def _committed(self, topic: str, partition: int) -> int | None:
        """faust's note of the group's committed offset of ``topic[partition]``."""
        from faust.types import TP

        return committed_offset(self.app.consumer, TP(topic, partition))

    # -- a batch ------------------------------------------------------------------

    async def _tick(self) -> None:
        # the cyclic collector waits for the batch to end (see streamjoin._gc)
        async with self._lock, gc_paused_async(*BATCH_SCHEDULE):
            # a batch that cannot be made durable stops the worker, unless it is
            # stopping already (its producer first)
            await crash_on_failure(
                self._run_batch(), what=f"join {self.name}: batch", crash=self.app.crash,
                logger=logger, stopping=lambda: bool(self.app.should_stop),
                on_shutdown="; its records were not acked and are read again",
            )  # fmt: skip

    async def _run_batch(self) -> None:
        """Release and apply what every task can, then make it durable (see batch),
        only while this worker owns the tasks (:meth:`TaskRegistry.may_write`,
        :meth:`TaskRegistry.still_owned`)."""
        tasks = self.tasks
        if not tasks.may_write():
            return
        epoch = tasks.epoch
        began, processed = time.perf_counter(), self.stats.processed
        batch = self._release()
        if not batch.touched:
            return
        written = sum(len(task.state.content) for task in batch.touched)
        durable = await make_durable(
            self._sender, self.config.changelog_topic, batch,
            cast("Collection", self.table).data.offset_key, self._db,
            self.intake.ack, lambda touched, whole: tasks.still_owned(epoch, touched, whole),
            self._faults.reached,
        )  # fmt: skip
        if durable:
            stats = self.stats
            stats.batches += 1
            stats.changelog_records += written
            stats.batch_seconds.observe(time.perf_counter() - began)
            stats.batch_records.observe(stats.processed - processed)

    def _release(self) -> Batch:
        """Every task's records a batch takes and idle inputs, staged (nothing sent)."""
        now = now_ms()
        batch = Batch()
        topics = self.config.topics
        consumer = self.app.consumer
        tasks = self.tasks
        for partition in sorted(tasks.live):
            task = tasks.live[partition]
            waits = task.waits(consumer, topics, self.config.window.grace)  # (alignment)
            received = task.take_inbox(self.config.batch_max, waits)
            idle = task.going_idle(now, consumer, topics)
            if task.more:  # more than batch_max were waiting: next batch now
                self._wake.set()
            if not received and not idle:
                continue
            batch.touched.append(task)
            batch.outputs.extend(self._router.stage(task, received, idle))
        tasks.buffered = tasks.waiting()
        self.intake.drained()
        return batch
