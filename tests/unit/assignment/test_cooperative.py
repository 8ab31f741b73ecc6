"""Cooperative rebalancing in the assignment core: one owner at a time (R1),
ambiguous claims withheld from everyone (R4), warm handovers (R5), eager as
soon as one member is (R6), and convergence once the group stops changing."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from invariants import ad_join_doc, check_all, churn_doc, feed_back
from test_assignment_properties import _churn_step

from streamjoin.assignment import assign, assign_document, parse_group_state
from streamjoin.assignment.cooperative import check_one_owner
from streamjoin.assignment.errors import AssignmentError, UnsafeHandoverError

Doc = dict[str, Any]


def cooperative(doc: Doc) -> Doc:
    """*doc* with every member cooperative."""
    return dict(doc, members=[dict(m, cooperative=True) for m in doc["members"]])


def handovers(doc: Doc, out: Doc) -> list[tuple[str, int, str, list[str]]]:
    """Partitions *out* gives a member while another member may still run them
    (computed here from the documents, not by the core's own check): (topic,
    partition, new owner, old owners). A member of the latest generation runs
    what it claims if it is cooperative; a member reporting an older one (its
    metadata came late) runs what it claimed then if it was cooperative, and
    what the leader's last assignment gave it, except what a member of the
    latest generation claims."""
    last = doc.get("last_assignment") or {"generation": None, "actives": {}}
    gens = [m["generation"] for m in doc["members"] if m.get("generation") is not None]
    gens += [last["generation"]] if last["generation"] is not None else []
    if not gens:
        return []
    latest = max(gens)
    remembered = last["actives"] if last["generation"] == latest else {}
    runs: dict[str, set[tuple[str, int]]] = {}
    for m in doc["members"]:
        if m.get("cooperative") and m.get("generation") == latest:
            runs[m["id"]] = {(t, p) for t, ps in m.get("actives", {}).items() for p in ps}
    taken = set().union(*runs.values())
    for m in doc["members"]:
        if m.get("generation") is not None and m["generation"] >= latest:
            continue
        late = {(t, p) for t, ps in remembered.get(m["id"], {}).items() for p in ps}
        if m.get("cooperative"):
            late |= {(t, p) for t, ps in m.get("actives", {}).items() for p in ps}
        runs[m["id"]] = late - taken
    found = []
    globals_ = set(doc.get("global_changelogs", []))
    for mid, owned in sorted(out["assignment"].items()):
        for topic, parts in sorted(owned["actives"].items()):
            for p in parts:
                others = sorted(o for o, tps in runs.items() if o != mid and (topic, p) in tps)
                if others and topic not in globals_:
                    found.append((topic, p, mid, others))
    return found


def settle(doc: Doc, out: Doc, limit: int = 6) -> tuple[Doc, Doc, int]:
    """Rebalance with nothing changing until the assignment is steady (it
    withholds nothing, warms nothing up, and the next round gives the same);
    returns its state, the assignment and the rounds after *out* it took."""
    for rounds in range(limit + 1):
        doc = feed_back(doc, out)
        nxt = assign_document(doc)
        assert handovers(doc, nxt) == []
        steady = out["stats"]["withheld"] == 0 and out["stats"]["warmups"] == 0
        if steady and nxt["assignment"] == out["assignment"]:
            return doc, nxt, rounds
        out = nxt
    raise AssertionError(f"no steady assignment after {limit} rounds: {out['stats']}")


def test_a_joining_member_warms_up_then_is_withheld_its_share_then_takes_it_warm() -> None:
    doc = cooperative(ad_join_doc(members=2))
    out = assign_document(doc)
    assert out["stats"]["protocol"] == "cooperative" and out["stats"]["withheld"] == 0
    doc = feed_back(doc, out)
    doc["members"].append({"id": "w2", "topics": sorted(doc["topics"]), "cooperative": True})
    # round 1: w2 is not caught up: its share stays where it is, w2 warms it up
    warming = assign_document(doc)
    assert warming["stats"]["withheld"] == 0 and warming["assignment"]["w2"]["actives"] == {}
    share = warming["stats"]["warmups"]
    assert share > 0
    # round 2: the warm-ups caught up; the tasks are withheld from everyone: their
    # old owners give them up and rejoin, w2 keeps restoring them
    doc = feed_back(doc, warming)
    first = assign_document(doc)
    assert handovers(doc, first) == []
    assert first["stats"]["withheld"] == share
    w2 = first["assignment"]["w2"]
    assert w2["actives"] == {}
    assert sum(map(len, w2["warmups"].values())) >= share  # (both changelogs)
    for m in doc["members"][:2]:
        assert set(first["assignment"][m["id"]]["actives"]["imp"]) < set(m["actives"]["imp"])
    # round 3, the follow-up: w2 takes them warm, nothing is withheld any more
    doc = feed_back(doc, first)
    second = assign_document(doc)
    assert handovers(doc, second) == []
    assert second["stats"]["withheld"] == 0 and second["stats"]["cold_activations"] == 0
    assert len(second["assignment"]["w2"]["actives"]["imp"]) == share
    check_all(doc, second)


def test_a_task_two_live_members_claim_is_withheld_from_both() -> None:
    doc = cooperative(ad_join_doc(members=3))
    out = assign_document(doc)
    doc = feed_back(doc, out)
    a, b = doc["members"][0], doc["members"][1]
    stolen = b["actives"]["imp"][0]
    a["actives"] = {t: sorted({*ps, stolen}) if t in ("imp", "clk") else ps
                    for t, ps in a["actives"].items()}  # fmt: skip
    out = assign_document(doc)
    assert out["stats"]["contested"] == 1 and out["stats"]["withheld"] == 1
    for owned in out["assignment"].values():
        assert stolen not in owned["actives"].get("imp", [])
    doc, out, rounds = settle(doc, out)
    assert rounds <= 2
    assert sum(stolen in o["actives"]["imp"] for o in out["assignment"].values()) == 1


def test_a_member_that_lost_its_membership_holds_nothing_back() -> None:
    """A member back from a session loss rejoins non-cooperative (it gave
    everything up) with its last generation's claims: nothing waits for it."""
    doc = cooperative(ad_join_doc(members=3))
    out = assign_document(doc)
    doc = feed_back(doc, out)
    doc = feed_back(doc, assign_document(doc))
    back = doc["members"][2]
    back.update(generation=back["generation"] - 1, cooperative=False)
    doc["members"].append({"id": "w3", "topics": sorted(doc["topics"]), "cooperative": True})
    out = assign_document(doc)
    assert out["stats"]["withheld"] == 0
    assert handovers(doc, out) == []


