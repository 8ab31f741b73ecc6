"""Place standby replicas of stateful tasks.

Each stateful task gets ``standby_replicas`` standbys, as far as members on
distinct hosts allow: never on its active's member or host, never on the
member holding its warm-up, each on its own host. Rack safety comes first:
a task's copies (active + standbys) span ``min(1 + standbys, 1 + other
racks)`` racks, where the other racks are those with such a member on a host
other than the active's. Counts are then balanced with the same quota
rounding as actives (per group and in total) as far as that allows (a rack
that must take more than its quota sets ``relaxed``); members keep standbys
they already hold (sticky, warm) before new ones are handed out.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from itertools import islice, repeat

from streamjoin.assignment.fencing import History, TaskRows
from streamjoin.assignment.model import MemberState, TaskGroup
from streamjoin.assignment.quotas import Demand, balanced_quotas

__all__ = ["place_standbys"]

_SEARCH_DEPTH = 32  # candidates examined for a fresh rack before settling
#: (-room, tie-break, member), most room first; the tie-break is the member, or
#: a sequence number once its room changed; stale once its room changes again
_Entry = tuple[int, int, int]
_Rows = Mapping[tuple[int, int], Sequence[int]]  # task -> members


def place_standbys(
    groups: Sequence[TaskGroup],
    owners: Sequence[Sequence[int]],
    warmups: Sequence[Sequence[int]],
    history: History,
    members: Sequence[MemberState],
    replicas: int,
    capacities: Sequence[int],
) -> tuple[list[list[tuple[int, ...]]], bool]:
    """Return the standby members of every task (per group) and a relaxed flag."""
    hosts, racks = [m.host for m in members], [m.rack for m in members]
    holders = history.standby_holders if len(history.standby_holders) else None
    formers = history.former if len(history.former) else None
    prepared: list[_Tasks | None] = []
    demands: list[Demand] = []
    layouts: dict[tuple[int, ...], _Layout] = {}  # groups with the same members share one
    for group, owner, warmup in zip(groups, owners, warmups, strict=True):
        if not group.stateful or replicas <= 0 or len(group.eligible) < 2:
            prepared.append(None)
            demands.append(Demand(0, group.eligible, {}))
            continue
        layout = layouts.get(group.eligible)
        if layout is None:
            layout = layouts[group.eligible] = _Layout(group.eligible, hosts, racks, replicas)
        tasks = _Tasks(group.index, owner, warmup, layout, history, holders, formers)
        prepared.append(tasks)
        demands.append(Demand(sum(tasks.counts), group.eligible, tasks.previous))
    result = balanced_quotas(demands, capacities)
    relaxed = result.relaxed

    placed: list[list[tuple[int, ...]]] = []
    for group, owner, warmup, found, quota in zip(
        groups, owners, warmups, prepared, result.quotas, strict=True
    ):
        if found is None or not any(found.counts):
            placed.append([() for _ in range(group.partitions)])
            continue
        counts, span = found.counts, found.span
        rooms = _Rooms(quota, layouts[group.eligible])
        room, take = rooms.room, rooms.take
        chosen: list[list[int]] = [[] for _ in range(group.partitions)]
        # 1. sticky: keep standbys members hold (or have state for): a fresh
        #    rack first, then the most caught up
        for p, candidates in found.sticky:
            if len(candidates) > 1:
                rooms.keep(candidates, owner[p], chosen[p], counts[p], span[p])
                continue
            m, o, count = candidates[0], owner[p], counts[p]  # the common case, as in keep
            if count > 0 and room.get(m, 0) > 0 and (racks[m] != racks[o] or count > span[p] - 1):
                chosen[p].append(m)
                take(m)
        # 2. fill: racks the task still needs first (over quota if need be),
        #    then the most remaining room (a task full now stays full)
        todo = [p for p, c in enumerate(chosen) if len(c) < counts[p]]
        todo.sort(key=owner.__getitem__)
        for p in todo:
            o, w, mine = owner[p], warmup[p], chosen[p]
            while len(mine) < counts[p]:
                pick = None if mine else rooms.first_fit(o, w)
                if pick is None:
                    used_racks = {racks[o], *(racks[c] for c in mine)}
                    need_rack = len(used_racks) < span[p]
                    pick = rooms.pick(o, w, mine, not need_rack)
                    if pick is None and need_rack:
                        used_hosts = {hosts[o], *(hosts[c] for c in mine)}
                        pick = rooms.fresh_rack(used_racks, used_hosts, w)
                        if pick is not None and room.get(pick, 0) <= 0:
                            relaxed = True
                    if pick is None:
                        if rooms.swap(p, owner, warmup, chosen) is not None:
                            continue
                        relaxed = True
                        pick = rooms.least_loaded(o, w, mine)
                        if pick is None:
                            break
                mine.append(pick)
                take(pick)
        if max(map(len, chosen)) > 1:
            for c in chosen:
                c.sort()
        placed.append(list(map(tuple, chosen)))
    return placed, relaxed


class _Tasks:
    """One group's tasks: per task the standbys it gets, the racks its copies
    span, and the members with state for it (for the quotas, the sticky pass)."""

    def __init__(
        self,
        gi: int,
        owner: Sequence[int],
        warmup: Sequence[int],
        layout: _Layout,
        history: History,
        holders: _Rows | None,
        formers: _Rows | None,
    ) -> None:
        hosts, racks, n = layout.hosts, layout.racks, len(owner)
        self.counts, self.span = layout.task_limits(owner, warmup)
        #: the sticky pass's work, in task order: the members a task may keep (off
        #: its active's host, not its warm-up's member), fresh rack, most caught up first
        self.sticky: list[tuple[int, Sequence[int]]] = []
        self.previous: dict[int, int] = {}  # member -> standbys it holds and may keep
        held = None if holders is None else _rows(holders, gi, n)
        fs = None if formers is None else _rows(formers, gi, n)
        earlier = history.owner[gi]  # the previous owners
        moved = earlier != owner and max(earlier, default=-1) >= 0
        if held is not None and fs is None and not moved and max(map(len, held), default=0) <= 1:
            # the common case: at most one standby holder per task, nothing else
            indexed = enumerate(zip(owner, warmup, held, strict=True))
            self.sticky = [
                (p, ms)
                for p, (o, w, ms) in indexed
                if ms and ms[0] != w and hosts[ms[0]] != hosts[o]
            ]
            self.previous = dict(Counter([ms[0] for _, ms in self.sticky]))
            return
        if held is None and fs is None and not moved:
            return
        kept: list[int] = []
        rows = zip(owner, warmup, held or repeat(()), fs or repeat(()), earlier, strict=False)
        for p, (o, w, ms, f, e) in enumerate(rows):
            kept += [m for m in ms if hosts[m] != hosts[o] and m != w]
            # standby holders, former owners, the previous owner if the task moved
            candidates = list(ms)
            for m in [e, *f] if e >= 0 else f:
                if m != o and m not in candidates:
                    candidates.append(m)
            candidates = [m for m in candidates if hosts[m] != hosts[o] and m != w]
            if len(candidates) > 1:
                lag = {m: i for i, (_, m) in enumerate(history.warm.get((gi, p)) or ())}
                far = len(lag)
                candidates.sort(key=lambda m: (racks[m] == racks[o], lag.get(m, far), m))
            if candidates:
                self.sticky.append((p, candidates))
        self.previous = dict(Counter(kept))


def _rows(tasks: _Rows, gi: int, partitions: int) -> list[Sequence[int]]:
    """Group ``gi``'s row of ``tasks``: the members of each partition."""
    if isinstance(tasks, TaskRows):
        return tasks.row(gi, partitions)
    return [tasks.get((gi, p), ()) for p in range(partitions)]


