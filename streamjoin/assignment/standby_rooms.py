"""Where standbys may go and how much room each member has left. Pure.

:class:`Layout` holds where a group's eligible members are (hosts, racks) and
the per-task limits derived from it; :class:`Rooms` the standby room each
member has left in one group's quota, with the searches the standby pass
(:mod:`streamjoin.assignment.standbys`) makes: the member with the most room
on a fresh rack, a swap that frees one, and the least-loaded fallback.
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from itertools import islice

__all__ = ["Layout", "Rooms"]

_SEARCH_DEPTH = 32  # candidates examined for a fresh rack before settling
_SPREAD_DEPTH = 64  # members per rack compared when a pick must go over quota
#: (-room, tie-break, member), most room first; the tie-break is the member, or
#: a sequence number once its room changed; stale once its room changes again
_Entry = tuple[int, int, int]


class Layout:
    """Where a group's eligible members are: hosts and racks, for per-task limits."""

    def __init__(
        self,
        eligible: Sequence[int],
        hosts: Sequence[str],
        racks: Sequence[str | None],
        replicas: int,
    ) -> None:
        self.eligible, self.hosts, self.racks, self.replicas = eligible, hosts, racks, replicas
        self.per_host: dict[str, int] = {}
        self.per_rack: dict[str | None, int] = {}
        self.per_rack_host: dict[tuple[str | None, str], int] = {}
        self.racks_of_host: dict[str, set[str | None]] = {}
        self.rack_members: dict[str | None, list[int]] = {}  # in index order
        for m in sorted(eligible):
            h, r = hosts[m], racks[m]
            self.per_host[h] = self.per_host.get(h, 0) + 1
            self.per_rack[r] = self.per_rack.get(r, 0) + 1
            self.per_rack_host[(r, h)] = self.per_rack_host.get((r, h), 0) + 1
            self.racks_of_host.setdefault(h, set()).add(r)
            self.rack_members.setdefault(r, []).append(m)
        self.plain: dict[int, tuple[int, int]] = {}  # active (no warm-up) -> limit
        self.paired: dict[tuple[int, int], tuple[int, int]] = {}  # (active, warm-up) -> limit

    def task_limits(self, owner: Sequence[int], warmup: Sequence[int]) -> tuple[list[int], ...]:
        """Per task: the standbys it gets, and the racks its copies span."""
        plain, paired = self.plain, self.paired
        plain.update([(o, self.limit(o, -1)) for o in set(owner).difference(plain)])
        found = list(map(plain.__getitem__, owner))
        if max(warmup, default=-1) >= 0:
            for p, (o, w) in enumerate(zip(owner, warmup, strict=True)):
                if w >= 0:
                    found[p] = paired.get((o, w)) or paired.setdefault((o, w), self.limit(o, w))
        if found and found.count(found[0]) == len(found):  # mostly: every task alike
            return [found[0][0]] * len(found), [found[0][1]] * len(found)
        return [count for count, _ in found], [span for _, span in found]

    def limit(self, owner: int, warmup: int) -> tuple[int, int]:
        """Standbys a task with this active and warm-up gets, and the racks its copies span."""
        count = min(self.replicas, self.other_hosts(owner, warmup))
        if len(self.per_rack) == 1:
            return count, 1
        return count, min(1 + count, 1 + self.other_racks(owner, warmup))

    def other_hosts(self, owner: int, warmup: int) -> int:
        """Hosts other than the active's with a member that is neither active nor warm-up."""
        n = len(self.per_host) - 1
        if warmup >= 0:
            h = self.hosts[warmup]
            if h != self.hosts[owner] and self.per_host[h] == 1:
                n -= 1
        return n

    def other_racks(self, owner: int, warmup: int) -> int:
        """Racks other than the active's with such a member on a host other than the active's."""
        home, rack = self.hosts[owner], self.racks[owner]
        suspects = set(self.racks_of_host[home])
        if warmup >= 0:
            suspects.add(self.racks[warmup])
        suspects.discard(rack)
        n = len(self.per_rack) - 1
        for r in suspects:
            left = self.per_rack[r] - self.per_rack_host.get((r, home), 0)
            if warmup >= 0 and self.racks[warmup] == r and self.hosts[warmup] != home:
                left -= 1
            if left <= 0:
                n -= 1
        return n


