"""The assignment core: ``assign(state) -> Assignment``.

Pure: takes a :class:`GroupState`, returns an :class:`Assignment`; no I/O,
no clocks, no randomness. The steps:

1. group topics into tasks (:mod:`.grouping`);
2. fence previous task claims and read changelog lag (:mod:`.fencing`);
3. compute balanced, sticky active quotas per group and member (:mod:`.quotas`),
   where a task with a warm-up counts as its warm-up holder's;
4. place the target owners: keep, then warm, then the remaining room (:mod:`.actives`),
   then trade targets between racks to cut cross-rack traffic (:mod:`.racks`);
5. settle the actual owners: a task whose target is not caught up stays on a
   caught-up member and the target gets a warm-up replica (:mod:`.warmups`);
6. place standbys: racks first, then balanced and sticky, off the active's
   host and never on the warm-up's member (:mod:`.standbys`);
7. give every subscriber all partitions of the global changelogs;
8. withhold for one round the tasks a cooperative member still owns and
   another gets (:mod:`.cooperative`).
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from streamjoin.assignment.actives import place_actives
from streamjoin.assignment.cooperative import (
    check_one_owner,
    latest_generation,
    live_owners,
    protocol,
    withhold,
)
from streamjoin.assignment.errors import InvalidGroupStateError
from streamjoin.assignment.fencing import History, read_history
from streamjoin.assignment.grouping import build_groups
from streamjoin.assignment.model import (
    Assignment,
    GroupState,
    MemberAssignment,
    MemberState,
    Move,
    TaskGroup,
)
from streamjoin.assignment.moves import actual_moves
from streamjoin.assignment.quotas import Demand, balanced_quotas
from streamjoin.assignment.racks import (
    CrossRack,
    RackIndex,
    cross_rack,
    place_by_racks,
    rack_stats,
    task_costs,
)
from streamjoin.assignment.standbys import place_standbys
from streamjoin.assignment.warmups import settle

# Filling the member tables (issue 27 measured both fast paths on the assignor benchmark):
# a wide group's topics go into each member's table in one update (without that, the
# calls of scenario d, 500 topics per task, take 1.6x to 2.9x as long), and a group of
# up to _FEW_TOPICS topics goes topic by topic (updating those in bulk too makes
# scenario b's fresh call 12% slower).
_FEW_TOPICS = 4

__all__ = [
    "MemberTables",
    "Placement",
    "as_built",
    "assign",
    "check_handovers",
    "member_tables",
    "place",
]


def assign(state: GroupState) -> Assignment:
    """Assign every task of ``state`` to its members.

    The result does not depend on the order of ``state.members``.
    """
    placed = place(state)
    tables = member_tables(placed, tuple)
    check_handovers(placed, tables)
    return Assignment(
        members={
            member.id: MemberAssignment(
                actives=tables.actives[m], standbys=tables.standbys[m], warmups=tables.warmups[m]
            )
            for m, member in enumerate(placed.members)
        },
        generation=placed.generation,
        groups=placed.groups,
        moves=placed.moves,
        stats=placed.stats,
        withheld=tuple(sorted(placed.withheld)),
        cross_rack=tuple(
            (c.group, c.partition, placed.members[c.member].id, c.traffic, c.reason)
            for c in placed.cross_rack
        ),
    )


@dataclass(frozen=True)
class Placement:
    """Where every task goes, by member index: what :func:`assign` renders."""

    state: GroupState
    #: the members sorted by id (the indices below point into it)
    members: tuple[MemberState, ...]
    groups: tuple[TaskGroup, ...]
    #: per group, per partition: the active's member
    owners: list[list[int]]
    #: per group, per partition: the standbys' members (stateful groups)
    standbys: list[list[tuple[int, ...]]]
    #: per group, per partition: the warm-up's member, or -1
    warmups: list[list[int]]
    generation: int
    moves: tuple[Move, ...]
    stats: dict[str, object]
    #: tasks given to nobody this round: another member still owns them
    #: (cooperative groups only, see :mod:`.cooperative`)
    withheld: frozenset[tuple[int, int]] = frozenset()
    #: tasks whose active is off its partitions' racks, with why (:mod:`.racks`)
    cross_rack: tuple[CrossRack, ...] = ()


# long because: it runs the module docstring's steps in their order, each one call, with
# the glue that feeds one step's result to the next; split, the order would be scattered
def place(state: GroupState) -> Placement:
    """Compute the assignment of ``state`` by member index (see :func:`assign`)."""
    members = tuple(sorted(state.members, key=lambda m: m.id))
    if not members:
        raise InvalidGroupStateError("the group has no members: nothing to assign to")
    for a, b in itertools.pairwise(members):
        if a.id == b.id:
            raise InvalidGroupStateError(
                f"member id {a.id!r} appears twice; every member needs a unique id"
            )
    groups = build_groups(state, members)
    actual = read_history(members, groups)
    # the target is sticky to warm-ups: a task with one counts as its holder's
    sticky = tuple(list(o) for o in actual.owner)
    for (gi, p), holder in actual.warmup_holder.items():
        sticky[gi][p] = holder
    history = dataclasses.replace(actual, owner=sticky)
    capacities = [m.capacity for m in members]
    lag = state.acceptable_recovery_lag

    previous_counts: list[dict[int, int]] = []
    for prev in history.owner:
        counts = Counter(prev)  # counted in C, in order of first appearance
        counts.pop(-1, None)  # (no previous owner)
        previous_counts.append(counts)
    demands = [
        Demand(g.partitions, g.eligible, previous_counts[g.index], _warm_orphans(g, history, lag))
        for g in groups
    ]
    active_quotas = balanced_quotas(demands, capacities)
    rack_index = RackIndex.of(members)
    rack_costs = [task_costs(state, g, rack_index) for g in groups]
    targets = place_actives(
        groups,
        active_quotas.quotas,
        history,
        lag,
        previous_counts,
        rack_costs if state.rack_traffic_cost > 0 else None,
    )
    rack_moved = place_by_racks(state, groups, targets, history, members, lag, rack_costs)
    settled = settle(groups, targets, actual, lag, state.max_warmup_replicas)
    owners = settled.owners
    standbys, standby_relaxed = place_standbys(
        groups, owners, settled.warmups, actual, members, state.standby_replicas, capacities
    )
    # tasks a member keeps at best: min(held before, quota), summed in C per group
    minimum = history.owned - sum(
        sum(map(min, counts.values(), map(quota.get, counts, itertools.repeat(0))))
        for counts, quota in zip(previous_counts, active_quotas.quotas, strict=True)
    )
    rebalancing = protocol(members)
    last = state.last_assignment
    live = live_owners(members, groups, last) if rebalancing != "eager" else {}
    withheld = withhold(owners, live)
    warmups = settled.warmups
    if withheld:
        # the new owner restores a withheld task meanwhile: it takes it warm next round
        warmups = [list(w) for w in warmups]
        for gi, p in withheld:
            target = owners[gi][p]
            if groups[gi].stateful and warmups[gi][p] < 0 and target not in standbys[gi][p]:
                warmups[gi][p] = target
    moves = actual_moves(groups, owners, actual, members, lag, rack_moved)
    generation = (latest_generation(members, last) or 0) + 1
    stats = _stats(groups, owners, standbys, members, actual, moves)
    stats.update(_target_stats(groups, targets, history, members, minimum))
    stats.update(
        warmups=sum(len(w) - w.count(-1) for w in warmups),
        cold_activations=settled.cold,
        warm_activations=settled.warm,
        held_back=settled.held_back,
        relaxed_balance=active_quotas.relaxed or standby_relaxed,
        protocol=rebalancing,
        withheld=len(withheld),
    )
    crossing = cross_rack(state, rack_costs, owners, targets, history, members)
    stats.update(rack_stats(rack_costs, targets, crossing))
    return Placement(
        state=state,
        members=members,
        groups=groups,
        owners=owners,
        standbys=standbys,
        warmups=warmups,
        generation=generation,
        moves=tuple(sorted(moves, key=lambda mv: (mv.group, mv.partition))),
        stats=stats,
        withheld=frozenset(withheld),
        cross_rack=tuple(crossing),
    )


def _warm_orphans(group: TaskGroup, history: History, acceptable_lag: int) -> dict[int, int]:
    """Member -> tasks of ``group`` without an owner that it could take over warm."""
    preferred: dict[int, int] = {}
    if not group.stateful or -1 not in history.owner[group.index]:
        return preferred
    reported = history.warm.reported
    for p, owner in enumerate(history.owner[group.index]):
        if owner >= 0:
            continue
        ranked = history.warm.get((group.index, p)) if reported((group.index, p)) else None
        if ranked:
            lag, m = ranked[0]
            if lag <= acceptable_lag:
                preferred[m] = preferred.get(m, 0) + 1
            continue
        holders = history.standby_holders.get((group.index, p), ())
        if holders:
            preferred[holders[0]] = preferred.get(holders[0], 0) + 1
    return preferred


Frozen = TypeVar("Frozen", tuple[int, ...], list[int])


@dataclass(frozen=True)
class MemberTables(Generic[Frozen]):
    """Per member index: topic -> partitions, topics in sorted order."""

    actives: list[dict[str, Frozen]]
    standbys: list[dict[str, Frozen]]
    warmups: list[dict[str, Frozen]]


def member_tables(placed: Placement, make: Callable[[list[int]], Frozen]) -> MemberTables[Frozen]:
    """Every member's partitions per topic, topics in sorted order.

    ``make`` builds the value of a member's partitions in a group (a new list,
    in order), which all of the group's topics then share; members reading a
    global changelog get the value of one list. ``tuple`` freezes them;
    :func:`as_built` keeps the lists, which the caller must then treat as
    read-only (``assign_document`` hands them to JSON).
    """
    state, members = placed.state, placed.members
    actives: list[dict[str, Frozen]] = [{} for _ in members]
    backups: list[dict[str, Frozen]] = [{} for _ in members]
    warming: list[dict[str, Frozen]] = [{} for _ in members]
    # (topic, the tables it goes to, member -> its partitions), then filled in topic order
    fills: list[tuple[str, list[dict[str, Frozen]], dict[int, list[int]]]] = []
    for group, owner, spare, warmup in zip(
        placed.groups, placed.owners, placed.standbys, placed.warmups, strict=True
    ):
        mine: dict[int, list[int]] = {}
        for p, m in enumerate(owner):
            mine.setdefault(m, []).append(p)
        if placed.withheld:
            gone = {p for gi, p in placed.withheld if gi == group.index}
            kept = {m: [p for p in parts if p not in gone] for m, parts in mine.items()}
            mine = {m: parts for m, parts in kept.items() if parts}
        fills.extend((topic, actives, mine) for topic in group.topics)
        if group.stateful:
            held: dict[int, list[int]] = {}
            for p, holders in enumerate(spare):
                for m in holders:
                    held.setdefault(m, []).append(p)
            fills.extend((topic, backups, held) for topic in group.changelogs)
            if warmup.count(-1) != len(warmup):  # (most groups have none)
                restoring: dict[int, list[int]] = {}
                for p, m in enumerate(warmup):
                    if m >= 0:
                        restoring.setdefault(m, []).append(p)
                fills.extend((topic, warming, restoring) for topic in group.changelogs)
    for topic in state.global_changelogs:
        everything = list(range(state.topics[topic]))
        readers = {m: everything for m, member in enumerate(members) if topic in member.topics}
        fills.append((topic, actives, readers))
    fills.sort(key=lambda fill: fill[0])  # stable: a topic is in each table at most once
    # consecutive topics of one group and table (the same table and member -> partitions
    # objects) go in together: one update per member for a wide group
    for _, run in itertools.groupby(fills, key=lambda f: (id(f[1]), id(f[2]))):
        listed = list(run)
        topics, tables, by_member = [fill[0] for fill in listed], listed[0][1], listed[0][2]
        if len(topics) > _FEW_TOPICS:  # wide groups: the topics in bulk
            for m, parts in by_member.items():
                value = make(parts)
                tables[m].update(dict.fromkeys(topics, value))
            continue
        for m, parts in by_member.items():
            table = tables[m]
            value = make(parts)
            for topic in topics:
                table[topic] = value
    return MemberTables(actives, backups, warming)


def check_handovers(placed: Placement, tables: MemberTables[Frozen]) -> None:
    """The leader's last check before it answers: unless the group is eager, no
    partition in *tables* goes to a member while a cooperative member still
    owns it (:func:`.cooperative.check_one_owner`)."""
    if placed.stats["protocol"] != "eager":
        check_one_owner(
            placed.members,
            {member.id: tables.actives[m] for m, member in enumerate(placed.members)},
            placed.state.global_changelogs,
            placed.state.last_assignment,
        )


def as_built(parts: list[int]) -> list[int]:
    """The ``make`` of :func:`member_tables` that keeps its lists."""
    return parts


def _group_spread(counts: Counter[int], group: TaskGroup) -> int:
    """max - min tasks per eligible member (members without any count 0)."""
    if not counts:
        return 0
    low = min(counts.values()) if len(counts) >= len(group.eligible) else 0
    return max(counts.values()) - low


def _total_spread(counts: Counter[int], members: int) -> int:
    """max - min over all ``members`` (members without any count 0)."""
    if not counts:
        return 0
    low = min(counts.values()) if len(counts) >= members else 0
    return max(counts.values()) - low


def _stats(
    groups: Sequence[TaskGroup],
    owners: Sequence[Sequence[int]],
    standbys: Sequence[Sequence[tuple[int, ...]]],
    members: Sequence[MemberState],
    history: History,
    moves: Sequence[Move],
) -> dict[str, object]:
    n = len(members)
    # totals counted in one pass each (adding Counters is a Python loop)
    total = Counter(itertools.chain.from_iterable(owners))
    held = [spare for group, spare in zip(groups, standbys, strict=True) if group.stateful]
    standby_total = Counter(itertools.chain.from_iterable(itertools.chain.from_iterable(held)))
    group_spread = 0
    standby_group_spread = 0
    for group, owner, spare in zip(groups, owners, standbys, strict=True):
        group_spread = max(group_spread, _group_spread(Counter(owner), group))
        if group.stateful:
            s_counts = Counter(itertools.chain.from_iterable(spare))
            standby_group_spread = max(standby_group_spread, _group_spread(s_counts, group))
    tasks = sum(g.partitions for g in groups)
    kept = sum(
        sum(map(operator.eq, new, prev)) for new, prev in zip(owners, history.owner, strict=True)
    )
    return {
        "members": n,
        "groups": len(groups),
        "tasks": tasks,
        "stateful_tasks": sum(g.partitions for g in groups if g.stateful),
        "active_spread": _total_spread(total, n),
        "active_spread_per_group": group_spread,
        "standby_spread": _total_spread(standby_total, n),
        "standby_spread_per_group": standby_group_spread,
        "standbys": sum(standby_total.values()),
        "previously_owned": history.owned,
        "kept": kept,
        "moved": history.owned - kept,
        "warm_promotions": sum(1 for mv in moves if mv.warm),
        "contested": len(history.contested),
        "fenced_claims": history.fenced,
    }


def _target_stats(
    groups: Sequence[TaskGroup],
    targets: Sequence[Sequence[int]],
    history: History,
    members: Sequence[MemberState],
    minimum: int,
) -> dict[str, object]:
    """Balance and moves of the target (previous owners: warm-up holders count as owners)."""
    total = Counter(itertools.chain.from_iterable(targets))
    group_spread = 0
    for group, target in zip(groups, targets, strict=True):
        group_spread = max(group_spread, _group_spread(Counter(target), group))
    kept = sum(
        sum(map(operator.eq, new, prev)) for new, prev in zip(targets, history.owner, strict=True)
    )
    return {
        "target_active_spread": _total_spread(total, len(members)),
        "target_active_spread_per_group": group_spread,
        "target_moved": history.owned - kept,
        "minimum_moves": minimum,
    }
