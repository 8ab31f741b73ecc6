"""Rack-aware active placement: move targets into their partitions' racks. Pure.

A task reads its input partitions and its changelogs. A partition read from a
member with no replica of it in the member's rack crosses racks (on a cloud:
availability zones, billed both ways). The task's **traffic** on member ``m``
is the weight of its partitions (``GroupState.partition_weights``, 1 where not
given) that have known replica racks (``GroupState.partition_racks``) none of
which is ``m``'s rack. A member without a rack is in no rack.

The target of :mod:`.actives` fixes how many tasks of each group every member
runs (balance, then stickiness: :mod:`.quotas`). Among the placements with
those counts, this step chooses one that minimises, per group::

    rack_traffic_cost * traffic + rack_move_cost * moves

where ``moves`` counts the tasks it takes off their previous owner beyond
those the target already moves; ties keep the target's choice (warm members
first). Traffic depends only on a member's rack, so the problem is solved on
racks: each rack has as many slots as the target gives its members, and a
rack-level placement is optimal exactly when no cycle of moves between racks
lowers the cost (cycle cancelling on a graph of a few racks, each edge the
cheapest task to move along it). The tasks that change rack then take the
slots the tasks leaving that rack freed: their previous owner's first, then
the most caught-up member's, then in member order.

With no rack information (no replica racks, or every eligible member in the
same rack, or ``rack_traffic_cost`` 0) a group's target is left as it is.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streamjoin.assignment.fencing import History
from streamjoin.assignment.model import GroupState, MemberState, TaskGroup

__all__ = [
    "REASONS",
    "CrossRack",
    "RackCosts",
    "RackIndex",
    "cross_rack",
    "deal_by_racks",
    "place_by_racks",
    "task_costs",
]


@dataclass(frozen=True)
class RackIndex:
    """The racks of a group's members: ``racks`` sorted (``None`` last: no rack), and
    per member index, its rack's position in ``racks``."""

    racks: tuple[str | None, ...]
    of_member: list[int]

    @staticmethod
    def of(members: Sequence[MemberState]) -> RackIndex:
        racks = tuple(sorted({m.rack for m in members}, key=_rack_key))
        index = {rack: i for i, rack in enumerate(racks)}
        return RackIndex(racks, [index[m.rack] for m in members])


@dataclass(frozen=True)
class RackCosts:
    """One group's traffic per task and rack: ``traffic[p][i]`` on rack ``i`` of
    ``index.racks``; ``present`` the racks with an eligible member."""

    index: RackIndex
    present: tuple[int, ...]
    traffic: list[tuple[int, ...]]
    #: per task, its least traffic on a present rack
    least: list[int]
    #: some task's traffic differs between the present racks: placement can cut it
    choice: bool

    def on(self, target: Sequence[int]) -> list[int]:
        """Every task's traffic on its member in ``target``."""
        return list(
            map(operator.getitem, self.traffic, map(self.index.of_member.__getitem__, target))
        )


def task_costs(state: GroupState, group: TaskGroup, index: RackIndex) -> RackCosts | None:
    """The traffic of ``group``'s tasks on each rack, or ``None`` when none of its
    partitions has known replica racks."""
    known = [
        (state.partition_racks[t], state.partition_weights.get(t))
        for t in dict.fromkeys((*group.topics, *group.changelogs))  # (a changelog may be both)
        if t in state.partition_racks
    ]
    if not known:
        return None
    if len(group.eligible) == len(index.of_member):
        present = tuple(range(len(index.racks)))
    else:
        present = tuple(sorted({index.of_member[m] for m in group.eligible}))
    # per task: its partitions' (replica racks, weight); most tasks share theirs, as
    # the same objects (the document's parser shares equal rows): keyed by identity
    keys = list(
        zip(
            *(
                zip(map(id, replica_racks), weights or itertools.repeat(1), strict=False)
                for replica_racks, weights in known
            ),
            strict=True,
        )
    )
    objects = {id(where): where for replica_racks, _ in known for where in replica_racks}
    rows: dict[tuple[tuple[int, int], ...], tuple[int, ...]] = {}
    for key in set(keys):
        counted = [0] * len(index.racks)
        for ident, weight in key:
            where = objects[ident]
            if where:
                for i, rack in enumerate(index.racks):
                    if rack not in where:
                        counted[i] += weight
        rows[key] = tuple(counted)
    least_of = {row: min(row[i] for i in present) for row in rows.values()}
    choice = any(max(row[i] for i in present) != low for row, low in least_of.items())
    traffic = list(map(rows.__getitem__, keys))
    return RackCosts(index, present, traffic, list(map(least_of.__getitem__, traffic)), choice)


