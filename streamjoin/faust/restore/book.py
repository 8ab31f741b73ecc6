"""Per-partition bookkeeping of table restoration, and the gate that lets tasks run.

:class:`ChangelogBook` is what this process knows of each changelog partition
it restores or follows: the table it belongs to, the store writer applying its
records, the last offset applied by this process and how many records the
latest active restore applied. It outlives restore sessions (writers are
reused, applied offsets survive until their partition is revoked).

:class:`TaskGate` resumes a task's stream partitions once none of its
changelog partitions (and no global table) is still being restored; nothing
of a partition is processed before then.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from aiokafka import TopicPartition
from faust.types import TP

from streamjoin.faust.kafka.app import changelogs
from streamjoin.faust.restore.changelog_store import ChangelogRecord, StoreWriter, writer_for
from streamjoin.restore.plan import PartitionProgress, ready_partitions
from streamjoin.restore.progress import TableProgress

if TYPE_CHECKING:
    from faust.types import CollectionT, ConsumerT
    from faust.types.tables import TableManagerT

__all__ = ["ChangelogBook", "TaskGate"]

logger = logging.getLogger(__name__)


class ChangelogBook:
    """Tables, store writers and applied offsets of the changelog partitions.

    Attributes:
        tables: faust's table manager (its changelogs map a changelog topic
            to its table).
        applied: last changelog offset applied by this process, per partition
            (faust's persisted-offset convention); kept until the partition
            is revoked.
        restore_counts: records applied by the latest active restore, per
            partition.
        highwater: the latest high watermark a fetch answered, per partition.
    """

    def __init__(self, tables: TableManagerT) -> None:
        self.tables = tables
        self._writers: dict[CollectionT, StoreWriter] = {}
        self.applied: dict[TP, int] = {}
        self.restore_counts: dict[TP, int] = {}
        self.highwater: dict[TP, int] = {}

    def table_for(self, tp: TP) -> CollectionT:
        """The table whose changelog *tp* is."""
        return changelogs(self.tables)[tp.topic]

    def writer(self, tp: TP) -> StoreWriter:
        """The writer applying records of *tp* to its table's local store (one per table)."""
        table = self.table_for(tp)
        writer = self._writers.get(table)
        if writer is None:
            writer = self._writers[table] = writer_for(table)
        return writer

    def apply(self, tp: TP, records: Sequence[ChangelogRecord]) -> None:
        """Apply *records* (non-empty, in offset order) atomically and note the last offset."""
        self.writer(tp).apply(tp, records)
        self.applied[tp] = records[-1].offset

    def wipe(self, ktp: TopicPartition, position: int, hw: int) -> None:
        """Delete the local state of a partition that claims more than its changelog holds."""
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
        self.writer(tp).wipe(tp)
        self.applied.pop(tp, None)

    def partition_restored(
        self, tp: TP, part: PartitionProgress[TopicPartition], started: float
    ) -> None:
        """Record and log that active partition *tp* caught up."""
        self.restore_counts[tp] = part.applied
        logger.info(
            "restored changelog %s[%d]: %d records applied (offsets %d..%d) in %.2fs",
            tp.topic,
            tp.partition,
            part.applied,
            part.first_offset,
            part.position - 1,
            time.monotonic() - started,
        )

    def remaining(self, active: set[TP], ready: set[int]) -> dict[tuple[str, int], int]:
        """Records each partition of *active* has to restore: 0 once its task (partition
        number) is in *ready*, else high watermark - (applied + 1); partitions no
        fetch answered for yet are left out."""
        applied, highwater = dict(self.applied), dict(self.highwater)  # (threads read)
        out: dict[tuple[str, int], int] = {}
        for tp in sorted(active):
            hw = highwater.get(tp)
            if tp.partition in ready:
                out[(tp.topic, tp.partition)] = 0
            elif hw is not None:
                done = applied.get(tp)
                out[(tp.topic, tp.partition)] = max(0, hw - (0 if done is None else done + 1))
        return out

    def snapshots(
        self,
        progress: Mapping[TopicPartition, PartitionProgress[TopicPartition]],
        ktps: Mapping[TopicPartition, TP],
        started: float,
    ) -> list[TableProgress]:
        """Progress of the restore per table, for the progress reporter."""
        by_table: dict[str, list[PartitionProgress[TopicPartition]]] = {}
        for ktp, part in progress.items():
            name = str(self.table_for(ktps[ktp]).name)
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


class TaskGate:
    """Resumes a task's stream partitions once none of its tables is being restored."""

    def __init__(
        self,
        consumer: ConsumerT,
        streams: set[TP],
        global_partitions: set[int],
        restored_at: dict[int, float],
    ) -> None:
        self._consumer = consumer
        self._waiting = set(streams)
        self._global_partitions = global_partitions
        self._restored_at = restored_at
        #: every task that had a changelog partition pending in this session
        self._restoring: set[int] = set()

    def update(self, pending: set[int]) -> None:
        """Resume every waiting stream partition whose task has nothing *pending*;
        note the time each task that was restoring became ready."""
        global_pending = bool(pending & self._global_partitions)
        self._restoring |= pending
        partitions = {tp.partition for tp in self._waiting} | self._restoring
        ready = ready_partitions(sorted(partitions), pending, global_pending)
        now = time.time()
        for partition in sorted(ready):
            self._restored_at.setdefault(partition, now)
        resume = {tp for tp in self._waiting if tp.partition in ready}
        if resume:
            self._waiting -= resume
            self._consumer.resume_partitions(resume)
