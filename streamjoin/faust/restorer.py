"""Table restoration that replaces faust's ``Recovery`` service.

One *restore session* runs per rebalance generation:

1. Stream partitions stay paused; the app's flow is resumed at once, and a
   task (partition number) with no table to restore starts immediately.
2. A dedicated consumer (no group, manual assignment) reads the active
   changelog partitions from the persisted offset + 1. Every fetch is applied
   per partition in one atomic store batch that also records the offset.
3. A changelog partition is restored when the consumer position reaches the
   larger of the latest fetch high watermark and the ``ListOffsets`` end
   offset. When all active changelog partitions of a task are restored, that
   task's stream partitions are resumed; nothing of a partition is processed
   before then.
4. After every active is restored, a second consumer (polling more lazily)
   applies the standby partitions until the next rebalance; their applied offsets
   are exposed by :meth:`Restorer.standby_offsets`.

A persisted offset beyond the changelog's end (the topic was recreated or its
data deleted) wipes that partition's local state and restores it from the
beginning, with a warning.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import OffsetOutOfRangeError
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth, server_list
from faust.types import TP
from faust.types.enums import ProcessingGuarantee
from mode import Service

from streamjoin.faust.changelog_store import StoreWriter, writer_for
from streamjoin.restore.plan import (
    PartitionProgress,
    is_beyond_end,
    is_caught_up,
    ready_partitions,
    restore_target,
    start_offset,
)
from streamjoin.restore.progress import ProgressReporter, TableProgress

__all__ = ["RestoreSettings", "Restorer"]

logger = logging.getLogger("streamjoin.restore")


class RestoreSettings:
    """Knobs of the restore consumer (class attributes; override in a subclass).

    Attributes:
        fetch_max_bytes: upper bound of one fetch response.
        max_partition_fetch_bytes: upper bound per partition per fetch.
        fetch_max_wait_ms: how long the broker may hold a fetch while restoring
            actives.
        standby_fetch_max_wait_ms: the same while tailing standbys (long: idle
            standbys must not cost CPU).
        poll_timeout_ms: how long one ``getmany`` waits while restoring.
        standby_poll_timeout_ms: the same once only standbys are tailed.
        progress_interval: seconds between progress lines per table.
    """

    fetch_max_bytes = 64 * 1024 * 1024
    max_partition_fetch_bytes = 16 * 1024 * 1024
    fetch_max_wait_ms = 100
    standby_fetch_max_wait_ms = 500
    poll_timeout_ms = 200
    standby_poll_timeout_ms = 500
    progress_interval = 1.0


class Restorer(Service):
    """Restores a worker's tables from their changelogs after every rebalance.

    It implements what faust's ``TableManager`` needs of its ``recovery``
    attribute: ``on_partitions_revoked``, ``on_rebalance`` and the
    ``completed`` event set once the first restore of the active partitions
    has finished.
    """

    settings = RestoreSettings

    def __init__(self, app: Any, tables: Any, **kwargs: Any) -> None:
        self.app = app
        self.tables = tables
        self.completed = asyncio.Event()
        self._session: asyncio.Task[None] | None = None
        self._writers: dict[Any, StoreWriter] = {}
        self._applied: dict[TP, int] = {}
        self._active_tps: set[TP] = set()
        self._standby_tps: set[TP] = set()
        self._restored_at: dict[int, float] = {}
        self._restore_counts: dict[TP, int] = {}
        self._generation: int | None = None
        super().__init__(**kwargs)

    # -- what the TableManager and the assignor read -------------------------

    def standby_offsets(self) -> dict[tuple[str, int], int]:
        """Last applied changelog offset of each standby partition assigned now.

        Only in-memory state is read, so the consumer thread (where an
        assignor builds its metadata) may call it; a standby appears once its
        session has read the persisted offset or applied a batch.
        """
        applied = dict(self._applied)
        return {
            (tp.topic, tp.partition): applied[tp]
            for tp in sorted(self._standby_tps)
            if tp in applied
        }

    def applied_offsets(self) -> dict[tuple[str, int], int]:
        """Last changelog offset applied by this process, per partition."""
        return {(tp.topic, tp.partition): off for tp, off in sorted(self._applied.items())}

    def restored_at(self) -> dict[int, float]:
        """Wall-clock time (``time.time()``) each task of this generation became ready."""
        return dict(self._restored_at)

    def restore_counts(self) -> dict[tuple[str, int], int]:
        """Records applied by the latest active restore of each changelog partition."""
        return {(tp.topic, tp.partition): n for tp, n in sorted(self._restore_counts.items())}

    # -- faust's recovery protocol ----------------------------------------------

    def on_partitions_revoked(self, revoked: set[TP]) -> None:
        """Stop the running session: no more writes for partitions we may lose."""
        if self._session is not None and not self._session.done():
            self._session.cancel()

    async def on_rebalance(
        self,
        assigned: set[TP],
        revoked: set[TP],
        newly_assigned: set[TP],
        generation_id: int = 0,
    ) -> None:
        """Start the restore session for generation *generation_id*."""
        app = self.app
        if generation_id != app.consumer_generation_id:
            logger.warning(
                "rebalance generation %s superseded by %s; waiting for the next one",
                generation_id,
                app.consumer_generation_id,
            )
            return
        changelogs = self.tables._changelogs
        actives = {tp for tp in app.assignor.assigned_actives() if tp.topic in changelogs}
        standbys = {tp for tp in app.assignor.assigned_standbys() if tp.topic in changelogs}
        streams = {tp for tp in assigned if tp.topic not in changelogs}
        for tp in revoked:
            self._applied.pop(tp, None)
        self._active_tps = actives
        self._standby_tps = standbys
        self._restored_at = {}
        self._generation = generation_id
        previous = self._session
        if previous is not None and not previous.done():
            previous.cancel()
        self._session = asyncio.ensure_future(
            self._run_session(previous, generation_id, actives, standbys, streams)
        )

    async def on_stop(self) -> None:
        """Cancel the running session and wait for its consumer to close."""
        session = self._session
        if session is not None and not session.done():
            session.cancel()
            await asyncio.wait([session], timeout=10)

    # -- the session ----------------------------------------------------------------

    def _table_for(self, tp: TP) -> Any:
        return self.tables._changelogs[tp.topic]

    def _writer(self, table: Any) -> StoreWriter:
        writer = self._writers.get(table)
        if writer is None:
            writer = self._writers[table] = writer_for(table)
        return writer

    def _stale(self, generation_id: int) -> bool:
        return bool(self.should_stop or self.app.consumer_generation_id != generation_id)

    async def _run_session(
        self,
        previous: asyncio.Task[None] | None,
        generation_id: int,
        actives: set[TP],
        standbys: set[TP],
        streams: set[TP],
    ) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        try:
            await self._session_body(generation_id, actives, standbys, streams)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.exception("table restoration failed: %r", exc)
            await self.crash(exc)

    async def _session_body(
        self, generation_id: int, actives: set[TP], standbys: set[TP], streams: set[TP]
    ) -> None:
        app = self.app
        consumer = app.consumer
        timeout = app.conf.broker_request_timeout
        await app.on_rebalance_complete.send()
        await asyncio.wait_for(consumer.perform_seek(), timeout=timeout)
        if self._stale(generation_id):
            return
        app.flow_control.resume()
        consumer.resume_flow()
        await app._fetcher.maybe_start()

        global_partitions = {
            tp.partition for tp in actives if getattr(self._table_for(tp), "is_global", False)
        }
        gate = _TaskGate(consumer, streams, global_partitions, self._restored_at)
        gate.update(pending={tp.partition for tp in actives})
        if actives:
            restored = await self._with_consumer(
                self.settings.fetch_max_wait_ms,
                lambda rc: self._restore_actives(rc, generation_id, actives, gate),
            )
            if not restored:
                return
        await self._on_actives_restored(actives, standbys)
        if standbys and not self._stale(generation_id):
            await self._with_consumer(
                self.settings.standby_fetch_max_wait_ms,
                lambda rc: self._tail_standbys(rc, generation_id, standbys),
            )

    async def _with_consumer(
        self, fetch_max_wait_ms: int, body: Callable[[AIOKafkaConsumer], Awaitable[bool]]
    ) -> bool:
        rc = self._new_restore_consumer(fetch_max_wait_ms)
        await rc.start()
        try:
            return await body(rc)
        finally:
            await rc.stop()

    def _new_restore_consumer(self, fetch_max_wait_ms: int) -> AIOKafkaConsumer:
        conf = self.app.conf
        exactly_once = conf.processing_guarantee == ProcessingGuarantee.EXACTLY_ONCE
        return AIOKafkaConsumer(
            bootstrap_servers=server_list(conf.broker, 9092),
            client_id=f"{conf.broker_client_id}-restore",
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="none",
            isolation_level="read_committed" if exactly_once else "read_uncommitted",
            fetch_max_bytes=self.settings.fetch_max_bytes,
            max_partition_fetch_bytes=self.settings.max_partition_fetch_bytes,
            fetch_max_wait_ms=fetch_max_wait_ms,
            request_timeout_ms=int(conf.broker_request_timeout * 1000),
            check_crcs=False,
            **credentials_to_aiokafka_auth(conf.broker_credentials, conf.ssl_context),
        )

    async def _seek_start(
        self, rc: AIOKafkaConsumer, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        tps = list(tps)
        beginnings = await rc.beginning_offsets(tps)
        starts: dict[TopicPartition, int] = {}
        for ktp in tps:
            tp = TP(ktp.topic, ktp.partition)
            persisted = self._writer(self._table_for(tp)).persisted_offset(tp)
            first = start_offset(persisted)
            begin = beginnings.get(ktp) or 0
            offset = begin if first is None else max(first, begin)
            if persisted is not None:
                self._applied[tp] = persisted
            rc.seek(ktp, offset)
            starts[ktp] = offset
        return starts

    def _wipe(self, ktp: TopicPartition, position: int, hw: int) -> None:
        tp = TP(ktp.topic, ktp.partition)
        logger.warning(
            "local state of %s[%d] claims offset %d but the changelog ends at %d "
            "(topic recreated or data deleted): wiping this partition's local state "
            "and restoring it from the beginning",
            tp.topic,
            tp.partition,
            position - 1,
            hw,
        )
        self._writer(self._table_for(tp)).wipe(tp)
        self._applied.pop(tp, None)

    async def _fetch_and_apply(
        self,
        rc: AIOKafkaConsumer,
        ktps: Mapping[TopicPartition, TP],
        wait_ms: int,
        progress: dict[TopicPartition, PartitionProgress[TopicPartition]],
    ) -> None:
        """One ``getmany``: apply each partition's records as one atomic batch."""
        try:
            fetched = await rc.getmany(timeout_ms=wait_ms)
        except OffsetOutOfRangeError as exc:
            await self._out_of_range(rc, exc.args[0] if exc.args else {}, progress)
            return
        for ktp, records in fetched.items():
            tp = ktps.get(ktp)
            if not records or tp is None:
                continue
            self._writer(self._table_for(tp)).apply(tp, records)
            self._applied[tp] = records[-1].offset
            part = progress.get(ktp)
            if part is not None:
                part.applied += len(records)

    async def _position(
        self,
        rc: AIOKafkaConsumer,
        ktp: TopicPartition,
        progress: dict[TopicPartition, PartitionProgress[TopicPartition]],
    ) -> int | None:
        """The partition's position, after wiping it if it is beyond the changelog's end."""
        hw = rc.highwater(ktp)
        position: int = await rc.position(ktp)
        if hw is not None and is_beyond_end(position, hw):
            self._wipe(ktp, position, hw)
            begin = (await rc.beginning_offsets([ktp])).get(ktp) or 0
            rc.seek(ktp, begin)
            if ktp in progress:
                progress[ktp] = PartitionProgress(ktp, begin, begin)
            return None
        return position

    async def _restore_actives(
        self,
        rc: AIOKafkaConsumer,
        generation_id: int,
        actives: set[TP],
        gate: _TaskGate,
    ) -> bool:
        """Restore every active changelog partition; ``False`` if a rebalance interrupted."""
        ktps = {TopicPartition(tp.topic, tp.partition): tp for tp in actives}
        rc.assign(sorted(ktps))
        ends = await rc.end_offsets(list(ktps))
        starts = await self._seek_start(rc, ktps)
        pending = set(ktps)
        progress = {
            k: PartitionProgress(k, starts[k], starts[k], target=ends.get(k)) for k in pending
        }
        started = time.monotonic()
        reporter = ProgressReporter(logger, interval=self.settings.progress_interval)
        logger.info(
            "restoring %d changelog partition(s) of %d table(s)",
            len(pending),
            len({tp.topic for tp in actives}),
        )
        while pending:
            if self._stale(generation_id):
                return False
            await self._fetch_and_apply(rc, ktps, self.settings.poll_timeout_ms, progress)
            for ktp in sorted(pending):
                position = await self._position(rc, ktp, progress)
                if position is None:
                    continue
                hw = rc.highwater(ktp)
                part = progress[ktp]
                part.position = position
                if hw is not None:
                    part.target = restore_target(hw, ends.get(ktp))
                if is_caught_up(position, hw, ends.get(ktp)):
                    pending.discard(ktp)
                    rc.pause(ktp)
                    self._partition_restored(ktps[ktp], part, started)
                    gate.update(pending={k.partition for k in pending})
            reporter.maybe_report(self._snapshots(progress, ktps, started), force=not pending)
        return True

    async def _tail_standbys(
        self, rc: AIOKafkaConsumer, generation_id: int, standbys: set[TP]
    ) -> bool:
        """Apply the standby changelog partitions until the next rebalance."""
        ktps = {TopicPartition(tp.topic, tp.partition): tp for tp in standbys}
        rc.assign(sorted(ktps))
        await self._seek_start(rc, ktps)
        logger.info("applying %d standby changelog partition(s)", len(ktps))
        no_progress: dict[TopicPartition, PartitionProgress[TopicPartition]] = {}
        while not self._stale(generation_id):
            await self._fetch_and_apply(
                rc, ktps, self.settings.standby_poll_timeout_ms, no_progress
            )
            for ktp in sorted(ktps):
                await self._position(rc, ktp, no_progress)
        return True

    async def _out_of_range(
        self,
        rc: AIOKafkaConsumer,
        offsets: Mapping[TopicPartition, int],
        progress: dict[TopicPartition, PartitionProgress[TopicPartition]],
    ) -> None:
        """Kafka answers OffsetOutOfRange for a position past the end (or before the start)."""
        if not offsets:
            return
        ends = await rc.end_offsets(list(offsets))
        begins = await rc.beginning_offsets(list(offsets))
        for ktp, offset in offsets.items():
            begin = begins.get(ktp) or 0
            if offset > (ends.get(ktp) or 0):
                self._wipe(ktp, offset, ends.get(ktp) or 0)
            else:
                logger.warning(
                    "changelog %s[%d] no longer holds offset %d (retention or compaction); "
                    "continuing from its first offset %d",
                    ktp.topic,
                    ktp.partition,
                    offset,
                    begin,
                )
            rc.seek(ktp, begin)
            if ktp in progress:
                progress[ktp] = PartitionProgress(ktp, begin, begin)

    def _partition_restored(
        self, tp: TP, part: PartitionProgress[TopicPartition], started: float
    ) -> None:
        self._restore_counts[tp] = part.applied
        logger.info(
            "restored changelog %s[%d]: %d records applied (offsets %d..%d) in %.2fs",
            tp.topic,
            tp.partition,
            part.applied,
            part.first_offset,
            part.position - 1,
            time.monotonic() - started,
        )

    def _snapshots(
        self,
        progress: Mapping[TopicPartition, PartitionProgress[TopicPartition]],
        ktps: Mapping[TopicPartition, TP],
        started: float,
    ) -> list[TableProgress]:
        by_table: dict[str, list[PartitionProgress[TopicPartition]]] = {}
        for ktp, part in progress.items():
            name = str(self._table_for(ktps[ktp]).name)
            by_table.setdefault(name, []).append(part)
        elapsed = time.monotonic() - started
        return [
            TableProgress(
                table=name,
                restored=sum(p.applied for p in parts),
                total=sum(p.total() for p in parts),
                elapsed=elapsed,
            )
            for name, parts in sorted(by_table.items())
        ]

    async def _on_actives_restored(self, actives: set[TP], standbys: set[TP]) -> None:
        app = self.app
        by_table: dict[Any, tuple[set[TP], set[TP]]] = {}
        for table in self.tables.values():
            by_table[table] = (set(), set())
        for tp in actives:
            by_table[self._table_for(tp)][0].add(tp)
        for tp in standbys:
            by_table[self._table_for(tp)][1].add(tp)
        for table, (table_actives, table_standbys) in by_table.items():
            await table.on_recovery_completed(table_actives, table_standbys)
        self.completed.set()
        self.tables.on_actives_ready()
        self.tables.on_standbys_ready()
        app.on_rebalance_end()
        logger.info("tables restored: %d active changelog partition(s)", len(actives))


class _TaskGate:
    """Resumes a task's stream partitions once none of its tables is being restored."""

    def __init__(
        self,
        consumer: Any,
        streams: set[TP],
        global_partitions: set[int],
        restored_at: dict[int, float],
    ) -> None:
        self._consumer = consumer
        self._waiting = set(streams)
        self._global_partitions = global_partitions
        self._restored_at = restored_at

    def update(self, pending: set[int]) -> None:
        """Resume every waiting stream partition whose task has nothing *pending*."""
        global_pending = bool(pending & self._global_partitions)
        partitions = {tp.partition for tp in self._waiting} | set(pending)
        ready = ready_partitions(sorted(partitions), pending, global_pending)
        now = time.time()
        for partition in sorted(ready):
            self._restored_at.setdefault(partition, now)
        resume = {tp for tp in self._waiting if tp.partition in ready}
        if resume:
            self._waiting -= resume
            self._consumer.resume_partitions(resume)