def deal_by_racks(
    cold: Sequence[int], owner: list[int], room: dict[int, int], costs: RackCosts
) -> None:
    """Give each task of ``cold`` (nobody is warm for it) a member with ``room``,
    in its least-traffic rack while one there has room: members of a rack in
    turn, as :mod:`.actives` deals such tasks without racks. The trades of
    :func:`place_by_racks` then only fix what this greedy deal could not."""
    of_member = costs.index.of_member
    by_rack: dict[int, list[int]] = {}
    for m in sorted(room):
        if room[m] > 0:
            by_rack.setdefault(of_member[m], []).append(m)
    left = {rack: len(listed) for rack, listed in by_rack.items()}  # members with room
    turn = dict.fromkeys(by_rack, 0)
    ranked: dict[tuple[int, ...], list[int]] = {}  # traffic row -> racks, best first
    for p in cold:
        row = costs.traffic[p]
        racks = ranked.get(row)
        if racks is None:
            racks = ranked[row] = sorted(by_rack, key=lambda r: (row[r], r))
        for rack in racks:
            if not left[rack]:
                continue
            listed, i = by_rack[rack], turn[rack]
            while room[listed[i]] <= 0:
                i = (i + 1) % len(listed)
            m = listed[i]
            owner[p] = m
            room[m] -= 1
            left[rack] -= room[m] == 0
            turn[rack] = (i + 1) % len(listed)
            break


def place_by_racks(
    state: GroupState,
    groups: Sequence[TaskGroup],
    targets: list[list[int]],
    history: History,
    members: Sequence[MemberState],
    acceptable_lag: int,
    costs_of: Sequence[RackCosts | None],
) -> None:
    """Move ``targets`` (per group, per partition: member) in place to cut traffic
    (see the module docstring); ``costs_of``: each group's :func:`task_costs`."""
    totals = [0] * len(members)  # tasks per member over all groups
    for target in targets:
        for m in target:
            totals[m] += 1
    # quotas follow capacities when they differ: then only the counts stay as they are
    flexible = len({m.capacity for m in members}) == 1
    for group, costs in zip(groups, costs_of, strict=True):
        if (
            costs is not None
            and costs.choice
            and state.rack_traffic_cost > 0
            and costs.on(targets[group.index]) != costs.least
        ):
            market = _Market(state, group, targets[group.index], history, members, costs)
            market.settle(totals if flexible else None)
            market.fill(history, acceptable_lag)


