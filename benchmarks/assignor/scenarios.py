"""Deterministic group-state documents for the assignor benchmark.

Every scenario builds a *fresh* document (no member reports a previous assignment) and,
from an assignor's own fresh result, a *rebalance* document: the surviving members report
what that assignor gave them (actives, standbys, the generation it returned, changelog
offsets), then one change is applied — a member joins or a member leaves.

Scenarios named ``*-racks`` (issue 41) are a, b, e and f with broker racks: the same
document plus ``partition_racks`` (:func:`with_replica_racks`), three racks
``zone-1..3`` matching the members' zones, two replicas per partition.  The benchmark
also times streamjoin on the same document without ``partition_racks`` (for a, b and e
that is exactly the plain scenario's document) to show what rack-aware placement costs.

Documents use the shared group-state format of ``streamjoin assign`` (see docs/assignment.rst).
Everything that could vary (which member leaves, reported standby lags) comes from a
``random.Random`` seeded per scenario, and every iteration is over sorted keys, so a
scenario builds byte-for-byte the same document on every run.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Document = dict[str, Any]
Output = Mapping[str, Any]
Change = Literal["join", "leave"]

#: Changelog end offset reported for a task's active copy is ``END_OFFSET_BASE`` plus a
#: per-partition spread; standby copies report that minus a small seeded lag (always
#: below ``ACCEPTABLE_RECOVERY_LAG``, so every surviving standby counts as caught up).
END_OFFSET_BASE = 100_000
ACCEPTABLE_RECOVERY_LAG = 10_000
MAX_STANDBY_LAG = 500


@dataclass(frozen=True)
class Scenario:
    """One benchmark scenario: how to build its fresh document and what changes next."""

    name: str
    title: str
    change: Change
    quick: bool
    seed: int
    build: Callable[[], Document]
    #: members that join at once (``change == "join"``)
    joiners: int = 1
    #: the scenario this one adds broker racks to (``*-racks`` scenarios)
    plain: str | None = None
    #: streamjoin's call is timed this many times in one process, the best counting
    #: (rack scenarios and their rack-less twins: the ratio of two single calls of a
    #: millisecond is mostly noise)
    repeat: int = 1

    def fresh_document(self) -> Document:
        """Build the fresh group state (no previous assignment anywhere)."""
        return self.build()

    def rebalance_document(self, fresh: Document, previous: Output) -> Document:
        """Build the rebalance group state from ``previous`` (an assignor's fresh output)."""
        return rebalance_document(fresh, previous, self.change, self.seed, self.joiners)

    def document(self, phase: str, assign: Callable[[Document], Output]) -> Document:
        """The ``"fresh"`` document, or the ``"rebalance"`` one built from what ``assign``
        (streamjoin's ``assign_document``) made of the fresh one, passed through JSON."""
        fresh = self.fresh_document()
        if phase != "rebalance":
            return fresh
        previous = json.loads(json.dumps(assign(fresh)))
        return self.rebalance_document(self.fresh_document(), previous)


def member_id(index: int) -> str:
    """Member ids sort in creation order (zero padded)."""
    return f"worker-{index:05d}"


def _members(
    count: int, topics: list[str], racks: int = 0
) -> list[dict[str, Any]]:
    # All members share one subscription list object: documents for 10,000 members
    # subscribed to hundreds of topics stay small in memory.
    members: list[dict[str, Any]] = []
    for index in range(1, count + 1):
        member: dict[str, Any] = {"id": member_id(index), "topics": topics}
        if racks:
            member["rack"] = f"zone-{(index - 1) % racks + 1}"
        members.append(member)
    return members


def _document(
    topics: dict[str, int],
    members: list[dict[str, Any]],
    *,
    copartition: list[list[str]] | None = None,
    changelogs: list[str] | None = None,
    standby_replicas: int = 0,
) -> Document:
    return {
        "topics": topics,
        "copartition": copartition or [],
        "changelogs": changelogs or [],
        "global_changelogs": [],
        "standby_replicas": standby_replicas,
        "acceptable_recovery_lag": ACCEPTABLE_RECOVERY_LAG,
        "members": members,
    }


def join_groups_document(
    *, members: int, groups: int, base_partitions: int, standby_replicas: int, racks: int
) -> Document:
    """``groups`` joins; join ``i`` has a left and a right topic plus one changelog.

    Join ``i`` has ``base_partitions + i`` partitions, so no two joins share a partition
    count and each join is exactly one co-partitioned group (three topics).
    """
    topics: dict[str, int] = {}
    copartition: list[list[str]] = []
    changelogs: list[str] = []
    for index in range(groups):
        count = base_partitions + index
        left, right = f"join{index:03d}-left", f"join{index:03d}-right"
        changelog = f"join{index:03d}-state-changelog"
        topics.update({left: count, right: count, changelog: count})
        copartition.append([left, right])
        changelogs.append(changelog)
    return _document(
        topics,
        _members(members, sorted(topics), racks=racks),
        copartition=copartition,
        changelogs=changelogs,
        standby_replicas=standby_replicas,
    )


def ad_join_document() -> Document:
    """Scenario a: 8 members, impressions ⋈ clicks with two changelogs, 64 partitions."""
    topics = {
        "impressions": 64,
        "clicks": 64,
        "ads-impressions-changelog": 64,
        "ads-clicks-changelog": 64,
    }
    return _document(
        topics,
        _members(8, sorted(topics), racks=2),
        copartition=[["impressions", "clicks"]],
        changelogs=["ads-clicks-changelog", "ads-impressions-changelog"],
        standby_replicas=1,
    )


def small_topics_document() -> Document:
    """Scenario c: 4 members, topics t01..t10 with 1..10 partitions, stateless."""
    topics = {f"t{count:02d}": count for count in range(1, 11)}
    return _document(topics, _members(4, sorted(topics)))


def kafka_scale_document() -> Document:
    """Scenario d: 500 topics × 2000 partitions (1M topic-partitions), 2000 members.

    All topics have the same partition count and the same subscribers, so both assignors
    see ONE co-partitioned group of 500 topics: 2000 tasks of 500 partitions each, one
    task per member.  This is the grouping rule of DESIGN.md (and faust's), not a choice
    of the benchmark: unrelated topics that happen to match are placed together.
    """
    topics = {f"topic-{index:03d}": 2000 for index in range(500)}
    return _document(topics, _members(2000, sorted(topics)))


def near_full_standbys_document() -> Document:
    """Scenario f: 46 members, 178 tasks of three co-partitioned topics and a changelog,
    45 standbys per task (one copy on every member): the case of faust-streaming's
    ``test_add_new_clients`` where standby placement used to take seconds (issue 41)."""
    topics = {"bar": 178, "baz": 178, "foo": 178, "store-changelog": 178}
    return _document(
        topics,
        _members(46, sorted(topics)),
        copartition=[["bar", "baz", "foo"]],
        changelogs=["store-changelog"],
        standby_replicas=45,
    )


ZONES = 3
REPLICATION = 2


def replica_racks(
    partitions: int, shift: int, racks: int = ZONES, replication: int = REPLICATION,
    prefix: str = "zone-",
) -> list[list[str]]:
    """Partition ``p``'s replicas on racks ``prefix(p + shift) % racks + 1`` and the
    next ``replication - 1`` racks round the ring: the leader's rack rotates with the
    partition, the way Kafka spreads a topic's replicas over racks.  Partitions on the
    same racks share one row object (so do documents the assignor parses)."""
    rows = [
        [f"{prefix}{(first + k) % racks + 1}" for k in range(replication)]
        for first in range(racks)
    ]
    return [rows[(p + shift) % racks] for p in range(partitions)]


def with_replica_racks(document: Document, shifts: Mapping[str, int]) -> Document:
    """``document`` with ``partition_racks`` for every topic of ``shifts`` (topic ->
    shift of :func:`replica_racks`).  Topics of one task shifted by one rack from each
    other share exactly one rack holding all of the task's partitions; the other racks
    hold some of them (traffic 1 or 2): tasks differ in where they are cheapest."""
    racks = {t: replica_racks(document["topics"][t], shift) for t, shift in sorted(shifts.items())}
    return dict(document, partition_racks=racks)


def without_replica_racks(document: Document) -> Document:
    """``document`` without broker racks: what streamjoin's time with racks is set against."""
    return {k: v for k, v in document.items() if k not in ("partition_racks", "partition_weights")}


def join_groups_racks(document: Document) -> Document:
    """Broker racks for :func:`join_groups_document`: join ``i``'s left topic and
    changelog start at rack ``i``, its right topic one rack on."""
    shifts: dict[str, int] = {}
    for topic in document["topics"]:
        index = int(topic[4:7])
        shifts[topic] = index + 1 if topic.endswith("-right") else index
    return with_replica_racks(document, shifts)


def ad_join_racks_document() -> Document:
    """Scenario a with broker racks on three zones; its members are on two of them, so
    a third of the tasks (those whose only all-replica rack is zone-3) cross anyway."""
    return with_replica_racks(
        ad_join_document(),
        {"impressions": 0, "ads-impressions-changelog": 0, "clicks": 1,
         "ads-clicks-changelog": 1},
    )


def near_full_standbys_racks_document() -> Document:
    """Scenario f with members on zones 1..3 (f's members have no rack) and broker racks."""
    document = near_full_standbys_document()
    topics = sorted(document["topics"])
    document["members"] = _members(len(document["members"]), topics, racks=ZONES)
    return with_replica_racks(
        document, {"bar": 0, "baz": 1, "foo": 0, "store-changelog": 1}
    )


def _copy_partitions(mapping: Mapping[str, Any]) -> dict[str, list[int]]:
    return {topic: sorted(int(p) for p in parts) for topic, parts in sorted(mapping.items())}


def rebalance_document(
    fresh: Document, previous: Output, change: Change, seed: int, joiners: int = 1
) -> Document:
    """The group state after ``previous`` was installed and then ``change`` happened.

    Surviving members report their previous actives and standbys exactly as ``previous``
    gave them, its ``generation`` as their claim, and changelog offsets: the active copy
    of a changelog partition reports the end offset, a standby copy the end offset minus a
    seeded lag below ``acceptable_recovery_lag``.  ``join`` appends ``joiners`` new members
    with the same subscription and no previous assignment; ``leave`` removes one member
    chosen by the seeded generator.
    """
    rng = random.Random(seed)
    assignment: Mapping[str, Any] = previous["assignment"]
    generation = int(previous.get("generation", 0))
    changelogs = set(fresh["changelogs"]) | set(fresh.get("global_changelogs", []))
    members: list[dict[str, Any]] = []
    for source in fresh["members"]:
        member = dict(source)
        mine = assignment.get(member["id"], {})
        actives = _copy_partitions(mine.get("actives", {}))
        standbys = _copy_partitions(mine.get("standbys", {}))
        offsets: dict[str, dict[str, int]] = {}
        for topic, parts in actives.items():
            if topic in changelogs:
                offsets.setdefault(topic, {}).update(
                    {str(p): END_OFFSET_BASE + (p * 7919) % 5000 for p in parts}
                )
        for topic, parts in standbys.items():
            if topic in changelogs:
                offsets.setdefault(topic, {}).update(
                    {
                        str(p): END_OFFSET_BASE
                        + (p * 7919) % 5000
                        - rng.randrange(MAX_STANDBY_LAG)
                        for p in parts
                    }
                )
        member.update(
            actives=actives, standbys=standbys, generation=generation, offsets=offsets
        )
        members.append(member)
    if change == "join":
        template = fresh["members"][0]
        racks = sorted({m["rack"] for m in fresh["members"]}) if "rack" in template else []
        for serial in range(len(fresh["members"]), len(fresh["members"]) + joiners):
            joiner: dict[str, Any] = {"id": member_id(serial + 1), "topics": template["topics"]}
            if racks:
                joiner["rack"] = racks[serial % len(racks)]
            members.append(joiner)
    else:
        leaver = rng.randrange(len(members))
        del members[leaver]
    document = dict(fresh)
    document["members"] = members
    return document


def changed_member(fresh: Document, rebalance: Document) -> tuple[str, str]:
    """(``"join"`` or ``"leave"``, member id) describing what changed between documents
    (the first joiner's id when several joined)."""
    before = {m["id"] for m in fresh["members"]}
    after = {m["id"] for m in rebalance["members"]}
    joined = sorted(after - before)
    if joined:
        return "join", joined[0]
    return "leave", sorted(before - after)[0]


SCENARIOS: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (
        Scenario(
            "a-join",
            "a. 8 members, impressions⋈clicks + 2 changelogs × 64 partitions, 1 standby; "
            "a 9th member joins",
            "join",
            True,
            101,
            ad_join_document,
        ),
        Scenario(
            "a-leave",
            "a. 8 members, impressions⋈clicks + 2 changelogs × 64 partitions, 1 standby; "
            "a member leaves",
            "leave",
            True,
            102,
            ad_join_document,
        ),
        Scenario(
            "b-50-joins",
            "b. 1000 members, 50 joins (200–249 partitions, 2 topics + 1 changelog each), "
            "1 standby; a member joins",
            "join",
            False,
            201,
            lambda: join_groups_document(
                members=1000, groups=50, base_partitions=200, standby_replicas=1, racks=3
            ),
        ),
        Scenario(
            "c-10-topics",
            "c. 4 members, 10 topics with 1..10 partitions, stateless; a 5th member joins",
            "join",
            True,
            301,
            small_topics_document,
        ),
        Scenario(
            "d-1m-partitions",
            "d. 500 topics × 2000 partitions (1M topic-partitions), 2000 members, "
            "0 standbys; a member leaves",
            "leave",
            False,
            401,
            kafka_scale_document,
        ),
        Scenario(
            "e-10k-members",
            "e. 10,000 members, 100 joins of 1000–1099 partitions (104,950 tasks), "
            "1 standby; a member joins",
            "join",
            False,
            501,
            lambda: join_groups_document(
                members=10_000, groups=100, base_partitions=1000, standby_replicas=1, racks=3
            ),
        ),
        Scenario(
            "f-45-standbys",
            "f. 46 members, 178 tasks (3 topics + 1 changelog), 45 standbys; 10 members join",
            "join",
            True,
            601,
            near_full_standbys_document,
            joiners=10,
        ),
        Scenario(
            "a-join-racks",
            "a with broker racks (3 zones, 2 replicas); members on 2 zones; a 9th joins",
            "join", True, 101, ad_join_racks_document, plain="a-join", repeat=9,
        ),
        Scenario(
            "a-leave-racks",
            "a with broker racks (3 zones, 2 replicas); members on 2 zones; a member leaves",
            "leave", True, 102, ad_join_racks_document, plain="a-leave", repeat=9,
        ),
        Scenario(
            "b-50-joins-racks",
            "b with broker racks (3 zones, 2 replicas, members on the same 3); a member joins",
            "join", False, 201,
            lambda: join_groups_racks(join_groups_document(
                members=1000, groups=50, base_partitions=200, standby_replicas=1, racks=3
            )),
            plain="b-50-joins", repeat=3,
        ),
        Scenario(
            "e-10k-members-racks",
            "e with broker racks (3 zones, 2 replicas, members on the same 3); a member joins",
            "join", False, 501,
            lambda: join_groups_racks(join_groups_document(
                members=10_000, groups=100, base_partitions=1000, standby_replicas=1, racks=3
            )),
            plain="e-10k-members", repeat=3,
        ),
        Scenario(
            "f-45-standbys-racks",
            "f with members on 3 zones and broker racks (3 zones, 2 replicas); "
            "10 members join",
            "join", False, 601, near_full_standbys_racks_document, joiners=10,
            plain="f-45-standbys", repeat=3,
        ),
    )
}
