"""Tasks of a group-state document and who holds them in an output.

Tasks
    Topics with the same partition count and the same subscribers form a co-partitioned
    group, and declared ``copartition`` lists merge groups (DESIGN.md's rule, also faust's
    grouping).  Global-table changelogs are left out: every member holds all of them.
    A task is one partition number of one group; it is stateful when the group contains a
    changelog topic.  A task's active owner is the member holding most of its
    topic-partitions (ties: smallest member id).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Output = Mapping[str, Any]


@dataclass(frozen=True)
class Group:
    """One co-partitioned group of topics."""

    topics: tuple[str, ...]
    partitions: int
    stateful: bool
    eligible: tuple[str, ...]

    @property
    def name(self) -> str:
        """Readable name: the group's topics, shortened when there are many."""
        if len(self.topics) <= 3:
            return "+".join(self.topics)
        return f"{self.topics[0]}+…({len(self.topics)} topics)"


@dataclass(frozen=True)
class Layout:
    """What a document means for the metrics: members and task groups."""

    members: tuple[str, ...]
    capacity: Mapping[str, float]
    host: Mapping[str, str]
    rack: Mapping[str, str | None]
    groups: tuple[Group, ...]
    group_of_topic: Mapping[str, int]
    global_topics: frozenset[str]
    standby_replicas: int

    @property
    def tasks(self) -> int:
        """Number of tasks."""
        return sum(group.partitions for group in self.groups)


def layout(document: Mapping[str, Any]) -> Layout:
    """Derive members and co-partitioned groups from a group-state document."""
    topics: dict[str, int] = {str(t): int(n) for t, n in document["topics"].items()}
    global_topics = frozenset(document.get("global_changelogs", []))
    changelogs = set(document.get("changelogs", []))
    members = [str(m["id"]) for m in document["members"]]
    subscribers: dict[str, list[str]] = defaultdict(list)
    for member in document["members"]:
        for topic in member["topics"]:
            subscribers[str(topic)].append(str(member["id"]))
    parent: dict[str, str] = {}

    def find(topic: str) -> str:
        root = topic
        while parent[root] != root:
            root = parent[root]
        while parent[topic] != root:
            parent[topic], topic = root, parent[topic]
        return root

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            low, high = sorted((ra, rb))
            parent[high] = low

    by_key: dict[tuple[int, tuple[str, ...]], list[str]] = defaultdict(list)
    for topic in sorted(topics):
        if topic in global_topics or not subscribers.get(topic):
            continue
        parent[topic] = topic
        by_key[(topics[topic], tuple(sorted(set(subscribers[topic]))))].append(topic)
    for same in by_key.values():
        for topic in same[1:]:
            union(same[0], topic)
    for declared in document.get("copartition", []):
        present = [t for t in declared if t in parent]
        for topic in present[1:]:
            union(present[0], topic)
    members_of: dict[str, list[str]] = defaultdict(list)
    for topic in sorted(parent):
        members_of[find(topic)].append(topic)
    subscribed = {m: set(s) for m, s in _member_topics(document).items()}
    groups: list[Group] = []
    group_of_topic: dict[str, int] = {}
    for root in sorted(members_of):
        group_topics = tuple(members_of[root])
        needed = set(group_topics)
        eligible = tuple(m for m in sorted(members) if needed <= subscribed[m])
        for topic in group_topics:
            group_of_topic[topic] = len(groups)
        groups.append(
            Group(
                topics=group_topics,
                partitions=max(topics[t] for t in group_topics),
                stateful=any(t in changelogs for t in group_topics),
                eligible=eligible,
            )
        )
    return Layout(
        members=tuple(sorted(members)),
        capacity={str(m["id"]): float(m.get("capacity", 1) or 1) for m in document["members"]},
        host={str(m["id"]): str(m.get("host") or m["id"]) for m in document["members"]},
        rack={str(m["id"]): m.get("rack") for m in document["members"]},
        groups=tuple(groups),
        group_of_topic=group_of_topic,
        global_topics=global_topics,
        standby_replicas=int(document.get("standby_replicas", 0)),
    )


def _member_topics(document: Mapping[str, Any]) -> dict[str, Iterable[str]]:
    # Members share subscription lists in big documents: convert each list once.
    cache: dict[int, frozenset[str]] = {}
    result: dict[str, Iterable[str]] = {}
    for member in document["members"]:
        topics = member["topics"]
        key = id(topics)
        if key not in cache:
            cache[key] = frozenset(str(t) for t in topics)
        result[str(member["id"])] = cache[key]
    return result


@dataclass
class Placement:
    """Who holds each task: ``owner[g][p]`` (or None) and ``standbys[g][p]``."""

    owner: list[list[str | None]]
    standbys: list[list[tuple[str, ...]]]
    violations: Counter[str]


def placement(lay: Layout, output: Output) -> Placement:
    """Resolve an output's topic-partitions into task owners and standby holders."""
    violations: Counter[str] = Counter()
    tp_owner: dict[str, list[str | None]] = {}
    standby_sets: list[list[set[str]]] = [
        [set() for _ in range(g.partitions)] for g in lay.groups
    ]
    assignment: Mapping[str, Any] = output["assignment"]
    for member in sorted(assignment):
        entry = assignment[member]
        for topic, parts in sorted(entry.get("actives", {}).items()):
            if topic in lay.global_topics:
                continue
            index = lay.group_of_topic.get(topic)
            if index is None:
                violations["unknown_tps"] += len(parts)
                continue
            slots = tp_owner.setdefault(topic, [None] * lay.groups[index].partitions)
            for p in parts:
                if not 0 <= int(p) < len(slots):
                    violations["unknown_tps"] += 1
                elif slots[int(p)] is not None:
                    violations["duplicate_tps"] += 1
                else:
                    slots[int(p)] = member
        for topic, parts in sorted(entry.get("standbys", {}).items()):
            if topic in lay.global_topics:
                continue
            index = lay.group_of_topic.get(topic)
            if index is None:
                violations["unknown_tps"] += len(parts)
                continue
            for p in parts:
                if 0 <= int(p) < lay.groups[index].partitions:
                    standby_sets[index][int(p)].add(member)
                else:
                    violations["unknown_tps"] += 1
    owners: list[list[str | None]] = []
    for group in lay.groups:
        columns = [tp_owner.get(topic) for topic in group.topics]
        row: list[str | None] = []
        for p in range(group.partitions):
            held: list[str] = [
                owner for column in columns if column is not None and (owner := column[p])
            ]
            violations["missing_tps"] += len(group.topics) - len(held)
            if not held:
                row.append(None)
                continue
            counts = Counter(held)
            if len(counts) > 1:
                violations["split_tasks"] += 1
            best = max(counts.values())
            row.append(min(m for m, n in counts.items() if n == best))
        owners.append(row)
    return Placement(
        owner=owners,
        standbys=[[tuple(sorted(s)) for s in rows] for rows in standby_sets],
        violations=violations,
    )