class _Market:
    """One group's tasks traded between racks (see the module docstring).

    Invariant: a rack's tasks are its members' slots; a task that arrived in a
    rack waits (member -1) for a slot of that rack's ``pool`` (slots freed by the
    tasks that left it, or given to it by a member of another rack).
    """

    def __init__(
        self,
        state: GroupState,
        group: TaskGroup,
        target: list[int],
        history: History,
        members: Sequence[MemberState],
        costs: RackCosts,
    ) -> None:
        self.group, self.target, self.n = group, target, len(costs.index.racks)
        self.rack_of = costs.index.of_member
        self.start = [self.rack_of[m] for m in target]
        self.rack = list(self.start)
        self.member = list(target)  # the slot each task holds, -1 while it waits
        self.pool: list[list[int]] = [[] for _ in range(self.n)]
        self.slots = {m: 0 for m in group.eligible}
        for m in target:
            self.slots[m] += 1
        previous = history.owner[group.index]
        # one unit of traffic or move outweighs every tie-break of the group together
        scale = group.partitions + 1
        traffic_cost, move_cost = state.rack_traffic_cost, state.rack_move_cost
        self.traffic, self.least = costs.traffic, costs.least
        self.price: list[list[int]] = []
        rows: dict[tuple[tuple[int, ...], int, bool], list[int]] = {}  # shared: read-only
        for p, home in enumerate(self.start):
            kept = previous[p] == target[p]  # the target keeps it: leaving its rack moves it
            key = (costs.traffic[p], home, kept)
            row = rows.get(key)
            if row is None:
                move = move_cost if kept else 0
                row = rows[key] = [
                    (traffic_cost * traffic + (move if r != home else 0)) * scale + (r != home)
                    for r, traffic in enumerate(costs.traffic[p])
                ]
            self.price.append(row)
        # per (r, s): heap of (cost change, task) for tasks in r; stale once it left r
        self.edges: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for p, r in enumerate(self.rack):
            self._offer(p, r)
        for heap in self.edges.values():
            heapq.heapify(heap)

    def _offer(self, p: int, r: int, push: bool = False) -> None:
        row = self.price[p]
        for s in range(self.n):
            if s != r:
                entry = (row[s] - row[r], p)
                if push:
                    heapq.heappush(self.edges.setdefault((r, s), []), entry)
                else:
                    self.edges.setdefault((r, s), []).append(entry)

    def _move(self, p: int, s: int) -> None:
        m = self.member[p]
        if m >= 0:
            self.pool[self.rack[p]].append(m)
            self.member[p] = -1
        self.rack[p] = s
        self._offer(p, s, push=True)

    def settle(self, totals: list[int] | None) -> None:
        """Cancel cycles; then, while balance allows, move a slot with a task
        along a path that lowers the cost (``totals``: None keeps the counts)."""
        while True:
            self._swap_pairs()
            cycle = _negative_cycle(self.n, self._weights())
            if cycle is not None:
                moving = [(self.edges[edge][0][1], edge[1]) for edge in cycle]
                for p, s in moving:
                    self._move(p, s)
                continue
            if totals is None or not self._transfer(totals):
                return

    def _swap_pairs(self) -> None:
        """Cancel the cycles of two racks first: one task each way (most of them)."""
        for r in range(self.n):
            for s in range(r + 1, self.n):
                there, back = self.edges.get((r, s)), self.edges.get((s, r))
                while there and back:
                    out, home = self._valid_top(there, r), self._valid_top(back, s)
                    if out is None or home is None or out[0] + home[0] >= 0:
                        break
                    self._move(out[1], s)
                    self._move(home[1], r)

    def _valid_top(self, heap: list[tuple[int, int]], r: int) -> tuple[int, int] | None:
        """The cheapest entry of ``heap`` whose task is still in rack ``r``."""
        while heap and self.rack[heap[0][1]] != r:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def _weights(self) -> dict[tuple[int, int], int]:
        weight = {}
        for edge, heap in self.edges.items():
            r = edge[0]
            while heap and self.rack[heap[0][1]] != r:
                heapq.heappop(heap)
            if heap:
                weight[edge] = heap[0][0]
        return weight

    def _transfer(self, totals: list[int]) -> bool:
        """One task of a member with a task more than others (in the group and in
        total) goes, with its slot, along the cheapest path to a rack with a
        member one task short; False when no such path lowers the cost."""
        if all(map(operator.eq, map(_at, self.traffic, self.rack), self.least)):
            return False  # every task has its least traffic: only moves are left to pay
        givers, takers = _balance_ends(self.slots, totals)
        if not givers or not takers:
            return False
        taker_racks = sorted({self.rack_of[m] for m in takers})
        weights = self._weights()
        best: tuple[tuple[int, bool, int], int, list[tuple[int, int]], int] | None = None
        ways = {}  # first rack -> (cost, path) of the cheapest way on to a taker's rack
        # any task of a giver's rack may leave: a rack's slots are interchangeable
        # (the giver's own tasks first on a tie: fewer moves within the rack)
        giving = {self.rack_of[m] for m in givers}
        for p, m in enumerate(self.member):
            r = self.rack[p]
            if r not in giving:
                continue
            row = self.price[p]
            if r not in ways:
                ways[r] = _cheapest_ways(self.n, weights, r, taker_racks)
            for s, (cost, steps) in ways[r].items():
                change = row[s] - row[r] + cost
                key = (change, m not in givers, p)
                if change < 0 and (best is None or key < best[0]):
                    best = (key, p, steps, s)
        if best is None:
            return False
        _, first, steps, reached = best
        end = steps[-1][1] if steps else reached
        r0, held = self.rack[first], self.member[first]
        if held in givers:  # its slot leaves with it
            giver = held
            self.member[first] = -1
        else:  # it leaves a slot behind, and a giver of its rack gives one up
            giver = min(m for m in givers if self.rack_of[m] == r0)
            if held >= 0:
                self.pool[r0].append(held)
                self.member[first] = -1
            if giver in self.pool[r0]:
                self.pool[r0].remove(giver)
            else:  # one of the giver's tasks waits for a slot of the rack instead
                self.member[self.member.index(giver)] = -1
        self.slots[giver] -= 1
        totals[giver] -= 1
        self.rack[first] = reached
        self._offer(first, reached, push=True)
        for edge in steps:
            self._move(self.edges[edge][0][1], edge[1])
        taker = min(m for m in takers if self.rack_of[m] == end)
        self.slots[taker] += 1
        totals[taker] += 1
        self.pool[end].append(taker)
        return True

    def fill(self, history: History, acceptable_lag: int) -> None:
        """Waiting tasks take their rack's free slots: the previous owner's first,
        then the most caught-up member's, then in member order."""
        previous = history.owner[self.group.index]
        for slots in self.pool:
            slots.sort()
        for p, m in enumerate(self.member):
            if m >= 0:
                continue
            slots = self.pool[self.rack[p]]
            if previous[p] in slots:
                pick = previous[p]
            else:
                pick = _warmest(history, self.group.index, p, slots, acceptable_lag)
            slots.remove(pick)
            self.target[p] = pick


