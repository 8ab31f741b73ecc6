"""A readable account of an assignment: what moved, why, warm-ups, and summary figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamjoin.assignment.model import Assignment
from streamjoin.assignment.racks import REASONS

__all__ = ["explain"]


def explain(result: Assignment) -> str:
    """Describe ``result`` for a human: every move with its reason, then figures."""
    lines: list[str] = [f"generation {result.generation}"]
    names = {g.index: g.name for g in result.groups}
    for g in result.groups:
        kind = "stateful" if g.stateful else "stateless"
        lines.append(
            f"group {g.index}: {g.name} ({g.partitions} tasks, {kind}, "
            f"{len(g.eligible)} eligible members)"
        )
    lines += _moves(result, names)
    lines += _warmups(result)
    lines += _withheld(result, names)
    lines += _cross_rack(result, names)
    lines += _summary(result.stats)
    return "\n".join(lines)


def _moves(result: Assignment, names: Mapping[int, str]) -> list[str]:
    """Every move: task, old and new owner, warm or cold, and why."""
    if not result.moves:
        return ["moves: none"]
    lines = [f"moves ({len(result.moves)}):"]
    for mv in result.moves:
        source = mv.source or "(no owner)"
        if mv.warm:
            how = "warm" if mv.lag is None else f"warm, lag {mv.lag}"
        else:
            how = "cold"
        lines.append(
            f"  {names[mv.group]}[{mv.partition}]: {source} -> {mv.target} ({how}): {mv.reason}"
        )
    return lines


def _warmups(result: Assignment) -> list[str]:
    """The warm-ups, one line per member and task group."""
    warming = [
        (member_id, topic, parts)
        for member_id, owned in sorted(result.members.items())
        for topic, parts in sorted(owned.warmups.items())
    ]
    if not warming:
        return []
    changelogs = {t: g for g in result.groups for t in g.changelogs}
    shown = set()
    lines = ["warm-ups (the task stays on a caught-up member until they catch up):"]
    for member_id, topic, parts in warming:
        group = changelogs[topic]
        if (member_id, group.index) in shown:
            continue  # a warm-up covers every changelog of its task: one line
        shown.add((member_id, group.index))
        listed = ", ".join(str(p) for p in parts)
        lines.append(f"  {member_id}: {group.name}[{listed}]")
    return lines


def _withheld(result: Assignment, names: Mapping[int, str]) -> list[str]:
    """The tasks given to nobody this round, per group."""
    if not result.withheld:
        return []
    lines = [
        f"withheld ({len(result.withheld)}; given to nobody this round: another member "
        "still owns them, gives them up and rejoins; the follow-up rebalance "
        "gives them to their target, which restores them meanwhile):"
    ]
    for gi in sorted({gi for gi, _ in result.withheld}):
        listed = ", ".join(str(p) for g, p in result.withheld if g == gi)
        lines.append(f"  {names[gi]}[{listed}]")
    return lines


def _cross_rack(result: Assignment, names: Mapping[int, str]) -> list[str]:
    """The tasks whose active reads across racks, with why."""
    if not result.cross_rack:
        return []
    lines = [
        f"cross-rack ({len(result.cross_rack)}; the active reads partitions with no "
        "replica in its member's rack, weighted):"
    ]
    for gi, p, member_id, traffic, reason in result.cross_rack:
        lines.append(
            f"  {names[gi]}[{p}] on {member_id}: {traffic} across racks, {reason}: "
            f"{REASONS[reason]}"
        )
    return lines


def _summary(s: Mapping[str, Any]) -> list[str]:
    """The summary figures, and notes on what held the assignment back."""
    lines = [
        "summary:",
        f"  members {s['members']}, groups {s['groups']}, tasks {s['tasks']} "
        f"({s['stateful_tasks']} stateful), standbys {s['standbys']}",
        f"  active spread: total {s['active_spread']}, worst group {s['active_spread_per_group']}",
        f"  standby spread: total {s['standby_spread']}, "
        f"worst group {s['standby_spread_per_group']}",
        f"  previously owned {s['previously_owned']}: kept {s['kept']}, moved {s['moved']}",
        f"  target: spread total {s['target_active_spread']}, worst group "
        f"{s['target_active_spread_per_group']}; moves {s['target_moved']} "
        f"(minimum for a balanced assignment: {s['minimum_moves']})",
        f"  activations: {s['warm_activations']} warm, {s['cold_activations']} cold; "
        f"warm-ups {s['warmups']}, held back {s['held_back']}",
        f"  warm promotions {s['warm_promotions']}; contested tasks {s['contested']}; "
        f"fenced claims {s['fenced_claims']}",
        f"  protocol {s['protocol']}; withheld {s['withheld']}",
        f"  cross-rack tasks {s['cross_rack_tasks']} (traffic {s['cross_rack_traffic']}); "
        f"target {s['target_cross_rack_tasks']} (traffic {s['target_cross_rack_traffic']})",
    ]
    if s["held_back"]:
        lines.append(
            "  note: held back tasks stay on a caught-up member without a warm-up "
            "(max_warmup_replicas reached)"
        )
    if s.get("relaxed_balance"):
        lines.append("  note: host/rack constraints forced a standby count off its balanced share")
    return lines
