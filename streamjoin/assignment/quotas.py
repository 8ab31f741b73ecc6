"""Balanced, sticky quotas: how many units of each group every member gets.

Every group ``g`` has ``total`` units (tasks, or standby slots) to spread over
its eligible members. Member ``m`` with capacity ``c`` has the fair share
``q = total * c / C`` (``C`` = capacity of all eligible members) of the group
and the fair share ``Q = sum of q over all groups`` overall. A quota matrix is
*balanced* when every entry is ``floor(q)`` or ``ceil(q)``, every column sums
to ``total`` and every member's row sums to ``floor(Q)`` or ``ceil(Q)``. With
equal capacities this is exactly "counts differ by at most one, per group and
in total". Such a rounding always exists (the matrix rounding theorem).

Among the balanced matrices we pick one that lets members keep the most units
they held before: a member keeps ``min(previous, quota)``, so a round-up is
worth one unit exactly where ``previous > floor(q)``. Choosing which members
round up is a bipartite b-matching (groups supply round-ups, members accept
between ``lo`` and ``hi`` of them, only ``K`` members may take ``hi``); we
solve it exactly with augmenting paths seeded by a greedy pass, then complete
the remaining round-ups on members where they gain nothing, most-needy first
(the Gale–Ryser greedy), falling back to augmenting paths if that gets stuck.

Cost: the greedy and completion passes are O((units + members) log members);
each augmenting path is one breadth-first search over the cells where a
round-up is worth something, and there are as many as the greedy missed.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

__all__ = ["Demand", "QuotaResult", "balanced_quotas"]


@dataclass(frozen=True)
class Demand:
    """Units of one group to share among ``eligible`` members.

    ``previous`` maps a member index to the units it held before (only those
    that survive fencing); it steers which members round up. ``preferred``
    (member -> weight) breaks the remaining ties: members with warm state for
    units that must move round up first, which never costs a kept unit.
    """

    total: int
    eligible: tuple[int, ...]
    previous: Mapping[int, int]
    preferred: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class QuotaResult:
    """Quotas per group (member index -> units, members with 0 omitted)."""

    quotas: tuple[dict[int, int], ...]
    #: True when no balanced rounding could be completed and one group's
    #: round-ups went to members beyond their total bound (never seen in
    #: practice; kept so callers can report it instead of failing).
    relaxed: bool


class _Group:
    """Per-group arithmetic of the fair shares."""

    __slots__ = ("base", "capacity", "demand", "frac", "index", "uniform", "uniform_base", "ups")

    def __init__(self, index: int, demand: Demand, capacities: Sequence[int]) -> None:
        self.index = index
        self.demand = demand
        caps = [capacities[m] for m in demand.eligible]
        self.capacity = sum(caps)
        self.uniform = min(caps, default=1) == max(caps, default=1)
        n = len(caps)
        if self.uniform and n:
            self.uniform_base = demand.total // n
            self.ups = demand.total - self.uniform_base * n
            self.base: dict[int, int] = {}
            self.frac: set[int] | None = None
        else:
            self.uniform_base = 0
            self.base = {}
            self.frac = set()
            total = 0
            for m, c in zip(demand.eligible, caps, strict=True):
                share, rest = divmod(demand.total * c, self.capacity)
                if share:
                    self.base[m] = share
                if rest:
                    self.frac.add(m)
                total += share
            self.ups = demand.total - total

    def base_of(self, m: int) -> int:
        return self.uniform_base if self.uniform else self.base.get(m, 0)

    def can_round_up(self, m: int) -> bool:
        """Whether ``m``'s share in this group is fractional (it may round up)."""
        if self.uniform:
            return self.ups > 0
        return self.frac is not None and m in self.frac


