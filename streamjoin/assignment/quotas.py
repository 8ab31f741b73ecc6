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

This module holds the entry point, :func:`balanced_quotas`, and the greedy
pass; the fair-share arithmetic is in :mod:`.quota_shares`, the round-up
matrix and its augmenting paths in :mod:`.quota_rounding`, the completion in
:mod:`.quota_completion`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streamjoin.assignment.quota_completion import complete_rounding
from streamjoin.assignment.quota_rounding import Rounding
from streamjoin.assignment.quota_shares import Demand, GroupShares, row_bounds

__all__ = ["Demand", "QuotaResult", "balanced_quotas"]


@dataclass(frozen=True)
class QuotaResult:
    """Quotas per group (member index -> units, members with 0 omitted)."""

    quotas: tuple[dict[int, int], ...]
    #: True when no balanced rounding could be completed and one group's
    #: round-ups went to members beyond their total bound (never seen in
    #: practice; kept so callers can report it instead of failing).
    relaxed: bool


def balanced_quotas(demands: Sequence[Demand], capacities: Sequence[int]) -> QuotaResult:
    """Compute balanced quotas that keep as many previous units as possible.

    ``capacities[m]`` is member ``m``'s capacity (a positive integer);
    ``demands[g].eligible`` are indices into it.
    """
    same = capacities[0] if capacities and min(capacities) == max(capacities) else None
    groups = [GroupShares(i, d, capacities, same) for i, d in enumerate(demands)]
    lo, hi = row_bounds(groups, capacities, _member_groups(groups, capacities))
    rounding = Rounding(groups, lo, hi)

    # 1. greedy: round up where it keeps a previous unit; first within every
    #    member's lower bound, then the scarce extra slots
    gain_cells = _gain_cells(groups)
    _seed_lower_bounds(groups, rounding, gain_cells)
    _seed_extra_slots(groups, rounding, gain_cells)
    # 2. exact: augmenting paths over the gainful cells
    if gain_cells:
        while rounding.augment(lambda gi: gain_cells.get(gi, ())):
            pass

    # 3. complete with round-ups that gain nothing, neediest members first
    relaxed = complete_rounding(groups, rounding, gain_cells)
    quotas = tuple(_quota(g, rounding.up[g.index]) for g in groups)
    return QuotaResult(quotas=quotas, relaxed=relaxed)


def _member_groups(
    groups: Sequence[GroupShares], capacities: Sequence[int]
) -> list[tuple[int, ...]]:
    """Per member, the groups (with units to share) it is eligible for, in order.

    Groups mostly share their eligible members: the work is per distinct
    eligible tuple and per distinct combination of them, not per group x member.
    """
    sharing: dict[tuple[int, ...], list[int]] = {}  # eligible -> groups, in order
    for g in groups:
        if g.demand.total:
            sharing.setdefault(g.demand.eligible, []).append(g.index)
    kinds: list[list[int]] = [[] for _ in capacities]  # per member: its eligible tuples
    classes = list(sharing.values())
    for kind, eligible in enumerate(sharing):
        for m in eligible:
            kinds[m].append(kind)
    merged: dict[tuple[int, ...], tuple[int, ...]] = {}
    result: list[tuple[int, ...]] = []
    for mine in kinds:
        key = tuple(mine)
        combined = merged.get(key)
        if combined is None:
            combined = merged[key] = tuple(sorted(gi for k in key for gi in classes[k]))
        result.append(combined)
    return result


def _gain_cells(groups: Sequence[GroupShares]) -> dict[int, list[int]]:
    """Per group with round-ups, the members for which a round-up keeps a
    previous unit, most previous units first (ties by member index)."""
    gain_cells: dict[int, list[int]] = {}
    for g in groups:
        if not g.ups:
            continue
        previous = g.demand.previous
        if g.uniform:  # every member may round up and has the same floor
            base = g.uniform_base
            cells = sorted([m for m, held in previous.items() if held > base])
        else:
            cells = sorted(
                [m for m, held in previous.items() if held > g.base_of(m) and g.can_round_up(m)]
            )
        # by member, then (stable) most previous units first
        cells.sort(key=previous.__getitem__, reverse=True)
        gain_cells[g.index] = cells
    return gain_cells


def _seed_lower_bounds(
    groups: Sequence[GroupShares], rounding: Rounding, gain_cells: Mapping[int, list[int]]
) -> None:
    """Greedy, first part: gainful round-ups within every member's lower bound.

    Members with more gainful cells than their lower bound leave out a
    different group each (rotating), so what stays open is spread out.
    """
    lo = rounding.lo
    member_cells: dict[int, list[int]] = {}
    for gi, cells in gain_cells.items():
        for m in cells:
            member_cells.setdefault(m, []).append(gi)
    ups = [g.ups for g in groups]
    for m in sorted(member_cells):
        cells = member_cells[m]
        if len(cells) > lo[m]:
            start = m % len(cells)
            cells = cells[start:] + cells[:start]
        rounding.add_within_lower(m, cells, ups)


def _seed_extra_slots(
    groups: Sequence[GroupShares], rounding: Rounding, gain_cells: Mapping[int, list[int]]
) -> None:
    """Greedy, second part: the scarce extra slots for the remaining gainful cells.

    They go round-robin over the groups, so the cells left without one are
    spread over many groups (easy to complete) rather than piled up in the
    last ones.
    """
    pending = [[m for m in cells if m not in rounding.up[gi]] for gi, cells in gain_cells.items()]
    order = list(gain_cells)
    for turn in range(max(map(len, pending), default=0)):
        for gi, cells in zip(order, pending, strict=True):
            if turn < len(cells) and rounding.filled[gi] < groups[gi].ups:
                m = cells[turn]
                if rounding.can_absorb(m):
                    rounding.add(gi, m)


def _quota(g: GroupShares, ups: set[int]) -> dict[int, int]:
    """Group ``g``'s quotas: its floors plus one for every member in ``ups``."""
    if g.uniform:
        if not g.uniform_base:  # fewer units than members: the round-ups are the quotas
            return dict.fromkeys(ups, 1)
        quota = dict.fromkeys(g.demand.eligible, g.uniform_base)
    else:
        quota = dict(g.base)
    for m in ups:
        quota[m] = quota.get(m, 0) + 1
    return quota
