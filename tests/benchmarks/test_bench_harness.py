"""The assignor benchmark's harness: faust peer adapter and metrics on known inputs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.assignor import faust_peer, scenarios  # noqa: E402
from benchmarks.metrics import moves, quality, tasks  # noqa: E402


def tiny_document() -> dict[str, Any]:
    """Three members, one 6-partition join (2 topics + changelog), one standby."""
    topics = ["clicks", "impressions", "state-changelog"]
    return {
        "topics": {"impressions": 6, "clicks": 6, "state-changelog": 6},
        "copartition": [["impressions", "clicks"]],
        "changelogs": ["state-changelog"],
        "global_changelogs": [],
        "standby_replicas": 1,
        "members": [{"id": f"m{i}", "topics": topics} for i in (1, 2, 3)],
    }


def output(
    actives: dict[str, dict[str, list[int]]],
    standbys: dict[str, dict[str, list[int]]] | None = None,
) -> dict[str, Any]:
    """Build an output document from per-member active (and standby) maps."""
    standbys = standbys or {}
    return {
        "assignment": {
            member: {"actives": parts, "standbys": standbys.get(member, {})}
            for member, parts in actives.items()
        },
        "generation": 1,
    }


def task_map(*partitions: int) -> dict[str, list[int]]:
    """All three topics of the tiny join at the given partitions."""
    parts = sorted(partitions)
    return {"impressions": parts, "clicks": parts, "state-changelog": parts}


def test_faust_peer_runs_faust_and_assigns_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    from faust.assignor.copartitioned_assignor import CopartitionedAssignor

    calls: list[int] = []
    real = CopartitionedAssignor.get_assignment

    def spy(self: CopartitionedAssignor) -> Any:
        calls.append(self.num_partitions)
        return real(self)

    monkeypatch.setattr(CopartitionedAssignor, "get_assignment", spy)
    document = tiny_document()
    result = faust_peer.assign_document(document)

    assert calls == [6]  # faust's own co-partitioned assignor did the work
    assert sorted(result["assignment"]) == ["m1", "m2", "m3"]
    figures = quality.evaluate(document, result)
    assert figures["violations"] == {}
    assert figures["tasks"] == 6
    assert figures["spread_total"] == 0
    for entry in result["assignment"].values():
        assert entry["actives"]["impressions"] == entry["actives"]["clicks"]
        assert set(entry["standbys"]) <= {"state-changelog"}


def test_faust_peer_rebalance_keeps_faust_behaviour_for_a_joiner() -> None:
    scenario = scenarios.SCENARIOS["a-join"]
    fresh_document = scenario.fresh_document()
    fresh = faust_peer.assign_document(fresh_document)
    document = scenario.rebalance_document(fresh_document, fresh)
    result = faust_peer.assign_document(document)
    figures = quality.evaluate(document, result, fresh, joiner="worker-00009")
    assert figures["joiner_tasks"] == 0  # faust issue #93: the newcomer gets nothing
    assert figures["moved"] == 0
    assert figures["min_moves"] == 7


def test_spread_of_a_hand_built_assignment() -> None:
    document = tiny_document()
    unbalanced = output({"m1": task_map(0, 1, 2), "m2": task_map(3, 4), "m3": task_map(5)})
    figures = quality.evaluate(document, unbalanced)
    assert figures["spread_total"] == 2
    assert figures["spread_group_max"] == 2
    assert (figures["active_min"], figures["active_max"]) == (1, 3)
    assert figures["violations"]["standby_missing"] == 6


def test_violations_are_reported() -> None:
    document = tiny_document()
    broken = output(
        {
            "m1": {"impressions": [0, 1], "clicks": [0], "state-changelog": [0, 1]},
            "m2": {"impressions": [2, 3, 4], "clicks": [1, 2, 3, 4], "state-changelog": [2, 3]},
            "m3": {"impressions": [4, 5], "clicks": [5], "state-changelog": [5]},
        },
        {"m1": {"state-changelog": [0]}, "m2": {"state-changelog": [0, 9]}},
    )
    found = quality.evaluate(document, broken)["violations"]
    assert found["split_tasks"] == 1  # partition 1: impressions/changelog on m1, clicks on m2
    assert found["duplicate_tps"] == 1  # impressions-4 on m2 and m3
    assert found["missing_tps"] == 1  # state-changelog-4
    assert found["unknown_tps"] == 1  # state-changelog-9
    assert found["standby_on_active"] == 1  # m1 holds task 0 and its standby


def test_moves_minimum_and_warm_promotions() -> None:
    document = tiny_document()
    previous = output(
        {"m1": task_map(0, 1, 2, 3), "m2": task_map(4, 5), "m3": {}},
        {"m3": {"state-changelog": [0, 1, 3]}, "m2": {"state-changelog": [2]}},
    )
    # Balanced needs 2 each: m1 must give up 2 tasks — the minimum is 2 moves.
    now = output({"m1": task_map(2, 3), "m2": task_map(4, 5), "m3": task_map(0, 1)})
    figures = quality.evaluate(document, now, previous)
    assert (figures["moved"], figures["min_moves"], figures["min_moves_exact"]) == (2, 2, True)
    assert (figures["warm"], figures["warm_possible"], figures["cold"]) == (2, 2, 0)
    worse = output({"m1": task_map(0, 1), "m2": task_map(2, 3), "m3": task_map(4, 5)})
    figures = quality.evaluate(document, worse, previous)
    assert (figures["moved"], figures["min_moves"]) == (4, 2)
    # 2 → m2 (its standby: warm); 3 → m2 although m3 had its standby; 4, 5 had none.
    assert (figures["warm"], figures["warm_possible"]) == (1, 2)
    assert (figures["cold"], figures["cold_with_standby"]) == (3, 1)


def test_minimum_moves_counts_total_balance_across_groups() -> None:
    # Scenario c's shape: ten single-topic groups of 1..10 partitions, a 5th member joins.
    # Per group alone 7 moves would do, and the total alone 11; balancing both needs 12
    # (checked by exhaustive search over who gets each group's extra partitions).
    scenario = scenarios.SCENARIOS["c-10-topics"]
    fresh_document = scenario.fresh_document()
    fresh = faust_peer.assign_document(fresh_document)
    document = scenario.rebalance_document(fresh_document, fresh)
    lay = tasks.layout(document)
    assert len(lay.groups) == 10
    assert moves.minimum_moves(lay, tasks.placement(lay, fresh)) == (12, True)


def test_scenarios_are_deterministic() -> None:
    scenario = scenarios.SCENARIOS["a-leave"]
    fresh = scenario.fresh_document()
    previous = faust_peer.assign_document(fresh)
    first = scenario.rebalance_document(fresh, previous)
    second = scenario.rebalance_document(scenario.fresh_document(), previous)
    assert first == second
    assert scenarios.changed_member(fresh, first)[0] == "leave"


def test_spread_is_capacity_weighted_when_capacities_differ() -> None:
    document = tiny_document()
    document["members"] = document["members"][:2]
    document["members"][0] = {**document["members"][0], "capacity": 2}
    weighted = output({"m1": task_map(0, 1, 2, 3), "m2": task_map(4, 5)})
    assert quality.evaluate(document, weighted)["spread_total"] == 0
    skewed = output({"m1": task_map(0, 1), "m2": task_map(2, 3, 4, 5)})
    assert quality.evaluate(document, skewed)["spread_total"] == 3


def _exhaustive_minimum(lay: tasks.Layout, before: tasks.Placement) -> int:
    """Fewest moves by trying every choice of who gets each group's extra tasks."""
    import itertools
    from collections import Counter

    members = list(lay.members)
    count = len(members)
    alive = set(members)
    held = [Counter(m for m in rows if m in alive) for rows in before.owner]
    had = sum(1 for rows in before.owner for m in rows if m is not None)
    extra_total = sum(g.partitions % count for g in lay.groups)
    per_member, overflow = divmod(extra_total, count)
    states: dict[tuple[int, ...], int] = {tuple([0] * count): 0}
    base = 0
    for group, previous in zip(lay.groups, held, strict=True):
        floor_, extra = divmod(group.partitions, count)
        base += sum(min(previous[m], floor_) for m in members)
        following: dict[tuple[int, ...], int] = {}
        for state, value in states.items():
            for chosen in itertools.combinations(range(count), extra):
                nxt = list(state)
                gain = 0
                for j in chosen:
                    nxt[j] += 1
                    gain += previous[members[j]] > floor_
                if max(nxt, default=0) <= per_member + 1:
                    key = tuple(nxt)
                    following[key] = max(following.get(key, -1), value + gain)
        states = following
    target = sorted([per_member] * (count - overflow) + [per_member + 1] * overflow)
    best = max(v for s, v in states.items() if sorted(s) == target)
    return had - base - best


