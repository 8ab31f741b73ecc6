"""Per source topic-partition bookkeeping: what is archived, what waits to be. Pure.

A :class:`PartitionLedger` is created when a worker takes a topic-partition,
from the highest offset already archived in each hour bucket (read off the
file names). It is then offered every record of the partition, in the order
the consumer delivers them, and decides:

* a record already archived (its offset is at or below the highest archived
  offset of its hour) is skipped: after a crash the consumer replays from its
  last committed offset, and what a renamed file already holds is not written
  again, so an archive file's range never overlaps another's;
* a record seen earlier in this ownership (the consumer was moved back, e.g.
  by a join sharing the consumer) is a replay: skipped, and if the original
  still waits in the buffer, its ack waits for the same flush;
* a rejected (malformed) record is only noted;
* anything else is buffered.

:meth:`PartitionLedger.plan` turns the buffer into one :class:`FilePlan` per hour
bucket; once every planned file is renamed into place, :meth:`PartitionLedger.commit`
records the new highest offsets and hands back the tokens (in the adapter, faust
events) to acknowledge.

Why "per hour": the files of one flush interleave in offset order (records
of two hours alternate near an hour boundary), so a crash between two renames
can leave hour *h* archived up to offset 199 while hour *h + 1* holds nothing
past offset 99. A single highest offset per partition would then skip the
unarchived records of hour *h + 1* on replay; the highest offset per hour
skips exactly the archived ones.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from streamjoin.ads.archive.layout import ArchivedFile, HourBucket
from streamjoin.ads.archive.rows import Row

__all__ = ["FilePlan", "FlushPlan", "Offer", "PartitionLedger"]

T = TypeVar("T")


class Offer(enum.Enum):
    """What :meth:`PartitionLedger.offer` did with a record."""

    #: buffered; its token comes back from the :meth:`~PartitionLedger.commit` that archives it
    BUFFERED = "buffered"
    #: an archive file already holds it: acknowledge it now
    ALREADY_ARCHIVED = "already-archived"
    #: seen before in this ownership and not buffered: acknowledge it now
    REPLAYED = "replayed"
    #: seen before and its original is buffered: its token comes back with the original's
    HELD = "held"
    #: malformed (not archived): acknowledge it now
    REJECTED = "rejected"


@dataclass(frozen=True)
class FilePlan:
    """One file to write: the bucket it goes to, its name, its rows (by offset)."""

    bucket: HourBucket
    file: ArchivedFile
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class FlushPlan:
    """The files of one flush, and how many buffered rows turned out already archived."""

    files: tuple[FilePlan, ...]
    already_archived: int = 0

    @property
    def rows(self) -> int:
        """Rows the files hold."""
        return sum(len(f.rows) for f in self.files)


@dataclass(frozen=True)
class _Entry(Generic[T]):
    offset: int
    bucket: HourBucket
    row: Row
    token: T


class PartitionLedger(Generic[T]):
    """Archive bookkeeping of one source topic-partition on this worker.

    Arguments:
        topic: the source topic.
        partition: the source partition.
        archived: hour bucket -> highest offset of this topic-partition the
            archive holds in that bucket (from the file names).
    """

    def __init__(
        self, topic: str, partition: int, archived: Mapping[HourBucket, int] | None = None
    ) -> None:
        self.topic = topic
        self.partition = partition
        self._highest: dict[HourBucket, int] = dict(archived or {})
        #: the offset after the last one offered (``None``: nothing offered yet)
        self._next: int | None = None
        self._entries: list[_Entry[T]] = []
        self._buffered_offsets: set[int] = set()
        self._held: list[T] = []
        self._since: float | None = None

    # -- state ---------------------------------------------------------------------

    @property
    def buffered(self) -> int:
        """Rows waiting for the next flush."""
        return len(self._entries)

    @property
    def next_offset(self) -> int | None:
        """The offset after the last record offered, ``None`` before the first."""
        return self._next

    def expected(self) -> int | None:
        """The offset the next record should have: right after the last one
        offered, or, before the first, right after the highest archived
        (``None``: nothing offered, nothing archived).

        A record delivered beyond it leaves records in between that the archive
        never saw (see :meth:`ArchiveSink._fill_gap
        <streamjoin.ads.archive.sink.ArchiveSink._fill_gap>`).
        """
        if self._next is not None:
            return self._next
        high = self.highest()
        return None if high is None else high + 1

    def highest(self, bucket: HourBucket | None = None) -> int | None:
        """The highest archived offset of *bucket*, or of any bucket when ``None``."""
        if bucket is not None:
            return self._highest.get(bucket)
        return max(self._highest.values(), default=None)

    def due(self, now: float, max_age: float) -> bool:
        """Whether the oldest buffered row has waited *max_age* (same clock as ``offer``)."""
        return self._since is not None and now - self._since >= max_age

    def pending_buckets(self) -> list[HourBucket]:
        """The hour buckets of the buffered rows, in time order."""
        return sorted({e.bucket for e in self._entries})

    # -- records -------------------------------------------------------------------

    def offer(
        self, offset: int, record: tuple[HourBucket, Row] | None, token: T, now: float = 0.0
    ) -> Offer:
        """Offer the record at *offset*: ``(bucket, row)``, or ``None`` if malformed.

        *now* (any monotonic clock) is when the record arrived; :meth:`due` compares
        against it.
        """
        if self._next is not None and offset < self._next:
            if offset in self._buffered_offsets:
                self._held.append(token)
                return Offer.HELD
            return Offer.REPLAYED
        if self._next is None:
            # the consumer starts at its committed offset, or the sink read what lay
            # between the archive's end and it first (ArchiveSink._fill_gap): older
            # buckets cannot matter any more
            self._highest = {b: o for b, o in self._highest.items() if o >= offset}
        self._next = offset + 1
        if record is None:
            return Offer.REJECTED
        bucket, row = record
        high = self._highest.get(bucket)
        if high is not None and offset <= high:
            return Offer.ALREADY_ARCHIVED
        self._entries.append(_Entry(offset, bucket, row, token))
        self._buffered_offsets.add(offset)
        if self._since is None:
            self._since = now
        return Offer.BUFFERED

    # -- flushing ------------------------------------------------------------------

    def plan(self, on_disk: Mapping[HourBucket, int] | None = None) -> FlushPlan:
        """The files that archive the buffer, one per hour bucket, in time order.

        *on_disk* (bucket -> highest offset of this topic-partition found there
        just now) lets a flush skip rows another writer archived meanwhile.
        """
        for bucket, high in (on_disk or {}).items():
            self._raise(bucket, high)
        by_bucket: dict[HourBucket, list[_Entry[T]]] = {}
        covered = 0
        for entry in self._entries:
            if entry.offset <= self._highest.get(entry.bucket, -1):
                covered += 1
                continue
            by_bucket.setdefault(entry.bucket, []).append(entry)
        files = tuple(
            FilePlan(
                bucket,
                ArchivedFile(self.topic, self.partition, entries[0].offset, entries[-1].offset),
                tuple(e.row for e in entries),
            )
            for bucket, entries in sorted(by_bucket.items())
        )
        return FlushPlan(files, covered)

    def commit(self, plan: FlushPlan) -> list[T]:
        """Record that every file of *plan* is in place; return the tokens to acknowledge.

        *plan* must come from :meth:`plan` with no :meth:`offer` in between. The
        tokens are those of every buffered record (written or found archived) and
        of the replays held for them, in offer order.
        """
        for item in plan.files:
            self._raise(item.bucket, item.file.last)
        tokens = [e.token for e in self._entries]
        tokens.extend(self._held)
        self._entries.clear()
        self._buffered_offsets.clear()
        self._held.clear()
        self._since = None
        return tokens

    def _raise(self, bucket: HourBucket, offset: int) -> None:
        if offset > self._highest.get(bucket, -1):
            self._highest[bucket] = offset
