"""Place standby replicas of stateful tasks.

Each stateful task gets ``min(standby_replicas, eligible - 1)`` standbys,
never on its active's member or host, on distinct hosts, spread over racks
when the eligible members span several. Counts are balanced with the same
quota rounding as actives (per group and in total); members keep standbys
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
    history: History,
    members: Sequence[MemberState],
    replicas: int,
    capacities: Sequence[int],
) -> tuple[list[list[tuple[int, ...]]], bool]:
    """Return the standby members of every task (per group) and a relaxed flag."""
    hosts = [m.host for m in members]
    racks = [m.rack for m in members]
    wanted: list[list[int]] = []
    demands: list[Demand] = []
    for group, owner in zip(groups, owners, strict=True):
        if not group.stateful or replicas <= 0 or len(group.eligible) < 2:
            wanted.append([0] * group.partitions)
            demands.append(Demand(0, group.eligible, {}))
            continue
        per_host: dict[str, int] = {}
        for m in group.eligible:
            per_host[hosts[m]] = per_host.get(hosts[m], 0) + 1
        k = min(replicas, len(group.eligible) - 1)
        counts = [min(k, len(group.eligible) - per_host[hosts[o]]) for o in owner]
        # a standby on a distinct host each: no more than the other hosts
        counts = [min(c, len(per_host) - 1) for c in counts]
        previous: dict[int, int] = {}
        for p, o in enumerate(owner):
            for m in history.standby_holders.get((group.index, p), ()):
                if hosts[m] != hosts[o]:
                    previous[m] = previous.get(m, 0) + 1
        wanted.append(counts)
        demands.append(Demand(sum(counts), group.eligible, previous))
    result = balanced_quotas(demands, capacities)
    relaxed = result.relaxed

    placed: list[list[tuple[int, ...]]] = []
    for group, owner, counts, quota in zip(groups, owners, wanted, result.quotas, strict=True):
        if not any(counts):
            placed.append([() for _ in range(group.partitions)])
            continue
        room = dict(quota)
        chosen: list[list[int]] = [[] for _ in range(group.partitions)]
        # 1. sticky: keep standbys members hold (or have state for): a fresh
        #    rack first, then the most caught up
        warm, holders, former = history.warm, history.standby_holders, history.former
        previous_owner = history.owner[group.index]
        gi = group.index
        for p, o in enumerate(owner):
            # members with state for the task: standby holders, former owners
            # and the previous owner when the task moved away from it
            candidates = list(holders.get((gi, p), ()))
            earlier = previous_owner[p]
            if earlier >= 0 and earlier != o and earlier not in candidates:
                candidates.append(earlier)
            for m in former.get((gi, p), ()):
                if m != o and m not in candidates:
                    candidates.append(m)
            if not candidates:
                continue
            if len(candidates) > 1:
                # a fresh rack first, then the most caught up
                lag = {m: i for i, (_, m) in enumerate(warm.get((gi, p)) or ())}
                far = len(lag)
                candidates.sort(
                    key=lambda m, o=o: (racks[m] == racks[o], lag.get(m, far), m)  # type: ignore[misc]
                )
            mine = chosen[p]
            for m in candidates:
                if len(mine) >= counts[p]:
                    break
                if room.get(m, 0) > 0 and _fits(m, o, mine, hosts):
                    mine.append(m)
                    room[m] -= 1
        # 2. fill: most remaining room first, preferring racks not yet used
        heap = [(-r, m, m) for m, r in sorted(room.items()) if r > 0]
        heapq.heapify(heap)
        seq = len(members)
        # one owner's tasks in a row: the rotating heap hands their standbys to
        # different members, so a failed member's tasks spread over many
        # standby holders (and can all be promoted warm)
        for p in sorted(range(group.partitions), key=owner.__getitem__):
            o = owner[p]
            while len(chosen[p]) < counts[p]:
                pick = _pick(heap, o, chosen[p], hosts, racks, room)
                if pick is None:
                    freed = _swap(p, owner, chosen, hosts, room)
                    if freed is not None:
                        if room[freed] > 0:
                            seq += 1
                            heapq.heappush(heap, (-room[freed], seq, freed))
                        continue
                if pick is None:
                    relaxed = True
                    pick = _least_loaded(group, o, chosen[p], hosts, room)
                    if pick is None:
                        break
                chosen[p].append(pick)
                room[pick] = room.get(pick, 0) - 1
                if room[pick] > 0:
                    seq += 1
                    heapq.heappush(heap, (-room[pick], seq, pick))
        placed.append([tuple(sorted(c)) for c in chosen])
    return placed, relaxed


def _fits(m: int, owner: int, chosen: Sequence[int], hosts: Sequence[str]) -> bool:
    """May ``m`` hold a standby of a task owned by ``owner`` (sticky pass)?"""
    return hosts[m] != hosts[owner] and all(hosts[c] != hosts[m] for c in chosen)


def _pick(
    heap: list[tuple[int, int, int]],
    owner: int,
    chosen: Sequence[int],
    hosts: Sequence[str],
    racks: Sequence[str | None],
    room: Mapping[int, int],
) -> int | None:
    used_hosts = {hosts[owner], *(hosts[c] for c in chosen)}
    used_racks = {racks[owner], *(racks[c] for c in chosen)}
    skipped: list[tuple[int, int, int]] = []
    fallback: tuple[int, int, int] | None = None
    pick: tuple[int, int, int] | None = None
    while heap and len(skipped) < _SEARCH_DEPTH:
        entry = heapq.heappop(heap)
        m = entry[2]
        if room.get(m, 0) != -entry[0]:  # stale
            continue
        if hosts[m] in used_hosts or m in chosen:
            skipped.append(entry)
            continue
        if racks[m] not in used_racks:
            pick = entry
            break
        if fallback is None:
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
    chosen: list[list[int]],
    hosts: Sequence[str],
    room: dict[int, int],
) -> int | None:
    """Free a member for task ``p`` when only disallowed members have room.

    Finds a placed standby ``x`` of another task ``q`` that ``p`` may use, such
    that a member ``y`` with room may replace ``x`` on ``q``: then ``y`` takes
    ``q`` and ``x`` takes ``p``. Counts stay within the quotas. Returns ``y``.
    """
    spare = sorted(m for m, r in room.items() if r > 0)
    if not spare:
        return None
    blocked = {hosts[owner[p]], *(hosts[c] for c in chosen[p])}
    for q, holders in enumerate(chosen):
        if q == p:
            continue
        q_hosts = {hosts[owner[q]], *(hosts[c] for c in holders)}
        for i, x in enumerate(holders):
            if hosts[x] in blocked:
                continue
            for y in spare:
                if hosts[y] in q_hosts:
                    continue
                holders[i] = y
                chosen[p].append(x)
                room[y] -= 1
                return y
    return None


def _least_loaded(
    group: TaskGroup,
    owner: int,
    chosen: Sequence[int],
    hosts: Sequence[str],
    room: Mapping[int, int],
) -> int | None:
    """Quota exhausted for every allowed member: take the one with most room."""
    used_hosts = {hosts[owner], *(hosts[c] for c in chosen)}
    best: tuple[int, int] | None = None
    for m in group.eligible:
        if hosts[m] in used_hosts:
            continue
        key = (-room.get(m, 0), m)
        if best is None or key < best:
            best = key
    return best[1] if best is not None else None
