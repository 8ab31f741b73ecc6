"""The leader's last step: the core's :class:`Assignment` as one share per Kafka member.

Pure: the adapter hands in the assignment, the stable-id → Kafka-member-id map
and every member's url; it gets back, per Kafka member id, what to tell it
(:class:`~streamjoin.membership.userdata.AssignmentInfo`: its actives,
standbys and warm-ups, the routing table of every partition's active, the task groups)
and the partitions the Kafka protocol hands it (actives, standbys and
warm-ups, which the consumer fetches alike).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streamjoin.assignment.model import Assignment
from streamjoin.membership.userdata import AssignmentInfo

__all__ = ["MemberShare", "empty_shares", "member_shares"]


@dataclass(frozen=True)
class MemberShare:
    """What the leader sends one Kafka member."""

    info: AssignmentInfo
    #: (topic, sorted partitions), sorted by topic: the Kafka protocol's assignment
    partitions: tuple[tuple[str, tuple[int, ...]], ...]


def member_shares(
    result: Assignment,
    kafka_ids: Mapping[str, str],
    urls: Mapping[str, str],
    partitions: Mapping[str, int],
    *,
    unrouted: Iterable[str] = (),
    members: Iterable[str] = (),
) -> dict[str, MemberShare]:
    """One share per Kafka member id.

    Args:
        result: the core's assignment (keyed by stable member id).
        kafka_ids: stable id → Kafka member id.
        urls: Kafka member id → the url the member advertises.
        partitions: topic → partition count (the topics routed).
        unrouted: topics left out of the routing table (global changelogs:
            every member has all of their partitions, as actives and, as
            faust's assignor gives them, as standbys too).
        members: every Kafka member id of the rebalance; those the core gave
            nothing (no known topic) get an empty share with the routing table.
    """
    order = sorted(result.members)
    url_list = tuple(urls.get(kafka_ids[mid], "") for mid in order)
    index = {mid: i for i, mid in enumerate(order)}
    skip = set(unrouted)
    routes: dict[str, list[int]] = {
        topic: [-1] * count for topic, count in sorted(partitions.items()) if topic not in skip
    }
    for mid in order:
        for topic, parts in result.members[mid].actives.items():
            if topic in routes:
                for partition in parts:
                    routes[topic][partition] = index[mid]
    frozen_routes = {topic: tuple(owners) for topic, owners in routes.items()}
    groups = {topic: group.index for group in result.groups for topic in group.topics}
    # every assigned topic has a group (faust's group_for_topic raises for others):
    # the global changelogs, which form no task, get one each after the tasks'
    following = max(groups.values(), default=-1) + 1
    for offset, topic in enumerate(sorted(t for t in skip if t in partitions)):
        groups[topic] = following + offset
    shares: dict[str, MemberShare] = {}
    for mid in order:
        owned = result.members[mid]
        actives = {t: list(p) for t, p in sorted(owned.actives.items())}
        standbys = {t: list(p) for t, p in sorted(owned.standbys.items())}
        warmups = {t: list(p) for t, p in sorted(owned.warmups.items())}
        # a global changelog is also every member's standby, as faust's assignor
        # gives it: faust's own TableManager then keeps following it
        for topic in sorted(skip):
            if topic in actives:
                standbys[topic] = sorted(actives[topic])
        fetched: dict[str, set[int]] = {}
        for source in (actives, standbys, warmups):
            for topic, numbers in source.items():
                fetched.setdefault(topic, set()).update(numbers)
        shares[kafka_ids[mid]] = MemberShare(
            AssignmentInfo(
                generation=result.generation,
                actives=actives,
                standbys=standbys,
                urls=url_list,
                routes=frozen_routes,
                groups=groups,
                warmups=warmups,
            ),
            tuple((t, tuple(sorted(n))) for t, n in sorted(fetched.items())),
        )
    empty = AssignmentInfo(result.generation, {}, {}, url_list, frozen_routes, groups)
    for member_id in sorted(members):
        shares.setdefault(member_id, MemberShare(empty, ()))
    return shares


def empty_shares(generation: int, members: Iterable[str]) -> dict[str, MemberShare]:
    """Nothing for anyone (no subscribed topic has partitions yet), at *generation*."""
    empty = MemberShare(AssignmentInfo(generation, {}, {}, (), {}, {}), ())
    return {member_id: empty for member_id in sorted(members)}
