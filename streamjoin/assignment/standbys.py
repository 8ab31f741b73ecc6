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

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import repeat

from streamjoin.assignment.fencing import History, TaskRows
from streamjoin.assignment.model import MemberState, TaskGroup
from streamjoin.assignment.quotas import Demand, balanced_quotas
from streamjoin.assignment.standby_rooms import Layout, Rooms

__all__ = ["place_standbys"]

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
    prepared, layouts = _prepare(groups, owners, warmups, history, hosts, racks, replicas)
    demands = [
        Demand(0, group.eligible, {})
        if found is None
        else Demand(sum(found.counts), group.eligible, found.previous)
        for group, found in zip(groups, prepared, strict=True)
    ]
    result = balanced_quotas(demands, capacities)
    relaxed = result.relaxed
    load = [0] * len(members)  # standbys per member in the groups placed so far

    placed: list[list[tuple[int, ...]]] = []
    for group, owner, warmup, found, quota in zip(
        groups, owners, warmups, prepared, result.quotas, strict=True
    ):
        if found is None or not any(found.counts):
            placed.append([() for _ in range(group.partitions)])
            continue
        rooms = Rooms(quota, layouts[group.eligible], load, group.index)
        chosen: list[list[int]] = [[] for _ in range(group.partitions)]
        _keep_sticky(found, owner, racks, rooms, chosen)
        relaxed = _fill(found, owner, warmup, hosts, racks, rooms, chosen) or relaxed
        if max(map(len, chosen)) > 1:
            for c in chosen:
                c.sort()
        placed.append(list(map(tuple, chosen)))
        for m, added in Counter(itertools.chain.from_iterable(chosen)).items():
            load[m] += added
    return placed, relaxed


def _prepare(
    groups: Sequence[TaskGroup],
    owners: Sequence[Sequence[int]],
    warmups: Sequence[Sequence[int]],
    history: History,
    hosts: Sequence[str],
    racks: Sequence[str | None],
    replicas: int,
) -> tuple[list[_Tasks | None], dict[tuple[int, ...], Layout]]:
    """Per group, its tasks' standby needs (None: it gets no standbys), and the
    layouts of the members eligible for each (groups with the same members share one)."""
    holders = history.standby_holders if history.standby_holders else None
    formers = history.former if history.former else None
    prepared: list[_Tasks | None] = []
    layouts: dict[tuple[int, ...], Layout] = {}
    for group, owner, warmup in zip(groups, owners, warmups, strict=True):
        if not group.stateful or replicas <= 0 or len(group.eligible) < 2:
            prepared.append(None)
            continue
        layout = layouts.get(group.eligible)
        if layout is None:
            layout = layouts[group.eligible] = Layout(group.eligible, hosts, racks, replicas)
        prepared.append(_Tasks(group.index, owner, warmup, layout, history, holders, formers))
    return prepared, layouts


def _keep_sticky(
    found: _Tasks,
    owner: Sequence[int],
    racks: Sequence[str | None],
    rooms: Rooms,
    chosen: list[list[int]],
) -> None:
    """Sticky: keep the standbys members hold (or have state for), within their room:
    a fresh rack first, then the most caught up."""
    counts, span, room = found.counts, found.span, rooms.room
    for p, candidates in found.sticky:
        if len(candidates) > 1:
            rooms.keep(candidates, owner[p], chosen[p], counts[p], span[p])
            continue
        m, o, count = candidates[0], owner[p], counts[p]  # the common case, as in keep
        if count > 0 and room.get(m, 0) > 0 and (racks[m] != racks[o] or count > span[p] - 1):
            chosen[p].append(m)
            rooms.take(m)


def _fill(
    found: _Tasks,
    owner: Sequence[int],
    warmup: Sequence[int],
    hosts: Sequence[str],
    racks: Sequence[str | None],
    rooms: Rooms,
    chosen: list[list[int]],
) -> bool:
    """Fill every task's remaining standbys: racks the task still needs first (over
    quota if need be), then the most remaining room (a task full now stays full).

    Returns whether a standby had to go over its member's quota (relaxed).
    """
    counts, span, room, take = found.counts, found.span, rooms.room, rooms.take
    relaxed = False
    todo = [p for p, c in enumerate(chosen) if len(c) < counts[p]]
    todo.sort(key=lambda p: (-room.get(owner[p], 0), owner[p]))
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
    return relaxed


class _Tasks:
    """One group's tasks: per task the standbys it gets, the racks its copies
    span, and the members with state for it (for the quotas, the sticky pass)."""

    def __init__(
        self,
        gi: int,
        owner: Sequence[int],
        warmup: Sequence[int],
        layout: Layout,
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
