"""The group leader's part of :class:`~streamjoin.faust.assignment.assignor.PartitionAssignor`.

Decode every member's userdata, build the group state (with this worker's
``acceptable_recovery_lag``, ``max_warmup_replicas``, ``rack_traffic_cost`` and
``rack_move_cost``, and the racks of
every partition's replicas read off the cluster metadata the consumer holds),
run the pure core, encode each member's share, and log the assignment's figures.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from streamjoin._gc import gc_paused
from streamjoin._histogram import Buckets
from streamjoin.assignment import assign
from streamjoin.assignment.errors import AssignmentError
from streamjoin.assignment.model import Assignment, GroupState, LastAssignment
from streamjoin.faust.kafka.app import changelog_topic_name
from streamjoin.faust.kafka.metadata import broker_racks, partition_replicas
from streamjoin.membership.group_state import JoinedMember, build_group_state, replica_racks
from streamjoin.membership.shares import empty_shares, member_shares
from streamjoin.membership.userdata import decode_member, encode_assignment

if TYPE_CHECKING:
    from faust.types import AppT

    from streamjoin.membership.settings import MemberSettings

__all__ = ["Leader", "LeaderInput", "lead", "leader_input"]

logger = logging.getLogger(__name__)


class Leader(Protocol):
    """What the leader's step needs of the assignor
    (:class:`~streamjoin.faust.assignment.assignor.PartitionAssignor`, which imports this)."""

    app: AppT
    settings: MemberSettings
    replicas: int
    protocol_version: int
    #: stats of the last assignment made as the leader (JSON values: Any)
    last_assignment: dict[str, Any]
    #: the actives that assignment gave each member (the leader's memory: a
    #: member's metadata may come from its JoinGroup of an earlier rebalance)
    last_actives: LastAssignment | None
    #: seconds each assignment this worker computed took (the core's call)
    assignment_seconds: Buckets

    def stop_worker(self, exc: Exception) -> None:
        """Crash the worker: the assignment cannot be made."""


@dataclass(frozen=True)
class LeaderInput:
    """What the leader assigns: the members, the topics and the core's group state."""

    joined: list[JoinedMember]
    #: every topic some member subscribes to, sorted
    topics: list[str]
    #: topic -> partition count, of the topics the cluster has partitions of
    partitions: dict[str, int]
    state: GroupState
    #: stable id -> Kafka member id
    member_ids: dict[str, str]


def leader_input(
    assignor: Leader,
    cluster: ClusterMetadata,
    members: Mapping[str, ConsumerProtocolMemberMetadata],
) -> LeaderInput:
    """Decode every member and read the cluster metadata into the core's group state."""
    joined = []
    for member_id, meta in sorted(members.items()):
        info = decode_member(meta.user_data)
        if info is None:
            logger.warning(
                "streamjoin: member %s sent userdata this version cannot read; "
                "it joins as a fresh member (no previous tasks, no offsets)",
                member_id,
            )
        joined.append(JoinedMember(member_id, tuple(meta.subscription), info))
    topics = sorted({t for meta in members.values() for t in meta.subscription})
    partitions = {}
    for topic in topics:
        count = len(cluster.partitions_for_topic(topic) or ())
        if count:
            partitions[topic] = count
        else:
            logger.warning("streamjoin: topic %r has no partitions yet; not assigned", topic)
    app = assignor.app
    tables = list(getattr(app.tables, "data", {}).values())
    changelogs = {changelog_topic_name(t) for t in tables}
    globals_ = {changelog_topic_name(t) for t in tables if getattr(t, "is_global", False)}
    settings = assignor.settings
    state, member_ids = build_group_state(
        joined,
        partitions,
        copartition=getattr(app, "copartitioned_topics", ()),
        changelogs=changelogs - globals_,
        global_changelogs=globals_,
        standby_replicas=assignor.replicas,
        acceptable_recovery_lag=settings.recovery_lag,
        max_warmup_replicas=settings.max_warmup_replicas,
        last_assignment=assignor.last_actives,
        partition_racks=replica_racks(
            partitions, partition_replicas(cluster, partitions), broker_racks(cluster)
        ),
        rack_traffic_cost=settings.rack_traffic_cost,
        rack_move_cost=settings.rack_move_cost,
    )
    return LeaderInput(joined, topics, partitions, state, member_ids)


