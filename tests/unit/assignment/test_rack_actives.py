"""Rack-aware active placement (issue 41): nothing changes without replica racks,
the exhaustive minimum on small groups, every invariant under churn."""

from __future__ import annotations

import collections
import copy
import hashlib
import itertools
import json
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from invariants import check_all, feed_back, task_groups

from streamjoin.assignment import assign, assign_document, parse_group_state
from streamjoin.assignment.explain import explain

Doc = dict[str, Any]

#: stats added with rack-aware placement: left out when comparing with older outputs
RACK_STATS = (
    "cross_rack_tasks",
    "cross_rack_traffic",
    "target_cross_rack_tasks",
    "target_cross_rack_traffic",
)

#: sha256 of the outputs of :func:`_seeded_docs` (rack stats left out), made by the
#: assignor at 72fc494, before rack-aware placement: without replica racks (or with
#: rack_traffic_cost 0) every assignment must stay exactly what it was
BEFORE_RACKS = "2de678261d488eac028dbbc44375060b90d4b603941e1302fca3743c896cb3b3"


def _seeded_docs() -> list[Doc]:
    """Seeded group states: several groups, racks and hosts on members, history
    from a previous round and a change (a member joins or leaves)."""
    rnd = random.Random(41)
    docs: list[Doc] = []
    for case in range(40):
        topics: dict[str, int] = {}
        copartition: list[list[str]] = []
        changelogs: list[str] = []
        for gi in range(rnd.randint(1, 3)):
            count = rnd.randint(1, 12) * 3 + gi  # distinct counts: distinct groups
            topics[f"in{gi}a"] = topics[f"in{gi}b"] = count
            copartition.append([f"in{gi}a", f"in{gi}b"])
            if rnd.random() < 0.7:
                changelogs.append(f"in{gi}-changelog")
                topics[f"in{gi}-changelog"] = count
        n = rnd.randint(2, 9)
        members = [
            {
                "id": f"w{i:02d}",
                "topics": sorted(topics),
                "host": f"h{i % rnd.randint(1, n)}",
                "rack": f"zone-{i % 3}",
            }
            for i in range(n)
        ]
        doc: Doc = {
            "topics": topics,
            "copartition": copartition,
            "changelogs": changelogs,
            "standby_replicas": rnd.randint(0, 2),
            "acceptable_recovery_lag": 10,
            "members": members,
        }
        docs.append(doc)
        if case % 2:
            nxt = feed_back(doc, assign_document(doc))
            if rnd.random() < 0.5 and len(nxt["members"]) > 2:
                nxt["members"].pop(rnd.randrange(len(nxt["members"])))
            else:
                nxt["members"].append(
                    {"id": "w99", "topics": sorted(topics), "host": "h99", "rack": "zone-1"}
                )
            docs.append(nxt)
    return docs


def _replica_racks(doc: Doc, rnd: random.Random, replicas: int = 2) -> dict[str, list[list[str]]]:
    racks = ["zone-0", "zone-1", "zone-2"]
    return {
        topic: [sorted(rnd.sample(racks, replicas)) for _ in range(count)]
        for topic, count in doc["topics"].items()
    }


def _without_rack_stats(out: Doc) -> Doc:
    out = copy.deepcopy(out)
    for key in RACK_STATS:
        out["stats"].pop(key)
    return out


