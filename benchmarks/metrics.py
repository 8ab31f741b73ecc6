"""Quality figures of an assignment, computed from the outputs alone.

The same code judges streamjoin's and faust's results: it knows nothing of either
assignor, only the group-state document (what the tasks are, who may own them) and the
output format ``{"assignment": {member: {"actives": {...}, "standbys": {...}}}}``.

Tasks
    Topics with the same partition count and the same subscribers form a co-partitioned
    group, and declared ``copartition`` lists merge groups (DESIGN.md's rule, also faust's
    grouping).  Global-table changelogs are left out: every member holds all of them.
    A task is one partition number of one group; it is stateful when the group contains a
    changelog topic.  A task's active owner is the member holding most of its
    topic-partitions (ties: smallest member id).

Spread
    ``max − min`` of active task counts over all members (total) and, per group, over the
    members subscribed to the whole group; the table shows the largest per-group value.
    When capacities differ, counts are divided by capacity first.  Standby spread is the
    same on standby task counts of stateful groups.

Moves and the minimum
    A task *moved* when it had a previous owner and its owner changed (tasks of a member
    that left move necessarily and are counted too).  The minimum is the smallest number
    of moves of ANY assignment that is balanced in the contract's sense (in every group
    each member gets ``f_g = ⌊N_g/M⌋`` or ``f_g + 1`` tasks, and totals differ by at most
    one).  Member ``m`` holding ``p`` previous tasks of group ``g`` keeps at most
    ``min(p, q)`` of them for a quota ``q``; so the most that can stay is

        keep = Σ_{m,g} min(p_{m,g}, f_g) + G,

    where ``G`` is the largest number of (member, group) pairs with ``p_{m,g} > f_g`` that
    receive one of the ``r_g = N_g mod M`` extra slots of group ``g`` such that no member
    gets more than ``k + 1`` extras and at most ``R − kM`` members get ``k + 1`` (``R =
    Σ r_g``, ``k = ⌊R/M⌋``: totals balanced).  ``G`` is a maximum flow (source → group
    ``r_g`` → member 1 → sink ``k`` / → overflow 1 → sink ``R − kM``), computed exactly.
    The minimum is then (tasks with a previous owner) − keep.  The figure is *exact* when
    the remaining extra slots can be dealt out to complete a balanced assignment; the
    code builds such a completion and says ``exact`` only when it succeeds.  When members
    are not all subscribed to every group or capacities differ, the flow does not apply
    and the larger of two plain lower bounds is reported (per group:
    ``Σ min(p, f_g) + min(r_g, #{m: p > f_g})``; in total: ``Σ_m min(P_m, quota_m)``),
    marked as a bound — unless the judged output is itself balanced and moves exactly
    that many tasks, which proves the bound is reached.

Warm and cold
    Of the moved stateful tasks, *warm* ones land on a member that held a standby of the
    task before; *warm possible* counts moved stateful tasks for which some member that is
    still in the group held a standby; *cold* = moved stateful − warm (state restored
    from the changelog from scratch), ``cold_with_standby`` = cold although a surviving
    standby existed.

Violations (each counted, never hidden)
    ``split_tasks``: co-partitioning broken (a task's partitions on several members);
    ``missing_tps`` / ``duplicate_tps``: topic-partitions with no / several active owners;
    ``unsubscribed``: a task on a member not subscribed to all its topics;
    ``unknown_tps``: topic-partitions not in the document;
    ``standby_on_active`` / ``standby_same_host``: a standby on its active's member/host;
    ``standby_missing`` / ``standby_excess``: versus ``min(standby_replicas, hosts − 1)``.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Output = Mapping[str, Any]


@dataclass(frozen=True)
class Group:
    """One co-partitioned group of topics."""

    topics: tuple[str, ...]
    partitions: int
    stateful: bool
    eligible: tuple[str, ...]

    @property
    def name(self) -> str:
        """Readable name: the group's topics, shortened when there are many."""
        if len(self.topics) <= 3:
            return "+".join(self.topics)
        return f"{self.topics[0]}+…({len(self.topics)} topics)"


