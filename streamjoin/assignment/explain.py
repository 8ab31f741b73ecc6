"""A readable account of an assignment: what moved, why, and summary figures."""

from __future__ import annotations

from streamjoin.assignment.model import Assignment

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
    if result.moves:
        lines.append(f"moves ({len(result.moves)}):")
        for mv in result.moves:
            source = mv.source or "(no owner)"
            if mv.warm:
                how = "warm" if mv.lag is None else f"warm, lag {mv.lag}"
            else:
                how = "cold"
            lines.append(
                f"  {names[mv.group]}[{mv.partition}]: {source} -> {mv.target} ({how}): {mv.reason}"
            )
    else:
        lines.append("moves: none")
    s = result.stats
    lines += [
        "summary:",
        f"  members {s['members']}, groups {s['groups']}, tasks {s['tasks']} "
        f"({s['stateful_tasks']} stateful), standbys {s['standbys']}",
        f"  active spread: total {s['active_spread']}, worst group {s['active_spread_per_group']}",
        f"  standby spread: total {s['standby_spread']}, "
        f"worst group {s['standby_spread_per_group']}",
        f"  previously owned {s['previously_owned']}: kept {s['kept']}, moved {s['moved']} "
        f"(minimum for a balanced assignment: {s['minimum_moves']})",
        f"  warm promotions {s['warm_promotions']}; contested tasks {s['contested']}; "
        f"fenced claims {s['fenced_claims']}",
    ]
    if s.get("relaxed_balance"):
        lines.append("  note: host/rack constraints forced a standby count off its balanced share")
    return "\n".join(lines)
