"""The restore consumer and its fetch loops: reading changelogs and applying them.

A restore consumer has no group and is assigned its changelog partitions by
hand (:func:`restore_consumer`). A :class:`ChangelogFetcher` drives one:

* :meth:`ChangelogFetcher.restore_actives` reads the active partitions from
  the persisted offset + 1 until the consumer position reaches the larger of
  the latest fetch high watermark and the ``ListOffsets`` end offset (the
  fetch high watermark is authoritative: some brokers answer ``ListOffsets``
  with a stale value), releasing each task through the gate as its
  partitions catch up;
* :meth:`ChangelogFetcher.tail_standbys` applies the standby partitions
  until the session is stale.

Every fetch is applied per partition in one atomic store batch that also
records the offset. A position beyond the changelog's end (the topic was
recreated or its data deleted) wipes that partition's local state and
restores it from the beginning.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import OffsetOutOfRangeError
from faust.types import TP

from streamjoin.faust.kafka.range_read import no_group_consumer
from streamjoin.faust.restore.book import ChangelogBook, TaskGate
from streamjoin.restore.plan import (
    PartitionProgress,
    is_beyond_end,
    is_caught_up,
    restore_target,
    start_offset,
)
from streamjoin.restore.progress import ProgressReporter
from streamjoin.restore.throttle import RestoreThrottle

if TYPE_CHECKING:
    from faust.types.settings import Settings

__all__ = ["ChangelogFetcher", "RestoreSettings", "restore_consumer"]

logger = logging.getLogger(__name__)

Progress = dict[TopicPartition, PartitionProgress[TopicPartition]]


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
        standby_share: the share of the event loop's time that following
            standby, warm-up and global table partitions may take once the
            actives are restored, in (0, 1]. After each fetch round that applied
            records the follower rests in proportion to the CPU time the event
            loop's thread used during the round (decoding and applying the
            records, and whatever else ran meanwhile: a busy worker rests its
            standbys longer), leaving the rest to the worker's live tasks and,
            on a shared machine or broker, to the other workers. Waiting for
            records costs no CPU and earns no rest. 1: no rest.
        standby_max_partition_fetch_bytes: upper bound per partition per fetch
            while tailing (smaller than while restoring actives: a large catch-up
            reaches the broker as many small fetches, not a few huge ones).
        max_records: records decoded and applied in one step of the event loop
            (each partition's share applied atomically with its offset); between
            steps the worker's live tasks run, so that a restore (a task taken
            over while others keep running through a cooperative rebalance)
            never holds them up for longer than one step.
    """

    fetch_max_bytes = 64 * 1024 * 1024
    max_partition_fetch_bytes = 16 * 1024 * 1024
    fetch_max_wait_ms = 100
    standby_fetch_max_wait_ms = 500
    poll_timeout_ms = 200
    standby_poll_timeout_ms = 500
    progress_interval = 1.0
    standby_share = 0.5
    standby_max_partition_fetch_bytes = 1024 * 1024
    max_records = 5000


@asynccontextmanager
async def restore_consumer(
    conf: Settings,
    settings: type[RestoreSettings],
    fetch_max_wait_ms: int,
    *,
    tailing: bool = False,
) -> AsyncIterator[AIOKafkaConsumer]:
    """A started restore consumer for the app's brokers (no group), stopped on exit;
    ``tailing``: the one that follows standbys, with smaller per-partition fetches."""
    rc = _new_restore_consumer(conf, settings, fetch_max_wait_ms, tailing)
    await rc.start()
    try:
        yield rc
    finally:
        await rc.stop()


def _new_restore_consumer(
    conf: Settings, settings: type[RestoreSettings], fetch_max_wait_ms: int, tailing: bool
) -> AIOKafkaConsumer:
    per_partition = (
        min(settings.standby_max_partition_fetch_bytes, settings.max_partition_fetch_bytes)
        if tailing
        else settings.max_partition_fetch_bytes
    )
    return no_group_consumer(
        conf,
        "restore",
        auto_offset_reset="none",
        fetch_max_bytes=settings.fetch_max_bytes,
        max_partition_fetch_bytes=per_partition,
        fetch_max_wait_ms=fetch_max_wait_ms,
        check_crcs=False,
    )


class Marks(Protocol):
    """Fence markers of the partitions taken over (:mod:`streamjoin.faust.restore.owner_tokens`)."""

    def needs_marker(self, tp: TP) -> bool:
        """Must *tp* be fenced before its task starts?"""

    async def mark(self, tp: TP) -> int | None:
        """Write *tp*'s marker and wait for it; returns its offset (``None``: the
        session went stale)."""