def _negative_cycle(n: int, weight: Mapping[tuple[int, int], int]) -> list[tuple[int, int]] | None:
    """A cycle of rack edges whose weights sum below 0 (Bellman-Ford), or None."""
    dist = [0] * n
    pred = [-1] * n
    last = -1
    for _ in range(n):
        last = -1
        for (r, s), w in sorted(weight.items()):
            if dist[r] + w < dist[s]:
                dist[s], pred[s], last = dist[r] + w, r, s
        if last < 0:
            return None
    for _ in range(n):  # walk back into the cycle
        last = pred[last]
    cycle, node = [], last
    while True:
        cycle.append((pred[node], node))
        node = pred[node]
        if node == last:
            break
    cycle.reverse()
    return cycle


def _cheapest_ways(
    n: int, weights: Mapping[tuple[int, int], int], avoid: int, ends: Sequence[int]
) -> dict[int, tuple[int, list[tuple[int, int]]]]:
    """For every rack ``s`` other than ``avoid``: the cheapest way from ``s`` to one
    of ``ends`` over racks other than ``avoid`` (its cost and edges; ``[]`` when
    ``s`` is one of them). Bellman-Ford backwards from the ends: no negative
    cycle is left when this runs, so a few rounds over a few racks settle it."""
    inf = float("inf")
    dist: list[float] = [inf] * n
    step: list[int] = [-1] * n
    for e in ends:
        if e != avoid:
            dist[e] = 0
    for _ in range(n):
        changed = False
        for (r, s), w in sorted(weights.items()):
            if avoid in (r, s):
                continue
            if dist[s] + w < dist[r]:
                dist[r], step[r], changed = dist[s] + w, s, True
        if not changed:
            break
    ways: dict[int, tuple[int, list[tuple[int, int]]]] = {}
    for s in range(n):
        if s == avoid or dist[s] == inf:
            continue
        edges: list[tuple[int, int]] = []
        node = s
        while step[node] >= 0 and len(edges) < n:
            edges.append((node, step[node]))
            node = step[node]
        ways[s] = (int(dist[s]), edges)
    return ways


