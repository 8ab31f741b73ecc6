"""The round-up matrix under construction and its augmenting-path searches. Pure.

:class:`Rounding` records which members round up in which group, within each
member's bounds ``lo``/``hi`` (:func:`~streamjoin.assignment.quota_shares.row_bounds`)
and the shared pool of extra slots (only ``K`` members may take ``hi``). Its
searches solve the bipartite b-matching of :mod:`streamjoin.assignment.quotas`
exactly: :meth:`Rounding.augment` adds one round-up along any augmenting
path, :meth:`Rounding.cheapest_path` along the one that loses the fewest
kept units.

Nodes of the search graph are ``("g", group)``, ``("m", member)``, the pool
``("p", 0)`` and ``("x", member)`` (a member reached through the pool).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence

from streamjoin.assignment.quota_shares import GroupShares

__all__ = ["Node", "Rounding"]

#: a node of the search graph: ``(kind, index)``
Node = tuple[str, int]


class _LabelSearch:
    """Queue, distances and parents of a label-correcting shortest-path search."""

    def __init__(self, sources: Iterable[Node]) -> None:
        self.dist: dict[Node, int] = {}
        self.parent: dict[Node, Node | None] = {}
        self.queue: deque[Node] = deque()
        self.queued: set[Node] = set()
        for node in sources:
            self.dist[node] = 0
            self.parent[node] = None
            self.queue.append(node)
            self.queued.add(node)

    def pop(self) -> Node:
        """The next node to expand (first in, first out)."""
        node = self.queue.popleft()
        self.queued.discard(node)
        return node

    def relax(self, node: Node, cost: int, via: Node) -> None:
        """Reach ``node`` from ``via`` at ``cost`` if that is cheaper than before."""
        if cost < self.dist.get(node, cost + 1):
            self.dist[node] = cost
            self.parent[node] = via
            if node not in self.queued:
                self.queued.add(node)
                self.queue.append(node)


class Rounding:
    """The round-up matrix under construction and its augmenting-path search."""

    def __init__(self, groups: Sequence[GroupShares], lo: list[int], hi: list[int]) -> None:
        self.groups = groups
        self.lo = lo
        self.hi = hi
        self.extra_slots = sum(g.ups for g in groups) - sum(lo)
        self.used = [0] * len(lo)
        self.extras_used = 0
        self.filled = [0] * len(groups)
        self.up: list[set[int]] = [set() for _ in groups]
        self._member_ups: dict[int, list[int]] | None = None

    @property
    def member_ups(self) -> dict[int, list[int]]:
        """Member -> groups where it rounds up; built on first use (only the
        augmenting-path searches need it), then kept in step."""
        if self._member_ups is None:
            index: dict[int, list[int]] = {}
            for gi, members in enumerate(self.up):
                for m in members:
                    index.setdefault(m, []).append(gi)
            self._member_ups = index
        return self._member_ups

    # -- state changes -------------------------------------------------
    def can_absorb(self, m: int) -> bool:
        """Whether ``m`` may take one more round-up (below ``lo``, or an extra slot)."""
        if self.used[m] < self.lo[m]:
            return True
        return self.used[m] < self.hi[m] and self.extras_used < self.extra_slots

    def add(self, gi: int, m: int) -> None:
        """Round ``m`` up in group ``gi``."""
        if self.used[m] >= self.lo[m]:
            self.extras_used += 1
        self.used[m] += 1
        self.filled[gi] += 1
        self.up[gi].add(m)
        if self._member_ups is not None:
            self._member_ups.setdefault(m, []).append(gi)

    def add_within_lower(self, m: int, groups: Sequence[int], ups: Sequence[int]) -> None:
        """Round ``m`` up in ``groups``, in order, while it is below its lower
        bound, skipping groups whose ``ups`` round-ups are all handed out."""
        used, filled, up, room = self.used, self.filled, self.up, self.lo[m] - self.used[m]
        for gi in groups:
            if room <= 0:
                break
            if filled[gi] < ups[gi]:
                filled[gi] += 1
                up[gi].add(m)
                used[m] += 1
                room -= 1
                if self._member_ups is not None:
                    self._member_ups.setdefault(m, []).append(gi)

    def hand_over(self, gi: int, giver: int, taker: int) -> None:
        """``giver`` gives its round-up in group ``gi`` to ``taker``; counts follow."""
        if self.used[giver] > self.lo[giver]:
            self.extras_used -= 1
        self.used[giver] -= 1
        self.up[gi].discard(giver)
        if self.used[taker] >= self.lo[taker]:
            self.extras_used += 1
        self.used[taker] += 1
        self.up[gi].add(taker)
        if self._member_ups is not None:
            self._member_ups[giver].remove(gi)
            self._member_ups.setdefault(taker, []).append(gi)

    def _flip_on(self, gi: int, m: int) -> None:
        self.up[gi].add(m)
        self.member_ups.setdefault(m, []).append(gi)

    def _flip_off(self, gi: int, m: int) -> None:
        self.up[gi].discard(m)
        self.member_ups[m].remove(gi)

    # -- augmenting paths ----------------------------------------------
    def _sources(self) -> list[Node]:
        """The groups with unfilled round-ups, in group order."""
        return [("g", g.index) for g in self.groups if self.filled[g.index] < g.ups]

    def augment(self, neighbours: Callable[[int], Iterable[int]]) -> bool:
        """Find one augmenting path and apply it; False when none exists.

        Nodes: groups with unfilled round-ups (sources), members reached from
        a group (may absorb a unit, or hand one of their round-ups back, or
        take an extra slot from a member holding one), and members reached
        through the extra-slot pool (may only hand one of their round-ups
        back). ``neighbours(g)`` lists the members a round-up of ``g`` may go to.
        """
        parent: dict[Node, Node | None] = {}
        queue: deque[Node] = deque()
        for node in self._sources():
            parent[node] = None
            queue.append(node)
        pool_visited = False
        end: Node | None = None
        while queue and end is None:
            kind, x = queue.popleft()
            if kind == "g":
                ups = self.up[x]
                for m in neighbours(x):
                    node = ("m", m)
                    if m in ups or node in parent:
                        continue
                    parent[node] = (kind, x)
                    if self.can_absorb(m):
                        end = node
                        break
                    queue.append(node)
                continue
            # a member that must pass one unit on
            if kind == "m" and self.used[x] < self.hi[x] and not pool_visited:
                # x takes an extra slot that another member gives up
                pool_visited = True
                for other in range(len(self.used)):
                    if self.used[other] > self.lo[other] and ("x", other) not in parent:
                        parent[("x", other)] = (kind, x)
                        queue.append(("x", other))
            for gi in self.member_ups.get(x, ()):
                node = ("g", gi)
                if node not in parent:
                    parent[node] = (kind, x)
                    queue.append(node)
        if end is None:
            return False
        self._apply(end, parent)
        return True

    def cheapest_path(
        self, neighbours: Callable[[int], Iterable[int]], gain: Callable[[int, int], bool]
    ) -> tuple[int, Callable[[], None]] | None:
        """The augmenting path that loses the fewest kept units, and how to apply it.

        Same graph as :meth:`augment`, but a round-up that keeps a previous
        unit costs -1 to add and +1 to hand back; the cheapest path is found
        with a label-correcting search (costs may be negative, cycles are
        not: the current rounding is the cheapest for its size). Returns the
        path's cost and a function applying it, or None when there is no path.
        """
        search = _LabelSearch(self._sources())
        givers = [m for m in range(len(self.used)) if self.used[m] > self.lo[m]]
        best_end: Node | None = None
        best_cost = 0
        while search.queue:
            node = search.pop()
            kind, x = node
            here = search.dist[node]
            if kind == "g":
                ups = self.up[x]
                for m in neighbours(x):
                    if m not in ups:
                        search.relax(("m", m), here - (1 if gain(m, x) else 0), node)
                continue
            if kind == "m":
                if self.can_absorb(x) and (best_end is None or here < best_cost):
                    best_end, best_cost = node, here
                if self.used[x] < self.hi[x]:
                    search.relax(("p", 0), here, node)  # take an extra slot from a giver
            if kind == "p":
                for other in givers:
                    search.relax(("x", other), here, node)
                continue
            for gi in self.member_ups.get(x, ()):
                search.relax(("g", gi), here + (1 if gain(x, gi) else 0), node)
        if best_end is None:
            return None
        end, parent = best_end, search.parent
        return best_cost, lambda: self._apply(end, parent)

    def _apply(self, end: Node, parent: Mapping[Node, Node | None]) -> None:
        """Apply the path that ``parent`` leads back from ``end`` to a source group."""
        # walk back: every (g -> m) step turns a round-up on, every (m -> g)
        # step turns one off; the pool hop moves an extra slot between members
        m_end = end[1]
        if self.used[m_end] >= self.lo[m_end]:
            self.extras_used += 1
        self.used[m_end] += 1
        node: Node = end
        while True:
            prev = parent[node]
            if prev is None:
                self.filled[node[1]] += 1
                return
            if node[0] == "m" and prev[0] == "g":
                self._flip_on(prev[1], node[1])
            elif node[0] == "g":  # from a member handing a round-up back
                self._flip_off(node[1], prev[1])
            elif node[0] == "x":  # a member takes an extra, node member drops one
                taker = parent[prev] if prev[0] == "p" else prev  # through the pool node
                if taker is not None:
                    self.used[taker[1]] += 1
                    self.used[node[1]] -= 1
            node = prev