class Rooms:
    """Standby room left per member: a heap over members with room, and per rack
    (built on first need: rack-safety picks that no member with room offers).

    Members with equal room are taken in member order starting at ``start``
    (the group's index): the members left with room a group's tasks could not
    use (their racks were the actives') differ from group to group.
    """

    def __init__(
        self, quota: Mapping[int, int], layout: Layout, load: Sequence[int], start: int
    ) -> None:
        """``load``: each member's standbys in the groups placed before this one."""
        self.load, self.quota = load, quota
        self.room: dict[int, int] = {m: r for m, r in quota.items() if r}
        self.layout, self.hosts, self.racks = layout, layout.hosts, layout.racks
        n = self.n = len(self.racks)
        self.start = start % n if n else 0
        self.heap: list[_Entry] = [(-r, self._rank(m), m) for m, r in self.room.items() if r > 0]
        heapq.heapify(self.heap)
        #: per rack, entries of the members with room other than 0 when built (``nonzero``)
        #: and of every change since; the others' would be ``(0, m, m)``: ``layout.rack_members``
        self.by_rack: dict[str | None, list[_Entry]] | None = None
        self.nonzero: set[int] = set()
        self.seq = len(self.racks)

    def _rank(self, m: int) -> int:
        """``m``'s place in member order starting at ``start`` (ties of equal room)."""
        return (m - self.start) % self.n

    def _from_start(self, listed: list[int]) -> list[int]:
        """``listed`` (in member order) rotated to begin at ``start``."""
        cut = bisect.bisect_left(listed, self.start)
        return listed[cut:] + listed[:cut]

    def take(self, m: int) -> None:
        room = self.room[m] = self.room.get(m, 0) - 1
        self.seq += 1
        entry = (-room, self.seq, m)
        if room > 0:
            heapq.heappush(self.heap, entry)
        if self.by_rack is not None:
            heapq.heappush(self.by_rack.setdefault(self.racks[m], []), entry)

    def keep(
        self, candidates: Sequence[int], owner: int, mine: list[int], count: int, span: int
    ) -> None:
        """Sticky pass, one task: keep ``candidates`` in order while it needs them."""
        hosts, racks, kept_racks = self.hosts, self.racks, [self.racks[owner]]
        for m in candidates:
            if len(mine) >= count:
                break
            if self.room.get(m, 0) <= 0 or any(hosts[c] == hosts[m] for c in [owner, *mine]):
                continue
            fresh = racks[m] not in kept_racks
            # an old rack only while enough slots stay for the racks still needed
            if fresh or count - len(mine) > span - len(kept_racks):
                mine.append(m)
                if fresh:
                    kept_racks.append(racks[m])
                self.take(m)

    def first_fit(self, owner: int, warmup: int) -> int | None:
        """:meth:`pick` for a task without standbys, if that takes one of the first two."""
        heap, room, hosts, racks = self.heap, self.room, self.hosts, self.racks
        home, rack = hosts[owner], racks[owner]
        if not heap or room[heap[0][2]] != -heap[0][0]:
            return None  # none, or stale
        m = heap[0][2]
        if racks[m] != rack and hosts[m] != home and m != warmup:
            return heapq.heappop(heap)[2]
        if len(heap) < 2:  # the first is skipped (host, warm-up) or a fallback (rack)
            return None
        key, _, m = heap[1] if len(heap) == 2 or heap[1] < heap[2] else heap[2]
        if room[m] != -key or racks[m] == rack or hosts[m] == home or m == warmup:
            return None
        heapq.heapreplace(heap, heapq.heappop(heap))  # the first stays, m leaves
        return m

    def pick(self, owner: int, warmup: int, chosen: Sequence[int], any_rack: bool) -> int | None:
        """The member with the most room, a fresh rack first (only one unless ``any_rack``)."""
        heap, room, hosts, racks = self.heap, self.room, self.hosts, self.racks
        used_hosts = {hosts[owner], *(hosts[c] for c in chosen)}
        used_racks = {racks[owner], *(racks[c] for c in chosen)}
        skipped: list[_Entry] = []
        fallback: _Entry | None = None
        pick: _Entry | None = None
        while heap and len(skipped) < _SEARCH_DEPTH:
            entry = heapq.heappop(heap)
            m = entry[2]
            if room.get(m, 0) != -entry[0] or -entry[0] <= 0:  # stale
                continue
            if hosts[m] in used_hosts or m in chosen or m == warmup:
                skipped.append(entry)
                continue
            if racks[m] not in used_racks:
                pick = entry
                break
            if fallback is None and any_rack:
                fallback = entry
            else:
                skipped.append(entry)
        if pick is None and fallback is not None:
            pick, fallback = fallback, None
        if fallback is not None:
            skipped.append(fallback)
        for entry in skipped:
            heapq.heappush(heap, entry)
        return pick[2] if pick is not None else None

    def fresh_rack(
        self, used_racks: set[str | None], used_hosts: set[str], warmup: int
    ) -> int | None:
        """The member with the most room (over quota if need be) on a rack not used yet."""
        if self.by_rack is None:
            self.by_rack = {r: [] for r in self.layout.rack_members}
            for m, left in self.room.items():
                if left:
                    self.nonzero.add(m)
                    self.by_rack[self.racks[m]].append((-left, self._rank(m), m))
            for entries in self.by_rack.values():
                heapq.heapify(entries)
        room, best = self.room, None
        for rack in sorted(self.by_rack, key=lambda r: (r is None, r or "")):
            if rack in used_racks:
                continue
            heap, popped = self.by_rack[rack], list[_Entry]()
            listed = self._from_start(self.layout.rack_members.get(rack, []))
            zeros = (m for m in listed if m not in self.nonzero)
            rest = ((0, self._rank(m), m) for m in zeros if room.get(m, 0) == 0)
            for entry in islice(heapq.merge(_popping(heap, room, popped), rest), _SEARCH_DEPTH):
                m = entry[2]
                if self.hosts[m] not in used_hosts and m != warmup:
                    rank = (entry[0], self._rank(m), m)
                    best = min(best or rank, rank)
                    break
            for entry in popped:
                heapq.heappush(heap, entry)
        if best is not None and best[0] >= 0:  # over quota anyway: spread such picks
            return self._fewest_standbys(best[0], best[2], used_racks, used_hosts, warmup)
        return best[2] if best is not None else None

    def _fewest_standbys(
        self,
        level: int,
        found: int,
        used_racks: set[str | None],
        used_hosts: set[str],
        warmup: int,
    ) -> int:
        """Of the allowed members on unused racks with room ``-level`` (as much as any
        has), the one with the fewest standbys so far, in all groups: the group's
        quota cannot hold, the total balance still can. Looks at the first
        ``_SPREAD_DEPTH`` such members per rack, in order from ``start``, and ``found``."""
        room, hosts, load, quota = self.room, self.hosts, self.load, self.quota
        best = (load[found] + quota.get(found, 0) - room.get(found, 0), found)
        for rack, listed in sorted(self.layout.rack_members.items(), key=_rack_order):
            if rack in used_racks:
                continue
            allowed = (
                m
                for m in self._from_start(listed)
                if -room.get(m, 0) == level and hosts[m] not in used_hosts and m != warmup
            )
            for m in islice(allowed, _SPREAD_DEPTH):
                total = (load[m] + quota.get(m, 0) - room.get(m, 0), m)
                best = min(best, total)
        return best[1]

    def swap(
        self, p: int, owner: Sequence[int], warmup: Sequence[int], chosen: list[list[int]]
    ) -> int | None:
        """Free a member for task ``p`` when only disallowed members have room.

        Finds a placed standby ``x`` of another task ``q`` that ``p`` may use, such
        that a member ``y`` with room may replace ``x`` on ``q`` without ``q``
        losing a rack: then ``y`` takes ``q`` and ``x`` takes ``p``. Counts stay
        within the quotas. Returns ``y``.
        """
        hosts, racks = self.hosts, self.racks
        spare = sorted(m for m, r in self.room.items() if r > 0)
        if not spare:
            return None
        blocked = {hosts[owner[p]], *(hosts[c] for c in chosen[p])}
        # the members p may take from another task (the x above); usually few once p
        # needs a swap, and none when every host already has a copy of p
        movable = {m for m in self.layout.eligible if hosts[m] not in blocked}
        movable.discard(warmup[p])
        if not movable:
            return None
        for q, holders in enumerate(chosen):
            if q == p or movable.isdisjoint(holders):
                continue
            q_hosts = set(map(hosts.__getitem__, holders))
            q_hosts.add(hosts[owner[q]])
            fits = [y for y in spare if hosts[y] not in q_hosts and y != warmup[q]]
            if not fits:
                continue
            # copies of q per rack: the racks q keeps without x are those left counted
            q_racks = Counter([racks[owner[q]], *(racks[c] for c in holders)])
            for i, x in enumerate(holders):
                if x not in movable:
                    continue
                rack = racks[x]
                alone = q_racks[rack] == 1  # y must bring x's rack or a new one back
                for y in fits:
                    if alone and racks[y] != rack and q_racks[racks[y]] > 0:
                        continue
                    holders[i] = y
                    chosen[p].append(x)
                    self.take(y)
                    return y
        return None

    def least_loaded(self, owner: int, warmup: int, chosen: Sequence[int]) -> int | None:
        """Quota exhausted for every allowed member: the one with most room, then
        the fewest standbys so far."""
        hosts = self.hosts
        used_hosts = {hosts[owner], *(hosts[c] for c in chosen)}
        allowed = [m for m in self.layout.eligible if hosts[m] not in used_hosts and m != warmup]
        room, load, quota = self.room, self.load, self.quota
        return min(
            allowed,
            key=lambda m: (-room.get(m, 0), load[m] + quota.get(m, 0) - room.get(m, 0), m),
            default=None,
        )


def _rack_order(item: tuple[str | None, object]) -> tuple[bool, str]:
    return item[0] is None, item[0] or ""


def _popping(heap: list[_Entry], room: Mapping[int, int], popped: list[_Entry]) -> Iterator[_Entry]:
    """Pop ``heap``'s current entries in order, adding them to ``popped`` (stale ones dropped)."""
    while heap:
        entry = heapq.heappop(heap)
        if room.get(entry[2], 0) == -entry[0]:
            popped.append(entry)
            yield entry
