"""The key-value state a join task keeps, behind one small interface.

A join's per-task logic reads and writes ordered byte keys; the runtime decides
where they live: :class:`MemoryState` here (tests, batch use), RocksDB with a
Kafka changelog in :mod:`streamjoin.faust.join.operator`. Two kinds of writes:

* ``put``/``delete``: the task's *content* (records, decisions, stream time);
  durable backends changelog them, so a standby or a new owner rebuilds it.
* ``put_index``/``delete_index``: derived lookup keys the logic can rebuild
  from the content (see ``TaskAttribution.rebuild_indexes``); kept locally,
  never changelogged.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from typing import Protocol

__all__ = ["KVState", "MemoryState"]


class KVState(Protocol):
    """Ordered byte-keyed state of one task."""

    def get(self, key: bytes) -> bytes | None:
        """The value at *key*, ``None`` if absent."""

    def put(self, key: bytes, value: bytes) -> None:
        """Write content (changelogged by durable backends)."""

    def delete(self, key: bytes) -> None:
        """Delete content (a changelog tombstone in durable backends)."""

    def put_index(self, key: bytes, value: bytes) -> None:
        """Write a derived key (local only)."""

    def delete_index(self, key: bytes) -> None:
        """Delete a derived key (local only)."""

    def scan(self, start: bytes, end: bytes) -> list[tuple[bytes, bytes]]:
        """Every ``(key, value)`` with ``start <= key < end``, in key order."""


class MemoryState:
    """A :class:`KVState` in a dict plus a sorted key list (pure, for tests and batch)."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []
        #: content writes in order, as a durable backend would changelog them
        self.changelog: list[tuple[bytes, bytes | None]] = []
        self.record_changelog = False

    @classmethod
    def from_changelog(cls, changelog: Iterable[tuple[bytes, bytes | None]]) -> MemoryState:
        """The content a changelog (or a prefix of one) restores: ``None`` deletes."""
        state = cls()
        for key, value in changelog:
            if value is None:
                state.delete(key)
            else:
                state.put(key, value)
        return state

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self._set(key, value)
        if self.record_changelog:
            self.changelog.append((key, value))

    def delete(self, key: bytes) -> None:
        self._del(key)
        if self.record_changelog:
            self.changelog.append((key, None))

    def put_index(self, key: bytes, value: bytes) -> None:
        self._set(key, value)

    def delete_index(self, key: bytes) -> None:
        self._del(key)

    def scan(self, start: bytes, end: bytes) -> list[tuple[bytes, bytes]]:
        lo = bisect.bisect_left(self._keys, start)
        hi = bisect.bisect_left(self._keys, end)
        return [(k, self._data[k]) for k in self._keys[lo:hi]]

    def __len__(self) -> int:
        return len(self._data)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every entry in key order."""
        for key in self._keys:
            yield key, self._data[key]

    def _set(self, key: bytes, value: bytes) -> None:
        if key not in self._data:
            bisect.insort(self._keys, key)
        self._data[key] = value

    def _del(self, key: bytes) -> None:
        if key in self._data:
            del self._data[key]
            self._keys.pop(bisect.bisect_left(self._keys, key))