def late(doc: Doc, before: Doc, member: int, out: Doc) -> Doc:
    """*doc* where member *member* reports what it reported in *before* (the
    broker handed the leader the metadata of its previous JoinGroup), and the
    leader remembers *out*, the assignment it made last."""
    doc = copy.deepcopy(doc)
    doc["members"][member] = copy.deepcopy(before["members"][member])
    actives = {mid: owned["actives"] for mid, owned in out["assignment"].items()}
    doc["last_assignment"] = {"generation": out["generation"], "actives": actives}
    return doc


def test_a_member_whose_metadata_comes_late_keeps_what_it_runs() -> None:
    """The embedded broker answered the leader's JoinGroup with the metadata w1
    sent a rebalance earlier: w1 still runs its tasks, the ones the previous
    assignment gave it included; none of them goes to anybody else until w1
    has given it up."""
    doc = cooperative(ad_join_doc(members=3))
    doc = feed_back(doc, assign_document(doc))
    before = copy.deepcopy(doc)
    gone = doc["members"].pop(2)  # a scale-in: w2's tasks go to w0 and w1
    out = assign_document(doc)
    doc = feed_back(doc, out)
    got = {p for p in out["assignment"]["w1"]["actives"]["imp"]}
    assert got > set(before["members"][1]["actives"]["imp"])  # w1 took some of w2's
    # w2 comes back; w1's JoinGroup is late: the leader sees w1's old report
    doc["members"].append(dict(gone, actives={}, generation=None, cooperative=False))
    stale = late(doc, dict(before, members=[*before["members"][:2], gone]), 1, out)
    assert stale["members"][1]["generation"] < out["generation"]
    nxt = assign_document(stale)
    assert handovers(stale, nxt) == []
    for mid, owned in nxt["assignment"].items():
        if mid != "w1":
            assert not got & set(owned["actives"].get("imp", [])), mid
    # without the leader's memory, the tasks w1 got last time would move at once
    forgetful = dict(stale, last_assignment=None)
    moved = assign_document(forgetful)
    assert any(
        got & set(owned["actives"].get("imp", []))
        for mid, owned in moved["assignment"].items()
        if mid != "w1"
    )
    with pytest.raises(UnsafeHandoverError):
        state = parse_group_state(stale)
        given = {mid: owned["actives"] for mid, owned in moved["assignment"].items()}
        check_one_owner(state.members, given, state.global_changelogs, state.last_assignment)


def test_the_last_assignment_is_checked_like_the_rest() -> None:
    doc = ad_join_doc(members=1)
    for bad, match in [
        ({"actives": {}}, "generation"),
        ({"generation": -1, "actives": {}}, "generation"),
        ({"generation": 1, "actives": {"w0": {"nope": [0]}}}, "nope"),
        ({"generation": 1, "actives": {"w0": {"imp": [-1]}}}, "imp"),
        ({"generation": 1, "when": 2}, "when"),
    ]:
        with pytest.raises(AssignmentError, match=match):
            assign_document(dict(doc, last_assignment=bad))


