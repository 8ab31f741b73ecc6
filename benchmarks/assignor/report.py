"""The assignor benchmark's report: one side-by-side block per scenario and a summary.

Figures come from ``__main__.py`` (times, peak memory) and
``benchmarks/metrics`` (spread, moves, warm/cold, violations), the same for both assignors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmarks.assignor import faust_peer
from benchmarks.harness.report import columns

ASSIGNORS = ("streamjoin", "faust")
LABELS = {"streamjoin": "streamjoin", "faust": f"faust {faust_peer.FAUST_VERSION}"}


def _time(entry: Mapping[str, Any]) -> str:
    status = entry.get("status")
    if status == "ok":
        if entry["seconds"] < 0.1:
            return f"{entry['seconds'] * 1000:.2f} ms"
        return f"{entry['seconds']:.3f} s"
    if status == "timeout":
        return f"> {entry['budget']:g} s (timed out)"
    if status == "not run":
        return "not run"
    return "error"


def _memory(entry: Mapping[str, Any]) -> str:
    if entry.get("status") != "ok":
        return "–"
    if entry["peak_bytes"] < 2**20:
        return f"{entry['peak_bytes'] / 2**10:.0f} KiB"
    return f"{entry['peak_bytes'] / 2**20:.1f} MiB"


def _ratio(mine: Mapping[str, Any], peer: Mapping[str, Any]) -> str:
    if mine.get("status") != "ok":
        return "–"
    fast = max(mine["seconds"], 1e-6)
    if peer.get("status") == "ok":
        return f"{peer['seconds'] / fast:.1f}×"
    if peer.get("status") == "timeout":
        return f"> {peer['budget'] / fast:.0f}×"
    return "–"


def _metric(entry: Mapping[str, Any], render: Any) -> str:
    found = entry.get("metrics")
    if not found:
        return "–"
    return str(render(found))


def _spread(m: Mapping[str, Any]) -> str:
    return f"{_num(m['spread_total'])} / {_num(m['spread_group_max'])}" + (
        f"  ({m['active_min']}..{m['active_max']})"
    )


def _standby_spread(m: Mapping[str, Any]) -> str:
    if m["standby_spread_total"] is None:
        return "n/a"
    return (f"{_num(m['standby_spread_total'])} / {_num(m['standby_spread_group_max'])}"
            f"  ({m['standby_min']}..{m['standby_max']})")


def _num(value: float) -> str:
    return f"{value:g}"


def _moves(m: Mapping[str, Any]) -> str:
    exact = "" if m["min_moves_exact"] else " (bound)"
    forced = f", {m['forced_moves']} forced" if m["forced_moves"] else ""
    return f"{m['moved']} / {m['min_moves']}{exact}{forced}"


def _spread_short(m: Mapping[str, Any]) -> str:
    return f"{_num(m['spread_total'])}/{_num(m['spread_group_max'])}"


def _moves_short(m: Mapping[str, Any]) -> str:
    return f"{m['moved']}/{m['min_moves']}"


def _joiner(m: Mapping[str, Any]) -> str:
    if "joiner_tasks" not in m:
        return "n/a"
    low, high = m["joiner_fair"]
    fair = f"{low}" if low == high else f"{low}–{high}"
    return f"{m['joiner_tasks']} (fair {fair})"


def _joiner_tasks(m: Mapping[str, Any]) -> str:
    return str(m.get("joiner_tasks", "–"))


def _warm(m: Mapping[str, Any]) -> str:
    if not m["warm_possible"] and not m["warm"] and not m["cold"]:
        return "n/a"
    joiner = f", {m['cold_to_joiner']} to the joiner" if "joiner_tasks" in m else ""
    reach = m.get("warm_reachable")
    bound = f" (≤ {reach} reachable balanced)" if reach is not None else ""
    return (
        f"{m['warm']} / {m['warm_possible']}{bound}; cold {m['cold']}"
        f" ({m['cold_with_standby']} despite a standby{joiner})"
    )


def _warmups(m: Mapping[str, Any]) -> str:
    """Warm-ups and the target's moves: where the tasks are headed (streamjoin only)."""
    stats = m.get("stats") or {}
    if "warmups" not in stats:
        return "–"
    return (
        f"{stats['warmups']} warm-ups; target moves {stats['target_moved']} / "
        f"{stats['minimum_moves']}; cold {stats['cold_activations']}"
    )


