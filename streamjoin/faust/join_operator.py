"""``app.join(...)``: a windowed stream-stream join running inside faust workers.

One faust agent reads both joined topics (raw bytes). Records of a task (the
same partition of both topics) go to the task's
:class:`~streamjoin.join.ordering.EventTimeMerger`, which releases them in
event-time order, waiting at most ``max_idle_ms`` for a side that still has
unread data. Released records are decoded by the policy (bad ones go to the
dead-letter topic with the reason) and fed to the task's logic, whose state
lives in the task's RocksDB database (a faust table's store, so it is
restored before the task runs, replicated to standbys and placed by the
assignor like any table).

Each batch is made durable in an order that survives a crash anywhere:

1. outputs (outcomes, dead letters) are sent and acknowledged by the broker;
2. the batch's state changes, including the next input offset of each side,
   are sent to the changelog and acknowledged;
3. the same changes go to RocksDB in one write batch with the changelog offset;
4. the input records are acked (faust may commit their offsets).

After a crash the task's state (restored from the changelog) says where its
input resumes: records before that offset are skipped, so an input record is
applied to state at most once; outputs of a batch whose state was lost are
re-emitted with the same key and value (effectively once, by key).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamjoin.assignment.grouping import copartition_problems
from streamjoin.faust.batch_state import BatchState
from streamjoin.join import keys
from streamjoin.join.errors import JoinConfigError
from streamjoin.join.ordering import EventTimeMerger
from streamjoin.join.policy import DEAD_LETTER, BadRecord, Emission, JoinPolicy, TaskLogic

__all__ = ["Join", "JoinStats"]

logger = logging.getLogger(__name__)

LEFT = "left"
RIGHT = "right"
SIDES = (LEFT, RIGHT)

#: records a task holds back waiting for its other input before it goes on
#: without it (bounds memory when one input stalls while the other flows)
MAX_BUFFERED_PER_TASK = 50_000

#: header names on dead-letter records
REASON_HEADER = "streamjoin-reason"
SOURCE_HEADER = "streamjoin-source"


@dataclass
class JoinStats:
    """Counters of one join on this worker (since the worker started)."""

    received: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIDES, 0))
    processed: int = 0
    skipped_replays: int = 0
    bad: int = 0
    late: int = 0
    emitted: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    idle_expirations: int = 0
    gaps: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready copy."""
        return {
            "received": dict(self.received),
            "processed": self.processed,
            "skipped_replays": self.skipped_replays,
            "bad": self.bad,
            "late": self.late,
            "emitted": dict(sorted(self.emitted.items())),
            "batches": self.batches,
            "idle_expirations": self.idle_expirations,
            "gaps": self.gaps,
        }


class _Task:
    """One partition of both topics on this worker."""

    def __init__(self, partition: int, policy: JoinPolicy, max_idle_ms: int) -> None:
        self.partition = partition
        self.state = BatchState()
        self.merger: EventTimeMerger[Any] = EventTimeMerger(
            SIDES, max_idle_ms, max_buffered=MAX_BUFFERED_PER_TASK
        )
        self.logic: TaskLogic | None = None
        self.policy = policy
        #: next input offset to apply, per side (from state; None: unknown yet)
        self.position: dict[str, int | None] = dict.fromkeys(SIDES)
        #: next offset expected from the consumer, per side
        self.next_seen: dict[str, int | None] = dict.fromkeys(SIDES)
        self.unacked: list[Any] = []

    def open(self, db: Any) -> None:
        """Load the task from its (restored) database and rebuild its indexes."""
        self.state.db = db
        self.logic = self.policy.task(self.state)
        self.logic.rebuild_indexes()
        for side in SIDES:
            raw = self.state.get(keys.position_key(side))
            self.position[side] = None if raw is None else int.from_bytes(raw, "big")
            self.next_seen[side] = self.position[side]