class _Layout:
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
        plain.update([(o, self.limit(o, -1)) for o in dict.fromkeys(owner) if o not in plain])
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


class _Rooms:
    """Standby room left per member: a heap over members with room, and per rack
    (built on first need: rack-safety picks that no member with room offers)."""

    def __init__(self, quota: Mapping[int, int], layout: _Layout) -> None:
        self.room: dict[int, int] = {m: r for m, r in quota.items() if r}
        self.layout, self.hosts, self.racks = layout, layout.hosts, layout.racks
        self.heap: list[_Entry] = [(-r, m, m) for m, r in self.room.items() if r > 0]
        heapq.heapify(self.heap)
        #: per rack, entries of the members with room other than 0 when built (``nonzero``)
        #: and of every change since; the others' would be ``(0, m, m)``: ``layout.rack_members``
        self.by_rack: dict[str | None, list[_Entry]] | None = None
        self.nonzero: set[int] = set()
        self.seq = len(self.racks)

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
                    self.by_rack[self.racks[m]].append((-left, m, m))
            for entries in self.by_rack.values():
                heapq.heapify(entries)
        room, best = self.room, None
        for rack in sorted(self.by_rack, key=lambda r: (r is None, r or "")):
            if rack in used_racks:
                continue
            heap, popped = self.by_rack[rack], list[_Entry]()
            zeros = (m for m in self.layout.rack_members.get(rack, ()) if m not in self.nonzero)
            rest = ((0, m, m) for m in zeros if room.get(m, 0) == 0)  # unchanged since
            for entry in islice(heapq.merge(_popping(heap, room, popped), rest), _SEARCH_DEPTH):
                m = entry[2]
                if self.hosts[m] not in used_hosts and m != warmup:
                    best = min(best or (entry[0], m), (entry[0], m))
                    break
            for entry in popped:
                heapq.heappush(heap, entry)
        return best[1] if best is not None else None

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
        for q, holders in enumerate(chosen):
            if q == p:
                continue
            q_hosts = {hosts[owner[q]], *(hosts[c] for c in holders)}
            for i, x in enumerate(holders):
                if hosts[x] in blocked or x == warmup[p]:
                    continue
                # the racks q keeps without x: y must bring x's rack or a new one back
                rest = {racks[owner[q]], *(racks[c] for c in holders if c != x)}
                for y in spare:
                    if hosts[y] in q_hosts or y == warmup[q]:
                        continue
                    if racks[x] not in rest and racks[y] in rest:
                        continue
                    holders[i] = y
                    chosen[p].append(x)
                    self.take(y)
                    return y
        return None

    def least_loaded(self, owner: int, warmup: int, chosen: Sequence[int]) -> int | None:
        """Quota exhausted for every allowed member: take the one with most room."""
        hosts = self.hosts
        used_hosts = {hosts[owner], *(hosts[c] for c in chosen)}
        allowed = [m for m in self.layout.eligible if hosts[m] not in used_hosts and m != warmup]
        return min(allowed, key=lambda m: (-self.room.get(m, 0), m), default=None)


def _popping(heap: list[_Entry], room: Mapping[int, int], popped: list[_Entry]) -> Iterator[_Entry]:
    """Pop ``heap``'s current entries in order, adding them to ``popped`` (stale ones dropped)."""
    while heap:
        entry = heapq.heappop(heap)
        if room.get(entry[2], 0) == -entry[0]:
            popped.append(entry)
            yield entry