def _cross_rack(m: Mapping[str, Any]) -> str:
    """Cross-rack tasks and traffic (benchmarks.metrics.racks), of the tasks with racks."""
    if "cross_rack_tasks" not in m:
        return "n/a"
    return (f"{m['cross_rack_tasks']} / {m['cross_rack_traffic']} (of {m['rack_tasks']}; "
            f"{m['no_local_member']} cross anywhere)")


def _cross_rack_short(m: Mapping[str, Any]) -> str:
    return str(m.get("cross_rack_tasks", "–"))


def _target_cross_rack(entry: Mapping[str, Any]) -> str:
    """streamjoin's own figure for its target (where tasks are headed after warm-ups)."""
    stats = entry.get("stats") or {}
    if "target_cross_rack_tasks" not in stats:
        return "–"
    return f"{stats['target_cross_rack_tasks']} / {stats['target_cross_rack_traffic']}"


def _rack_ratio(with_racks: Mapping[str, Any], without: Mapping[str, Any]) -> str:
    """streamjoin's time with ``partition_racks`` over its time on the same document
    without them."""
    if with_racks.get("status") != "ok" or without.get("status") != "ok":
        return "–"
    return f"{with_racks['seconds'] / max(without['seconds'], 1e-9):.2f}×"


def _violations(m: Mapping[str, Any]) -> str:
    found = m["violations"]
    if not found:
        return "none"
    return ", ".join(f"{k} {v}" for k, v in found.items())


def render_scenario(name: str, figures: Mapping[str, Any]) -> str:
    """The side-by-side block for one scenario."""
    mine, peer = figures["streamjoin"], figures["faust"]
    rows: list[tuple[str, str, str, str]] = [
        ("fresh time", _time(mine["fresh"]), _time(peer["fresh"]),
         _ratio(mine["fresh"], peer["fresh"])),
        ("rebalance time", _time(mine["rebalance"]), _time(peer["rebalance"]),
         _ratio(mine["rebalance"], peer["rebalance"])),
        ("peak memory fresh", _memory(mine["fresh"]), _memory(peer["fresh"]), ""),
        ("peak memory rebalance", _memory(mine["rebalance"]), _memory(peer["rebalance"]), ""),
    ]
    for phase in ("fresh", "rebalance"):
        a, b = mine[phase], peer[phase]
        rows += [
            (f"{phase}: spread total / group (min..max)", _metric(a, _spread),
             _metric(b, _spread), ""),
            (f"{phase}: standby spread total / group (min..max)", _metric(a, _standby_spread),
             _metric(b, _standby_spread), ""),
            (f"{phase}: violations", _metric(a, _violations), _metric(b, _violations), ""),
        ]
    rows += [
        ("moves / minimum", _metric(mine["rebalance"], _moves),
         _metric(peer["rebalance"], _moves), ""),
        ("joining member's tasks", _metric(mine["rebalance"], _joiner),
         _metric(peer["rebalance"], _joiner), ""),
        ("warm / warm possible; cold", _metric(mine["rebalance"], _warm),
         _metric(peer["rebalance"], _warm), ""),
        ("warm-ups; target moves / minimum", _warmups(mine["rebalance"]),
         _warmups(peer["rebalance"]), ""),
    ]
    if any("cross_rack_tasks" in figures[a][phase].get("metrics", {})
           for a in ASSIGNORS for phase in ("fresh", "rebalance")):
        for phase in ("fresh", "rebalance"):
            rows.append((
                f"{phase}: cross-rack tasks / traffic", _metric(mine[phase], _cross_rack),
                _metric(peer[phase], _cross_rack), ""))
        rows.append(("rebalance: target cross-rack tasks / traffic",
                     _target_cross_rack(mine["rebalance"]), "–", ""))
    plain = figures.get("without_racks")
    if plain:
        for phase in ("fresh", "rebalance"):
            rows.append((
                f"{phase}: time with racks / without (best of {plain['repeat']}; ≤ 1.5×)",
                f"{_rack_ratio(mine[phase], plain[phase])} "
                f"({_time(mine[phase])} / {_time(plain[phase])})", "", ""))
    encode = peer["fresh"].get("stats", {}).get("encode_s")
    if encode is not None:
        rows.append(("faust wire encoding (fresh)", "", f"{encode:.3f} s", ""))
    header = ("", LABELS["streamjoin"], LABELS["faust"], "faust/streamjoin")
    lines = [f"== {name}: {figures['title']}", *columns([header, *rows])]
    for assignor in ASSIGNORS:
        for phase in ("fresh", "rebalance"):
            error = figures[assignor][phase].get("error")
            if error:
                lines.append(f"  ! {LABELS[assignor]} {phase}: {error}")
    return "\n".join(lines)