class Join:
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
    ) -> None:
        self.app = app
        self.name = name
        self.policy = policy
        self.left_topic = _topic_name(left)
        self.right_topic = _topic_name(right)
        if self.left_topic == self.right_topic:
            raise JoinConfigError(
                f"join {name!r}: cannot join topic {self.left_topic!r} with itself"
            )
        counts = {
            t: n
            for t, n in ((self.left_topic, _declared(left)), (self.right_topic, _declared(right)))
            if n
        }
        problems = copartition_problems(counts, [(self.left_topic, self.right_topic)])
        if problems:
            raise problems[0]
        self.partitions = (
            partitions or next(iter(counts.values()), None) or app.conf.topic_partitions
        )
        if max_idle_ms < 0 or batch_max < 1 or batch_interval <= 0:
            raise JoinConfigError(
                f"join {name!r}: max_idle_ms must be >= 0, batch_max >= 1, batch_interval > 0"
            )
        from streamjoin.faust.tables import TableManager

        manager = app.conf.TableManager
        if not (isinstance(manager, type) and issubclass(manager, TableManager)):
            raise JoinConfigError(
                f"join {name!r} needs streamjoin's table restoration: create the app with "
                "streamjoin.App, or pass TableManager='streamjoin:TableManager' to faust.App"
            )
        self.max_idle_ms = max_idle_ms
        self.batch_max = batch_max
        self.batch_interval = batch_interval
        raw = {"key_serializer": "raw", "value_serializer": "raw"}
        wanted = dict(outputs or {})
        unknown = sorted(set(wanted) - set(policy.outputs))
        if unknown:
            raise JoinConfigError(
                f"join {name!r}: unknown outputs {unknown}; the policy emits {list(policy.outputs)}"
            )
        self.outputs: dict[str, Any] = {}
        for out in policy.outputs:
            target = wanted.get(out, f"{name}-{out}")
            self.outputs[out] = app.topic(target, **raw) if isinstance(target, str) else target
        dlq = dead_letters if dead_letters is not None else f"{name}-dead-letters"
        self.dead_letters = app.topic(dlq, **raw) if isinstance(dlq, str) else dlq
        self.source = app.topic(
            self.left_topic, self.right_topic, partitions=self.partitions, **raw
        )
        self.table = app.Table(
            f"{name}-state",
            partitions=self.partitions,
            key_type=bytes,
            value_type=bytes,
            help=f"state of join {name}",
        )
        self.changelog_topic = self.table.changelog_topic.get_topic_name()
        groups = list(getattr(app, "copartitioned_topics", ()))
        groups.append((self.left_topic, self.right_topic, self.changelog_topic))
        app.copartitioned_topics = groups
        self.stats = JoinStats()
        self._tasks: dict[int, _Task] = {}
        self._lock = asyncio.Lock()
        self._buffered = 0
        self._received_since_tick = 0
        self._last_arrival_ms = 0
        #: seconds between progress log lines
        self.log_interval = 10.0
        self._logged_at = time.monotonic()
        self._logged_n = 0
        self.agent = app.agent(self.source, name=f"streamjoin.join.{name}")(self._consume)
        self._revoking = False
        # a task loop, not app.timer: faust stops timers before it waits for
        # in-flight records on shutdown, and this loop makes them durable
        app.task(self._ticker)
        _hook_rebalance(self)

    # -- introspection -------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """The join's configuration, tasks and counters (JSON-ready)."""
        window = self.policy.window
        return {
            "name": self.name,
            "left": self.left_topic,
            "right": self.right_topic,
            "partitions": self.partitions,
            "window": {"before": window.before, "after": window.after, "grace": window.grace},
            "changelog": self.changelog_topic,
            "outputs": {k: v.get_topic_name() for k, v in sorted(self.outputs.items())},
            "dead_letters": self.dead_letters.get_topic_name(),
            "tasks": {
                str(p): {
                    "stream_time": t.logic.stream_time if t.logic else None,
                    "position": dict(t.position),
                    "buffered": t.merger.buffered(),
                }
                for p, t in sorted(self._tasks.items())
            },
            "stats": self.stats.as_dict(),
        }

    # -- input --------------------------------------------------------------------

    async def _consume(self, stream: Any) -> Any:
        async for event in stream.noack().events():
            await self._receive(event)
            # a batch per batch_max records *received*: counting what the
            # merger holds back would start a tiny batch for every record
            # while it waits for the other input
            if self._received_since_tick >= self.batch_max:
                await self._tick()

    async def _ticker(self) -> None:
        # faust creates the topics agents read, not the ones we produce to
        for topic in [*self.outputs.values(), self.dead_letters]:
            await topic.maybe_declare()
        while not self.app.should_stop:
            await asyncio.sleep(self.batch_interval)
            await self._on_timer()

    async def _on_timer(self) -> None:
        if self._buffered and not self._revoking:
            await self._tick()
        now = time.monotonic()
        if now - self._logged_at >= self.log_interval and self.stats.processed != self._logged_n:
            self._log_progress(now)

    def _log_progress(self, now: float) -> None:
        rate = (self.stats.processed - self._logged_n) / max(now - self._logged_at, 1e-9)
        self._logged_at, self._logged_n = now, self.stats.processed
        emitted = ", ".join(f"{k} {v}" for k, v in sorted(self.stats.emitted.items()))
        logger.info(
            "join %s: %d tasks, %d records processed (%.0f/s), %d buffered, %d skipped replays; "
            "out: %s",
            self.name,
            len(self._tasks),
            self.stats.processed,
            rate,
            self._buffered,
            self.stats.skipped_replays,
            emitted or "nothing yet",
        )

    def _task(self, partition: int) -> _Task:
        task = self._tasks.get(partition)
        if task is None:
            task = self._tasks[partition] = _Task(partition, self.policy, self.max_idle_ms)
            task.open(self._db(partition))
        return task

    def _db(self, partition: int) -> Any:
        store = self.table.data
        db_for = getattr(store, "_db_for_partition", None)
        if db_for is None or not getattr(store, "use_rocksdict", False):
            raise JoinConfigError(
                f"join {self.name!r} keeps its state in RocksDB: give the app "
                "store='rocksdb://' (streamjoin.App's default) and install rocksdict"
            )
        return db_for(partition)

    async def _receive(self, event: Any) -> None:
        if self._revoking:
            return  # in flight while partitions are revoked: never acked, read again
        message = event.message
        side = LEFT if message.topic == self.left_topic else RIGHT
        self.stats.received[side] += 1
        task = self._task(message.partition)
        offset = message.offset
        position = task.position[side]
        if position is not None and offset > position and task.next_seen[side] == position:
            # Records are acked only once applied, so faust never commits past
            # the state's position; if the consumer starts beyond it anyway
            # (a changelog truncated or deleted), records in between are not in
            # the state, and nothing can bring them back: say so.
            self.stats.gaps += 1
            logger.warning(
                "join %s: %s[%d] starts at offset %d but the task's state ends at %d; "
                "records %d..%d were never applied to it",
                self.name,
                message.topic,
                message.partition,
                offset,
                position,
                position,
                offset - 1,
            )
        task.next_seen[side] = offset + 1
        ts = int(message.timestamp * 1000) if message.timestamp is not None else 0
        self._last_arrival_ms = int(time.monotonic() * 1000)
        task.merger.add(side, ts, event, now_ms=self._last_arrival_ms)
        self._buffered += 1
        self._received_since_tick += 1

    def _unread(self, task: _Task) -> dict[str, bool]:
        consumer = self.app.consumer
        unread = {}
        for side in SIDES:
            topic = self.left_topic if side == LEFT else self.right_topic
            hw = _highwater(consumer, topic, task.partition)
            seen = task.next_seen[side]
            unread[side] = hw is None or (hw > 0 if seen is None else seen < hw)
        return unread

    # -- a batch ------------------------------------------------------------------

    async def _tick(self) -> None:
        self._received_since_tick = 0
        async with self._lock:
            try:
                await self._run_batch()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a batch that cannot be made durable stops the worker
                logger.exception("join %s: batch failed, stopping the worker", self.name)
                await self.app.crash(exc)

    async def _run_batch(self) -> None:
        now = int(time.monotonic() * 1000)
        outputs: list[tuple[str, bytes | None, bytes, list[tuple[str, bytes]] | None]] = []
        touched: list[_Task] = []
        for partition in sorted(self._tasks):
            task = self._tasks[partition]
            before = task.merger.idle_expirations
            # records arriving for any task mean the consumer is still
            # delivering: a task's missing input may be queued behind them
            task.merger.progress(self._last_arrival_ms)
            released = task.merger.poll(now, self._unread(task))
            self.stats.idle_expirations += task.merger.idle_expirations - before
            if not released:
                continue
            touched.append(task)
            self._buffered -= len(released)
            for side, event in released:
                outputs.extend(self._apply(task, side, event))
                task.unacked.append(event)
            if task.logic is not None:
                task.logic.checkpoint()
            # the positions are the batch's last changes: a changelog that has
            # them has everything the batch changed before them
            for side in SIDES:
                if task.position[side] is not None:
                    task.state.put(
                        keys.position_key(side), int(task.position[side] or 0).to_bytes(8, "big")
                    )
        if not touched:
            return
        producer = self.app.producer
        futures = [await producer.send(t, k, v, None, None, h) for t, k, v, h in outputs]
        if futures:
            await asyncio.gather(*futures)
        changelog: list[tuple[_Task, Any]] = []
        for task in touched:
            for key, value in task.state.content:
                fut = await producer.send(
                    self.changelog_topic, key, value, task.partition, None, None
                )
                changelog.append((task, fut))
        last: dict[int, int] = {}
        for task, fut in changelog:
            meta = await fut
            last[task.partition] = max(last.get(task.partition, -1), meta.offset)
        offset_key = self.table.data.offset_key
        for task in touched:
            task.state.db = self._db(task.partition)
            task.state.commit(offset_key, last.get(task.partition))
            for event in task.unacked:
                event.ack()
            task.unacked.clear()
        self.stats.batches += 1

    def _apply(
        self, task: _Task, side: str, event: Any
    ) -> list[tuple[str, bytes | None, bytes, list[tuple[str, bytes]] | None]]:
        message = event.message
        position = task.position[side]
        if position is not None and message.offset < position:
            self.stats.skipped_replays += 1
            return []
        task.position[side] = message.offset + 1
        self.stats.processed += 1
        decode = self.policy.decode_left if side == LEFT else self.policy.decode_right
        ts = int(message.timestamp * 1000) if message.timestamp is not None else 0
        logic = task.logic
        if logic is None:  # opened in _task(); a dropped task never reaches here
            raise JoinConfigError(f"join {self.name!r}: task {task.partition} is not open")
        try:
            record = decode(message.key, message.value, ts)
        except BadRecord as exc:
            self.stats.bad += 1
            return [self._dead_letter(message, exc.reason.encode())]
        emitted: Sequence[Emission] = (logic.on_left if side == LEFT else logic.on_right)(record)
        out = []
        for emission in emitted:
            if emission.output == DEAD_LETTER:
                self.stats.late += 1
                out.append(self._dead_letter(message, emission.value))
                continue
            self.stats.emitted[emission.output] = self.stats.emitted.get(emission.output, 0) + 1
            topic = self.outputs[emission.output].get_topic_name()
            out.append((topic, emission.key, emission.value, None))
        return out

    def _dead_letter(
        self, message: Any, reason: bytes
    ) -> tuple[str, bytes | None, bytes, list[tuple[str, bytes]] | None]:
        source = f"{message.topic}:{message.partition}:{message.offset}".encode()
        value = message.value if message.value is not None else b""
        headers = [(REASON_HEADER, reason), (SOURCE_HEADER, source)]
        self.stats.emitted[DEAD_LETTER] = self.stats.emitted.get(DEAD_LETTER, 0) + 1
        return (self.dead_letters.get_topic_name(), message.key, value, headers)

    # -- rebalance ----------------------------------------------------------------

    def on_revoke(self) -> None:
        """Partitions are being revoked (a rebalance or a shutdown): drop buffered records.

        They are dropped unacknowledged, so faust does not commit them (the
        join sets ``stream_wait_empty`` off: faust does not wait for them
        either); whoever runs the task next reads them again from the
        committed offset, which is never past the task state's position.
        Tasks are closed; a batch already being made durable completes.
        """
        self._revoking = True
        self._buffered = 0
        self._tasks.clear()

    async def on_rebalance(self, assigned: set[Any]) -> None:
        """The new assignment is known: accept records again."""
        self._revoking = False
        async with self._lock:
            keep = {tp.partition for tp in assigned if tp.topic == self.left_topic}
            # on_revoke closed every task already; anything opened since and no
            # longer ours is dropped the same way: unacked, read again elsewhere
            for partition in sorted(set(self._tasks) - keep):
                task = self._tasks.pop(partition)
                self._buffered -= task.merger.buffered()
                task.state.discard()
                task.state.db = None


def _hook_rebalance(join: Join) -> None:
    """Let the join drop revoked tasks before faust closes their databases."""
    table = join.table
    original = table.on_rebalance

    async def on_rebalance(
        assigned: set[Any], revoked: set[Any], newly_assigned: set[Any], generation_id: int = 0
    ) -> None:
        await join.on_rebalance(assigned)
        await original(assigned, revoked, newly_assigned, generation_id)

    table.on_rebalance = on_rebalance


def _topic_name(topic: Any) -> str:
    if isinstance(topic, str):
        return topic
    names = list(getattr(topic, "topics", ()) or ())
    if len(names) != 1 or getattr(topic, "pattern", None):
        raise JoinConfigError(f"a join side must be one topic, got {topic!r}")
    return str(names[0])


def _declared(topic: Any) -> int | None:
    return None if isinstance(topic, str) else getattr(topic, "partitions", None)


def _highwater(consumer: Any, topic: str, partition: int) -> int | None:
    from faust.types import TP

    try:
        hw = consumer.highwater(TP(topic, partition))
    except (KeyError, AssertionError, AttributeError, TypeError):
        return None
    return None if hw is None else int(hw)
