"""A task's join state in RocksDB, with one batch of pending writes on top.

The join logic reads and writes through :class:`BatchState`; nothing reaches
RocksDB until :meth:`BatchState.commit` after the batch's changelog records
are on the broker, so local state is never ahead of the changelog (a crash
between the two leaves local state behind, and restoration catches it up).
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocksdict import Rdict, RdictIter

__all__ = ["BatchState"]


class BatchState:
    """:class:`~streamjoin.join.state.KVState` over a rocksdict ``Rdict`` (raw mode)."""

    def __init__(self) -> None:
        #: the task's database; ``None`` while the task is closed or parked, when the
        #: logic does not run (the uses below are not checked: a hot path)
        self.db: Rdict | None = None
        self._over: dict[bytes, bytes | None] = {}
        self._it: RdictIter | None = None
        self._it_db: Rdict | None = None
        #: the overlay's keys, sorted, per first byte (a key family), for the
        #: families scanned in this batch only (a family's list is made at its
        #: first scan and kept sorted from then on): a logic that reads from
        #: memory pays nothing for it
        self._over_keys: dict[int, list[bytes]] = {}
        #: content writes of this batch in the order they were made, for the
        #: changelog: any prefix of it is a state the logic passed through
        self.content: list[tuple[bytes, bytes | None]] = []

    # -- KVState -------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        if key in self._over:
            return self._over[key]
        value: bytes | None = self.db.get(key)  # type: ignore[union-attr]
        return value

    def put(self, key: bytes, value: bytes) -> None:
        self._write(key, value)
        self.content.append((key, value))

    def delete(self, key: bytes) -> None:
        self._write(key, None)
        self.content.append((key, None))

    def put_index(self, key: bytes, value: bytes) -> None:
        self._write(key, value)

    def delete_index(self, key: bytes) -> None:
        self._write(key, None)

    def scan(self, start: bytes, end: bytes) -> list[tuple[bytes, bytes]]:
        found: dict[bytes, bytes] = {}
        it = self._iterator()
        it.seek(start)
        while it.valid():
            key = it.key()
            if key >= end:
                break
            found[key] = it.value()
            it.next()
        overlay = self._overlay(start, end)
        if not overlay:
            return list(found.items())
        for key in overlay:
            value = self._over[key]
            if value is None:
                found.pop(key, None)
            else:
                found[key] = value
        return sorted(found.items())

    # -- batch ------------------------------------------------------------------
    def commit(self, offset_key: bytes, changelog_offset: int | None) -> None:
        """Write the batch (and the changelog offset it reached) to RocksDB atomically."""
        if not self._over:
            return
        import rocksdict

        batch = rocksdict.WriteBatch(raw_mode=True)
        for key, value in self._over.items():
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        if changelog_offset is not None:
            batch.put(offset_key, str(changelog_offset).encode())
        self.db.write(batch)  # type: ignore[union-attr]
        self.discard()

    def _iterator(self) -> RdictIter:
        """One RocksDB iterator for the whole batch: the database does not
        change until :meth:`commit`, so every scan of the batch seeks the same
        one instead of creating its own."""
        if self._it is None or self._it_db is not self.db:
            self._it = self.db.iter()  # type: ignore[union-attr]
            self._it_db = self.db
        return self._it

    def discard(self) -> None:
        """Forget the batch (after a commit, or when the task is dropped)."""
        self._it = self._it_db = None
        self._over.clear()
        self._over_keys.clear()
        self.content.clear()

    def detach(self) -> None:
        """Forget the batch and the database (the task is dropped, or opened anew)."""
        self.discard()
        self.db = None

    def _overlay(self, start: bytes, end: bytes) -> list[bytes]:
        """The overlay's keys in ``[start, end)``, in order."""
        if not self._over or start >= end:
            return []
        first = start[0] if start else 0
        # no key of family end[0] is below a one-byte end (a family's end)
        last = (end[0] - 1 if len(end) == 1 else end[0]) if end else 255
        tracked = self._over_keys
        out: list[bytes] = []
        for family in range(first, last + 1):
            keys = tracked.get(family)
            if keys is None:
                keys = sorted(k for k in self._over if (k[0] if k else 0) == family)
                tracked[family] = keys
            out.extend(keys[bisect.bisect_left(keys, start) : bisect.bisect_left(keys, end)])
        return out

    def _write(self, key: bytes, value: bytes | None) -> None:
        if self._over_keys and key not in self._over:
            keys = self._over_keys.get(key[0] if key else 0)
            if keys is not None:
                if not keys or key > keys[-1]:
                    keys.append(key)
                else:
                    bisect.insort(keys, key)
        self._over[key] = value