def render_summary(results: Mapping[str, Any]) -> str:
    """One line per scenario: times, ratios, spreads and moves."""
    header = ("scenario", "sj fresh", "faust fresh", "ratio", "sj rebal", "faust rebal",
              "ratio", "sj spread", "faust spread", "sj moves/min", "faust moves/min",
              "joiner sj/faust")
    rows = [header]
    for name, figures in results.items():
        mine, peer = figures["streamjoin"], figures["faust"]
        rows.append((
            name,
            _time(mine["fresh"]), _time(peer["fresh"]), _ratio(mine["fresh"], peer["fresh"]),
            _time(mine["rebalance"]), _time(peer["rebalance"]),
            _ratio(mine["rebalance"], peer["rebalance"]),
            _metric(mine["rebalance"], _spread_short),
            _metric(peer["rebalance"], _spread_short),
            _metric(mine["rebalance"], _moves_short),
            _metric(peer["rebalance"], _moves_short),
            (f"{_metric(mine['rebalance'], _joiner_tasks)}/"
             f"{_metric(peer['rebalance'], _joiner_tasks)}")
            if figures["change"] == "join" else "n/a",
        ))
    return "\n".join(columns(rows))


def render_rack_summary(results: Mapping[str, Any]) -> str:
    """One line per rack scenario: cross-rack tasks of both assignors and streamjoin's
    time with racks over without; empty when no scenario has racks."""
    header = ("scenario", "sj fresh", "faust fresh", "sj rebal", "faust rebal",
              "sj target", "cross anyway", "time w/ racks fresh", "rebal", "target")
    rows: list[tuple[str, ...]] = [header]
    for name, figures in results.items():
        plain = figures.get("without_racks")
        if plain is None:
            continue
        mine, peer = figures["streamjoin"], figures["faust"]
        ratios = [_rack_ratio(mine[phase], plain[phase]) for phase in ("fresh", "rebalance")]
        within = [
            mine[phase]["seconds"] <= 1.5 * plain[phase]["seconds"]
            for phase in ("fresh", "rebalance")
            if mine[phase].get("status") == "ok" and plain[phase].get("status") == "ok"
        ]
        rows.append((
            name,
            _metric(mine["fresh"], _cross_rack_short), _metric(peer["fresh"], _cross_rack_short),
            _metric(mine["rebalance"], _cross_rack_short),
            _metric(peer["rebalance"], _cross_rack_short),
            _target_cross_rack(mine["rebalance"]).split(" / ")[0],
            _metric(mine["rebalance"], lambda m: m.get("no_local_member", "–")),
            *ratios,
            ("met" if all(within) else "NOT met") if within else "–",
        ))
    return "\n".join(columns(rows)) if len(rows) > 1 else ""
