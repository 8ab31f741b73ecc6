"""Invariant checks and an independent optimum for the assignment core's tests.

Everything here re-derives the contract of DESIGN.md ("Assignment: the
contract") from the input document and the output alone; it never calls into
the core's placement code, so a bug there cannot hide itself.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from fractions import Fraction
from typing import Any

import networkx as nx

Doc = dict[str, Any]


def task_groups(doc: Doc) -> list[dict[str, Any]]:
    """Recompute the task groups: same count + same subscribers, merged with declared groups."""
    globals_ = set(doc.get("global_changelogs", []))
    subs: dict[str, frozenset[str]] = {}
    for m in doc["members"]:
        for t in m["topics"]:
            if t not in globals_:
                subs[t] = subs.get(t, frozenset()) | {m["id"]}
    parent = {t: t for t in subs}

    def find(t: str) -> str:
        while parent[t] != t:
            t = parent[t]
        return t

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    for a, b in itertools.combinations(sorted(subs), 2):
        if doc["topics"][a] == doc["topics"][b] and subs[a] == subs[b]:
            union(a, b)
    for declared in doc.get("copartition", []):
        present = [t for t in declared if t in subs]
        for t in present[1:]:
            union(present[0], t)
    comps: dict[str, list[str]] = defaultdict(list)
    for t in sorted(subs):
        comps[find(t)].append(t)
    groups = []
    for topics in sorted(comps.values()):
        eligible = frozenset.intersection(*(subs[t] for t in topics))
        groups.append(
            {
                "topics": topics,
                "partitions": doc["topics"][topics[0]],
                "changelogs": [t for t in topics if t in set(doc.get("changelogs", []))],
                "eligible": sorted(eligible),
            }
        )
    return groups


def owners_of(doc: Doc, out: Doc, groups: list[dict[str, Any]]) -> list[list[str]]:
    """The single owner of every task; fails on co-partitioning violations."""
    assignment = out["assignment"]
    result = []
    for g in groups:
        owners: list[str] = []
        for p in range(g["partitions"]):
            holders = {
                mid
                for mid, a in assignment.items()
                for t in g["topics"]
                if p in a["actives"].get(t, [])
            }
            assert len(holders) == 1, f"task {g['topics']}[{p}] owned by {sorted(holders)}"
            (owner,) = holders
            for t in g["topics"]:
                assert p in assignment[owner]["actives"].get(t, []), (
                    f"{owner} misses {t}[{p}] of its task (co-partitioning broken)"
                )
            assert owner in g["eligible"]
            owners.append(owner)
        result.append(owners)
    return result


def _shares(doc: Doc, groups: list[dict[str, Any]], totals: list[int]) -> dict[str, Any]:
    cap = {m["id"]: m.get("capacity", 1) for m in doc["members"]}
    per_group = []
    total_share: dict[str, Fraction] = defaultdict(Fraction)
    for g, t in zip(groups, totals, strict=True):
        c = sum(cap[m] for m in g["eligible"])
        shares = {m: Fraction(t * cap[m], c) for m in g["eligible"]}
        per_group.append(shares)
        for m, s in shares.items():
            total_share[m] += s
    return {"per_group": per_group, "total": total_share}


def check_balanced(
    doc: Doc, groups: list[dict[str, Any]], counts: list[dict[str, int]], totals: list[int]
) -> None:
    """Every count is floor or ceil of its fair share, per group and in total."""
    shares = _shares(doc, groups, totals)
    total_count: dict[str, int] = defaultdict(int)
    for g, share, c in zip(groups, shares["per_group"], counts, strict=True):
        for m, s in share.items():
            n = c.get(m, 0)
            assert math.floor(s) <= n <= math.ceil(s), (
                f"{m} has {n} of {g['topics']} but its share is {float(s):.2f}"
            )
            total_count[m] += n
    for m, s in shares["total"].items():
        n = total_count[m]
        assert math.floor(s) <= n <= math.ceil(s), f"{m} has {n} in total, share {float(s):.2f}"


def fenced_previous(doc: Doc, groups: list[dict[str, Any]]) -> dict[tuple[int, int], str]:
    """Previous owner of every task after generation fencing (the actual owners)."""
    claims: dict[tuple[int, int], list[tuple[int, str]]] = defaultdict(list)
    for m in doc["members"]:
        if m.get("generation") is None:
            continue
        for gi, g in enumerate(groups):
            if m["id"] not in g["eligible"]:
                continue
            parts: set[int] = set()
            for t in g["topics"]:
                parts |= set(m.get("actives", {}).get(t, []))
            for p in parts:
                if p < g["partitions"]:
                    claims[(gi, p)].append((m["generation"], m["id"]))
    owner = {}
    for task, cs in claims.items():
        top = max(gen for gen, _ in cs)
        winners = {mid for gen, mid in cs if gen == top}
        if len(winners) == 1:
            owner[task] = winners.pop()
    return owner


def warmup_claims(doc: Doc, groups: list[dict[str, Any]]) -> dict[tuple[int, int], str]:
    """Warm-up holder of every task in the latest generation (one claimant only)."""
    gens = [m["generation"] for m in doc["members"] if m.get("generation") is not None]
    if not gens:
        return {}
    latest = max(gens)
    claims: dict[tuple[int, int], set[str]] = defaultdict(set)
    for m in doc["members"]:
        if m.get("generation") != latest:
            continue
        for gi, g in enumerate(groups):
            if m["id"] not in g["eligible"]:
                continue
            for t in g["changelogs"]:
                for p in m.get("warmups", {}).get(t, []):
                    if p < g["partitions"]:
                        claims[(gi, p)].add(m["id"])
    return {task: next(iter(ms)) for task, ms in claims.items() if len(ms) == 1}


def sticky_previous(doc: Doc, groups: list[dict[str, Any]]) -> dict[tuple[int, int], str]:
    """The target's previous owners: a task with a warm-up counts as its holder's."""
    return {**fenced_previous(doc, groups), **warmup_claims(doc, groups)}


def lags(doc: Doc, g: dict[str, Any], p: int) -> dict[str, int]:
    """Member -> lag on task ``p`` of ``g``, for eligible members reporting every changelog."""
    own: dict[str, list[int]] = {}
    for m in doc["members"]:
        if m["id"] not in g["eligible"]:
            continue
        offsets = [m.get("offsets", {}).get(t, {}).get(str(p)) for t in g["changelogs"]]
        if g["changelogs"] and all(o is not None for o in offsets):
            own[m["id"]] = offsets
    if not own:
        return {}
    best = [max(o[i] for o in own.values()) for i in range(len(g["changelogs"]))]
    return {mid: sum(b - o for b, o in zip(best, offs, strict=True)) for mid, offs in own.items()}


def minimum_moves(doc: Doc, groups: list[dict[str, Any]]) -> int:
    """Fewest owner changes any balanced target needs (min-cost flow, networkx)."""
    prev = sticky_previous(doc, groups)
    held: dict[tuple[int, str], int] = defaultdict(int)
    for (gi, _), m in prev.items():
        held[(gi, m)] += 1
    totals = [g["partitions"] for g in groups]
    shares = _shares(doc, groups, totals)
    graph = nx.DiGraph()
    keep_floor = 0
    ups_total = 0
    floor_rows: dict[str, int] = defaultdict(int)
    for gi, share in enumerate(shares["per_group"]):
        ups = totals[gi] - sum(math.floor(s) for s in share.values())
        ups_total += ups
        graph.add_edge("S", ("g", gi), capacity=ups, weight=0)
        for m, s in share.items():
            f = math.floor(s)
            floor_rows[m] += f
            keep_floor += min(held[(gi, m)], f)
            if s != f:
                gain = 1 if held[(gi, m)] > f else 0
                graph.add_edge(("g", gi), ("m", m), capacity=1, weight=-gain)
    lo_sum = 0
    for m, s in shares["total"].items():
        lo = math.floor(s) - floor_rows[m]
        hi = math.ceil(s) - floor_rows[m]
        lo_sum += lo
        graph.add_edge(("m", m), "T", capacity=lo, weight=0)
        if hi > lo:
            graph.add_edge(("m", m), "X", capacity=hi - lo, weight=0)
    graph.add_edge("X", "T", capacity=ups_total - lo_sum, weight=0)
    flow = nx.max_flow_min_cost(graph, "S", "T")
    assert sum(flow["S"].values()) == ups_total, "no balanced rounding exists?"
    gain = -nx.cost_of_flow(graph, flow)
    return len(prev) - keep_floor - gain


def moves(doc: Doc, groups: list[dict[str, Any]], owners: list[list[str]]) -> int:
    """Target moves from the sticky previous owners."""
    prev = sticky_previous(doc, groups)
    return sum(1 for (gi, p), m in prev.items() if owners[gi][p] != m)


def warmups_of(out: Doc, groups: list[dict[str, Any]]) -> list[list[str | None]]:
    """The warm-up holder of every task (None: no warm-up); one per task, all changelogs."""
    result: list[list[str | None]] = []
    for g in groups:
        row: list[str | None] = []
        for p in range(g["partitions"]):
            holders = sorted(
                mid
                for mid, a in out["assignment"].items()
                if any(p in a.get("warmups", {}).get(t, []) for t in g["changelogs"])
            )
            assert len(holders) <= 1, f"task {g['topics']}[{p}] has warm-ups on {holders}"
            for mid in holders:
                for t in g["changelogs"]:
                    assert p in out["assignment"][mid]["warmups"].get(t, []), (
                        "a warm-up must cover all changelogs of its task"
                    )
            row.append(holders[0] if holders else None)
        result.append(row)
    return result


def targets_of(owners: list[list[str]], warmups: list[list[str | None]]) -> list[list[str]]:
    """The target assignment: where each task is headed (its warm-up, else its active)."""
    return [
        [w if w is not None else o for o, w in zip(row, wrow, strict=True)]
        for row, wrow in zip(owners, warmups, strict=True)
    ]


def check_all(doc: Doc, out: Doc, rack_moves: bool = False) -> list[list[str]]:
    """Check invariants 1-5b and the standby rules; return the owners.

    ``rack_moves``: the document has replica racks, so the target may move more
    than the minimum to cut cross-rack traffic (issue 41); it never moves less.
    """
    groups = task_groups(doc)
    members = {m["id"]: m for m in doc["members"]}
    assert set(out["assignment"]) == set(members)
    owners = owners_of(doc, out, groups)
    warmups = warmups_of(out, groups)
    stats = out["stats"]
    check_warm_first(doc, groups, owners, warmups)
    if stats["held_back"] == 0:
        # H3: the target is balanced and moves the minimum
        targets = targets_of(owners, warmups)
        counts = [dict(collections_count(o)) for o in targets]
        check_balanced(doc, groups, counts, [g["partitions"] for g in groups])
        moved, minimum = moves(doc, groups, targets), minimum_moves(doc, groups)
        assert moved >= minimum if rack_moves else moved == minimum
        if stats["warmups"] == 0:
            assert owners == targets
    else:
        # only the cap holds a task back (a warm-up may share the active's host)
        assert doc.get("max_warmup_replicas") is not None, "a task held back without a cap"
    cap = doc.get("max_warmup_replicas")
    assert stats["warmups"] == sum(1 for row in warmups for w in row if w is not None)
    if cap is not None:
        assert stats["warmups"] <= cap
    check_standbys(doc, out, groups, owners, warmups)
    for topic in doc.get("global_changelogs", []):
        for mid, m in members.items():
            if topic in m["topics"]:
                assert out["assignment"][mid]["actives"][topic] == list(range(doc["topics"][topic]))
    return owners


def collections_count(items: list[str]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for x in items:
        out[x] += 1
    return out


def check_warm_first(
    doc: Doc,
    groups: list[dict[str, Any]],
    owners: list[list[str]],
    warmups: list[list[str | None]],
) -> None:
    """H1/H2: active on a caught-up member whenever one exists; warm-ups where they belong."""
    acceptable = doc.get("acceptable_recovery_lag", 10_000)
    cap = doc.get("max_warmup_replicas")
    for gi, g in enumerate(groups):
        for p in range(g["partitions"]):
            owner, warmup = owners[gi][p], warmups[gi][p]
            if not g["changelogs"]:
                assert warmup is None
                continue
            lag = lags(doc, g, p)
            caught = {m for m, x in lag.items() if x <= acceptable}
            if caught and cap != 0:
                assert owner in caught, f"task {gi}/{p} cold on {owner}; caught up: {caught}"
            if warmup is not None:
                # a temporary copy where the task is headed: it may share the active's host
                assert warmup != owner
                assert warmup not in caught, "a warm-up on a member that is caught up"


def check_standbys(
    doc: Doc,
    out: Doc,
    groups: list[dict[str, Any]],
    owners: list[list[str]],
    warmups: list[list[str | None]],
) -> None:
    """Standby counts, hosts, and H5: copies span as many racks as the members allow."""
    members = {m["id"]: m for m in doc["members"]}
    host = {mid: m.get("host", mid) for mid, m in members.items()}
    rack = {mid: m.get("rack") for mid, m in members.items()}
    replicas = doc.get("standby_replicas", 0)
    for gi, g in enumerate(groups):
        for p in range(g["partitions"]):
            holders = sorted(
                mid
                for mid, a in out["assignment"].items()
                if any(p in a["standbys"].get(t, []) for t in g["changelogs"])
            )
            for t in g["changelogs"]:
                assert holders == sorted(
                    mid for mid, a in out["assignment"].items() if p in a["standbys"].get(t, [])
                ), "a standby must cover all changelogs of its task"
            owner = owners[gi][p]
            if not g["changelogs"]:
                assert holders == []
                continue
            warmup = warmups[gi][p]
            others = [m for m in g["eligible"] if m not in (owner, warmup)]
            other_hosts = {host[m] for m in others} - {host[owner]}
            expected = min(replicas, len(other_hosts))
            assert len(holders) == expected, f"task {gi}/{p}: {holders}, expected {expected}"
            assert owner not in holders and warmup not in holders
            assert host[owner] not in {host[h] for h in holders}, "standby on the active's host"
            assert len({host[h] for h in holders}) == len(holders), "two standbys on one host"
            for h in holders:
                assert h in g["eligible"]
            # H5: rack safety before balance
            spanned = {rack[owner], *(rack[h] for h in holders)}
            reachable = _most_racks(owner, others, len(holders), host, rack)
            assert len(spanned) >= reachable, (
                f"task {gi}/{p}: copies on racks {sorted(map(str, spanned))}, {reachable} reachable"
            )


def feed_back(doc: Doc, out: Doc, warmup_offset: int = 100) -> Doc:
    """The state members report after running ``out`` for a while.

    Actives at offset 100, standbys slightly behind (98), warm-ups at
    ``warmup_offset`` (100: caught up; lower: still restoring).
    """
    members = []
    kinds = {"actives": 100, "standbys": 98, "warmups": warmup_offset}
    for m in doc["members"]:
        owned = out["assignment"][m["id"]]
        offsets: dict[str, dict[str, int]] = {}
        for kind, at in kinds.items():
            for t, parts in owned.get(kind, {}).items():
                if t in doc.get("changelogs", []):
                    offsets.setdefault(t, {}).update({str(p): at for p in parts})
        members.append(
            dict(
                m,
                generation=out["generation"],
                actives=owned["actives"],
                standbys=owned["standbys"],
                warmups=owned.get("warmups", {}),
                offsets=offsets,
            )
        )
    return dict(doc, members=members)


def churn_doc() -> Doc:
    """The churn tests' starting group: a join with a changelog, an aggregate
    with one, a global table, one standby, four workers on their own hosts and
    two racks."""
    topics = {"imp": 12, "clk": 12, "imp-changelog": 12, "agg": 5, "agg-changelog": 5, "g": 3}
    return {
        "topics": topics,
        "copartition": [["imp", "clk"]],
        "changelogs": ["imp-changelog", "agg-changelog"],
        "global_changelogs": ["g"],
        "standby_replicas": 1,
        "acceptable_recovery_lag": 50,
        "members": [
            {"id": f"w{i}", "topics": sorted(topics), "host": f"h{i}", "rack": f"r{i % 2}"}
            for i in range(4)
        ],
    }


def ad_join_doc(members: int = 8, **extra: Any) -> Doc:
    """faust's peer case a: impressions+clicks and two changelogs, 64 partitions, 1 standby."""
    topics = {"imp": 64, "clk": 64, "imp-changelog": 64, "clk-changelog": 64}
    return {
        "topics": topics,
        "copartition": [["imp", "clk"]],
        "changelogs": ["imp-changelog", "clk-changelog"],
        "standby_replicas": 1,
        "members": [{"id": f"w{i}", "topics": sorted(topics)} for i in range(members)],
        **extra,
    }


def _most_racks(
    owner: str, others: list[str], count: int, host: dict[str, str], rack: dict[str, Any]
) -> int:
    """Most distinct racks an active plus ``count`` standbys can span (brute force)."""
    allowed = [m for m in others if host[m] != host[owner]]
    best = 1
    for combo in itertools.combinations(allowed, count):
        if len({host[m] for m in combo}) == count:
            best = max(best, len({rack[owner], *(rack[m] for m in combo)}))
    return best
