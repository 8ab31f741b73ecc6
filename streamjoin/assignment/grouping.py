"""Group topics into tasks.

A task group is a set of topics consumed partition by partition together:
topics with the same partition count and the same subscribers, merged with
every co-partition group a join declares. Task ``(g, p)`` is partition ``p``
of every topic of group ``g``; all of it goes to one member.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from streamjoin.assignment.errors import (
    CopartitioningError,
    InvalidGroupStateError,
    PartitionCountError,
)
from streamjoin.assignment.model import GroupState, MemberState, TaskGroup

__all__ = ["build_groups", "copartition_problems", "declared_count_problems"]


class _UnionFind:
    def __init__(self, items: Sequence[str]) -> None:
        self._parent = {item: item for item in items}

    def find(self, item: str) -> str:
        root = item
        while self._parent[root] != root:
            root = self._parent[root]
        while self._parent[item] != root:  # path compression
            self._parent[item], item = root, self._parent[item]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # the smaller name becomes the root: deterministic
            if rb < ra:
                ra, rb = rb, ra
            self._parent[rb] = ra


def build_groups(state: GroupState, members: Sequence[MemberState]) -> tuple[TaskGroup, ...]:
    """Return the task groups of ``state``, ordered by their sorted topic names.

    ``members`` is the member list in assignment order (sorted by id); the
    groups' ``eligible`` tuples index into it. Global changelog topics are not
    grouped: every subscriber receives all of their partitions.
    """
    # members subscribed to the same topics are alike: work per class, so the
    # cost grows with topics x classes, not topics x members
    classes = _subscription_classes(members)
    class_topics = sorted(classes)
    subscribers: dict[str, list[int]] = {}  # topic -> class ids
    for cid, subscribed in enumerate(class_topics):
        for topic in subscribed:
            if topic not in state.global_changelogs:
                subscribers.setdefault(topic, []).append(cid)
    groups: list[TaskGroup] = []
    # groups read by the same classes share one eligible tuple (cheap to compare, cache)
    shared: dict[tuple[int, ...], tuple[int, ...]] = {}
    for index, group_topics in enumerate(_read_together(state, subscribers)):
        readers = _common_readers(group_topics, subscribers)
        eligible = shared.get(readers)
        if eligible is None:
            eligible = shared[readers] = tuple(
                sorted(m for cid in readers for m in classes[class_topics[cid]])
            )
        if not eligible:
            counts = {
                t: sum(len(classes[class_topics[c]]) for c in subscribers[t]) for t in group_topics
            }
            raise _nobody_reads_all(counts)
        groups.append(
            TaskGroup(
                index=index,
                topics=tuple(group_topics),
                partitions=state.topics[group_topics[0]],
                changelogs=tuple(t for t in group_topics if t in state.changelogs),
                eligible=eligible,
            )
        )
    return tuple(groups)


def _subscription_classes(members: Sequence[MemberState]) -> dict[tuple[str, ...], list[int]]:
    """Subscription (sorted topics) -> the indices of the members subscribed to it."""
    classes: dict[tuple[str, ...], list[int]] = {}
    last: tuple[str, ...] | None = None
    alike: list[int] = []
    for index, member in enumerate(members):
        if member.topics is not last:  # parsed members share one tuple per subscription
            last = member.topics
            alike = classes.setdefault(last, [])
        alike.append(index)
    return classes


def _read_together(state: GroupState, subscribers: Mapping[str, list[int]]) -> list[list[str]]:
    """The subscribed topics in task groups, each sorted, the groups in sorted order.

    Topics with the same partition count and the same subscribers go together,
    and so do the topics of every declared co-partition group (whose counts must
    agree: the first that does not is raised).
    """
    topics = sorted(subscribers)
    forest = _UnionFind(topics)

    by_key: dict[tuple[int, tuple[int, ...]], str] = {}
    for topic in topics:
        key = (state.topics[topic], tuple(subscribers[topic]))
        first = by_key.setdefault(key, topic)
        forest.union(first, topic)

    problems = copartition_problems(state.topics, state.copartition)
    if problems:
        raise problems[0]
    for declared in state.copartition:
        subscribed_topics = [topic for topic in declared if topic in subscribers]
        for topic in subscribed_topics[1:]:
            forest.union(subscribed_topics[0], topic)

    components: dict[str, list[str]] = {}
    for topic in topics:
        components.setdefault(forest.find(topic), []).append(topic)
    return sorted(components.values())


def _common_readers(
    group_topics: Sequence[str], subscribers: Mapping[str, list[int]]
) -> tuple[int, ...]:
    """The classes subscribed to every topic of a group, sorted."""
    eligible_classes = set(subscribers[group_topics[0]])
    for topic in group_topics[1:]:
        eligible_classes.intersection_update(subscribers[topic])
    return tuple(sorted(eligible_classes))


def _nobody_reads_all(subscribed: Mapping[str, int]) -> InvalidGroupStateError:
    """The error for a group no member can take: ``subscribed``: topic -> its subscribers."""
    listing = ", ".join(
        f"{topic!r} (subscribed by {count} members)" for topic, count in subscribed.items()
    )
    return InvalidGroupStateError(
        f"no member subscribes to all of the co-partitioned topics {listing}; "
        "a task can only go to a member that reads every one of its topics. "
        "Subscribe at least one member to all of them."
    )


def copartition_problems(
    counts: Mapping[str, int], declared: Iterable[Iterable[str]]
) -> list[CopartitioningError]:
    """Every declared co-partition group whose topics' partition counts differ.

    The one co-partition rule: the assignor (a group state), the worker's
    start-up check and ``streamjoin topics check`` (the broker's counts) and
    ``app.join`` (the counts the app declares) all call it. Topics missing
    from ``counts`` (not created yet) are left out of the check.
    """
    problems = []
    for group in declared:
        present = {topic: counts[topic] for topic in sorted(set(group)) if topic in counts}
        if len(set(present.values())) > 1:
            problems.append(CopartitioningError(present))
    return problems


def declared_count_problems(
    declared: Mapping[str, int | None], counts: Mapping[str, int]
) -> list[PartitionCountError]:
    """Every topic whose count on the broker differs from the count the app declares.

    Topics the app declares no count for (``None``) or that do not exist yet
    are left out.
    """
    return [
        PartitionCountError(topic, wanted, counts[topic])
        for topic, wanted in sorted(declared.items())
        if wanted and topic in counts and counts[topic] != wanted
    ]