def _at(row: Sequence[int], i: int) -> int:
    return row[i]


def _balance_ends(slots: dict[int, int], totals: list[int]) -> tuple[set[int], set[int]]:
    """Members that may give one task of the group, and those that may take one,
    keeping the spread of the group's counts and of the totals (both exactly 1)."""
    counts = slots.values()
    high, low = max(counts), min(counts)
    if high != low + 1:
        return set(), set()
    top = max(totals[m] for m in slots)
    bottom = min(totals[m] for m in slots)
    if top != bottom + 1:
        return set(), set()
    givers = {m for m, c in slots.items() if c == high and totals[m] == top}
    takers = {m for m, c in slots.items() if c == low and totals[m] == bottom}
    return givers, takers


def _warmest(history: History, g: int, p: int, slots: Sequence[int], acceptable_lag: int) -> int:
    ranked = history.warm.get((g, p)) if history.warm.reported((g, p)) else None
    for lag, m in ranked or ():
        if lag <= acceptable_lag and m in slots:
            return m
    return slots[0]


def _rack_key(rack: str | None) -> tuple[bool, str]:
    return rack is None, rack or ""


@dataclass(frozen=True)
class CrossRack:
    """A task whose active reads partitions with no replica in its member's rack."""

    group: int
    partition: int
    #: the weight of those partitions (1 each unless weights were given)
    traffic: int
    #: why it is there: "no member there", "warm start", "moves" or "balance"
    reason: str


def cross_rack(
    state: GroupState,
    costs: Sequence[RackCosts | None],
    owners: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    history: History,
    members: Sequence[MemberState],
) -> list[CrossRack]:
    """Every task placed off its partitions' racks, in (group, partition) order."""
    found: list[CrossRack] = []
    for gi, (group_costs, owner) in enumerate(zip(costs, owners, strict=True)):
        if group_costs is None:
            continue
        previous, target = history.owner[gi], targets[gi]
        of_member = group_costs.index.of_member
        on_owner = group_costs.on(owner)
        if not any(on_owner):
            continue
        for p, (m, traffic) in enumerate(zip(owner, on_owner, strict=True)):
            if not traffic:
                continue
            best = group_costs.least[p]
            if traffic == best:
                reason = "no member there"
            elif target[p] != m and group_costs.traffic[p][of_member[target[p]]] < traffic:
                reason = "warm start"
            elif previous[p] == m and (
                state.rack_traffic_cost * (traffic - best) <= state.rack_move_cost
            ):
                reason = "moves"
            else:
                reason = "balance"
            found.append(CrossRack(gi, p, traffic, reason))
    return found


#: what each reason of :class:`CrossRack` means, for ``--explain``
REASONS = {
    "no member there": "no eligible member is in a rack with more of its partitions' replicas",
    "warm start": "it stays on a caught-up member while its target, in a better rack, warms up",
    "moves": "a move would cost more (rack_move_cost) than the traffic it saves",
    "balance": "the members in better racks are full with tasks that save more there",
}