def _digest(outputs: list[Doc]) -> str:
    text = json.dumps([_without_rack_stats(o) for o in outputs], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def test_without_replica_racks_every_assignment_is_what_it_was() -> None:
    outputs = [assign_document(doc) for doc in _seeded_docs()]
    assert _digest(outputs) == BEFORE_RACKS
    for out in outputs:
        assert out["stats"]["cross_rack_tasks"] == 0
        assert out["stats"]["target_cross_rack_tasks"] == 0


def test_rack_traffic_cost_zero_places_actives_as_if_racks_were_unknown() -> None:
    rnd = random.Random(7)
    docs = _seeded_docs()
    blind = [
        assign_document(dict(doc, partition_racks=_replica_racks(doc, rnd), rack_traffic_cost=0))
        for doc in docs
    ]
    assert _digest(blind) == BEFORE_RACKS
    # the cross-rack figures are still reported: that is what turning it on saves
    assert sum(out["stats"]["cross_rack_tasks"] for out in blind) > 0


def _traffic(doc: Doc, group: dict[str, Any], p: int, member: str) -> int:
    rack = next(m.get("rack") for m in doc["members"] if m["id"] == member)
    weights = doc.get("partition_weights", {})
    return sum(
        weights.get(t, [1] * doc["topics"][t])[p]
        for t in group["topics"]
        if t in doc["partition_racks"]
        and doc["partition_racks"][t][p]
        and rack not in doc["partition_racks"][t][p]
    )


def _minimum_traffic(doc: Doc) -> int:
    """The least cross-rack traffic over every assignment whose active counts
    differ by at most one per group and in total (equal capacities), brute force."""
    groups = task_groups(doc)
    ids = sorted(m["id"] for m in doc["members"])
    best = None
    choices = [itertools.product(ids, repeat=g["partitions"]) for g in groups]
    for combo in itertools.product(*choices):
        totals: collections.Counter[str] = collections.Counter()
        ok = True
        for owners in combo:
            counts = collections.Counter(owners)
            per = [counts[i] for i in ids]
            ok = ok and max(per) - min(per) <= 1
            totals.update(owners)
        per_total = [totals[i] for i in ids]
        if not ok or max(per_total) - min(per_total) > 1:
            continue
        cost = sum(
            _traffic(doc, g, p, owner)
            for g, owners in zip(groups, combo, strict=True)
            for p, owner in enumerate(owners)
        )
        best = cost if best is None else min(best, cost)
    assert best is not None
    return best


@st.composite
def small_groups(draw: st.DrawFn) -> Doc:
    """One co-partitioned join (2 inputs and a changelog), 2-4 members on 1-3
    racks (or none), random replica racks (some unknown) and weights."""
    count = draw(st.integers(1, 6))
    topics = {"left": count, "right": count, "left-changelog": count}
    racks = ["r1", "r2", "r3"][: draw(st.integers(1, 3))]
    members = []
    for i in range(draw(st.integers(2, 4))):
        member: Doc = {"id": f"m{i}", "topics": sorted(topics), "host": f"h{i}"}
        rack = draw(st.sampled_from([*racks, None]))
        if rack is not None:
            member["rack"] = rack
        members.append(member)
    replica_racks = {
        t: [sorted(draw(st.sets(st.sampled_from(racks), max_size=len(racks)))) for _ in range(n)]
        for t, n in topics.items()
    }
    doc: Doc = {
        "topics": topics,
        "copartition": [["left", "right"]],
        "changelogs": ["left-changelog"],
        "members": members,
        "partition_racks": replica_racks,
        "standby_replicas": draw(st.integers(0, 1)),
    }
    if draw(st.booleans()):
        doc["partition_weights"] = {
            t: [draw(st.integers(0, 3)) for _ in range(n)] for t, n in topics.items()
        }
    return doc


SMALL = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SMALL
@given(small_groups())
def test_a_fresh_group_reaches_the_least_cross_rack_traffic(doc: Doc) -> None:
    out = assign_document(doc)
    check_all(doc, out, rack_moves=True)
    assert out["stats"]["cross_rack_traffic"] == _minimum_traffic(doc)


@SMALL
@given(small_groups(), st.randoms(use_true_random=False))
def test_a_rebalanced_group_reaches_it_when_moves_are_free(doc: Doc, rnd: random.Random) -> None:
    """History from an assignment made under other racks: with rack_move_cost 0 the
    target (where tasks go once warm) reaches the minimum too."""
    before = dict(doc, partition_racks=_shuffled(doc["partition_racks"], rnd))
    nxt = feed_back(before, assign_document(before), warmup_offset=rnd.choice([100, 0]))
    nxt = dict(nxt, partition_racks=doc["partition_racks"], rack_move_cost=0)
    out = assign_document(nxt)
    check_all(nxt, out, rack_moves=True)
    assert out["stats"]["target_cross_rack_traffic"] == _minimum_traffic(nxt)


def _shuffled(racks: dict[str, list[list[str]]], rnd: random.Random) -> dict[str, Any]:
    return {t: rnd.sample(rows, len(rows)) for t, rows in racks.items()}


def _two_groups(rnd: random.Random) -> Doc:
    first = rnd.randint(1, 4)
    second = rnd.choice([n for n in range(1, 4) if n != first])
    topics = {"x": first, "x-changelog": first, "y": second}
    racks = ["a", "b", "c"][: rnd.randint(2, 3)]
    return {
        "topics": topics,
        "changelogs": ["x-changelog"],
        "members": [
            {"id": f"m{i}", "topics": sorted(topics), "rack": rnd.choice(racks)}
            for i in range(rnd.randint(2, 3))
        ],
        "partition_racks": {
            t: [sorted(rnd.sample(racks, rnd.randint(1, len(racks)))) for _ in range(n)]
            for t, n in topics.items()
        },
    }


def test_two_groups_reach_the_least_traffic_on_a_seeded_sample() -> None:
    """Two groups are coupled through the total balance: members trade slots
    between them. One case in 150 stays above the minimum (documented)."""
    rnd = random.Random(1)
    above = 0
    for _ in range(150):
        doc = _two_groups(rnd)
        out = assign_document(doc)
        check_all(doc, out, rack_moves=True)
        least = _minimum_traffic(doc)
        blind = assign_document(dict(doc, rack_traffic_cost=0))["stats"]["cross_rack_traffic"]
        assert least <= out["stats"]["cross_rack_traffic"] <= blind
        assert out["stats"]["cross_rack_traffic"] <= least + 1
        above += out["stats"]["cross_rack_traffic"] > least
    assert above <= 2, above


def _churn(rnd: random.Random, doc: Doc, out: Doc, serial: int) -> Doc:
    nxt = feed_back(doc, out, warmup_offset=rnd.choice([100, 100, 0]))
    members = nxt["members"]
    event = rnd.choice(["join", "leave", "crash-restart", "stale", "host"])
    if event == "join" or len(members) < 3:
        host = rnd.randrange(5)
        members.append(
            {
                "id": f"n{serial:03d}",
                "topics": sorted(doc["topics"]),
                "host": f"h{host}",
                "rack": f"zone-{host % 3}",
            }
        )
    elif event == "leave":
        members.pop(rnd.randrange(len(members)))
    elif event == "crash-restart":  # back with its state, claims from an older generation
        victim = rnd.choice(members)
        victim["generation"] = max(0, out["generation"] - 2)
    elif event == "stale":
        a, b = rnd.sample(range(len(members)), 2)
        members[b]["actives"] = {
            t: sorted(set(members[b]["actives"].get(t, [])) | set(p))
            for t, p in members[a]["actives"].items()
        }
    else:  # a worker moves host, and with it rack (racks are a property of hosts)
        host = rnd.randrange(5)
        rnd.choice(members).update(host=f"h{host}", rack=f"zone-{host % 3}")
    return nxt


def test_churn_keeps_every_invariant_and_pays_moves_only_with_traffic() -> None:
    """Joins, leaves, crash-restarts, stale claims, several workers per host: every
    invariant holds, member order does not matter, and against the rack-oblivious
    assignment of the same round the target never costs more
    (10 x traffic + moves, the default costs)."""
    rnd = random.Random(20261128)
    topics = {"imp": 12, "clk": 12, "imp-changelog": 12, "agg": 5, "agg-changelog": 5}
    doc: Doc = {
        "topics": topics,
        "copartition": [["clk", "imp"]],
        "changelogs": ["agg-changelog", "imp-changelog"],
        "standby_replicas": 1,
        "acceptable_recovery_lag": 50,
        "members": [
            {
                "id": f"w{i}",
                "topics": sorted(topics),
                "host": f"h{i // 2}",
                "rack": f"zone-{(i // 2) % 3}",
            }
            for i in range(6)
        ],
    }
    doc["partition_racks"] = _replica_racks(doc, rnd)
    out = assign_document(doc)
    saved = 0
    for serial in range(150):
        doc = _churn(rnd, doc, out, serial)
        out = assign_document(doc)
        check_all(doc, out, rack_moves=True)
        shuffled = dict(doc, members=rnd.sample(doc["members"], len(doc["members"])))
        assert assign_document(shuffled)["assignment"] == out["assignment"], serial
        blind = assign_document(dict(doc, rack_traffic_cost=0))["stats"]
        ours = out["stats"]
        cost = 10 * ours["target_cross_rack_traffic"] + ours["target_moved"]
        assert cost <= 10 * blind["target_cross_rack_traffic"] + blind["target_moved"], serial
        saved += blind["target_cross_rack_traffic"] - ours["target_cross_rack_traffic"]
    assert saved > 0


def test_a_stable_group_with_racks_moves_nothing() -> None:
    rnd = random.Random(3)
    doc = _seeded_docs()[4]
    doc = dict(doc, partition_racks=_replica_racks(doc, rnd))
    out = assign_document(doc)
    for _ in range(3):  # warm-ups catch up, then nothing changes
        doc = feed_back(doc, out)
        out = assign_document(doc)
    again = assign_document(feed_back(doc, out))
    assert again["stats"]["moved"] == 0
    assert again["assignment"] == out["assignment"]


def test_explain_says_why_a_task_reads_across_racks() -> None:
    """Three members in zone-a, one task whose replicas are all in zone-b: it
    crosses racks with nobody there; the others find a member in their rack."""
    topics = {"in": 4, "in-changelog": 4}
    doc: Doc = {
        "topics": topics,
        "changelogs": ["in-changelog"],
        "members": [
            {"id": f"m{i}", "topics": sorted(topics), "rack": rack}
            for i, rack in enumerate(["zone-a", "zone-a", "zone-c", "zone-c"])
        ],
        "partition_racks": {
            t: [["zone-b"], ["zone-a"], ["zone-c"], ["zone-a", "zone-c"]] for t in topics
        },
    }
    result = assign(parse_group_state(doc))
    assert result.stats["cross_rack_tasks"] == 1
    assert [(g, p, traffic, why) for g, p, _, traffic, why in result.cross_rack] == [
        (0, 0, 2, "no member there")
    ]
    text = explain(result)
    assert "cross-rack (1" in text
    assert "in+in-changelog[0]" in text and "no member there" in text
