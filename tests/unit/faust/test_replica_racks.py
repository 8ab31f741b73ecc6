"""The leader reads each partition's replica racks off aiokafka's cluster metadata.

The metadata is real: a Metadata response (v5, as aiokafka asks for; v1 and
v0 for brokers without racks) is encoded to its wire bytes, decoded, and fed
to ``ClusterMetadata.update_metadata`` as aiokafka's client does. Then the
seam's readings (:mod:`streamjoin.faust.kafka.metadata`), the pure conversion
(:func:`streamjoin.membership.group_state.replica_racks`) and the leader's
group state (:func:`streamjoin.faust.assignment.leader.leader_input`, what
``lead`` assigns) are checked against the racks the response describes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from aiokafka.protocol.metadata import (
    MetadataResponse_v0,
    MetadataResponse_v1,
    MetadataResponse_v5,
)

import streamjoin
from streamjoin.faust.assignment.assignor import PartitionAssignor
from streamjoin.faust.assignment.leader import leader_input
from streamjoin.faust.kafka.metadata import broker_racks, partition_replicas
from streamjoin.membership.group_state import replica_racks
from streamjoin.membership.userdata import MemberInfo, decode_assignment, encode_member

#: node id -> rack: three brokers, one per rack
RACKS = {1: "a", 2: "b", 3: "c"}
#: topic -> per partition, the replicas' broker ids (the leader first)
REPLICAS = {
    "orders": [[1, 2, 3], [2], [3, 1]],
    "payments": [[2, 3], [1], [3]],
    "other": [[1]],  # nobody subscribes to it
}
#: what the leader should find: topic -> per partition, the sorted distinct racks
EXPECTED = {
    "orders": (("a", "b", "c"), ("b",), ("a", "c")),
    "payments": (("b", "c"), ("a",), ("c",)),
}


def _wire(response: Any) -> Any:  # Any: aiokafka's response classes are untyped
    """*response* as aiokafka's client gets it: encoded, then decoded from the bytes."""
    return type(response).decode(response.encode())


def _v5(racks: dict[int, str | None], replicas: dict[str, list[list[int]]]) -> MetadataResponse_v5:
    brokers = [(node, f"kafka-{node}", 9092, rack) for node, rack in sorted(racks.items())]
    topics = [
        (
            0,
            topic,
            False,
            [(0, p, nodes[0], nodes, nodes, []) for p, nodes in enumerate(parts)],
        )
        for topic, parts in sorted(replicas.items())
    ]
    return MetadataResponse_v5(0, brokers, "cluster-1", 1, topics)


def _cluster(response: Any) -> ClusterMetadata:
    cluster = ClusterMetadata()
    cluster.update_metadata(_wire(response))
    return cluster


def test_the_seam_reads_every_partitions_replicas_and_every_brokers_rack() -> None:
    cluster = _cluster(_v5(RACKS, REPLICAS))
    assert broker_racks(cluster) == RACKS
    replicas = partition_replicas(cluster, ["orders", "payments", "missing"])
    assert replicas == {
        "orders": {0: (1, 2, 3), 1: (2,), 2: (3, 1)},
        "payments": {0: (2, 3), 1: (1,), 2: (3,)},
    }


def test_replica_racks_of_the_metadata_are_the_sorted_distinct_racks_per_partition() -> None:
    cluster = _cluster(_v5(RACKS, REPLICAS))
    partitions = {"orders": 3, "payments": 3}
    racks = replica_racks(
        partitions, partition_replicas(cluster, partitions), broker_racks(cluster)
    )
    assert racks == EXPECTED


def test_a_replica_on_a_broker_without_rack_or_unlisted_makes_its_partition_unknown() -> None:
    # broker 4 has no rack (an empty string on the wire reads as "" or None)
    cluster = _cluster(_v5({**RACKS, 4: None}, {"t": [[1, 4], [4], [2, 9], [3, 2]]}))
    racks = replica_racks({"t": 5}, partition_replicas(cluster, ["t"]), broker_racks(cluster))
    # 1+4: one rack unknown; 4: none; 9: no such broker; 3+2: known; 4th: no metadata
    assert racks == {"t": ((), (), (), ("b", "c"), ())}


