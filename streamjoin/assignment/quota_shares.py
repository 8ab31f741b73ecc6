"""Capacity-weighted fair shares: the arithmetic behind balanced quotas. Pure.

Holds :class:`Demand` (the units of one group to share), :class:`GroupShares`
(a group's floors and the members whose share is fractional, i.e. may round
up) and :func:`row_bounds` (how many round-ups each member takes at least and
at most, so that its total is ``floor(Q)`` or ``ceil(Q)``). The notation is
that of :mod:`streamjoin.assignment.quotas`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

__all__ = ["Demand", "GroupShares", "row_bounds"]


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


class GroupShares:
    """Per-group arithmetic of the fair shares.

    ``ups`` is the number of round-ups the group hands out: ``total`` minus
    the sum of the floors. With uniform capacities every eligible member has
    the floor ``uniform_base`` and may round up while ``ups > 0``; otherwise
    ``base`` holds the non-zero floors and ``frac`` the members whose share
    is fractional.
    """

    __slots__ = ("base", "capacity", "demand", "frac", "index", "uniform", "uniform_base", "ups")

    def __init__(
        self, index: int, demand: Demand, capacities: Sequence[int], same: int | None = None
    ) -> None:
        """``same``: the capacity every member has, when they all have the same (a shortcut)."""
        self.index = index
        self.demand = demand
        n = len(demand.eligible)
        if same is not None:
            caps: list[int] = []
            self.capacity = same * n
            self.uniform = True
        else:
            caps = [capacities[m] for m in demand.eligible]
            self.capacity = sum(caps)
            self.uniform = min(caps, default=1) == max(caps, default=1)
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
        """Member ``m``'s floor in this group."""
        return self.uniform_base if self.uniform else self.base.get(m, 0)

    def can_round_up(self, m: int) -> bool:
        """Whether ``m``'s share in this group is fractional (it may round up)."""
        if self.uniform:
            return self.ups > 0
        return self.frac is not None and m in self.frac


def row_bounds(
    groups: Sequence[GroupShares],
    capacities: Sequence[int],
    member_groups: Sequence[tuple[int, ...]],
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