def test_an_eager_members_claims_are_not_live_a_cooperative_members_still_are() -> None:
    """A mixed group (a rolling upgrade): the eager member gave its tasks up
    before it rejoined, the cooperative one did not."""
    doc = cooperative(ad_join_doc(members=2))
    doc = feed_back(doc, assign_document(doc))
    doc = feed_back(doc, assign_document(doc))
    doc["members"][1]["cooperative"] = False  # w1 revoked everything
    doc["members"].append({"id": "w2", "topics": sorted(doc["topics"]), "cooperative": True})
    warming = assign_document(doc)
    assert warming["stats"]["protocol"] == "mixed"
    doc = feed_back(doc, warming)
    doc["members"][1]["cooperative"] = False
    out = assign_document(doc)
    assert handovers(doc, out) == []
    w0_before = set(doc["members"][0]["actives"]["imp"])
    w1_before = set(doc["members"][1]["actives"]["imp"])
    w2_now = set(out["assignment"]["w2"]["actives"].get("imp", []))
    assert w2_now and w2_now <= w1_before  # w1's tasks move at once
    w0_now = set(out["assignment"]["w0"]["actives"]["imp"])
    assert out["stats"]["withheld"] == len(w0_before - w0_now)
    assert not w2_now & w0_before  # w0's wait a round


def test_the_leaders_check_refuses_two_owners_at_once() -> None:
    doc = cooperative(ad_join_doc(members=2))
    state = parse_group_state(feed_back(doc, assign_document(doc)))
    w0, w1 = state.members
    swapped = {"w0": dict(w1.actives), "w1": dict(w0.actives)}
    with pytest.raises(UnsafeHandoverError) as caught:
        check_one_owner(state.members, swapped, state.global_changelogs)
    assert isinstance(caught.value, AssignmentError)
    assert "still own" in str(caught.value) and "cooperative=False" in str(caught.value)
    check_one_owner(state.members, {m.id: dict(m.actives) for m in state.members}, frozenset())


def test_the_cooperative_flag_must_be_a_boolean() -> None:
    doc = ad_join_doc(members=1)
    doc["members"][0]["cooperative"] = "yes"
    with pytest.raises(AssignmentError, match="cooperative"):
        assign_document(doc)


def test_churn_never_hands_a_partition_over_in_one_generation_and_converges() -> None:
    """Joins, leaves, crashes, stale restarts, duplicate claims, capacity, rack and
    host changes, every round cooperative but now and then one eager member: no
    partition is ever given to a member while another live member claims it;
    the result does not depend on member order; whenever the group stops
    changing, it settles within two rounds into an assignment that keeps every
    invariant."""
    rnd = random.Random(20261126)
    doc: Doc = cooperative(churn_doc())
    out = assign_document(doc)
    events: dict[str, int] = {}
    withheld = settled = 0
    for serial in range(160):
        before = doc
        doc, event = _churn_step(doc, out, rnd, serial)
        doc = cooperative(doc)
        if rnd.random() < 0.25:  # a member that gave its tasks up (eager this time)
            rnd.choice(doc["members"])["cooperative"] = False
            event += "+eager"
        ids = [m["id"] for m in before["members"]]
        if rnd.random() < 0.2 and event.startswith(("join", "capacity", "rack", "host")):
            # the broker hands the leader a member's previous report (it came late)
            m = rnd.choice([i for i, m in enumerate(doc["members"]) if m["id"] in ids])
            doc["members"][m] = copy.deepcopy(before["members"][ids.index(doc["members"][m]["id"])])
            event += "+late"
        doc["last_assignment"] = {
            "generation": out["generation"],
            "actives": {mid: owned["actives"] for mid, owned in out["assignment"].items()},
        }
        events[event] = events.get(event, 0) + 1
        out = assign_document(doc)
        assert handovers(doc, out) == [], f"round {serial} ({event})"
        withheld += out["stats"]["withheld"]
        shuffled = dict(doc, members=rnd.sample(doc["members"], len(doc["members"])))
        assert assign_document(shuffled) == out, f"round {serial}"
        if serial % 8 == 7:  # the group stops changing for a while
            steady_doc, steady, rounds = settle(copy.deepcopy(doc), out)
            assert rounds <= 2, f"round {serial}: {rounds} rounds to settle"
            check_all(steady_doc, steady)
            settled += 1
    assert len({e.split("+")[0] for e in events}) == 8, events
    assert sum(n for e, n in events.items() if "+eager" in e) > 20
    assert sum(n for e, n in events.items() if e.endswith("+late")) > 5, events
    assert withheld > 20 and settled == 20


def test_assign_and_assign_document_agree_on_a_withholding_round() -> None:
    doc = cooperative(ad_join_doc(members=2))
    doc = feed_back(doc, assign_document(doc))
    doc["members"].append({"id": "w2", "topics": sorted(doc["topics"]), "cooperative": True})
    doc = feed_back(doc, assign_document(doc))  # w2's warm-ups caught up
    result = assign(parse_group_state(doc))
    out = assign_document(doc)
    assert result.stats["withheld"] == out["stats"]["withheld"] > 0
    for mid, owned in result.members.items():
        assert {t: list(p) for t, p in owned.actives.items()} == out["assignment"][mid]["actives"]
