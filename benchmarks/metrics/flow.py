"""Flow solvers of the moves bound: max flow (Dinic) and a small min-cost flow.

See :mod:`benchmarks.metrics.moves` for the graphs built on them.
"""

from __future__ import annotations

import heapq


def cheapest_completion(
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


class FlowGraph:
    """A small max-flow graph: node 0 is the source, node 1 the sink (Dinic's algorithm)."""

    def __init__(self, size: int) -> None:
        self.head: list[list[int]] = [[] for _ in range(size)]
        self.to: list[int] = []
        self.cap: list[int] = []

    def edge(self, a: int, b: int, capacity: int) -> None:
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


class ExtrasFlow(FlowGraph):
    """Max flow: which members take the extra slot of which group (see :mod:`.moves`)."""

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
                self.edge(0, 3 + g, extra)
            for m in gain_edges[g]:
                self.edge(3 + g, self.first_member + m, 1)
        for m in range(members):
            if per_member:
                self.edge(self.first_member + m, 1, per_member)
            if overflow:
                self.edge(self.first_member + m, 2, 1)
        if overflow:
            self.edge(2, 1, overflow)

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