@dataclass(frozen=True)
class Layout:
    """What a document means for the metrics: members and task groups."""

    members: tuple[str, ...]
    capacity: Mapping[str, float]
    host: Mapping[str, str]
    rack: Mapping[str, str | None]
    groups: tuple[Group, ...]
    group_of_topic: Mapping[str, int]
    global_topics: frozenset[str]
    standby_replicas: int

    @property
    def tasks(self) -> int:
        """Number of tasks."""
        return sum(group.partitions for group in self.groups)


def layout(document: Mapping[str, Any]) -> Layout:
    """Derive members and co-partitioned groups from a group-state document."""
    topics: dict[str, int] = {str(t): int(n) for t, n in document["topics"].items()}
    global_topics = frozenset(document.get("global_changelogs", []))
    changelogs = set(document.get("changelogs", []))
    members = [str(m["id"]) for m in document["members"]]
    subscribers: dict[str, list[str]] = defaultdict(list)
    for member in document["members"]:
        for topic in member["topics"]:
            subscribers[str(topic)].append(str(member["id"]))
    parent: dict[str, str] = {}

    def find(topic: str) -> str:
        root = topic
        while parent[root] != root:
            root = parent[root]
        while parent[topic] != root:
            parent[topic], topic = root, parent[topic]
        return root

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            low, high = sorted((ra, rb))
            parent[high] = low

    by_key: dict[tuple[int, tuple[str, ...]], list[str]] = defaultdict(list)
    for topic in sorted(topics):
        if topic in global_topics or not subscribers.get(topic):
            continue
        parent[topic] = topic
        by_key[(topics[topic], tuple(sorted(set(subscribers[topic]))))].append(topic)
    for same in by_key.values():
        for topic in same[1:]:
            union(same[0], topic)
    for declared in document.get("copartition", []):
        present = [t for t in declared if t in parent]
        for topic in present[1:]:
            union(present[0], topic)
    members_of: dict[str, list[str]] = defaultdict(list)
    for topic in sorted(parent):
        members_of[find(topic)].append(topic)
    subscribed = {m: set(s) for m, s in _member_topics(document).items()}
    groups: list[Group] = []
    group_of_topic: dict[str, int] = {}
    for root in sorted(members_of):
        group_topics = tuple(members_of[root])
        needed = set(group_topics)
        eligible = tuple(m for m in sorted(members) if needed <= subscribed[m])
        for topic in group_topics:
            group_of_topic[topic] = len(groups)
        groups.append(
            Group(
                topics=group_topics,
                partitions=max(topics[t] for t in group_topics),
                stateful=any(t in changelogs for t in group_topics),
                eligible=eligible,
            )
        )
    return Layout(
        members=tuple(sorted(members)),
        capacity={str(m["id"]): float(m.get("capacity", 1) or 1) for m in document["members"]},
        host={str(m["id"]): str(m.get("host") or m["id"]) for m in document["members"]},
        rack={str(m["id"]): m.get("rack") for m in document["members"]},
        groups=tuple(groups),
        group_of_topic=group_of_topic,
        global_topics=global_topics,
        standby_replicas=int(document.get("standby_replicas", 0)),
    )


def _member_topics(document: Mapping[str, Any]) -> dict[str, Iterable[str]]:
    # Members share subscription lists in big documents: convert each list once.
    cache: dict[int, frozenset[str]] = {}
    result: dict[str, Iterable[str]] = {}
    for member in document["members"]:
        topics = member["topics"]
        key = id(topics)
        if key not in cache:
            cache[key] = frozenset(str(t) for t in topics)
        result[str(member["id"])] = cache[key]
    return result


@dataclass
class Placement:
    """Who holds each task: ``owner[g][p]`` (or None) and ``standbys[g][p]``."""

    owner: list[list[str | None]]
    standbys: list[list[tuple[str, ...]]]
    violations: Counter[str]