class ChangelogFetcher:
    """Reads changelog partitions with one restore consumer and applies them.

    Arguments:
        rc: the started restore consumer (see :func:`restore_consumer`).
        book: where records are applied and offsets noted.
        settings: poll timeouts and the progress interval.
        stale: ``True`` once the session must stop (a newer rebalance, or
            the service stopping); checked before every fetch.
        marks: the fence markers to write once a partition taken over is
            restored to the end (``None``: none).
    """

    def __init__(
        self,
        rc: AIOKafkaConsumer,
        book: ChangelogBook,
        settings: type[RestoreSettings],
        stale: Callable[[], bool],
        marks: Marks | None = None,
    ) -> None:
        self._rc = rc
        self._book = book
        self._settings = settings
        self._stale = stale
        self._marks = marks

    async def restore_actives(self, actives: set[TP], gate: TaskGate) -> bool:
        """Restore every active changelog partition; ``False`` if a rebalance interrupted."""
        rc = self._rc
        ktps = {TopicPartition(tp.topic, tp.partition): tp for tp in actives}
        rc.assign(sorted(ktps))
        ends = await rc.end_offsets(list(ktps))
        starts = await self._seek_start(ktps)
        pending = set(ktps)
        progress = {
            k: PartitionProgress(k, starts[k], starts[k], target=ends.get(k)) for k in pending
        }
        started = time.monotonic()
        #: offset of the fence marker written for a partition: restored past it first
        marked: dict[TopicPartition, int] = {}
        reporter = ProgressReporter(logger, interval=self._settings.progress_interval)
        logger.info(
            "restoring %d changelog partition(s) of %d table(s)",
            len(pending),
            len({tp.topic for tp in actives}),
        )
        while pending:
            if self._stale():
                return False
            await self._fetch_and_apply(ktps, self._settings.poll_timeout_ms, progress)
            for ktp in sorted(pending):
                position = await self._position(ktp, progress)
                if position is None:
                    continue
                hw = rc.highwater(ktp)
                part = progress[ktp]
                part.position = position
                if hw is not None:
                    part.target = restore_target(hw, ends.get(ktp))
                if is_caught_up(position, hw, ends.get(ktp)) and position > marked.get(ktp, -1):
                    if self._marks is not None and self._marks.needs_marker(ktps[ktp]):
                        # taken over: fence it now that it is restored to the end,
                        # then restore on past the marker (see restore.owner_tokens)
                        offset = await self._marks.mark(ktps[ktp])
                        if offset is None:
                            return False
                        marked[ktp] = offset
                        continue
                    pending.discard(ktp)
                    rc.pause(ktp)
                    self._book.partition_restored(ktps[ktp], part, started)
                    gate.update(pending={k.partition for k in pending})
            reporter.maybe_report(self._book.snapshots(progress, ktps, started), force=not pending)
        return True

    async def tail_standbys(
        self,
        standbys: set[TP],
        on_round: Callable[[], None] | None,
        throttle: RestoreThrottle,
    ) -> bool:
        """Apply the standby (and global table) changelog partitions until the session
        is stale; ``on_round`` is called after every fetch round; ``throttle`` (the
        restorer's: its share and totals) says how long to rest after each."""
        rc = self._rc
        ktps = {TopicPartition(tp.topic, tp.partition): tp for tp in standbys}
        rc.assign(sorted(ktps))
        await self._seek_start(ktps)
        logger.info("following %d standby or global changelog partition(s)", len(ktps))
        no_progress: Progress = {}
        while not self._stale():
            # the round's cost: CPU time of this thread (the event loop's), so the
            # fetch's decoding counts and waiting for records does not
            cpu = time.thread_time()
            applied = await self._fetch_and_apply(
                ktps, self._settings.standby_poll_timeout_ms, no_progress
            )
            for ktp in sorted(ktps):
                await self._position(ktp, no_progress)
            if on_round is not None:
                on_round()
            rest = throttle.rest_after(time.thread_time() - cpu, applied)
            if rest > 0:
                resting = time.monotonic()
                await asyncio.sleep(rest)
                throttle.note_rest(time.monotonic() - resting)
        return True

    async def _seek_start(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Seek each partition to its persisted offset + 1 (at least its first offset)."""
        rc = self._rc
        tps = list(tps)
        beginnings = await rc.beginning_offsets(tps)
        starts: dict[TopicPartition, int] = {}
        for ktp in tps:
            tp = TP(ktp.topic, ktp.partition)
            persisted = self._book.writer(tp).persisted_offset(tp)
            first = start_offset(persisted)
            begin = beginnings.get(ktp) or 0
            offset = begin if first is None else max(first, begin)
            if persisted is not None:
                self._book.applied[tp] = persisted
            rc.seek(ktp, offset)
            starts[ktp] = offset
        return starts

    async def _fetch_and_apply(
        self, ktps: Mapping[TopicPartition, TP], wait_ms: int, progress: Progress
    ) -> int:
        """One ``getmany``: apply each partition's records as one atomic batch;
        return how many records were applied."""
        try:
            fetched = await self._rc.getmany(
                timeout_ms=wait_ms, max_records=self._settings.max_records
            )
        except OffsetOutOfRangeError as exc:
            await self._out_of_range(exc.args[0] if exc.args else {}, progress)
            return 0
        applied = 0
        for ktp, records in fetched.items():
            tp = ktps.get(ktp)
            if not records or tp is None:
                continue
            self._book.apply(tp, records)
            applied += len(records)
            part = progress.get(ktp)
            if part is not None:
                part.applied += len(records)
        if applied:
            await asyncio.sleep(0)  # the live tasks' turn (see RestoreSettings.max_records)
        return applied

    async def _position(self, ktp: TopicPartition, progress: Progress) -> int | None:
        """The partition's position, after wiping it if it is beyond the changelog's end."""
        rc = self._rc
        hw = rc.highwater(ktp)
        if hw is not None:
            self._book.highwater[TP(ktp.topic, ktp.partition)] = hw
        position: int = await rc.position(ktp)
        if hw is not None and is_beyond_end(position, hw):
            self._book.wipe(ktp, position, hw)
            begin = (await rc.beginning_offsets([ktp])).get(ktp) or 0
            rc.seek(ktp, begin)
            if ktp in progress:
                progress[ktp] = PartitionProgress(ktp, begin, begin)
            return None
        return position

    async def _out_of_range(
        self, offsets: Mapping[TopicPartition, int], progress: Progress
    ) -> None:
        """Kafka answers OffsetOutOfRange for a position past the end (or before the start)."""
        if not offsets:
            return
        rc = self._rc
        ends = await rc.end_offsets(list(offsets))
        begins = await rc.beginning_offsets(list(offsets))
        for ktp, offset in offsets.items():
            begin = begins.get(ktp) or 0
            if offset > (ends.get(ktp) or 0):
                self._book.wipe(ktp, offset, ends.get(ktp) or 0)
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
