"""Rack-aware active placement: move targets into their partitions' racks. Pure.

A task's **traffic** on a member is the weight of its partitions read from no
replica in the member's rack (:mod:`.rack_costs`; on a cloud: reads across
availability zones, billed both ways).

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

from collections.abc import Sequence
from dataclasses import dataclass

from streamjoin.assignment.fencing import History
from streamjoin.assignment.model import GroupState, MemberState, TaskGroup
from streamjoin.assignment.rack_costs import RackCosts, RackIndex, deal_by_racks, task_costs
from streamjoin.assignment.rack_market import Plan, RackMarket

__all__ = [
    "REASONS",
    "CrossRack",
    "RackCosts",
    "RackIndex",
    "cross_rack",
    "deal_by_racks",
    "place_by_racks",
    "rack_stats",
    "task_costs",
]


def place_by_racks(
    state: GroupState,
    groups: Sequence[TaskGroup],
    targets: list[list[int]],
    history: History,
    members: Sequence[MemberState],
    acceptable_lag: int,
    costs_of: Sequence[RackCosts | None],
) -> set[tuple[int, int]]:
    """Move ``targets`` (per group, per partition: member) in place to cut traffic
    (see the module docstring); ``costs_of``: each group's :func:`task_costs`.
    Returns the tasks (group, partition) whose target changed."""
    changed: set[tuple[int, int]] = set()
    totals = [0] * len(members)  # tasks per member over all groups
    for target in targets:
        for m in target:
            totals[m] += 1
    # quotas follow capacities when they differ: then only the counts stay as they are
    flexible = len({m.capacity for m in members}) == 1
    scale = sum(g.partitions for g in groups) + 1
    markets: dict[int, RackMarket] = {}
    for group, costs in zip(groups, costs_of, strict=True):
        if (
            costs is not None
            and costs.choice
            and state.rack_traffic_cost > 0
            and costs.on(targets[group.index]) != costs.least
        ):
            market = markets[group.index] = RackMarket(
                state, group, targets[group.index], history, costs, scale
            )
            market.settle(totals if flexible else None)
    if flexible and markets and 1 < len(groups) <= _EXCHANGE_GROUPS:
        _exchange(state, groups, targets, history, costs_of, markets, totals, scale)
    for gi, market in sorted(markets.items()):
        before = list(targets[gi])
        market.fill(history, acceptable_lag)
        changed.update((gi, p) for p, m in enumerate(before) if targets[gi][p] != m)
    return changed


def _exchange(
    state: GroupState,
    groups: Sequence[TaskGroup],
    targets: list[list[int]],
    history: History,
    costs_of: Sequence[RackCosts | None],
    markets: dict[int, RackMarket],
    totals: list[int],
    scale: int,
) -> None:
    """Two members trade a slot of one group for a slot of another when the two
    ways together lower the cost (totals stay; each group's counts stay within
    one): what one group's transfers alone cannot do while the totals are even."""
    index = next(c.index for c in costs_of if c is not None)
    for _ in range(_EXCHANGES):
        found = None
        for g in groups:
            for h in groups:
                if g.index == h.index or (g.index not in markets and h.index not in markets):
                    continue
                mg = _market(state, g, targets, history, costs_of, markets, index, scale)
                mh = _market(state, h, targets, history, costs_of, markets, index, scale)
                found = _best_exchange(mg, mh) or found
                if found is not None:
                    break
            if found is not None:
                break
        if found is None:
            return
        mg, mh, a, b, plan_g, plan_h = found
        mg.apply(plan_g, {a}, {b}, totals)
        mh.apply(plan_h, {b}, {a}, totals)
        mg.settle(totals)
        mh.settle(totals)


def _market(
    state: GroupState,
    group: TaskGroup,
    targets: list[list[int]],
    history: History,
    costs_of: Sequence[RackCosts | None],
    markets: dict[int, RackMarket],
    index: RackIndex,
    scale: int,
) -> RackMarket:
    """The group's market, opened (with no traffic anywhere if racks are unknown)."""
    market = markets.get(group.index)
    if market is None:
        costs = costs_of[group.index] or RackCosts(
            index,
            tuple(range(len(index.racks))),
            [(0,) * len(index.racks)] * group.partitions,
            [0] * group.partitions,
            False,
        )
        market = markets[group.index] = RackMarket(
            state, group, targets[group.index], history, costs, scale
        )
    return market


def _best_exchange(
    mg: RackMarket, mh: RackMarket
) -> tuple[RackMarket, RackMarket, int, int, Plan, Plan] | None:
    """Members ``a`` (one more in g, one fewer in h) and ``b`` (the other way round)
    whose trade lowers the cost, with the two plans; racks tried in order."""
    g_high, g_low = mg.high_low()
    h_high, h_low = mh.high_low()
    gives = sorted(g_high & h_low)  # a
    takes = sorted(g_low & h_high)  # b
    tried: set[tuple[int, int]] = set()
    for a in gives:
        for b in takes:
            racks = (mg.rack_of[a], mg.rack_of[b])
            if racks[0] == racks[1] or racks in tried:
                continue
            tried.add(racks)
            plan_g = mg.plan({a}, {b}, _NO_LIMIT)
            plan_h = mh.plan({b}, {a}, _NO_LIMIT)
            if plan_g and plan_h and plan_g.change + plan_h.change < 0:
                return mg, mh, a, b, plan_g, plan_h
    return None


#: exchanges between groups are tried for up to this many groups (each try looks
#: at every pair of groups), and at most this many are made
_EXCHANGE_GROUPS = 8
_EXCHANGES = 64
_NO_LIMIT = float("inf")


@dataclass(frozen=True)
class CrossRack:
    """A task whose active reads partitions with no replica in its member's rack."""

    group: int
    partition: int
    #: the member index of its active
    member: int
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
            found.append(CrossRack(gi, p, m, traffic, reason))
    return found


#: what each reason of :class:`CrossRack` means, for ``--explain``
REASONS = {
    "no member there": "no eligible member is in a rack with more of its partitions' replicas",
    "warm start": "it stays on a caught-up member while its target, in a better rack, warms up",
    "moves": "a move would cost more (rack_move_cost) than the traffic it saves",
    "balance": "the members in better racks are full with tasks that save more there",
}


def rack_stats(
    costs: Sequence[RackCosts | None],
    targets: Sequence[Sequence[int]],
    crossing: Sequence[CrossRack],
) -> dict[str, object]:
    """Cross-rack tasks and traffic of the actual assignment, and of the target."""
    target_tasks = target_traffic = 0
    for group_costs, target in zip(costs, targets, strict=True):
        if group_costs is None:
            continue
        traffic = group_costs.on(target)
        target_tasks += len(traffic) - traffic.count(0)
        target_traffic += sum(traffic)
    return {
        "cross_rack_tasks": len(crossing),
        "cross_rack_traffic": sum(c.traffic for c in crossing),
        "target_cross_rack_tasks": target_tasks,
        "target_cross_rack_traffic": target_traffic,
    }