def placement(lay: Layout, output: Output) -> Placement:
    """Resolve an output's topic-partitions into task owners and standby holders."""
    violations: Counter[str] = Counter()
    tp_owner: dict[str, list[str | None]] = {}
    standby_sets: list[list[set[str]]] = [
        [set() for _ in range(g.partitions)] for g in lay.groups
    ]
    assignment: Mapping[str, Any] = output["assignment"]
    for member in sorted(assignment):
        entry = assignment[member]
        for topic, parts in sorted(entry.get("actives", {}).items()):
            if topic in lay.global_topics:
                continue
            index = lay.group_of_topic.get(topic)
            if index is None:
                violations["unknown_tps"] += len(parts)
                continue
            slots = tp_owner.setdefault(topic, [None] * lay.groups[index].partitions)
            for p in parts:
                if not 0 <= int(p) < len(slots):
                    violations["unknown_tps"] += 1
                elif slots[int(p)] is not None:
                    violations["duplicate_tps"] += 1
                else:
                    slots[int(p)] = member
        for topic, parts in sorted(entry.get("standbys", {}).items()):
            if topic in lay.global_topics:
                continue
            index = lay.group_of_topic.get(topic)
            if index is None:
                violations["unknown_tps"] += len(parts)
                continue
            for p in parts:
                if 0 <= int(p) < lay.groups[index].partitions:
                    standby_sets[index][int(p)].add(member)
                else:
                    violations["unknown_tps"] += 1
    owners: list[list[str | None]] = []
    for group in lay.groups:
        columns = [tp_owner.get(topic) for topic in group.topics]
        row: list[str | None] = []
        for p in range(group.partitions):
            held: list[str] = [
                owner for column in columns if column is not None and (owner := column[p])
            ]
            violations["missing_tps"] += len(group.topics) - len(held)
            if not held:
                row.append(None)
                continue
            counts = Counter(held)
            if len(counts) > 1:
                violations["split_tasks"] += 1
            best = max(counts.values())
            row.append(min(m for m, n in counts.items() if n == best))
        owners.append(row)
    return Placement(
        owner=owners,
        standbys=[[tuple(sorted(s)) for s in rows] for rows in standby_sets],
        violations=violations,
    )


def spread(counts: Mapping[str, int], members: Sequence[str], capacity: Mapping[str, float]
           ) -> float:
    """``max − min`` of per-member counts (capacity-weighted when capacities differ)."""
    if not members:
        return 0
    caps = {capacity.get(m, 1.0) for m in members}
    if len(caps) == 1:
        values: list[float] = [counts.get(m, 0) for m in members]
        return max(values) - min(values)
    weighted = [counts.get(m, 0) / capacity.get(m, 1.0) for m in members]
    return round(max(weighted) - min(weighted), 3)


def evaluate(
    document: Mapping[str, Any], output: Output, previous: Output | None = None,
    *, joiner: str | None = None,
) -> dict[str, Any]:
    """All figures for ``output`` of ``document`` (and the rebalance ones vs ``previous``)."""
    lay = layout(document)
    now = placement(lay, output)
    violations = now.violations
    totals: Counter[str] = Counter()
    standby_totals: Counter[str] = Counter()
    group_spread = 0.0
    standby_group_spread = 0.0
    members = set(lay.members)
    for index, group in enumerate(lay.groups):
        counts: Counter[str] = Counter()
        standby_counts: Counter[str] = Counter()
        hosts = {lay.host[m] for m in group.eligible}
        racks = {lay.rack[m] for m in group.eligible}
        expected = min(lay.standby_replicas, len(hosts) - 1) if group.stateful else 0
        eligible = set(group.eligible)
        for p in range(group.partitions):
            owner = now.owner[index][p]
            if owner is not None:
                counts[owner] += 1
                if owner not in eligible:
                    violations["unsubscribed"] += 1
            holders = now.standbys[index][p]
            if not group.stateful:
                violations["standby_stateless"] += len(holders)
                continue
            for holder in holders:
                standby_counts[holder] += 1
                if holder == owner:
                    violations["standby_on_active"] += 1
                elif owner is not None and lay.host.get(holder) == lay.host.get(owner):
                    violations["standby_same_host"] += 1
                elif (
                    owner is not None
                    and len(racks) > 1
                    and lay.rack.get(holder) == lay.rack.get(owner)
                ):
                    violations["standby_same_rack"] += 1
                if holder not in members:
                    violations["unknown_member"] += 1
            violations["standby_missing"] += max(0, expected - len(holders))
            violations["standby_excess"] += max(0, len(holders) - expected)
        totals.update(counts)
        standby_totals.update(standby_counts)
        group_spread = max(group_spread, spread(counts, group.eligible, lay.capacity))
        if group.stateful:
            standby_group_spread = max(
                standby_group_spread, spread(standby_counts, group.eligible, lay.capacity)
            )
    has_standbys = any(g.stateful for g in lay.groups) and lay.standby_replicas > 0
    active_values = [totals.get(m, 0) for m in lay.members]
    standby_values = [standby_totals.get(m, 0) for m in lay.members]
    figures: dict[str, Any] = {
        "members": len(lay.members),
        "groups": len(lay.groups),
        "tasks": lay.tasks,
        "stateful_tasks": sum(g.partitions for g in lay.groups if g.stateful),
        "active_min": min(active_values, default=0),
        "active_max": max(active_values, default=0),
        "spread_total": spread(totals, lay.members, lay.capacity),
        "spread_group_max": group_spread,
        "standby_spread_total": (
            spread(standby_totals, lay.members, lay.capacity) if has_standbys else None
        ),
        "standby_spread_group_max": standby_group_spread if has_standbys else None,
        "standby_min": min(standby_values, default=0),
        "standby_max": max(standby_values, default=0),
        "violations": {k: v for k, v in sorted(violations.items()) if v},
    }
    if previous is not None:
        figures.update(_rebalance_figures(lay, now, placement(lay, previous), joiner))
        balanced = figures["spread_total"] <= 1 and figures["spread_group_max"] <= 1
        owned = not any(violations[k] for k in OWNERSHIP_VIOLATIONS)
        if balanced and owned and figures["moved"] == figures["min_moves"]:
            # The output itself is a balanced assignment reaching the lower bound.
            figures["min_moves_exact"] = True
    return figures