def test_minimum_moves_matches_exhaustive_search_on_random_groups() -> None:
    import random

    rng = random.Random(20261122)
    for _ in range(60):
        old = [f"m{i}" for i in range(rng.randint(2, 5))]
        new = old[: rng.randint(1, len(old))] if rng.random() < 0.5 else [*old, "joiner"]
        topics = {f"t{g}": c for g, c in enumerate(rng.sample(range(1, 12), rng.randint(1, 4)))}
        document = {"topics": topics, "members": [{"id": m, "topics": sorted(topics)} for m in new]}
        actives: dict[str, dict[str, list[int]]] = {m: {} for m in old}
        for topic, partitions in topics.items():
            for p in range(partitions):
                actives[rng.choice(old)].setdefault(topic, []).append(p)
        lay = tasks.layout(document)
        before = tasks.placement(lay, output(actives))
        assert moves.minimum_moves(lay, before) == (_exhaustive_minimum(lay, before), True)


def test_warm_reachable_is_bounded_by_the_holders_quota() -> None:
    document = tiny_document()
    document["members"] = document["members"][:2]  # m3 left
    actives = {"m1": task_map(0, 1), "m2": task_map(2, 3), "m3": task_map(4, 5)}
    lay = tasks.layout(document)
    crowded = output(actives, {"m1": {"state-changelog": [4, 5]}})
    # Each survivor may reach 3 tasks: m1 can absorb only one of its two standbys.
    assert moves.warm_reachable(lay, tasks.placement(lay, crowded)) == 1
    spread_out = output(actives, {"m1": {"state-changelog": [4]}, "m2": {"state-changelog": [5]}})
    assert moves.warm_reachable(lay, tasks.placement(lay, spread_out)) == 2