@pytest.mark.parametrize("version", [0, 1])
def test_a_cluster_without_racks_gives_no_partition_racks(version: int) -> None:
    if version == 0:  # no racks in the protocol at all (aiokafka reads None)
        response: Any = MetadataResponse_v0(
            [(111, "127.0.0.1", 9092)], [(0, "t", [(0, 0, 111, [111], [111])])]
        )
    else:  # racks in the protocol, none set (the embedded broker answers so)
        response = MetadataResponse_v1(
            [(111, "127.0.0.1", 9092, None)], 111, [(0, "t", False, [(0, 0, 111, [111], [111])])]
        )
    cluster = _cluster(response)
    assert broker_racks(cluster) == {111: None}
    assert replica_racks({"t": 1}, partition_replicas(cluster, ["t"]), broker_racks(cluster)) == {}


# -- the leader ------------------------------------------------------------------------


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Any]:
    app = streamjoin.App("racks-test", datadir=str(tmp_path), web_enabled=False)
    app.topic("orders", partitions=3)
    app.topic("payments", partitions=3)
    yield app


def _members(racks: dict[str, str | None], topics: list[str]) -> dict[str, Any]:
    """Kafka member id -> the metadata a worker on that rack sends."""
    return {
        f"k-{name}": ConsumerProtocolMemberMetadata(
            1,
            sorted(topics),
            encode_member(MemberInfo(id=name, url=f"http://{name}:1", host=name, rack=rack)),
        )
        for name, rack in racks.items()
    }


def test_the_leaders_group_state_carries_the_replica_racks_of_the_subscribed_topics(
    app: Any,
) -> None:
    cluster = _cluster(_v5(RACKS, REPLICAS))
    members = _members({"wa": "a", "wb": "b"}, ["orders", "payments"])
    given = leader_input(PartitionAssignor(app), cluster, members)
    assert given.partitions == {"orders": 3, "payments": 3}
    assert dict(given.state.partition_racks) == EXPECTED  # "other": nobody subscribes
    assert {m.id: m.rack for m in given.state.members} == {"wa": "a", "wb": "b"}
    assert dict(given.state.partition_weights) == {}  # not known at run time


def test_the_leaders_group_state_takes_the_rack_costs_of_its_member_settings(app: Any) -> None:
    from streamjoin.membership.settings import MemberSettings

    # as streamjoin worker sets them from --rack-traffic-cost / --rack-move-cost
    app.conf.streamjoin_member = MemberSettings(rack_traffic_cost=0, rack_move_cost=5)
    cluster = _cluster(_v5(RACKS, REPLICAS))
    members = _members({"wa": "a"}, ["orders"])
    state = leader_input(PartitionAssignor(app), cluster, members).state
    assert (state.rack_traffic_cost, state.rack_move_cost) == (0, 5)


def test_on_a_cluster_without_racks_the_leaders_group_state_has_none(app: Any) -> None:
    cluster = _cluster(_v5({n: None for n in RACKS}, REPLICAS))
    members = _members({"wa": "a", "wb": "b"}, ["orders", "payments"])
    given = leader_input(PartitionAssignor(app), cluster, members)
    assert dict(given.state.partition_racks) == {}


def _actives(app: Any, cluster: ClusterMetadata, members: dict[str, Any]) -> dict[int, str]:
    """Partition of ``orders`` -> the Kafka member id the leader made its active."""
    owned = {}
    for member_id, assignment in PartitionAssignor(app).assign(cluster, members).items():
        info = decode_assignment(assignment.user_data)
        assert info is not None
        for p in info.actives.get("orders", ()):
            owned[p] = member_id
    return owned


@pytest.mark.parametrize("traffic_cost", [None, 0])
def test_the_leader_places_actives_on_their_partitions_replica_racks(
    app: Any, traffic_cost: int | None
) -> None:
    """Each partition has its only replica on one rack, not in the members' order:
    the assignment the leader sends puts each on the member of that rack, unless
    the leader's ``--rack-traffic-cost`` is 0."""
    pytest.importorskip("streamjoin.assignment.racks", reason="rack-aware actives not built yet")
    from streamjoin.membership.settings import MemberSettings

    if traffic_cost is not None:
        app.conf.streamjoin_member = MemberSettings(rack_traffic_cost=traffic_cost)
    single = {"orders": [[3], [1], [2]]}  # partition 0 on rack c, 1 on a, 2 on b
    cluster = _cluster(_v5(RACKS, single))
    members = _members({"wa": "a", "wb": "b", "wc": "c"}, ["orders"])
    owned = _actives(app, cluster, members)
    assert sorted(owned) == [0, 1, 2] and len(set(owned.values())) == 3
    by_racks = {0: "k-wc", 1: "k-wa", 2: "k-wb"}
    assert (owned == by_racks) is (traffic_cost is None)