def lead(
    assignor: Leader,
    cluster: ClusterMetadata,
    members: Mapping[str, ConsumerProtocolMemberMetadata],
) -> dict[str, ConsumerProtocolMemberAssignment]:
    """Every member's assignment, as the leader (``assignor`` keeps the stats)."""
    given = leader_input(assignor, cluster, members)
    joined, partitions, state, member_ids = (
        given.joined,
        given.partitions,
        given.state,
        given.member_ids,
    )
    if not state.members:
        return _nothing_to_assign(assignor, joined, given.topics, partitions, members)
    result = _assign_or_stop(assignor, state)
    # by Kafka member id: two members claiming one stable id keep their own urls
    urls = {j.member_id: j.info.url for j in joined if j.info is not None}
    shares = member_shares(
        result, member_ids, urls, partitions, unrouted=state.global_changelogs, members=members
    )
    out = {
        member_id: ConsumerProtocolMemberAssignment(
            assignor.protocol_version,
            [(t, list(parts)) for t, parts in share.partitions],
            encode_assignment(share.info),
        )
        for member_id, share in shares.items()
    }
    stats = result.stats
    assignor.last_assignment = {"generation": result.generation, **dict(stats)}
    assignor.last_actives = LastAssignment(
        result.generation, {mid: owned.actives for mid, owned in sorted(result.members.items())}
    )
    _log_assignment(result, state)
    return out


def _assign_or_stop(assignor: Leader, state: GroupState) -> Assignment:
    """The core's assignment of ``state``, timed; a group it cannot assign stops this worker."""
    try:
        began = time.perf_counter()
        with gc_paused():
            result = assign(state)
        assignor.assignment_seconds.observe(time.perf_counter() - began)
    except AssignmentError as exc:
        logger.error("streamjoin: cannot assign the group, stopping this worker: %s", exc)
        assignor.stop_worker(exc)
        raise
    return result


def _log_assignment(result: Assignment, state: GroupState) -> None:
    """A line for members whose claims lag behind (if any), then one for the figures."""
    stats = result.stats
    late = [
        m.id
        for m in state.members
        if m.generation is not None and m.generation < result.generation - 1
    ]
    if late and stats.get("protocol") != "eager":
        logger.info(
            "streamjoin: member(s) %s reported an older generation (late metadata or a "
            "lost membership): the tasks they may still run wait for them",
            late,
        )
    logger.info(
        "streamjoin: assigned generation %d: %d members, %d tasks, spread %s/%s "
        "(target %s/%s), moved %s, target moves %s (minimum %s), activations %s warm "
        "%s cold, warm-ups %s, held back %s, cross-rack %s (target %s)",
        result.generation,
        stats["members"],
        stats["tasks"],
        stats["active_spread"],
        stats["active_spread_per_group"],
        stats["target_active_spread"],
        stats["target_active_spread_per_group"],
        stats["moved"],
        stats["target_moved"],
        stats["minimum_moves"],
        stats["warm_activations"],
        stats["cold_activations"],
        stats["warmups"],
        stats["held_back"],
        stats["cross_rack_tasks"],
        stats["target_cross_rack_tasks"],
    )


def _nothing_to_assign(
    assignor: Leader,
    joined: list[JoinedMember],
    topics: list[str],
    partitions: Mapping[str, int],
    members: Mapping[str, ConsumerProtocolMemberMetadata],
) -> dict[str, ConsumerProtocolMemberAssignment]:
    """No subscribed topic has partitions yet: an empty share for every member.

    The worker stays up; the consumer rebalances when the topics appear.
    """
    missing = [topic for topic in topics if topic not in partitions]
    logger.warning(
        "streamjoin: nothing to assign: none of the group's topics has partitions yet "
        "(%s); the group rebalances once they are created",
        ", ".join(missing) or "no topic subscribed",
    )
    generation = max((j.info.generation or 0 for j in joined if j.info), default=0)
    assignor.last_assignment = {"generation": generation, "members": 0, "tasks": 0}
    shares = empty_shares(generation, members)
    return {
        member_id: ConsumerProtocolMemberAssignment(
            assignor.protocol_version, [], encode_assignment(share.info)
        )
        for member_id, share in shares.items()
    }