def _row_bounds(
    groups: Sequence[_Group], capacities: Sequence[int], member_groups: Sequence[tuple[int, ...]]
) -> tuple[list[int], list[int]]:
    """Each member's lowest and highest number of round-ups (``lo``, ``hi``).

    Members with the same capacity and the same eligible groups share the
    arithmetic, so this is cheap when thousands of members look alike.
    """
    cache: dict[tuple[int, tuple[int, ...]], tuple[int, int]] = {}
    lo: list[int] = []
    hi: list[int] = []
    for m, c in enumerate(capacities):
        key = (c, member_groups[m])
        bounds = cache.get(key)
        if bounds is None:
            floors = 0
            share = Fraction(0)
            for gi in member_groups[m]:
                g = groups[gi]
                if g.capacity:
                    share += Fraction(g.demand.total * c, g.capacity)
                    floors += g.base_of(m) if g.uniform else (g.demand.total * c) // g.capacity
            low = share.numerator // share.denominator
            high = -((-share.numerator) // share.denominator)
            bounds = (low - floors, high - floors)
            cache[key] = bounds
        lo.append(bounds[0])
        hi.append(bounds[1])
    return lo, hi


class _Rounding:
    """The round-up matrix under construction and its augmenting-path search."""

    def __init__(self, groups: Sequence[_Group], lo: list[int], hi: list[int]) -> None:
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
        if self.used[m] < self.lo[m]:
            return True
        return self.used[m] < self.hi[m] and self.extras_used < self.extra_slots

    def add(self, gi: int, m: int) -> None:
        if self.used[m] >= self.lo[m]:
            self.extras_used += 1
        self.used[m] += 1
        self.filled[gi] += 1
        self.up[gi].add(m)
        if self._member_ups is not None:
            self._member_ups.setdefault(m, []).append(gi)

    def _flip_on(self, gi: int, m: int) -> None:
        self.up[gi].add(m)
        self.member_ups.setdefault(m, []).append(gi)

    def _flip_off(self, gi: int, m: int) -> None:
        self.up[gi].discard(m)
        self.member_ups[m].remove(gi)

    # -- augmenting paths ----------------------------------------------
    def augment(self, neighbours: Callable[[int], Iterable[int]]) -> bool:
        """Find one augmenting path and apply it; False when none exists.

        Nodes: groups with unfilled round-ups (sources), members reached from
        a group (may absorb a unit, or hand one of their round-ups back, or
        take an extra slot from a member holding one), and members reached
        through the extra-slot pool (may only hand one of their round-ups
        back). ``neighbours(g)`` lists the members a round-up of ``g`` may go to.
        """
        groups = self.groups
        parent: dict[tuple[str, int], tuple[str, int] | None] = {}
        queue: deque[tuple[str, int]] = deque()
        for g in groups:
            if self.filled[g.index] < g.ups:
                node = ("g", g.index)
                parent[node] = None
                queue.append(node)
        pool_visited = False
        end: tuple[str, int] | None = None
        while queue and end is None:
            kind, x = queue.popleft()
            if kind == "g":
                ups = self.up[x]
                for m in neighbours(x):
                    node = ("m", m)
                    if m in ups or node in parent:
                        continue
                    parent[node] = (kind, x)
                    if self.used[m] < self.lo[m] or (
                        self.used[m] < self.hi[m] and self.extras_used < self.extra_slots
                    ):
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
        groups = self.groups
        dist: dict[tuple[str, int], int] = {}
        parent: dict[tuple[str, int], tuple[str, int] | None] = {}
        queue: deque[tuple[str, int]] = deque()
        queued: set[tuple[str, int]] = set()
        for g in groups:
            if self.filled[g.index] < g.ups:
                node = ("g", g.index)
                dist[node] = 0
                parent[node] = None
                queue.append(node)
                queued.add(node)
        givers = [m for m in range(len(self.used)) if self.used[m] > self.lo[m]]
        best_end: tuple[str, int] | None = None
        best_cost = 0

        def relax(node: tuple[str, int], cost: int, via: tuple[str, int]) -> None:
            if cost < dist.get(node, cost + 1):
                dist[node] = cost
                parent[node] = via
                if node not in queued:
                    queued.add(node)
                    queue.append(node)

        while queue:
            node = queue.popleft()
            queued.discard(node)
            kind, x = node
            here = dist[node]
            if kind == "g":
                ups = self.up[x]
                for m in neighbours(x):
                    if m not in ups:
                        relax(("m", m), here - (1 if gain(m, x) else 0), node)
                continue
            if kind == "m":
                absorbs = self.used[x] < self.lo[x] or (
                    self.used[x] < self.hi[x] and self.extras_used < self.extra_slots
                )
                if absorbs and (best_end is None or here < best_cost):
                    best_end, best_cost = node, here
                if self.used[x] < self.hi[x]:
                    relax(("p", 0), here, node)  # take an extra slot from a giver
            if kind == "p":
                for other in givers:
                    relax(("x", other), here, node)
                continue
            for gi in self.member_ups.get(x, ()):
                relax(("g", gi), here + (1 if gain(x, gi) else 0), node)
        if best_end is None:
            return None
        end = best_end
        return best_cost, lambda: self._apply(end, parent)

    def _apply(
        self, end: tuple[str, int], parent: Mapping[tuple[str, int], tuple[str, int] | None]
    ) -> None:
        # walk back: every (g -> m) step turns a round-up on, every (m -> g)
        # step turns one off; the pool hop moves an extra slot between members
        m_end = end[1]
        if self.used[m_end] >= self.lo[m_end]:
            self.extras_used += 1
        self.used[m_end] += 1
        node: tuple[str, int] = end
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


def balanced_quotas(demands: Sequence[Demand], capacities: Sequence[int]) -> QuotaResult:
    """Compute balanced quotas that keep as many previous units as possible.

    ``capacities[m]`` is member ``m``'s capacity (a positive integer);
    ``demands[g].eligible`` are indices into it.
    """
    groups = [_Group(i, d, capacities) for i, d in enumerate(demands)]
    member_groups_lists: list[list[int]] = [[] for _ in capacities]
    for g in groups:
        if g.demand.total:
            for m in g.demand.eligible:
                member_groups_lists[m].append(g.index)
    member_groups = [tuple(x) for x in member_groups_lists]
    lo, hi = _row_bounds(groups, capacities, member_groups)
    rounding = _Rounding(groups, lo, hi)

    # 1. greedy: round up where it keeps a previous unit; first within every
    #    member's lower bound, then the scarce extra slots
    gain_cells: dict[int, list[int]] = {}
    for g in groups:
        if g.ups:
            gain_cells[g.index] = sorted(
                (
                    m
                    for m, held in g.demand.previous.items()
                    if held > g.base_of(m) and g.can_round_up(m)
                ),
                key=lambda m, prev=g.demand.previous: (-prev[m], m),  # type: ignore[misc]
            )
    # members with more gainful cells than their lower bound leave out a
    # different group each (rotating), so what stays open is spread out
    member_cells: dict[int, list[int]] = {}
    for gi, cells in gain_cells.items():
        for m in cells:
            member_cells.setdefault(m, []).append(gi)
    for m in sorted(member_cells):
        cells = member_cells[m]
        if len(cells) > lo[m]:
            start = m % len(cells)
            cells = cells[start:] + cells[:start]
        for gi in cells:
            if rounding.used[m] >= lo[m]:
                break
            if rounding.filled[gi] < groups[gi].ups:
                rounding.add(gi, m)
    # the extra slots go round-robin over the groups, so the cells left
    # without one are spread over many groups (easy to complete) rather
    # than piled up in the last ones
    pending = [[m for m in cells if m not in rounding.up[gi]] for gi, cells in gain_cells.items()]
    order = list(gain_cells)
    for turn in range(max(map(len, pending), default=0)):
        for gi, cells in zip(order, pending, strict=True):
            if turn < len(cells) and rounding.filled[gi] < groups[gi].ups:
                m = cells[turn]
                if rounding.can_absorb(m):
                    rounding.add(gi, m)
    # 2. exact: augmenting paths over the gainful cells
    if gain_cells:
        while rounding.augment(lambda gi: gain_cells.get(gi, ())):
            pass

    # 3. complete with round-ups that gain nothing, neediest members first
    relaxed = _complete(groups, rounding, gain_cells)

    quotas: list[dict[int, int]] = []
    for g in groups:
        quota: dict[int, int] = {}
        if g.uniform:
            if g.uniform_base:
                quota = dict.fromkeys(g.demand.eligible, g.uniform_base)
        else:
            quota = dict(g.base)
        for m in rounding.up[g.index]:
            quota[m] = quota.get(m, 0) + 1
        quotas.append(quota)
    return QuotaResult(quotas=tuple(quotas), relaxed=relaxed)


def _complete(
    groups: Sequence[_Group], rounding: _Rounding, gain_cells: Mapping[int, list[int]]
) -> bool:
    lo, hi, used = rounding.lo, rounding.hi, rounding.used
    seq = 0
    # members that still need round-ups to reach lo: most needy first
    needy: list[tuple[int, int, int]] = []
    spare: list[tuple[int, int]] = []  # members that may take one extra
    for m in range(len(lo)):
        if used[m] < lo[m]:
            needy.append((used[m] - lo[m], m, m))
        elif used[m] < hi[m]:
            spare.append((m, m))
    heapq.heapify(needy)
    heapq.heapify(spare)
    relaxed = False
    for g in groups:
        want = g.ups - rounding.filled[g.index]
        if want <= 0:
            continue
        ups = rounding.up[g.index]
        eligible = (
            set(g.demand.eligible) if not g.uniform or len(g.demand.eligible) < len(lo) else None
        )

        def fits(
            m: int, g: _Group = g, ups: set[int] = ups, eligible: set[int] | None = eligible
        ) -> bool:
            """May ``m`` round up in ``g`` (eligible, fractional share, not up yet)?"""
            return m not in ups and (eligible is None or m in eligible) and g.can_round_up(m)

        if g.demand.preferred:
            # zero-cost round-ups: the rounding stays the cheapest for its size
            for m in sorted(g.demand.preferred, key=lambda m, w=g.demand.preferred: (-w[m], m)):  # type: ignore[misc]
                if not want:
                    break
                if fits(m) and rounding.can_absorb(m):
                    rounding.add(g.index, m)
                    want -= 1
        skipped: list[tuple[int, int, int]] = []
        while want and needy:
            entry = heapq.heappop(needy)
            m = entry[2]
            if used[m] >= lo[m]:  # stale entry
                if used[m] < hi[m]:
                    heapq.heappush(spare, (entry[1], m))
                continue
            if not fits(m):
                skipped.append(entry)
                continue
            rounding.add(g.index, m)
            want -= 1
            seq += 1
            if used[m] < lo[m]:
                heapq.heappush(needy, (used[m] - lo[m], len(lo) + seq, m))
            elif used[m] < hi[m]:
                heapq.heappush(spare, (len(lo) + seq, m))
        for entry in skipped:
            heapq.heappush(needy, entry)
        spare_skipped: list[tuple[int, int]] = []
        while want and spare and rounding.extras_used < rounding.extra_slots:
            s_entry = heapq.heappop(spare)
            m = s_entry[1]
            if used[m] < lo[m] or used[m] >= hi[m]:
                continue
            if not fits(m):
                spare_skipped.append(s_entry)
                continue
            rounding.add(g.index, m)
            want -= 1
        for s_entry in spare_skipped:
            heapq.heappush(spare, s_entry)
        while want:
            # the greedy got stuck: take the cheapest augmenting path, first
            # among members with room or a previous unit, then through anyone
            if _augment_cheapest(groups, rounding, gain_cells) is None:
                break
            want = g.ups - rounding.filled[g.index]
        if want:
            # no balanced completion found (should not happen): stay complete,
            # give up the total bound for the members that take these units
            relaxed = True
            for m in sorted(g.demand.eligible, key=lambda m: (used[m] - hi[m], m)):
                if not want:
                    break
                if m not in ups and g.can_round_up(m):
                    rounding.add(g.index, m)
                    want -= 1
            # rebuild the heaps: bounds no longer hold for everyone
            needy = [(used[m] - lo[m], m, m) for m in range(len(lo)) if used[m] < lo[m]]
            heapq.heapify(needy)
    return relaxed


def _up_candidates(group: _Group) -> Sequence[int]:
    """Members whose share of ``group`` may round up."""
    if group.uniform:
        return group.demand.eligible if group.ups else ()
    return [m for m in group.demand.eligible if group.can_round_up(m)]


def _augment_cheapest(
    groups: Sequence[_Group], rounding: _Rounding, gain_cells: Mapping[int, list[int]]
) -> int | None:
    """Apply the cheapest augmenting path; None when there is none.

    Searching every member is costly, so the narrow search (members with
    room, and members with a previous unit in the group) goes first. A
    zero-cost narrow path is optimal: once the gainful cells are used, the
    rounding's marginal cost never drops below zero. Otherwise the wide
    search decides.
    """
    gain_sets = {gi: frozenset(cells) for gi, cells in gain_cells.items()}
    empty: frozenset[int] = frozenset()

    def gain(m: int, gi: int) -> bool:
        return m in gain_sets.get(gi, empty)

    n = len(rounding.used)
    used, lo, hi = rounding.used, rounding.lo, rounding.hi
    pool_open = rounding.extras_used < rounding.extra_slots
    roomy = [m for m in range(n) if used[m] < lo[m] or (pool_open and used[m] < hi[m])]
    narrow_lists: dict[int, list[int]] = {}

    def narrow(gi: int) -> list[int]:
        cached = narrow_lists.get(gi)
        if cached is None:
            g = groups[gi]
            eligible = None if len(g.demand.eligible) == n else set(g.demand.eligible)
            ups = rounding.up[gi]
            cached = [m for m in gain_cells.get(gi, ()) if m not in ups] + [
                m for m in roomy if (eligible is None or m in eligible) and g.can_round_up(m)
            ]
            narrow_lists[gi] = cached
        return cached

    found = rounding.cheapest_path(narrow, gain)
    if found is None or found[0] > 0:
        wide = rounding.cheapest_path(lambda gi: _up_candidates(groups[gi]), gain)
        if wide is not None:
            found = wide
    if found is None:
        return None
    found[1]()
    return found[0]
