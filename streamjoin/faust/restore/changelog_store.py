"""Write fetched changelog records into a table's local store, one atomic batch at a time.

Records pass the ownership fence first (:func:`streamjoin.restore.owner_tokens.fence`):
fence markers set the partition's current owner and are not applied, and a
record another owner wrote after that marker (a zombie's late write) is skipped.

For faust's RocksDB store on rocksdict (streamjoin's default) every call
writes the records *and* the partition's changelog offset in a single
rocksdict ``WriteBatch``, so local state and offset never diverge across a
crash. Other stores (e.g. ``memory://``) get the records through the table's
own ``apply_changelog_batch``.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, cast

from streamjoin.faust.kafka.stores import db_for_partition, drop_db, is_rocksdict
from streamjoin.restore.owner_tokens import (
    APPLY,
    OWNER_KEY,
    SKIP,
    STALE_MARKER,
    Owner,
    fence,
    judge,
)

if TYPE_CHECKING:
    from faust.stores.rocksdb import Store as RocksDBStore
    from faust.tables.base import Collection
    from faust.types import TP, CollectionT, EventT

    from streamjoin.faust.kafka.stores import TableStore

__all__ = ["ChangelogRecord", "StoreWriter", "writer_for"]

logger = logging.getLogger(__name__)


class ChangelogRecord(Protocol):
    """What a writer needs of a fetched record (aiokafka's ``ConsumerRecord`` has it)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes]]


class StoreWriter(Protocol):
    """Applies changelog records of one table to its local store."""

    def apply(self, tp: TP, records: Sequence[ChangelogRecord]) -> None:
        """Apply *records* (all of partition *tp*, in offset order) atomically."""

    def persisted_offset(self, tp: TP) -> int | None:
        """Offset of the last applied changelog record of *tp*, ``None`` if none."""

    def wipe(self, tp: TP) -> None:
        """Delete every key and the offset of partition *tp* from local state."""

    def owner(self, tp: TP) -> Owner | None:
        """The owner of the latest fence marker applied to *tp* (``None``: none)."""


def _log_fenced(tp: TP, skipped: int, stale: int, first: int, last: int) -> None:
    if skipped or stale:
        logger.warning(
            "changelog %s[%d]: skipped %d record(s) and %d stale fence marker(s) written "
            "by a former owner after it lost the partition (offsets %d..%d)",
            tp.topic,
            tp.partition,
            skipped,
            stale,
            first,
            last,
        )


class RocksdictWriter:
    """Fast path for ``faust.stores.rocksdb.Store`` on the rocksdict driver."""

    def __init__(self, store: RocksDBStore) -> None:
        import rocksdict

        self._store = store
        self._batch_type = rocksdict.WriteBatch
        self._offset_key: bytes = store.offset_key

    def apply(self, tp: TP, records: Sequence[ChangelogRecord]) -> None:
        """Put/delete *records* (past the fence), the owner and the new offset
        in one WriteBatch."""
        if not records:
            return
        db = db_for_partition(self._store, tp.partition)
        owner = first = Owner.decode(db.get(OWNER_KEY))
        skipped = stale = 0
        batch = self._batch_type(raw_mode=True)
        put = batch.put
        delete = batch.delete
        for record in records:
            key = record.key
            headers = record.headers
            if headers:  # the ownership fence (one pass with the writes: restores are hot)
                verdict, owner = judge(owner, headers)
                if verdict != APPLY:
                    skipped += verdict == SKIP
                    stale += verdict == STALE_MARKER
                    continue
            if key is None:
                continue
            value = record.value
            if value is None:
                delete(key)
            else:
                put(key, value)
        if owner is not None and owner != first:
            put(OWNER_KEY, owner.encode())
        _log_fenced(tp, skipped, stale, records[0].offset, records[-1].offset)
        put(self._offset_key, str(records[-1].offset).encode())
        db.write(batch)

    def persisted_offset(self, tp: TP) -> int | None:
        """The offset stored next to the partition's data."""
        offset = self._store.persisted_offset(tp)
        return None if offset is None else int(offset)

    def owner(self, tp: TP) -> Owner | None:
        """The owner stored next to the partition's data."""
        return Owner.decode(db_for_partition(self._store, tp.partition).get(OWNER_KEY))

    def wipe(self, tp: TP) -> None:
        """Close and destroy the partition's database; it reopens empty on next use."""
        import rocksdict

        store = self._store
        db = drop_db(store, tp.partition)
        if db is not None:
            db.close()
        path = store.partition_path(tp.partition)
        try:
            rocksdict.Rdict.destroy(str(path))
        except Exception:  # rocksdict raises plain Exception on I/O errors
            logger.debug("Rdict.destroy(%s) failed; removing the directory", path)
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(path)


class _Message:
    __slots__ = ("key", "offset", "partition", "topic", "tp", "value")

    def __init__(self, tp: TP, record: ChangelogRecord) -> None:
        self.tp = tp
        self.topic = record.topic
        self.partition = record.partition
        self.offset = record.offset
        self.key = record.key
        self.value = record.value


class _Event:
    __slots__ = ("key", "message", "value")

    def __init__(self, message: _Message) -> None:
        self.message = message
        self.key = message.key
        self.value = message.value


class TableWriter:
    """Generic path: hands records to ``table.apply_changelog_batch``."""

    def __init__(self, table: CollectionT) -> None:
        self._table = table
        self._offsets: dict[TP, int] = {}
        self._owners: dict[TP, Owner] = {}

    def apply(self, tp: TP, records: Sequence[ChangelogRecord]) -> None:
        """Apply through the table (the store decides how atomic it is)."""
        if not records:
            return
        fenced = fence(self._owners.get(tp), records)
        _log_fenced(tp, fenced.skipped, fenced.stale_markers, records[0].offset, records[-1].offset)
        if fenced.owner is not None:
            self._owners[tp] = fenced.owner
        if fenced.apply:
            # faust declares events; a table's apply_changelog_batch reads only the
            # key, value and message (tp, offset) a _Event carries
            events = [_Event(_Message(tp, r)) for r in fenced.apply]
            self._table.apply_changelog_batch(cast("list[EventT[bytes | None]]", events))
        self._offsets[tp] = records[-1].offset

    def persisted_offset(self, tp: TP) -> int | None:
        """The store's persisted offset, else the last offset applied in this process."""
        offset = self._table.persisted_offset(tp)
        if offset is None:
            return self._offsets.get(tp)
        return int(offset)

    def owner(self, tp: TP) -> Owner | None:
        """The owner of the latest marker applied in this process."""
        return self._owners.get(tp)

    def wipe(self, tp: TP) -> None:
        """Generic stores cannot drop a single partition: reset the whole store."""
        self._offsets.pop(tp, None)
        self._owners.pop(tp, None)
        reset = getattr(_store(self._table), "reset_state", None)
        if reset is not None:
            reset()


def _store(table: CollectionT) -> TableStore:
    """*table*'s store: faust declares ``data`` on its ``Collection``, not on ``CollectionT``."""
    store: TableStore = cast("Collection", table).data
    return store


def writer_for(table: CollectionT) -> StoreWriter:
    """Pick the fastest writer that is correct for *table*'s store."""
    store = _store(table)
    if is_rocksdict(store):
        return RocksdictWriter(store)
    return TableWriter(table)
