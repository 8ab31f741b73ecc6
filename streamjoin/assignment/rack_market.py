"""One group's targets traded between racks to lower their cost. Pure.

:class:`RackMarket` starts from a target (a member per task) and each task's
price per rack (:mod:`.racks` says what a price counts). Traffic depends only on
a member's rack, so the trades are worked out on racks:

* **cycles**: with every rack's load fixed, moves along a cycle of racks (one
  task per edge, the cheapest on that edge) that lower the total are made until
  none is left; a placement with fixed loads is a transportation problem, and
  it is optimal exactly when no such cycle lowers it;
* **transfers**: when a member runs one task more than another of the group
  (and in total), one task of the first one's rack goes, with a slot, along the
  cheapest path of racks to the second one's rack, when that lowers the total;
  balance per group and in total stays within one.

Tasks that change rack wait for a slot of their new rack (those the tasks
leaving it freed, or the one a transfer brought) and :meth:`RackMarket.fill`
gives them out: the task's previous owner first, then its most caught-up
member, then in member order.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streamjoin.assignment.fencing import History
from streamjoin.assignment.model import GroupState, TaskGroup
from streamjoin.assignment.rack_costs import RackCosts

__all__ = ["Plan", "RackMarket"]


@dataclass(frozen=True)
class Plan:
    """A task's way, with a slot, from a giver's rack to a taker's (see ``plan``)."""

    #: (cost change, not the giver's own task, task): the order plans compare in
    key: tuple[int, bool, int]
    first: int
    #: the rack edges the tasks after it move along, and the rack it goes to
    steps: list[tuple[int, int]]
    reached: int

    @property
    def change(self) -> int:
        return self.key[0]


class RackMarket:
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
        costs: RackCosts,
        scale: int,
    ) -> None:
        """``scale``: more than the tasks of every group traded together (a unit of
        traffic or a move outweighs all their tie-breaks: keep a task's rack)."""
        self.group, self.target, self.n = group, target, len(costs.index.racks)
        self.rack_of = costs.index.of_member
        self.start = [self.rack_of[m] for m in target]
        self.rack = list(self.start)
        self.member = list(target)  # the slot each task holds, -1 while it waits
        self.pool: list[list[int]] = [[] for _ in range(self.n)]
        self.slots = {m: 0 for m in group.eligible}
        for m in target:
            self.slots[m] += 1
        previous = self.previous = history.owner[group.index]
        traffic_cost, move_cost = state.rack_traffic_cost, state.rack_move_cost
        self.reshuffle = move_cost * scale
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
        # tasks sharing a price row (the same object) and a rack share their entries'
        # cost changes: filled a class at a time
        classes: dict[tuple[int, int], list[int]] = {}
        for p, (row, r) in enumerate(zip(self.price, self.rack, strict=True)):
            classes.setdefault((id(row), r), []).append(p)
        for (_, r), tasks in classes.items():
            row = self.price[tasks[0]]
            for s in range(self.n):
                if s != r:
                    entries = zip(itertools.repeat(row[s] - row[r]), tasks)
                    self.edges.setdefault((r, s), []).extend(entries)
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

    def settle(self, totals: list[int] | None) -> bool:
        """Cancel cycles; then, while balance allows, move a slot with a task
        along a path that lowers the cost (``totals``: None keeps the counts).
        Returns whether a slot moved (the counts changed)."""
        transferred = False
        while True:
            self._swap_pairs()
            cycle = _negative_cycle(self.n, self._weights())
            if cycle is not None:
                moving = [(self.edges[edge][0][1], edge[1]) for edge in cycle]
                for p, s in moving:
                    self._move(p, s)
                continue
            if totals is None or not self._transfer(totals):
                return transferred
            transferred = True

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
        givers, takers = self._balance_ends(totals)
        found = self.plan(givers, takers, 0) if givers and takers else None
        if found is None:
            return False
        self.apply(found, givers, takers, totals)
        return True

    def high_low(self) -> tuple[set[int], set[int]]:
        """Members with a task more than others of the group, and one task fewer
        (both empty unless the group's counts differ by exactly one)."""
        counts = self.slots.values()
        high, low = max(counts), min(counts)
        if high != low + 1:
            return set(), set()
        return (
            {m for m, c in self.slots.items() if c == high},
            {m for m, c in self.slots.items() if c == low},
        )

    def _balance_ends(self, totals: list[int]) -> tuple[set[int], set[int]]:
        """Members that may give one task of the group, and those that may take one,
        keeping the spread of the group's counts and of the totals (both exactly 1):
        of :meth:`high_low`'s, those with the most and the fewest tasks in total."""
        high, low = self.high_low()
        if not high:
            return set(), set()
        total = list(map(totals.__getitem__, self.slots))
        top, bottom = max(total), min(total)
        if top != bottom + 1:
            return set(), set()
        return {m for m in high if totals[m] == top}, {m for m in low if totals[m] == bottom}

    def plan(self, givers: set[int], takers: set[int], below: float) -> Plan | None:
        """The cheapest way for a task of a giver's rack to go, with a slot, to a
        taker's rack, if it changes the cost by less than ``below``."""
        taker_racks = sorted({self.rack_of[m] for m in takers})
        weights = self._weights()
        best: Plan | None = None
        ways = {}  # first rack -> (cost, path) of the cheapest way on to a taker's rack
        # any task of a giver's rack may leave: a rack's slots are interchangeable
        # (the giver's own tasks first on a tie: fewer moves within the rack);
        # another task's leaving makes one of the giver's tasks move within its rack,
        # unless the giver has a free slot there or a task it did not run before:
        # that move is priced too
        giving = {self.rack_of[m] for m in givers}
        free = {r for r in giving if not givers.isdisjoint(self.pool[r])}
        loose = set(givers)
        for p, m in enumerate(self.member):
            if m in loose and self.previous[p] == m:
                loose.discard(m)
        free.update(self.rack_of[m] for m in loose)
        for p, m in enumerate(self.member):
            r = self.rack[p]
            if r not in giving:
                continue
            row = self.price[p]
            if r not in ways:
                ways[r] = _cheapest_ways(self.n, weights, r, taker_racks)
            shuffle = 0 if m in givers or r in free else self.reshuffle
            for s, (cost, steps) in ways[r].items():
                change = row[s] - row[r] + cost + shuffle
                key = (change, m not in givers, p)
                if change < below and (best is None or key < best.key):
                    best = Plan(key, p, steps, s)
        return best

    def apply(self, plan: Plan, givers: set[int], takers: set[int], totals: list[int]) -> None:
        """Carry ``plan`` out: a giver of the first rack loses a slot, a taker of
        the last one gains it (``totals`` follow)."""
        first, steps, reached = plan.first, plan.steps, plan.reached
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
                self.member[self._spare_task(giver)[0]] = -1
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

    def _spare_task(self, giver: int) -> tuple[int, bool]:
        """The task of ``giver`` to hand to another member of its rack (one it did
        not run before, when it has one) and whether that is no move."""
        held = [p for p, m in enumerate(self.member) if m == giver]
        for p in held:
            if self.previous[p] != giver:
                return p, True
        return (held[0], False) if held else (-1, True)

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


def _warmest(history: History, g: int, p: int, slots: Sequence[int], acceptable_lag: int) -> int:
    ranked = history.warm.get((g, p)) if history.warm.reported((g, p)) else None
    for lag, m in ranked or ():
        if lag <= acceptable_lag and m in slots:
            return m
    return slots[0]