#: Violations that make an output unusable as a witness of a balanced assignment.
OWNERSHIP_VIOLATIONS = ("split_tasks", "missing_tps", "duplicate_tps", "unsubscribed",
                        "unknown_tps")


def _rebalance_figures(
    lay: Layout, now: Placement, before: Placement, joiner: str | None
) -> dict[str, Any]:
    members = set(lay.members)
    moved = forced = warm = warm_possible = cold = cold_with_standby = cold_to_joiner = 0
    for index, group in enumerate(lay.groups):
        for p in range(group.partitions):
            old = before.owner[index][p]
            new = now.owner[index][p]
            if old is None or new == old:
                continue
            moved += 1
            if old not in members:
                forced += 1
            if not group.stateful:
                continue
            standby_holders = before.standbys[index][p]
            surviving = [h for h in standby_holders if h in members and h != old]
            if surviving:
                warm_possible += 1
            if new in standby_holders:
                warm += 1
            else:
                cold += 1
                if surviving:
                    cold_with_standby += 1
                if new is not None and new == joiner:
                    cold_to_joiner += 1
    minimum, exact = minimum_moves(lay, before)
    figures: dict[str, Any] = {
        "warm_reachable": warm_reachable(lay, before),
        "moved": moved,
        "forced_moves": forced,
        "min_moves": minimum,
        "min_moves_exact": exact,
        "warm": warm,
        "warm_possible": warm_possible,
        "cold": cold,
        "cold_with_standby": cold_with_standby,
        "cold_to_joiner": cold_to_joiner,
    }
    if joiner is not None:
        total = sum(1 for rows in now.owner for owner in rows if owner == joiner)
        share = lay.tasks / max(1, len(lay.members))
        figures["joiner_tasks"] = total
        figures["joiner_fair"] = [int(share), -int(-share // 1)]
    return figures


def warm_reachable(lay: Layout, before: Placement) -> int | None:
    """At most how many orphaned stateful tasks can go warm at the minimum moves.

    Orphans are stateful tasks whose previous owner left (or may no longer own them).
    At the minimum number of moves the survivors keep their tasks, so a surviving
    standby holder ``h`` can take orphans only up to its quota: ``⌊N/M⌋ − P_h`` in
    total, one more for at most ``N mod M`` members (minus those already there), and
    ``⌈N_g/M⌉ − p_{h,g}`` per group.  A max flow (orphan → its standby holders'
    per-group slots → holder → sink / overflow) gives the number.  The per-group limit
    on how many members reach ``⌈N_g/M⌉`` is relaxed, so it is an upper bound.  None
    when there are no stateful orphans, or members differ in capacity or subscriptions.
    """
    members = set(lay.members)
    count = len(members)
    uniform = len({lay.capacity[m] for m in lay.members}) == 1 and all(
        len(g.eligible) == count for g in lay.groups
    )
    if not uniform or not count:
        return None
    orphans: list[tuple[int, list[str]]] = []
    totals: Counter[str] = Counter()
    per_group: Counter[tuple[int, str]] = Counter()
    for index, group in enumerate(lay.groups):
        for p in range(group.partitions):
            owner = before.owner[index][p]
            if owner in members:
                totals[owner] += 1
                per_group[(index, owner)] += 1
            elif owner is not None and group.stateful:
                holders = [h for h in before.standbys[index][p] if h in members]
                orphans.append((index, holders))
    if not orphans:
        return None
    floor_, extra = divmod(lay.tasks, count)
    overflow = max(0, extra - sum(1 for m in members if totals[m] > floor_))
    slots: dict[tuple[int, str], int] = {}
    holders_seen: dict[str, int] = {}
    edges: list[tuple[int, int]] = []
    for number, (index, holders) in enumerate(orphans):
        for h in holders:
            key = (index, h)
            if key not in slots:
                slots[key] = len(slots)
            holders_seen.setdefault(h, len(holders_seen))
            edges.append((number, slots[key]))
    first_slot = 3 + len(orphans)
    first_holder = first_slot + len(slots)
    graph = _FlowGraph(first_holder + len(holders_seen))
    for number in range(len(orphans)):
        graph._edge(0, 3 + number, 1)
    for number, slot in edges:
        graph._edge(3 + number, first_slot + slot, 1)
    for (index, h), slot in slots.items():
        ceiling = -(-lay.groups[index].partitions // count)
        room = ceiling - per_group[(index, h)]
        if room > 0:
            graph._edge(first_slot + slot, first_holder + holders_seen[h], room)
    for h, node in holders_seen.items():
        if totals[h] < floor_:
            graph._edge(first_holder + node, 1, floor_ - totals[h])
        if overflow and totals[h] <= floor_:
            graph._edge(first_holder + node, 2, 1)
    if overflow:
        graph._edge(2, 1, overflow)
    return graph.solve()


def minimum_moves(lay: Layout, before: Placement) -> tuple[int, bool]:
    """Fewest moves of any balanced assignment from ``before``; (value, exact?).

    See the module docstring for the derivation.
    """
    members = lay.members
    count = len(members)
    if not count:
        return 0, True
    had_owner = 0
    previous: list[Counter[str]] = []
    for index, group in enumerate(lay.groups):
        eligible = set(group.eligible)
        held: Counter[str] = Counter()
        for owner in before.owner[index]:
            if owner is None:
                continue
            had_owner += 1
            if owner in eligible:
                held[owner] += 1
        previous.append(held)
    uniform = len({lay.capacity[m] for m in members}) == 1 and all(
        len(g.eligible) == count for g in lay.groups
    )
    if uniform:
        keep, exact = _uniform_keep(lay, previous)
        return had_owner - keep, exact
    return had_owner - _bound_keep(lay, previous), False


def _uniform_keep(lay: Layout, previous: list[Counter[str]]) -> tuple[int, bool]:
    members = lay.members
    count = len(members)
    position = {m: i for i, m in enumerate(members)}
    base = 0
    extras: list[int] = []
    gain_edges: list[list[int]] = []
    for group, held in zip(lay.groups, previous, strict=True):
        floor_, extra = divmod(group.partitions, count)
        extras.append(extra)
        base += sum(min(n, floor_) for n in held.values())
        gain_edges.append(
            sorted(position[m] for m, n in held.items() if n > floor_) if extra else []
        )
    total_extra = sum(extras)
    per_member, overflow = divmod(total_extra, count)
    flow = _ExtrasFlow(extras, count, gain_edges, per_member, overflow)
    gained = flow.solve()
    if flow.complete():
        return base + gained, True
    if len(extras) * count * max(1, total_extra) <= SMALL_EXACT_LIMIT:
        return base + _cheapest_completion(extras, count, gain_edges, per_member, overflow), True
    return base + gained, False


#: Instances up to this size (groups × members × extra slots) whose greedy completion
#: fails are solved exactly by a min-cost flow over all (group, member) pairs.
SMALL_EXACT_LIMIT = 2_000_000


def _cheapest_completion(
    extras: list[int], members: int, gain_edges: list[list[int]], per_member: int,
    overflow: int,
) -> int:
    """Most gain edges in a complete balanced dealing of the extra slots (min-cost flow).

    Successive shortest paths with Bellman-Ford; a gain edge costs −1, any other pair 0.
    Only used on small instances.
    """
    groups = len(extras)
    first_member = 3 + groups
    size = first_member + members
    head: list[list[int]] = [[] for _ in range(size)]
    to: list[int] = []
    cap: list[int] = []
    cost: list[int] = []

    def edge(a: int, b: int, capacity: int, price: int) -> None:
        for node, other, c, w in ((a, b, capacity, price), (b, a, 0, -price)):
            head[node].append(len(to))
            to.append(other)
            cap.append(c)
            cost.append(w)

    for g, extra in enumerate(extras):
        if not extra:
            continue
        edge(0, 3 + g, extra, 0)
        gains = set(gain_edges[g])
        for m in range(members):
            edge(3 + g, first_member + m, 1, -1 if m in gains else 0)
    for m in range(members):
        if per_member:
            edge(first_member + m, 1, per_member, 0)
        if overflow:
            edge(first_member + m, 2, 1, 0)
    if overflow:
        edge(2, 1, overflow, 0)
    total_cost = 0
    while True:
        dist = [1 << 60] * size
        via = [-1] * size
        dist[0] = 0
        for _ in range(size):
            changed = False
            for node in range(size):
                if dist[node] == 1 << 60:
                    continue
                for e in head[node]:
                    if cap[e] and dist[node] + cost[e] < dist[to[e]]:
                        dist[to[e]] = dist[node] + cost[e]
                        via[to[e]] = e
                        changed = True
            if not changed:
                break
        if dist[1] == 1 << 60:
            return -total_cost
        node = 1
        while node != 0:
            e = via[node]
            cap[e] -= 1
            cap[e ^ 1] += 1
            node = to[e ^ 1]
        total_cost += dist[1]


class _FlowGraph:
    """A small max-flow graph: node 0 is the source, node 1 the sink (Dinic's algorithm)."""

    def __init__(self, size: int) -> None:
        self.head: list[list[int]] = [[] for _ in range(size)]
        self.to: list[int] = []
        self.cap: list[int] = []

    def _edge(self, a: int, b: int, capacity: int) -> None:
        self.head[a].append(len(self.to))
        self.to.append(b)
        self.cap.append(capacity)
        self.head[b].append(len(self.to))
        self.to.append(a)
        self.cap.append(0)

    def solve(self) -> int:
        """Maximum flow from node 0 to node 1 (graphs here have short paths)."""
        total = 0
        while True:
            level = [-1] * len(self.head)
            level[0] = 0
            queue = [0]
            for node in queue:
                for e in self.head[node]:
                    if self.cap[e] and level[self.to[e]] < 0:
                        level[self.to[e]] = level[node] + 1
                        queue.append(self.to[e])
            if level[1] < 0:
                return total
            cursor = [0] * len(self.head)
            while True:
                pushed = self._push(0, 1 << 60, level, cursor)
                if not pushed:
                    break
                total += pushed

    def _push(self, node: int, limit: int, level: list[int], cursor: list[int]) -> int:
        if node == 1:
            return limit
        edges = self.head[node]
        while cursor[node] < len(edges):
            e = edges[cursor[node]]
            nxt = self.to[e]
            if self.cap[e] and level[nxt] == level[node] + 1:
                pushed = self._push(nxt, min(limit, self.cap[e]), level, cursor)
                if pushed:
                    self.cap[e] -= pushed
                    self.cap[e ^ 1] += pushed
                    return pushed
            cursor[node] += 1
        return 0


class _ExtrasFlow(_FlowGraph):
    """Max flow: which members take the extra slot of which group (see module doc)."""

    def __init__(
        self, extras: list[int], members: int, gain_edges: list[list[int]],
        per_member: int, overflow: int,
    ) -> None:
        self.extras = extras
        self.members = members
        self.gains = [set(edges) for edges in gain_edges]
        self.per_member = per_member
        self.overflow = overflow
        groups = len(extras)
        # Nodes: 0 source, 1 sink, 2 overflow, 3.. groups, then members.
        self.first_member = 3 + groups
        super().__init__(self.first_member + members)
        for g, extra in enumerate(extras):
            if extra:
                self._edge(0, 3 + g, extra)
            for m in gain_edges[g]:
                self._edge(3 + g, self.first_member + m, 1)
        for m in range(members):
            if per_member:
                self._edge(self.first_member + m, 1, per_member)
            if overflow:
                self._edge(self.first_member + m, 2, 1)
        if overflow:
            self._edge(2, 1, overflow)

    def complete(self) -> bool:
        """Deal the remaining extra slots out; True when a balanced completion was found.

        Greedy: groups with the most unfilled slots first, each taking the members with
        the most room that do not hold one of its slots yet.  When only members already
        in the group have room, a swap keeps the gain: a member ``x`` holding a slot of
        another group ``h`` moves to this group and the member with room takes ``h``'s
        slot, provided ``x`` loses no gain by it.  False means "not found", not
        "impossible".
        """
        groups = len(self.extras)
        used: list[set[int]] = [set() for _ in range(groups)]
        taken = [0] * self.members
        for g in range(groups):
            for e in self.head[3 + g]:
                node = self.to[e]
                if node >= self.first_member and e % 2 == 0 and self.cap[e] == 0:
                    used[g].add(node - self.first_member)
                    taken[node - self.first_member] += 1
        top_needed = self.overflow - sum(1 for t in taken if t == self.per_member + 1)
        room: list[int] = []
        for m in range(self.members):
            target = self.per_member
            if taken[m] == self.per_member + 1:
                target += 1
            elif top_needed > 0:
                target += 1
                top_needed -= 1
            room.append(target - taken[m])
        # Entries are (−room, member); an entry is stale once the member's room changed.
        heap = [(-r, m) for m, r in enumerate(room) if r > 0]
        heapq.heapify(heap)
        order = sorted(range(groups), key=lambda g: (len(used[g]) - self.extras[g], g))
        for g in order:
            need = self.extras[g] - len(used[g])
            skipped: list[tuple[int, int]] = []
            while need and heap:
                r, m = heapq.heappop(heap)
                if -r != room[m]:
                    continue
                if m in used[g]:
                    skipped.append((r, m))
                    continue
                used[g].add(m)
                room[m] -= 1
                need -= 1
                if room[m]:
                    heapq.heappush(heap, (-room[m], m))
            for item in skipped:
                heapq.heappush(heap, item)
            while need:
                member = self._swap_into(g, used, room)
                if member is None:
                    return False
                need -= 1
                if room[member]:
                    heapq.heappush(heap, (-room[member], member))
        return not any(room)

    def _swap_into(self, g: int, used: list[set[int]], room: list[int]) -> int | None:
        for spare in range(self.members):
            if room[spare] <= 0:
                continue
            for h in range(len(self.extras)):
                if h == g or spare in used[h]:
                    continue
                for x in sorted(used[h]):
                    if x in used[g]:
                        continue
                    if x in self.gains[g] or x not in self.gains[h]:
                        used[h].discard(x)
                        used[h].add(spare)
                        used[g].add(x)
                        room[spare] -= 1
                        return spare
        return None


def _bound_keep(lay: Layout, previous: list[Counter[str]]) -> int:
    per_group = 0
    for group, held in zip(lay.groups, previous, strict=True):
        floor_, extra = divmod(group.partitions, max(1, len(group.eligible)))
        per_group += sum(min(n, floor_) for n in held.values())
        per_group += min(extra, sum(1 for n in held.values() if n > floor_))
    totals: Counter[str] = Counter()
    for held in previous:
        totals.update(held)
    capacity = sum(lay.capacity[m] for m in lay.members)
    in_total = 0
    for m in lay.members:
        quota = -int(-(lay.tasks * lay.capacity[m] / capacity) // 1)
        in_total += min(totals.get(m, 0), quota)
    return min(per_group, in_total)
