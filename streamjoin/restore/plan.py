"""Pure rules of table restoration: where to start, when a partition is done, what may run.

No faust, no aiokafka, no I/O: plain values in, plain values out.

Offsets follow faust's convention for the *persisted* offset: it is the offset
of the last changelog record applied to local state (``None`` when nothing was
ever applied); the next record to read is ``persisted + 1``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = [
    "PartitionProgress",
    "is_beyond_end",
    "is_caught_up",
    "ready_partitions",
    "restore_target",
    "start_offset",
]

TPT = TypeVar("TPT")


def start_offset(persisted: int | None) -> int | None:
    """First changelog offset to read, or ``None`` for "from the beginning"."""
    if persisted is None or persisted < 0:
        return None
    return persisted + 1


def restore_target(fetch_highwater: int | None, end_offset: int | None) -> int | None:
    """Offset a restore must reach: the larger of the fetch high watermark and the end offset.

    ``None`` until the broker has answered at least one fetch for the
    partition: a restore is never declared complete on ``ListOffsets`` alone
    (some brokers answer it with a stale value).
    """
    if fetch_highwater is None:
        return None
    if end_offset is None:
        return fetch_highwater
    return max(fetch_highwater, end_offset)


def is_caught_up(position: int | None, fetch_highwater: int | None, end_offset: int | None) -> bool:
    """Return ``True`` when the consumer position has reached the restore target.

    Trailing control records (transaction markers), compaction gaps and a
    lagging ``ListOffsets`` cannot stall this: the position moves past
    control batches and gaps, and the fetch high watermark is authoritative.
    """
    target = restore_target(fetch_highwater, end_offset)
    return position is not None and target is not None and position >= target


def is_beyond_end(position: int | None, fetch_highwater: int | None) -> bool:
    """Return ``True`` when local state claims records the changelog does not have.

    That happens when a changelog topic was deleted and recreated (or its
    data removed) under a worker's persisted state; the partition's local
    state must then be wiped and restored from scratch.
    """
    return position is not None and fetch_highwater is not None and position > fetch_highwater


def ready_partitions(
    assigned_partitions: Iterable[int],
    pending_changelogs: Iterable[int],
    global_pending: bool,
) -> set[int]:
    """Partition numbers (tasks) whose stream records may be processed.

    A task may run once none of its active changelog partitions is still
    being restored, and no global table is still being restored.
    """
    if global_pending:
        return set()
    pending = set(pending_changelogs)
    return {p for p in assigned_partitions if p not in pending}


@dataclass
class PartitionProgress(Generic[TPT]):
    """Progress of one changelog partition within one restore session."""

    tp: TPT
    first_offset: int
    position: int
    target: int | None = None
    applied: int = 0

    def remaining(self) -> int:
        """Records (offsets) left before the target; 0 when the target is unknown."""
        if self.target is None:
            return 0
        return max(0, self.target - self.position)

    def total(self) -> int:
        """Offsets this restore covers (applied plus remaining)."""
        return self.applied + self.remaining()
