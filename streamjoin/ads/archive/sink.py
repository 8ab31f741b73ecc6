"""The faust sink agent that archives topics as Parquet (declared by
:func:`~streamjoin.ads.archive.declare.archive_topics`).

One agent reads every archived topic (raw bytes) with manual acks. A worker
gives each source topic-partition a
:class:`~streamjoin.ads.archive.ledger.PartitionLedger` at its first record
after taking it, from the highest offset archived per hour bucket (read off
the file names; one listing per dataset and rebalance generation), so records
an earlier owner archived are skipped. When that first record is past the
archive's end, the records in between are read from the brokers first
(:meth:`ArchiveSink._fill_gap`): the files, not the committed offset, say
where a partition resumes (faust may commit over records no stream saw), and a
partition with no file yet starts at the topic's start (offset 0, or the
oldest record retention left). Valid records are buffered; a partition's
buffer is flushed, one file per hour bucket, at ``max_records`` rows, when its
oldest row has waited ``flush_interval`` seconds, and at once during a
rebalance or a shutdown. A record is acknowledged, so faust may commit its
offset, only once the file holding it has been renamed into place.

So a crash anywhere (even between the files of one flush) and the replay from
the last committed offset neither loses nor duplicates a row: what is in a
renamed file is skipped, the rest is written again. Before writing a bucket
the sink lists that one hour directory again and leaves out rows another
writer put there meanwhile (only a worker that lost its partitions without
noticing could; one archive root takes one archiving consumer group).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from contextlib import aclosing
from pathlib import Path
from typing import Any

from streamjoin._progress import ProgressLog
from streamjoin._supervise import crash_on_failure
from streamjoin.ads.archive import files
from streamjoin.ads.archive.ledger import FilePlan, Offer, PartitionLedger
from streamjoin.ads.archive.rows import (
    CLICKS,
    IMPRESSIONS,
    LATE,
    OUTCOMES,
    Dataset,
    SourceRecord,
    header_map,
)
from streamjoin.ads.archive.stats import ArchiveStats
from streamjoin.ads.errors import ArchiveConfigError

__all__ = ["DATASET_KEYS", "ArchiveSink", "ArchiveStats"]

logger = logging.getLogger(__name__)

#: the keys of ``archive_topics``' topic mapping
DATASET_KEYS: Mapping[str, Dataset] = {
    "impressions": IMPRESSIONS,
    "clicks": CLICKS,
    "outcomes": OUTCOMES,
    "late": LATE,
}


class ArchiveSink:
    """Archives records of Kafka topics as hour-partitioned Parquet files.

    Build it with :func:`archive_topics`.

    Attributes:
        root: the archive root directory.
        datasets: source topic -> the dataset its rows go to.
        max_records: rows a partition buffers before it is flushed.
        flush_interval: seconds a buffered row waits at most (while records flow).
        stats: counters on this worker.
        progress: the progress log (``progress.interval``: seconds between lines).
    """

    def __init__(
        self,
        app: Any,
        root: str | Path,
        datasets: Mapping[str, Dataset],
        *,
        max_records: int = 5000,
        flush_interval: float = 5.0,
        name: str = "archive",
    ) -> None:
        if not datasets:
            raise ArchiveConfigError(f"archive {name!r}: give at least one topic to archive")
        if max_records < 1 or flush_interval <= 0:
            raise ArchiveConfigError(
                f"archive {name!r}: max_records must be >= 1 and flush_interval > 0, "
                f"got {max_records} and {flush_interval}"
            )
        self.app = app
        self.name = name
        #: how log lines name the sink
        self.label = "archive" if name == "archive" else f"archive {name}"
        self.root = Path(root)
        self.datasets = dict(sorted(datasets.items()))
        self.max_records = max_records
        self.flush_interval = flush_interval
        self.stats = ArchiveStats()
        self._ledgers: dict[tuple[str, int], PartitionLedger[Any]] = {}
        #: dataset name -> listing, for the partitions taken in this generation
        self._listings: dict[str, files.Listing] = {}
        self._lock = asyncio.Lock()
        self.progress = ProgressLog(logger)
        self.source = app.topic(*self.datasets, key_serializer="raw", value_serializer="raw")
        self.agent = app.agent(self.source, name=f"streamjoin.ads.archive.{name}")(self._consume)
        self._tick = min(0.5, flush_interval)
        app.task(self._run_ticks)
        app.on_partitions_revoked.connect(self._on_revoked)

    # -- introspection -------------------------------------------------------------

    @property
    def buffered(self) -> int:
        """Rows waiting to be written, all partitions."""
        return sum(ledger.buffered for ledger in self._ledgers.values())

    def describe(self) -> dict[str, Any]:
        """Configuration, partitions held and counters (JSON-ready)."""
        return {
            "name": self.name,
            "root": str(self.root),
            "topics": {t: d.name for t, d in self.datasets.items()},
            "max_records": self.max_records,
            "flush_interval": self.flush_interval,
            "partitions": {
                f"{t}:{p}": {
                    "buffered": ledger.buffered,
                    "next_offset": ledger.next_offset,
                    "highest_archived": ledger.highest(),
                }
                for (t, p), ledger in sorted(self._ledgers.items())
            },
            "stats": self.stats.as_dict(),
        }

    # -- input ---------------------------------------------------------------------

    async def _consume(self, stream: Any) -> Any:
        async for event in stream.noack().events():
            await self._guarded(self._receive(event))

    async def _guarded(self, work: Any) -> None:
        # a flush that cannot be made durable stops the worker
        await crash_on_failure(work, what=self.label, crash=self.app.crash, logger=logger)

    async def _receive(self, event: Any) -> None:
        message = event.message
        record = SourceRecord(
            message.topic,
            message.partition,
            message.offset,
            message.key,
            message.value,
            header_map(getattr(message, "headers", None)),
        )
        dataset = self.datasets[record.topic]
        self.stats.received += 1
        item = dataset.bucketed(record)
        async with self._lock:
            ledger = self._ledgers.get((record.topic, record.partition))
            if ledger is None:
                ledger = await self._take(dataset, record.topic, record.partition)
                # no file of this partition yet: the archive starts at the topic's
                # start, not where faust's committed offset says
                expected = ledger.expected() or 0
                if record.offset > expected:
                    await self._fill_gap(dataset, ledger, expected, record.offset)
            await self._offer(dataset, ledger, record.offset, item, event)

    async def _offer(
        self,
        dataset: Dataset,
        ledger: PartitionLedger[Any],
        offset: int,
        item: tuple[Any, Any] | None,
        event: Any,
    ) -> None:
        """Offer one record to its ledger (call with the lock held); *event*
        (``None`` for a record read past faust) is acked once it is safe."""
        offer = ledger.offer(offset, item, event, time.monotonic())
        if offer is Offer.BUFFERED:
            if ledger.buffered >= self.max_records:
                await self._flush(dataset, ledger)
            return
        if offer is Offer.REJECTED and dataset is LATE:
            self.stats.not_late += 1  # a malformed input's dead letter: not archived
        elif offer is Offer.REJECTED:
            self.stats.bad += 1
        else:
            self.stats.skipped_replays += 1
        if offer is not Offer.HELD and event is not None:
            event.ack()

    async def _fill_gap(
        self, dataset: Dataset, ledger: PartitionLedger[Any], start: int, stop: int
    ) -> None:
        """A partition just taken starts at *stop*, but the archive ends at *start* - 1:
        offer offsets ``start..stop - 1``, read from the brokers, first (the
        app's consumer stays where it is: a seek would make every agent read
        them again). Malformed records and late-topic letters are only counted.
        """
        from streamjoin.faust.kafka.range_read import read_range

        topic, partition = ledger.topic, ledger.partition
        found = buffered = 0
        logged = time.monotonic()
        async with aclosing(read_range(self.app.conf, topic, partition, start, stop)) as chunks:
            async for records in chunks:
                if time.monotonic() - logged >= self.progress.interval:
                    logged = time.monotonic()
                    logger.info(
                        "%s: %s[%d]: reading offsets %d..%d from the brokers, at %d",
                        self.label,
                        topic,
                        partition,
                        start,
                        stop - 1,
                        records[0].offset,
                    )
                for r in records:
                    source = SourceRecord(
                        topic, partition, r.offset, r.key, r.value, header_map(r.headers)
                    )
                    item = dataset.bucketed(source)
                    buffered += item is not None
                    await self._offer(dataset, ledger, r.offset, item, None)
                found += len(records)
        self.stats.gaps += 1
        self.stats.gap_records += found
        logger.log(
            logging.WARNING if buffered else logging.INFO,
            "%s: %s[%d] taken at offset %d but archived up to %s: read %d record(s) "
            "in between from the brokers, %d to archive",
            self.label,
            topic,
            partition,
            stop,
            start - 1 if start else "nothing (from the topic's start)",
            found,
            buffered,
        )

    async def _take(self, dataset: Dataset, topic: str, partition: int) -> PartitionLedger[Any]:
        listing = self._listings.get(dataset.name)
        if listing is None:
            listing = await asyncio.to_thread(files.scan_dataset, self.root, dataset)
            self._listings[dataset.name] = listing
        archived = listing.highest.get((topic, partition), {})
        stale = listing.temps.pop((topic, partition), [])
        if stale:  # left by a write a crash interrupted; this worker owns the partition now
            await asyncio.to_thread(files.remove_files, stale)
        ledger: PartitionLedger[Any] = PartitionLedger(topic, partition, archived)
        self._ledgers[(topic, partition)] = ledger
        self.stats.takeovers += 1
        logger.log(
            logging.INFO if archived or stale else logging.DEBUG,
            "%s: %s[%d] taken: %s archived in %d hour buckets%s",
            self.label,
            topic,
            partition,
            "nothing" if not archived else f"up to offset {max(archived.values())}",
            len(archived),
            f", {len(stale)} stale temporary files removed" if stale else "",
        )
        return ledger

    # -- flushing ------------------------------------------------------------------

    async def _flush(self, dataset: Dataset, ledger: PartitionLedger[Any]) -> None:
        """Write the ledger's buffer, then ack its records (call with the lock held)."""
        buckets = ledger.pending_buckets()
        on_disk = await asyncio.to_thread(
            files.scan_hours, self.root, dataset, buckets, ledger.topic, ledger.partition
        )
        plan = ledger.plan(on_disk)
        if plan.files:
            await asyncio.to_thread(self._write_all, dataset, plan.files)
        for event in ledger.commit(plan):
            if event is not None:  # None: a record read past faust (see _fill_gap)
                event.ack()
        self.stats.flushes += 1
        self.stats.skipped_replays += plan.already_archived
        self.stats.files[dataset.name] = self.stats.files.get(dataset.name, 0) + len(plan.files)
        self.stats.rows[dataset.name] = self.stats.rows.get(dataset.name, 0) + plan.rows

    def _write_all(self, dataset: Dataset, plans: Iterable[FilePlan]) -> None:
        for plan in plans:
            files.write_file(self.root, dataset, plan)

    async def flush(self, *, only_due: bool = False) -> None:
        """Flush every partition's buffer (with *only_due*, those that waited long enough)."""
        now = time.monotonic()
        async with self._lock:
            for key in sorted(self._ledgers):
                ledger = self._ledgers[key]
                if ledger.buffered and (not only_due or ledger.due(now, self.flush_interval)):
                    await self._flush(self.datasets[key[0]], ledger)

    async def _run_ticks(self) -> None:
        """Call :meth:`_on_timer` every tick until the app cancels its tasks.

        A plain loop rather than ``app.timer``: faust ends its timers as soon as
        a worker starts to stop, and then waits for every unacked record before
        it stops the consumer; this loop keeps flushing while it waits.
        """
        while True:
            await asyncio.sleep(self._tick)
            await self._on_timer()

    async def _on_timer(self) -> None:
        # in a rebalance or a shutdown faust waits for every unacked record: flush all
        urgent = bool(getattr(self.app, "rebalancing", False) or self.app.should_stop)
        await self._guarded(self.flush(only_due=not urgent))
        s = self.stats
        state = (s.received, s.rows_written, s.skipped_replays, s.bad, self.buffered)
        self.progress.maybe_log(time.monotonic(), s.rows_written, state, self._progress_line)

    def _progress_line(self, rate: float) -> tuple[object, ...]:
        s = self.stats
        return (
            "%s: %d files, %d rows written (%.0f/s; %s), %d skipped replays, "
            "%d bad, %d buffered in %d partitions, %d dead letters not late",
            self.label,
            s.files_written,
            s.rows_written,
            rate,
            ", ".join(f"{k} {v}" for k, v in sorted(s.rows.items())) or "nothing yet",
            s.skipped_replays,
            s.bad,
            self.buffered,
            len(self._ledgers),
            s.not_late,
        )

    # -- rebalance -----------------------------------------------------------------

    async def _on_revoked(self, sender: Any, revoked: Iterable[Any], **_: Any) -> None:
        """Forget revoked partitions (their buffers were flushed while faust waited)."""

        async def drop() -> None:
            async with self._lock:
                for tp in revoked:
                    key = (tp.topic, tp.partition)
                    ledger = self._ledgers.get(key)
                    if ledger is None:
                        continue
                    if ledger.buffered:
                        await self._flush(self.datasets[key[0]], ledger)
                    del self._ledgers[key]
                # the next owner of any partition lists the archive afresh
                self._listings.clear()

        await self._guarded(drop())
