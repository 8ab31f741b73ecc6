"""Completing a rounding with the round-ups that keep nothing. Pure.

Once the gainful round-ups are placed (:mod:`streamjoin.assignment.quotas`),
every group still short of round-ups gets them group by group: first on its
``preferred`` members (zero cost), then on the members furthest below their
lower bound (the Gale–Ryser greedy), then on members with room for an extra
slot; if that gets stuck, along the cheapest augmenting paths
(:meth:`~streamjoin.assignment.quota_rounding.Rounding.cheapest_path`). Only
when no path exists either is the total bound given up ("relaxed").
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence

from streamjoin.assignment.quota_rounding import Rounding
from streamjoin.assignment.quota_shares import GroupShares

__all__ = ["complete_rounding"]


def complete_rounding(
    groups: Sequence[GroupShares], rounding: Rounding, gain_cells: Mapping[int, list[int]]
) -> bool:
    """Give every group all its round-ups; True when a bound had to be relaxed.

    ``gain_cells`` maps a group to the members for which a round-up keeps a
    previous unit (the cells the greedy and exact passes worked on).
    """
    return _Completion(groups, rounding, gain_cells).run()


def _fitter(group: GroupShares, rounding: Rounding) -> Callable[[int], bool]:
    """A test: may member ``m`` round up in ``group`` (eligible, fractional share,
    not up yet)?"""
    ups = rounding.up[group.index]
    members = len(rounding.lo)
    eligible = (
        set(group.demand.eligible)
        if not group.uniform or len(group.demand.eligible) < members
        else None
    )

    def fits(m: int) -> bool:
        return m not in ups and (eligible is None or m in eligible) and group.can_round_up(m)

    return fits


class _Completion:
    """The completion pass over all groups.

    Keeps, across the groups, a heap of the members still below their lower
    bound (most needy first) and a heap of the members that may take one
    extra round-up (lowest index first).
    """

    def __init__(
        self, groups: Sequence[GroupShares], rounding: Rounding, gain_cells: Mapping[int, list[int]]
    ) -> None:
        self.groups = groups
        self.rounding = rounding
        self.gain_cells = gain_cells
        lo, hi, used = rounding.lo, rounding.hi, rounding.used
        self.seq = 0
        self.needy: list[tuple[int, int, int]] = []
        self.spare: list[tuple[int, int]] = []
        for m in range(len(lo)):
            if used[m] < lo[m]:
                self.needy.append((used[m] - lo[m], m, m))
            elif used[m] < hi[m]:
                self.spare.append((m, m))
        heapq.heapify(self.needy)
        heapq.heapify(self.spare)
        self.relaxed = False
        #: gain_cells as sets, built the first time the greedy gets stuck
        self.gain_sets: dict[int, frozenset[int]] | None = None
        #: group index -> its round-up test, built once (it reads the live rounding)
        self.fitters: dict[int, Callable[[int], bool]] = {}

    def _fits(self, group: GroupShares) -> Callable[[int], bool]:
        """:func:`_fitter` of *group*, built on first use."""
        fits = self.fitters.get(group.index)
        if fits is None:
            fits = self.fitters[group.index] = _fitter(group, self.rounding)
        return fits

    def run(self) -> bool:
        """Complete every group in order; return whether a bound was relaxed."""
        for g in self.groups:
            want = g.ups - self.rounding.filled[g.index]
            if want <= 0:
                continue
            fits = self._fits(g)
            if g.demand.preferred:
                want = self._preferred(g, want, fits)
            want = self._needy(g, want, fits)
            want = self._spare(g, want, fits)
            while want:
                # the greedy got stuck: take the cheapest augmenting path, first
                # a short trade, then among members with room or a previous unit,
                # then through anyone
                if self.gain_sets is None:
                    self.gain_sets = {gi: frozenset(c) for gi, c in self.gain_cells.items()}
                if self._trade(g, fits):
                    want -= 1
                    continue
                if (
                    _augment_cheapest(self.groups, self.rounding, self.gain_cells, self.gain_sets)
                    is None
                ):
                    break
                want = g.ups - self.rounding.filled[g.index]
            if want:
                self._relax(g, want)
        return self.relaxed

    def _trade(self, g: GroupShares, fits: Callable[[int], bool]) -> bool:
        """The short augmenting path, tried before the general search; True when applied.

        Every extra slot is taken and the members below their lower bound are
        already up in ``g``: a member ``x`` with room for an extra rounds up in
        ``g``, the extra comes from a member ``y`` that gives its round-up in
        another group ``h`` to a member ``n`` below its lower bound. ``x`` is a
        gainful cell of ``g``: the trade keeps at least as many units as it gives
        up (the cheapest any path can be at this stage), so the rounding stays
        the cheapest for its size.
        """
        rounding = self.rounding
        lo, hi, used, up = rounding.lo, rounding.hi, rounding.used, rounding.up
        if rounding.extras_used < rounding.extra_slots:
            return False
        needy = sorted(m for _, _, m in self.needy if used[m] < lo[m])
        cells = self.gain_cells.get(g.index, ())
        takers = [x for x in cells if lo[x] <= used[x] < hi[x] and fits(x)]
        if not needy or not takers:
            return False
        x = takers[0]
        for n in needy:
            for h in self.groups:
                if h.index == g.index or n in up[h.index] or not self._fits(h)(n):
                    continue
                for y in sorted(up[h.index]):
                    if y in (n, x) or used[y] <= lo[y]:
                        continue
                    rounding.hand_over(h.index, y, n)
                    rounding.add(g.index, x)
                    return True
        return False

    def _preferred(self, g: GroupShares, want: int, fits: Callable[[int], bool]) -> int:
        """Round up on ``g``'s preferred members, heaviest first; the units still wanted.

        Zero-cost round-ups: the rounding stays the cheapest for its size.
        """
        rounding = self.rounding
        preferred = g.demand.preferred
        for m in sorted(preferred, key=lambda m: (-preferred[m], m)):
            if not want:
                break
            if fits(m) and rounding.can_absorb(m):
                rounding.add(g.index, m)
                want -= 1
        return want

    def _needy(self, g: GroupShares, want: int, fits: Callable[[int], bool]) -> int:
        """Round up on the members furthest below their lower bound; the units still wanted."""
        rounding = self.rounding
        lo, hi, used = rounding.lo, rounding.hi, rounding.used
        skipped: list[tuple[int, int, int]] = []
        while want and self.needy:
            entry = heapq.heappop(self.needy)
            m = entry[2]
            if used[m] >= lo[m]:  # stale entry
                if used[m] < hi[m]:
                    heapq.heappush(self.spare, (entry[1], m))
                continue
            if not fits(m):
                skipped.append(entry)
                continue
            rounding.add(g.index, m)
            want -= 1
            self.seq += 1
            if used[m] < lo[m]:
                heapq.heappush(self.needy, (used[m] - lo[m], len(lo) + self.seq, m))
            elif used[m] < hi[m]:
                heapq.heappush(self.spare, (len(lo) + self.seq, m))
        for entry in skipped:
            heapq.heappush(self.needy, entry)
        return want

    def _spare(self, g: GroupShares, want: int, fits: Callable[[int], bool]) -> int:
        """Round up on members with room for an extra slot; the units still wanted."""
        rounding = self.rounding
        lo, hi, used = rounding.lo, rounding.hi, rounding.used
        skipped: list[tuple[int, int]] = []
        while want and self.spare and rounding.extras_used < rounding.extra_slots:
            entry = heapq.heappop(self.spare)
            m = entry[1]
            if used[m] < lo[m] or used[m] >= hi[m]:
                continue
            if not fits(m):
                skipped.append(entry)
                continue
            rounding.add(g.index, m)
            want -= 1
        for entry in skipped:
            heapq.heappush(self.spare, entry)
        return want

    def _relax(self, g: GroupShares, want: int) -> None:
        """No balanced completion found (should not happen): stay complete and
        give up the total bound for the members that take ``g``'s last units."""
        self.relaxed = True
        rounding = self.rounding
        lo, hi, used = rounding.lo, rounding.hi, rounding.used
        ups = rounding.up[g.index]
        for m in sorted(g.demand.eligible, key=lambda m: (used[m] - hi[m], m)):
            if not want:
                break
            if m not in ups and g.can_round_up(m):
                rounding.add(g.index, m)
                want -= 1
        # rebuild the heap: bounds no longer hold for everyone
        self.needy = [(used[m] - lo[m], m, m) for m in range(len(lo)) if used[m] < lo[m]]
        heapq.heapify(self.needy)


def _up_candidates(group: GroupShares) -> Sequence[int]:
    """Members whose share of ``group`` may round up."""
    if group.uniform:
        return group.demand.eligible if group.ups else ()
    return [m for m in group.demand.eligible if group.can_round_up(m)]


def _augment_cheapest(
    groups: Sequence[GroupShares],
    rounding: Rounding,
    gain_cells: Mapping[int, list[int]],
    gain_sets: Mapping[int, frozenset[int]],
) -> int | None:
    """Apply the cheapest augmenting path; None when there is none.

    Searching every member is costly, so the narrow search (members with
    room, and members with a previous unit in the group) goes first. A
    zero-cost narrow path is optimal: once the gainful cells are used, the
    rounding's marginal cost never drops below zero. Otherwise the wide
    search decides.
    """
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
