"""The chunks of one state family of the ad join, by time segment. Pure.

Both stores of a task (:mod:`~streamjoin.ads.impressions`,
:mod:`~streamjoin.ads.clicks`) write their records in *chunks*: the entries
added to one time segment since the last :meth:`SegmentChunks.flush` are one
row (:func:`streamjoin.ads.keys.chunk_key`, a JSON list of entries that start
with ``[key, ts, id, ...]``), and a segment's chunks are deleted together when
it expires. :class:`SegmentChunks` keeps that bookkeeping; the stores keep
their records and what a segment's *members* are (what they drop when it
expires).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from streamjoin.ads import keys
from streamjoin.ads.events import dump_state, loads
from streamjoin.join.state import KVState

__all__ = ["SegmentChunks"]

M = TypeVar("M")


class SegmentChunks(Generic[M]):
    """Open entries, members and chunk keys per segment start, for one family."""

    def __init__(self, family: bytes) -> None:
        self.family = family
        #: segment start -> the members held in its chunks (or still open)
        self.members: dict[int, list[M]] = {}
        #: segment start -> entries added since the last flush
        self._open: dict[int, list[tuple[Any, ...]]] = {}
        #: segment start -> the keys of its chunks in state
        self._keys: dict[int, list[bytes]] = {}

    def clear(self) -> None:
        self.members.clear()
        self._open.clear()
        self._keys.clear()

    def add(self, segment: int, member: M, entry: tuple[Any, ...]) -> None:
        """Hold *member* in *segment*; *entry* goes to state at the next flush."""
        members = self.members.get(segment)
        if members is None:
            self.members[segment] = [member]
        else:
            members.append(member)
        opened = self._open.get(segment)
        if opened is None:
            self._open[segment] = [entry]
        else:
            opened.append(entry)

    def flush(self, state: KVState) -> None:
        """Write the entries added since the last flush: one chunk per segment.

        A chunk's key names its first entry, which no other chunk holds (a
        record is stored once), so a chunk never overwrites another.
        """
        for segment in sorted(self._open):
            entries = self._open[segment]
            jkey, ts, rid = entries[0][:3]
            key = keys.chunk_key(self.family, segment, jkey, ts, rid)
            state.put(key, dump_state(entries))
            self._keys.setdefault(segment, []).append(key)
        self._open.clear()

    def any_before(self, cut: int) -> bool:
        """Whether a segment before *cut* is held."""
        return any(s < cut for s in self.members)

    def pop_before(self, cut: int, dropped: list[bytes]) -> Iterator[tuple[int, list[M]]]:
        """Each segment before *cut* (a segment start), in order, with its members,
        forgotten; its chunk keys are added to *dropped*. Flush first."""
        for segment in sorted(s for s in self.members if s < cut):
            yield segment, self.members.pop(segment)
            dropped.extend(self._keys.pop(segment, ()))

    def load(self, state: KVState) -> Iterator[tuple[int, list[M], list[list[Any]]]]:
        """Each chunk of *state*: its segment, the segment's members (for the
        caller to add to) and its entries; the chunk's key is held."""
        for key, raw in state.scan(*keys.family_range(self.family)):
            segment = int.from_bytes(key[1:9], "big")
            self._keys.setdefault(segment, []).append(key)
            yield segment, self.members.setdefault(segment, []), loads(raw)
