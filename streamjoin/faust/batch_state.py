"""A task's join state in RocksDB, with one batch of pending writes on top.

The join logic reads and writes through :class:`BatchState`; nothing reaches
RocksDB until :meth:`BatchState.commit` after the batch's changelog records
are on the broker, so local state is never ahead of the changelog (a crash
between the two leaves local state behind, and restoration catches it up).
"""

from __future__ import annotations

import bisect
from typing import Any

__all__ = ["BatchState"]


class BatchState:
    """:class:`~streamjoin.join.state.KVState` over a rocksdict ``Rdict`` (raw mode)."""

    def __init__(self) -> None:
        self.db: Any = None
        self._over: dict[bytes, bytes | None] = {}
        self._over_keys: list[bytes] = []
        #: content writes of this batch in the order they were made, for the
        #: changelog: any prefix of it is a state the logic passed through
        self.content: list[tuple[bytes, bytes | None]] = []

    # -- KVState -------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        if key in self._over:
            return self._over[key]
        value: bytes | None = self.db.get(key)
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
        import rocksdict

        found: dict[bytes, bytes] = {}
        options = rocksdict.ReadOptions()
        options.set_iterate_upper_bound(end)
        it = self.db.iter(options)
        it.seek(start)
        while it.valid():
            key = it.key()
            if key >= end:
                break
            found[key] = it.value()
            it.next()
        del it
        lo = bisect.bisect_left(self._over_keys, start)
        hi = bisect.bisect_left(self._over_keys, end)
        if lo == hi:
            return list(found.items())
        for key in self._over_keys[lo:hi]:
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
        self.db.write(batch)
        self.discard()

    def discard(self) -> None:
        """Forget the batch (after a commit, or when the task is dropped)."""
        self._over.clear()
        self._over_keys.clear()
        self.content.clear()

    def _write(self, key: bytes, value: bytes | None) -> None:
        if key not in self._over:
            bisect.insort(self._over_keys, key)
        self._over[key] = value
