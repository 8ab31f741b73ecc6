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
from collections.abc import Mapping, Sequence

from streamjoin.assignment.fencing import History
from streamjoin.assignment.model import MemberState, TaskGroup
from streamjoin.assignment.quotas import Demand, balanced_quotas

__all__ = ["place_standbys"]

_SEARCH_DEPTH = 32  # candidates examined for a fresh rack before settling


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
    hosts = [m.host for m in members]
    racks = [m.rack for m in members]
    wanted: list[list[int]] = []
    spans: list[list[int]] = []
    demands: list[Demand] = []
    layouts: dict[tuple[int, ...], _Layout] = {}  # groups with the same members share one
    for group, owner, warmup in zip(groups, owners, warmups, strict=True):
        if not group.stateful or replicas <= 0 or len(group.eligible) < 2:
            wanted.append([0] * group.partitions)
            spans.append([1] * group.partitions)
            demands.append(Demand(0, group.eligible, {}))
            continue
        layout = layouts.get(group.eligible)
        if layout is None:
            layout = layouts[group.eligible] = _Layout(group.eligible, hosts, racks)
        counts: list[int] = []
        span: list[int] = []
        limits = layout.limits
        for o, w in zip(owner, warmup, strict=True):
            limit = limits.get((o, w))
            if limit is None:
                limit = limits[(o, w)] = layout.limit(o, w, replicas)
            counts.append(limit[0])
            span.append(limit[1])
        previous: dict[int, int] = {}
        for p, o in enumerate(owner):
            for m in history.standby_holders.get((group.index, p), ()):
                if hosts[m] != hosts[o] and m != warmup[p]:
                    previous[m] = previous.get(m, 0) + 1
        wanted.append(counts)
        spans.append(span)
        demands.append(Demand(sum(counts), group.eligible, previous))
    result = balanced_quotas(demands, capacities)
    relaxed = result.relaxed

    placed: list[list[tuple[int, ...]]] = []
    for group, owner, warmup, counts, span, quota in zip(
        groups, owners, warmups, wanted, spans, result.quotas, strict=True
    ):
        if not any(counts):
            placed.append([() for _ in range(group.partitions)])
            continue
        rooms = _Rooms(quota, group.eligible, racks)
        room, take = rooms.room, rooms.take
        chosen: list[list[int]] = [[] for _ in range(group.partitions)]
        # 1. sticky: keep standbys members hold (or have state for): a fresh
        #    rack first, then the most caught up
        warm, holders, former = history.warm, history.standby_holders, history.former
        previous_owner = history.owner[group.index]
        gi = group.index
        for p, o in enumerate(owner):
            # members with state for the task: standby holders, former owners
            # and the previous owner when the task moved away from it
            held = holders.get((gi, p), ())
            earlier = previous_owner[p]
            formers = former.get((gi, p), ())
            if formers or (earlier >= 0 and earlier != o) or len(held) != 1:
                candidates = list(held)
                if earlier >= 0 and earlier != o and earlier not in candidates:
                    candidates.append(earlier)
                for m in formers:
                    if m != o and m not in candidates:
                        candidates.append(m)
                if warmup[p] in candidates:
                    candidates.remove(warmup[p])
                if not candidates:
                    continue
            elif held[0] == warmup[p]:
                continue
            else:
                candidates = [held[0]]  # the common case: one standby holder, kept
            if len(candidates) > 1:
                lag = {m: i for i, (_, m) in enumerate(warm.get((gi, p)) or ())}
                far = len(lag)
                candidates.sort(
                    key=lambda m, o=o: (racks[m] == racks[o], lag.get(m, far), m)  # type: ignore[misc]
                )
            mine = chosen[p]
            count = counts[p]
            kept_racks = [racks[o]]
            for m in candidates:
                if len(mine) >= count:
                    break
                if room.get(m, 0) <= 0 or not _fits(m, o, mine, hosts):
                    continue
                fresh = racks[m] not in kept_racks
                # an old rack only while enough slots stay for the racks still needed
                if fresh or count - len(mine) > span[p] - len(kept_racks):
                    mine.append(m)
                    if fresh:
                        kept_racks.append(racks[m])
                    take(m)
        # 2. fill: racks the task still needs first (over quota if need be),
        #    then the most remaining room
        for p in sorted(range(group.partitions), key=owner.__getitem__):
            o, w = owner[p], warmup[p]
            while len(chosen[p]) < counts[p]:
                used_racks = {racks[o], *(racks[c] for c in chosen[p])}
                need_rack = len(used_racks) < span[p]
                pick = _pick(rooms, o, w, chosen[p], hosts, racks, not need_rack)
                if pick is None and need_rack:
                    used_hosts = {hosts[o], *(hosts[c] for c in chosen[p])}
                    pick = rooms.fresh_rack(used_racks, used_hosts, w, hosts)
                    if pick is not None and rooms.room.get(pick, 0) <= 0:
                        relaxed = True
                if pick is None:
                    freed = _swap(p, owner, warmup, chosen, hosts, racks, rooms)
                    if freed is not None:
                        continue
                    relaxed = True
                    pick = _least_loaded(group, o, w, chosen[p], hosts, rooms.room)
                    if pick is None:
                        break
                chosen[p].append(pick)
                rooms.take(pick)
        placed.append([tuple(sorted(c)) for c in chosen])
    return placed, relaxed


