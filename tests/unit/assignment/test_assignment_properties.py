"""Property tests: invariants 1-8 of DESIGN.md on random group states, and churn."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from invariants import (
    ad_join_doc,
    check_all,
    churn_doc,
    feed_back,
    minimum_moves,
    moves,
    owners_of,
    targets_of,
    task_groups,
    warmups_of,
)

from streamjoin.assignment import assign, assign_document, parse_group_state, render_assignment

Doc = dict[str, Any]


@st.composite
def group_states(draw: st.DrawFn) -> Doc:
    """A random group: 1-4 topic groups, 1-7 members, optional history."""
    topics: dict[str, int] = {}
    copartition: list[list[str]] = []
    changelogs: list[str] = []
    for gi in range(draw(st.integers(1, 4))):
        count = draw(st.integers(1, 12))
        names = [f"t{gi}{chr(97 + i)}" for i in range(draw(st.integers(1, 3)))]
        for name in names:
            topics[name] = count
        if len(names) > 1 and draw(st.booleans()):
            copartition.append(names)
        if draw(st.booleans()):
            changelogs.append(f"t{gi}-changelog")
            topics[f"t{gi}-changelog"] = count
    global_changelogs = ["global-changelog"] if draw(st.booleans()) else []
    for t in global_changelogs:
        topics[t] = draw(st.integers(1, 4))
    all_topics = sorted(topics)
    n_members = draw(st.integers(1, 7))
    n_hosts = draw(st.integers(1, n_members))
    n_racks = draw(st.integers(1, 3))
    # several workers per host, evenly (i % hosts) or not (a host drawn per member)
    uneven = draw(st.booleans())
    uniform_caps = draw(st.booleans())
    heterogeneous = draw(st.integers(0, 4)) == 0
    members = []
    for i in range(n_members):
        subscribed = all_topics
        if heterogeneous and i > 0:
            subscribed = sorted(draw(st.sets(st.sampled_from(all_topics), min_size=1)))
        host = draw(st.integers(0, n_hosts - 1)) if uneven else i % n_hosts
        member: dict[str, Any] = {
            "id": f"w{draw(st.integers(0, 99)):02d}-{i}",
            "topics": subscribed,
            "host": f"h{host}",
            # a rack is a property of a host (H5 is exact under that rule)
            "rack": f"r{host % n_racks}",
            "capacity": 1 if uniform_caps else draw(st.integers(1, 3)),
        }
        if draw(st.booleans()):
            member["generation"] = draw(st.integers(0, 3))
            member["actives"] = {
                t: sorted(draw(st.sets(st.integers(0, topics[t] - 1), max_size=topics[t])))
                for t in subscribed
                if draw(st.booleans())
            }
            member["standbys"] = {
                t: sorted(draw(st.sets(st.integers(0, topics[t] - 1), max_size=3)))
                for t in changelogs
                if t in subscribed and draw(st.booleans())
            }
            member["offsets"] = {
                t: {
                    str(p): draw(st.integers(0, 50))
                    for p in range(topics[t])
                    if draw(st.booleans())
                }
                for t in changelogs
                if t in subscribed
            }
        members.append(member)
    # ids must be unique
    for i, m in enumerate(members):
        m["id"] = f"{m['id']}-{i}"
    return {
        "topics": topics,
        "copartition": copartition,
        "changelogs": changelogs,
        "global_changelogs": global_changelogs,
        "standby_replicas": draw(st.integers(0, 2)),
        "acceptable_recovery_lag": draw(st.integers(0, 30)),
        "members": members,
    }


def _eligible_everywhere(doc: Doc) -> bool:
    """No group without an eligible member (the core rejects those)."""
    try:
        groups = task_groups(doc)
    except ValueError:
        return False
    return all(g["eligible"] for g in groups)


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(group_states())
def test_invariants_hold_on_random_groups(doc: Doc) -> None:
    out = assign_document(doc)
    check_all(doc, out)
    # the document path renders straight from the placement: same as the frozen one
    assert out == render_assignment(assign(parse_group_state(doc)))
    for owned in out["assignment"].values():  # topics listed in order
        for kind in ("actives", "standbys", "warmups"):
            assert list(owned[kind]) == sorted(owned[kind])
    # read-only and JSON-ready (topics of a group may share one list)
    assert json.loads(json.dumps(out)) == out


@SETTINGS
@given(group_states(), st.randoms(use_true_random=False))
def test_member_order_does_not_matter(doc: Doc, rnd: random.Random) -> None:
    first = assign_document(doc)
    shuffled = dict(doc, members=rnd.sample(doc["members"], len(doc["members"])))
    assert assign_document(shuffled)["assignment"] == first["assignment"]


@SETTINGS
@given(group_states())
def test_assigning_leaves_the_document_as_it_was(doc: Doc) -> None:
    # assign_document reads the members' partition lists in place (no copies)
    again = feed_back(doc, assign_document(doc))
    before = copy.deepcopy(again)
    out = assign_document(again)
    assert again == before
    assert feed_back(again, out) == feed_back(before, out)


@SETTINGS
@given(group_states())
def test_reassigning_a_stable_assignment_moves_nothing(doc: Doc) -> None:
    out = assign_document(doc)
    # H4: once warm-ups report caught up, their tasks move to them, and one
    # follow-up rebalance reaches the target (shared hosts included: a warm-up
    # may share its active's host, so without a cap nothing is held back)
    for round_ in range(6):
        again = feed_back(doc, out)
        nxt = assign_document(again)
        check_all(again, nxt)
        assert out["stats"]["held_back"] == 0
        for mid, owned in out["assignment"].items():
            for t, parts in owned["warmups"].items():
                assert set(parts) <= set(nxt["assignment"][mid]["actives"].get(t, []))
                assert not set(parts) & set(nxt["assignment"][mid]["warmups"].get(t, []))
        assert round_ > 0 or nxt["stats"]["warmups"] == 0, "no convergence in one follow-up"
        settled = nxt["stats"]["warmups"] == 0 and nxt["stats"]["moved"] == 0
        doc, out = again, nxt
        if settled:
            break
    else:
        raise AssertionError("the assignment never settled")
    again = feed_back(doc, out)
    second = assign_document(again)
    assert second["stats"]["moved"] == 0
    if out["stats"]["relaxed_balance"]:
        # hosts left no balanced standby placement: only actives must stay put
        for mid, owned in out["assignment"].items():
            assert second["assignment"][mid]["actives"] == owned["actives"]
    else:
        assert second["assignment"] == out["assignment"]


def _churn_step(doc: Doc, out: Doc, rnd: random.Random, serial: int) -> tuple[Doc, str]:
    """Apply one random event to the state members would report after ``out``."""
    nxt = feed_back(doc, out)
    members = nxt["members"]
    all_topics = sorted(doc["topics"])
    event = rnd.choice(
        ["join", "leave", "crash", "restart-stale", "duplicate", "capacity", "rack", "host"]
    )
    if event == "join" or len(members) < 2:
        event = "join"
        members.append(
            {
                "id": f"n{serial:04d}",
                "topics": all_topics,
                "host": f"h{rnd.randrange(6)}",
                "rack": f"r{rnd.randrange(3)}",
            }
        )
    elif event in ("leave", "crash"):
        members.pop(rnd.randrange(len(members)))
    elif event == "restart-stale":
        # a restarted worker reports its assignment from an older generation,
        # including tasks someone else owns by now
        victim = members[rnd.randrange(len(members))]
        other = members[rnd.randrange(len(members))]
        merged = {
            t: sorted(set(victim["actives"].get(t, [])) | set(p))
            for t, p in other["actives"].items()
        }
        victim.update(generation=max(0, out["generation"] - 2), actives=merged)
    elif event == "duplicate":
        a, b = rnd.sample(range(len(members)), 2)
        members[b]["actives"] = {
            t: sorted(set(members[b]["actives"].get(t, [])) | set(p))
            for t, p in members[a]["actives"].items()
        }
    elif event == "capacity":
        rnd.choice(members)["capacity"] = rnd.randint(1, 3)
    elif event == "rack":
        rnd.choice(members)["rack"] = f"r{rnd.randrange(3)}"
    else:
        rnd.choice(members)["host"] = f"h{rnd.randrange(6)}"
    return nxt, event


def test_churn_keeps_every_invariant_every_round() -> None:
    rnd = random.Random(20261122)
    doc = churn_doc()
    events: dict[str, int] = {}
    out = assign_document(doc)
    for serial in range(220):
        doc, event = _churn_step(doc, out, rnd, serial)
        events[event] = events.get(event, 0) + 1
        out = assign_document(doc)
        check_all(doc, out)
        shuffled = dict(doc, members=rnd.sample(doc["members"], len(doc["members"])))
        assert assign_document(shuffled)["assignment"] == out["assignment"], f"round {serial}"
    assert len(events) == 8, events  # every kind of event happened


def test_moves_equal_the_minimum_on_a_joining_member() -> None:
    """faust issue #93: a 9th member must get its share, with the fewest moves,
    first as warm-ups (H2), then as actives once they caught up (H4)."""
    doc = ad_join_doc()
    topics = doc["topics"]
    out = assign_document(doc)
    nxt = feed_back(doc, out)
    nxt["members"].append({"id": "w8", "topics": sorted(topics)})
    second = assign_document(nxt)
    groups = task_groups(nxt)
    owners = owners_of(nxt, second, groups)
    targets = targets_of(owners, warmups_of(second, groups))
    assert owners[0].count("w8") == 0, "a task started cold although its owner is warm"
    assert targets[0].count("w8") == 7  # 64 / 9 -> 7 or 8, and 8 members already at 8
    assert second["stats"]["warmups"] == 7 and second["stats"]["moved"] == 0
    assert moves(nxt, groups, targets) == minimum_moves(nxt, groups) == 7
    check_all(nxt, second)
    # the warm-ups catch up: the follow-up rebalance moves exactly those tasks
    third_doc = feed_back(nxt, second)
    third = assign_document(third_doc)
    assert owners_of(third_doc, third, groups)[0] == targets[0]
    assert third["stats"]["warmups"] == 0 and third["stats"]["moved"] == 7
    assert third["stats"]["warm_activations"] == 7 and third["stats"]["cold_activations"] == 0
    assert third["stats"]["active_spread_per_group"] == 1
    check_all(third_doc, third)


def test_no_warmups_moves_cold_at_once() -> None:
    """max_warmup_replicas 0: today's behaviour, the joining member's share moves at once."""
    doc = ad_join_doc(max_warmup_replicas=0)
    out = assign_document(doc)
    nxt = feed_back(doc, out)
    nxt["members"].append({"id": "w8", "topics": sorted(doc["topics"])})
    second = assign_document(nxt)
    groups = task_groups(nxt)
    assert owners_of(nxt, second, groups)[0].count("w8") == 7
    assert second["stats"]["warmups"] == 0 and second["stats"]["cold_activations"] == 7
    check_all(nxt, second)


def test_the_warmup_cap_holds_back_the_rest() -> None:
    """max_warmup_replicas 3: three warm-ups per round, the rest stays put, then converges."""
    doc = ad_join_doc(max_warmup_replicas=3)
    out = assign_document(doc)
    doc = feed_back(doc, out)
    doc["members"].append({"id": "w8", "topics": sorted(doc["topics"])})
    groups = task_groups(doc)
    for round_ in range(1, 5):
        out = assign_document(doc)
        check_all(doc, out)
        owners = owners_of(doc, out, groups)
        assert out["stats"]["cold_activations"] == 0
        # its warm-ups (and standbys that caught up) become actives; never more
        # than three restore at once
        assert owners[0].count("w8") >= min(7, 3 * (round_ - 1))
        assert out["stats"]["warmups"] <= 3
        doc = feed_back(doc, out)
    assert out["stats"]["warmups"] == 0
    assert out["stats"]["active_spread_per_group"] == 1


def test_output_is_json_serialisable() -> None:
    doc: Doc = {"topics": {"a": 2}, "members": [{"id": "x", "topics": ["a"]}]}
    json.dumps(assign_document(doc))


@st.composite
def grown_groups(draw: st.DrawFn) -> tuple[Doc, Doc]:
    """A balanced assignment of a larger group, then members join and leave."""
    n = draw(st.integers(5, 120))
    topics: dict[str, int] = {}
    for gi in range(draw(st.integers(1, 12))):
        count = draw(st.integers(1, 3 * n))
        topics[f"s{gi}"] = count
        topics[f"s{gi}-changelog"] = count
    doc: Doc = {
        "topics": topics,
        "copartition": [[f"s{gi}", f"s{gi}-changelog"] for gi in range(len(topics) // 2)],
        "changelogs": [t for t in topics if t.endswith("changelog")],
        "standby_replicas": draw(st.integers(0, 1)),
        "members": [{"id": f"m{i:03d}", "topics": sorted(topics)} for i in range(n)],
    }
    first = assign_document(doc)
    nxt = feed_back(doc, first)
    for _ in range(draw(st.integers(0, 3))):
        nxt["members"].pop(draw(st.integers(0, len(nxt["members"]) - 1)))
    for j in range(draw(st.integers(0 if len(nxt["members"]) else 1, 3))):
        nxt["members"].append({"id": f"new{j}", "topics": sorted(topics)})
    return doc, nxt


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grown_groups())
def test_rebalancing_larger_groups_moves_the_minimum(docs: tuple[Doc, Doc]) -> None:
    _, nxt = docs
    out = assign_document(nxt)
    check_all(nxt, out)
