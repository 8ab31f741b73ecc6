"""Build the assignment core's :class:`GroupState` from what members sent.

Pure: the Faust adapter decodes the rebalance's member metadata and calls
:func:`build_group_state`; the core never sees Kafka member ids, which change
on every join. It sees each member's stable identity instead, so a restarted
worker with its state on disk is recognised and gets its tasks back. The
racks of each partition's replicas come from the cluster metadata the leader
holds, through :func:`replica_racks`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from streamjoin.assignment.model import GroupState, LastAssignment, MemberState
from streamjoin.membership.userdata import MemberInfo

__all__ = ["JoinedMember", "build_group_state", "replica_racks"]


@dataclass(frozen=True)
class JoinedMember:
    """One Kafka group member: its protocol id, subscription and decoded userdata."""

    member_id: str
    topics: tuple[str, ...]
    info: MemberInfo | None


def build_group_state(
    joined: Sequence[JoinedMember],
    partitions: Mapping[str, int],
    *,
    copartition: Iterable[Iterable[str]] = (),
    changelogs: Iterable[str] = (),
    global_changelogs: Iterable[str] = (),
    standby_replicas: int = 0,
    acceptable_recovery_lag: int = 10_000,
    max_warmup_replicas: int | None = None,
    last_assignment: LastAssignment | None = None,
    partition_racks: Mapping[str, Sequence[tuple[str, ...]]] | None = None,
    rack_traffic_cost: int = GroupState.rack_traffic_cost,
    rack_move_cost: int = GroupState.rack_move_cost,
) -> tuple[GroupState, dict[str, str]]:
    """Return the group state and a map from stable id to Kafka member id.

    Topics the cluster does not know (``partitions`` lacks them, e.g. not
    created yet) are left out, and so are the ``partition_racks`` (topic ->
    per partition, the racks of its replicas: :func:`replica_racks`) of a
    topic whose partition count they do not match. Members whose userdata could not be decoded
    join as fresh members under their Kafka member id. Two members claiming
    the same stable id (a copied data directory) keep it only for the first
    by Kafka member id; the other joins fresh.
    """
    members, by_stable = _members(joined, partitions)
    known = set(partitions)
    state = GroupState(
        topics=dict(partitions),
        members=tuple(members),
        copartition=tuple(
            tuple(t for t in group if t in known)
            for group in copartition
            if sum(1 for t in group if t in known) > 1
        ),
        changelogs=frozenset(t for t in changelogs if t in known),
        global_changelogs=frozenset(t for t in global_changelogs if t in known),
        standby_replicas=standby_replicas,
        acceptable_recovery_lag=acceptable_recovery_lag,
        max_warmup_replicas=max_warmup_replicas,
        last_assignment=last_assignment,
        partition_racks={
            t: tuple(racks)
            for t, racks in sorted((partition_racks or {}).items())
            if len(racks) == partitions.get(t)
        },
        rack_traffic_cost=rack_traffic_cost,
        rack_move_cost=rack_move_cost,
    )
    return state, by_stable


def _members(
    joined: Sequence[JoinedMember], partitions: Mapping[str, int]
) -> tuple[list[MemberState], dict[str, str]]:
    """Every member subscribed to a known topic, under the identity it joins as, in
    Kafka member id order; and stable id -> Kafka member id.

    A member joins under its stable id with what it reported (on known topics
    only), or fresh under its Kafka member id when its userdata could not be
    decoded or an earlier member already claimed that stable id.
    """
    members: list[MemberState] = []
    by_stable: dict[str, str] = {}
    for member in sorted(joined, key=lambda j: j.member_id):
        topics = tuple(sorted({t for t in member.topics if t in partitions}))
        if not topics:
            continue
        info = member.info
        if info is None or info.id in by_stable:
            stable = member.member_id
            members.append(MemberState(id=stable, topics=topics, host=stable))
        else:
            stable = info.id
            members.append(
                MemberState(
                    id=stable,
                    topics=topics,
                    host=info.host,
                    rack=info.rack,
                    capacity=info.capacity,
                    generation=info.generation,
                    actives=_known(info.actives, partitions),
                    standbys=_known(info.standbys, partitions),
                    warmups=_known(info.warmups, partitions),
                    offsets={t: dict(o) for t, o in info.offsets.items() if t in partitions},
                    cooperative=info.cooperative,
                )
            )
        by_stable[stable] = member.member_id
    return members, by_stable


def replica_racks(
    partitions: Mapping[str, int],
    replicas: Mapping[str, Mapping[int, Sequence[int]]],
    broker_racks: Mapping[int, str | None],
) -> dict[str, tuple[tuple[str, ...], ...]]:
    """Topic -> per partition, the sorted distinct racks its replicas are on.

    ``partitions``: topic -> partition count; ``replicas``: topic -> partition
    -> the broker ids of its replicas; ``broker_racks``: broker id -> its rack
    (``broker.rack``; ``None`` when it has none). A partition whose replicas
    are not listed, or one of whose replicas is on a broker with no rack or on
    a broker the metadata does not list, gets ``()``: not known (the assignor
    then counts no traffic for it). Topics none of whose partitions has known
    racks are left out, so a cluster without racks gives ``{}``.
    """
    found: dict[str, tuple[tuple[str, ...], ...]] = {}
    for topic, count in sorted(partitions.items()):
        listed = replicas.get(topic, {})
        per_partition = tuple(_racks_of(listed.get(p, ()), broker_racks) for p in range(count))
        if any(per_partition):
            found[topic] = per_partition
    return found


def _racks_of(brokers: Sequence[int], broker_racks: Mapping[int, str | None]) -> tuple[str, ...]:
    racks = [broker_racks.get(b) for b in brokers]
    if not racks or not all(racks):
        return ()
    return tuple(sorted({r for r in racks if r}))


def _known(
    parts: Mapping[str, Sequence[int]], partitions: Mapping[str, int]
) -> dict[str, tuple[int, ...]]:
    return {t: tuple(sorted(set(p))) for t, p in parts.items() if t in partitions}
