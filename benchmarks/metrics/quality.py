"""Every figure of one assignment output: spread, violations, moves, warm and cold.

Spread
    ``max − min`` of active task counts over all members (total) and, per group, over the
    members subscribed to the whole group; the table shows the largest per-group value.
    When capacities differ, counts are divided by capacity first.  Standby spread is the
    same on standby task counts of stateful groups.

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

Cross-rack (documents with ``partition_racks`` only)
    ``cross_rack_tasks``, ``cross_rack_traffic``, ``rack_tasks`` and ``no_local_member``
    of :mod:`.racks`: tasks whose active member's rack holds no replica of one of their
    partitions.

The minimum number of moves and the warm bound are in :mod:`.moves`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.metrics.moves import minimum_moves, warm_reachable
from benchmarks.metrics.racks import cross_rack, has_racks
from benchmarks.metrics.tasks import Layout, Output, Placement, layout, placement


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
    if has_racks(document):
        figures.update(cross_rack(document, lay, now))
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