class _Layout:
    """Where a group's eligible members are: hosts and racks, for per-task limits."""

    def __init__(
        self, eligible: Sequence[int], hosts: Sequence[str], racks: Sequence[str | None]
    ) -> None:
        self.hosts, self.racks = hosts, racks
        self.per_host: dict[str, int] = {}
        self.per_rack: dict[str | None, int] = {}
        self.per_rack_host: dict[tuple[str | None, str], int] = {}
        self.racks_of_host: dict[str, set[str | None]] = {}
        for m in eligible:
            h, r = hosts[m], racks[m]
            self.per_host[h] = self.per_host.get(h, 0) + 1
            self.per_rack[r] = self.per_rack.get(r, 0) + 1
            self.per_rack_host[(r, h)] = self.per_rack_host.get((r, h), 0) + 1
            self.racks_of_host.setdefault(h, set()).add(r)
        #: (active, warm-up) -> (standbys, racks to span), computed once per pair
        self.limits: dict[tuple[int, int], tuple[int, int]] = {}

    def limit(self, owner: int, warmup: int, replicas: int) -> tuple[int, int]:
        """Standbys a task with this active and warm-up gets, and the racks its copies span."""
        count = min(replicas, self.other_hosts(owner, warmup))
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

    def __init__(
        self, quota: Mapping[int, int], eligible: Sequence[int], racks: Sequence[str | None]
    ) -> None:
        self.room: dict[int, int] = {m: r for m, r in quota.items() if r}
        self.eligible = eligible
        self.racks = racks
        self.heap: list[tuple[int, int, int]] = [
            (-r, m, m) for m, r in sorted(self.room.items()) if r > 0
        ]
        heapq.heapify(self.heap)
        self.by_rack: dict[str | None, list[tuple[int, int, int]]] | None = None
        self.seq = len(racks)

    def take(self, m: int) -> None:
        self._changed(m, self.room.get(m, 0) - 1)

    def _changed(self, m: int, room: int) -> None:
        self.room[m] = room
        self.seq += 1
        entry = (-room, self.seq, m)
        if room > 0:
            heapq.heappush(self.heap, entry)
        if self.by_rack is not None:
            heapq.heappush(self.by_rack.setdefault(self.racks[m], []), entry)

    def _rack_heaps(self) -> dict[str | None, list[tuple[int, int, int]]]:
        if self.by_rack is None:
            self.by_rack = {}
            for m in self.eligible:
                self.by_rack.setdefault(self.racks[m], []).append((-self.room.get(m, 0), m, m))
            for entries in self.by_rack.values():
                heapq.heapify(entries)
        return self.by_rack

    def fresh_rack(
        self, used_racks: set[str | None], used_hosts: set[str], warmup: int, hosts: Sequence[str]
    ) -> int | None:
        """The member with the most room (over quota if need be) on a rack not used yet."""
        by_rack = self._rack_heaps()
        best: tuple[int, int] | None = None
        for rack in sorted(by_rack, key=lambda r: (r is None, r or "")):
            if rack in used_racks:
                continue
            heap = by_rack[rack]
            skipped: list[tuple[int, int, int]] = []
            while heap and len(skipped) < _SEARCH_DEPTH:
                entry = heapq.heappop(heap)
                m = entry[2]
                if self.room.get(m, 0) != -entry[0]:
                    continue  # stale
                skipped.append(entry)
                if hosts[m] not in used_hosts and m != warmup:
                    key = (entry[0], m)
                    if best is None or key < best:
                        best = key
                    break
            for entry in skipped:
                heapq.heappush(heap, entry)
        return best[1] if best is not None else None


def _fits(m: int, owner: int, chosen: Sequence[int], hosts: Sequence[str]) -> bool:
    """May ``m`` hold a standby of a task owned by ``owner`` (sticky pass)?"""
    return hosts[m] != hosts[owner] and all(hosts[c] != hosts[m] for c in chosen)


def _pick(
    rooms: _Rooms,
    owner: int,
    warmup: int,
    chosen: Sequence[int],
    hosts: Sequence[str],
    racks: Sequence[str | None],
    any_rack: bool,
) -> int | None:
    """The member with the most room, a fresh rack first (only a fresh one unless ``any_rack``)."""
    heap, room = rooms.heap, rooms.room
    used_hosts = {hosts[owner], *(hosts[c] for c in chosen)}
    used_racks = {racks[owner], *(racks[c] for c in chosen)}
    skipped: list[tuple[int, int, int]] = []
    fallback: tuple[int, int, int] | None = None
    pick: tuple[int, int, int] | None = None
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


def _swap(
    p: int,
    owner: Sequence[int],
    warmup: Sequence[int],
    chosen: list[list[int]],
    hosts: Sequence[str],
    racks: Sequence[str | None],
    rooms: _Rooms,
) -> int | None:
    """Free a member for task ``p`` when only disallowed members have room.

    Finds a placed standby ``x`` of another task ``q`` that ``p`` may use, such
    that a member ``y`` with room may replace ``x`` on ``q`` without ``q``
    losing a rack: then ``y`` takes ``q`` and ``x`` takes ``p``. Counts stay
    within the quotas. Returns ``y``.
    """
    spare = sorted(m for m, r in rooms.room.items() if r > 0)
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
                rooms.take(y)
                return y
    return None


def _least_loaded(
    group: TaskGroup,
    owner: int,
    warmup: int,
    chosen: Sequence[int],
    hosts: Sequence[str],
    room: Mapping[int, int],
) -> int | None:
    """Quota exhausted for every allowed member: take the one with most room."""
    used_hosts = {hosts[owner], *(hosts[c] for c in chosen)}
    best: tuple[int, int] | None = None
    for m in group.eligible:
        if hosts[m] in used_hosts or m == warmup:
            continue
        key = (-room.get(m, 0), m)
        if best is None or key < best:
            best = key
    return best[1] if best is not None else None
