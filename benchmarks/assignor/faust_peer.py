"""The peer under measurement: faust-streaming's built-in ``PartitionAssignor``.

Nothing of faust's algorithm is re-implemented here.  The adapter

1. encodes each member of a group-state document the way a faust worker announces itself
   to the group leader: a ``ConsumerProtocolMemberMetadata`` whose subscription is the
   member's topics and whose ``user_data`` is ``ClientMetadata(...).dumps()`` carrying its
   previous ``ClientAssignment`` (actives and standbys) under ``url`` = the member id;
2. calls faust's own ``PartitionAssignor._perform_assignment(cluster, member_metadata)``,
   which decodes that metadata, groups topics into co-partitioned groups, runs one
   ``CopartitionedAssignor`` per group, adds global-table standbys and computes the
   changelog distributions — exactly the leader's code path;
3. converts faust's per-member ``ClientAssignment`` back to the shared output format.

Stand-ins, and why they do not change what is measured:

* ``app`` — faust's assignor reads ``app.tables`` only (``.data`` for global tables,
  ``.changelog_topics``); :class:`PeerApp` provides those two and nothing else.
* ``cluster`` — faust only calls ``cluster.partitions_for_topic(topic)``;
  :class:`PeerCluster` answers it from the document's topic counts.
* The last step of ``_perform_assignment``, ``_protocol_assignments``, only serialises
  each member's wire assignment (it embeds the whole cluster's changelog and topic
  distributions in every member's message, O(members × partitions)).  It has no
  counterpart in ``assign_document``, so by default the adapter captures faust's
  ``ClientAssignment`` mapping at that hand-off and skips the wire encoding;
  ``encode=True`` runs faust's real encoding afterwards and times it separately.
* Members report empty ``changelog_distribution``/``external_topic_distribution`` in
  their metadata.  Real faust workers echo the cluster-wide distributions they last
  received, which the leader decodes and ignores; leaving them out favours faust.
* Previous standbys are reported for changelog topics only (the output format's view).
  faust reads a co-partitioned group's previous standbys from the first topic of the
  group that has any, and its own standby lists are identical for all topics of a group,
  so for groups that contain a changelog topic this is what faust would read anyway.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

FAUST_VERSION = "0.15.3"


class PeerTable:
    """What faust's assignor reads of a global table: its changelog topic and flags."""

    is_global = True
    synchronize_all_active_partitions = False
    use_partitioner = False

    def __init__(self, changelog_topic: str) -> None:
        self._changelog_topic = changelog_topic

    def _changelog_topic_name(self) -> str:
        return self._changelog_topic


class PeerTableManager:
    """What faust's assignor reads of ``app.tables``."""

    def __init__(self, changelogs: Iterable[str], global_changelogs: Iterable[str]) -> None:
        globals_ = sorted(set(global_changelogs))
        self.data: dict[str, PeerTable] = {topic: PeerTable(topic) for topic in globals_}
        self.changelog_topics: set[str] = set(changelogs) | set(globals_)


class PeerApp:
    """The ``app`` argument of faust's ``PartitionAssignor``: only ``tables`` is read."""

    tracer = None

    def __init__(self, tables: PeerTableManager) -> None:
        self.tables = tables


class PeerCluster:
    """Answers ``partitions_for_topic`` like aiokafka's ``ClusterMetadata`` does."""

    def __init__(self, topics: Mapping[str, int]) -> None:
        self._topics = dict(topics)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """All partition numbers of ``topic``, or None for an unknown topic."""
        count = self._topics.get(topic)
        return None if count is None else set(range(count))


@dataclass
class PreparedPeer:
    """faust's inputs for one assignment, built before the clock starts."""

    assignor: Any
    cluster: PeerCluster
    member_metadata: dict[str, Any]
    changelog_topics: frozenset[str]
    generation: int
    encode: bool
    captured: dict[str, Any] = field(default_factory=dict)


def _partition_map(mapping: Mapping[str, Iterable[int]] | None) -> dict[str, list[int]]:
    return {
        topic: sorted(int(p) for p in parts)
        for topic, parts in sorted((mapping or {}).items())
        if parts
    }


def prepare(document: Mapping[str, Any], *, encode: bool = False) -> PreparedPeer:
    """Encode ``document``'s members as faust workers would and build faust's assignor."""
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
    from faust.assignor.client_assignment import ClientAssignment, ClientMetadata
    from faust.assignor.partition_assignor import PartitionAssignor

    tables = PeerTableManager(
        document.get("changelogs", []), document.get("global_changelogs", [])
    )
    app: Any = PeerApp(tables)
    assignor = PartitionAssignor(app, replicas=int(document.get("standby_replicas", 0)))
    member_metadata: dict[str, Any] = {}
    generation = 0
    for member in document["members"]:
        previous = ClientAssignment(
            actives=_partition_map(member.get("actives")),
            standbys=_partition_map(member.get("standbys")),
        )
        user_data = ClientMetadata(
            assignment=previous,
            url=member["id"],
            changelog_distribution={},
            external_topic_distribution={},
            topic_groups={},
        ).dumps()
        member_metadata[member["id"]] = ConsumerProtocolMemberMetadata(
            assignor.version, list(member["topics"]), user_data
        )
        generation = max(generation, int(member.get("generation") or 0))
    prepared = PreparedPeer(
        assignor=assignor,
        cluster=PeerCluster(document["topics"]),
        member_metadata=member_metadata,
        changelog_topics=frozenset(tables.changelog_topics),
        generation=generation + 1,
        encode=encode,
    )
    real_encoding = assignor._protocol_assignments

    def hand_off(
        assignments: Any, cl_distribution: Any, tp_distribution: Any, topic_groups: Any
    ) -> Any:
        prepared.captured["assignments"] = assignments
        prepared.captured["assigned_at"] = time.perf_counter()
        if not prepared.encode:
            return {}
        encoded = real_encoding(assignments, cl_distribution, tp_distribution, topic_groups)
        prepared.captured["encode_s"] = time.perf_counter() - prepared.captured["assigned_at"]
        return encoded

    assignor._protocol_assignments = hand_off  # type: ignore[method-assign]
    return prepared


def run(prepared: PreparedPeer) -> float:
    """Run faust's leader assignment; returns seconds until faust's assignment existed."""
    started = time.perf_counter()
    prepared.assignor._perform_assignment(prepared.cluster, prepared.member_metadata)
    return float(prepared.captured["assigned_at"] - started)


def to_output(prepared: PreparedPeer) -> dict[str, Any]:
    """faust's captured ``ClientAssignment`` mapping in the shared output format.

    Standbys of topics that are not changelogs are dropped: faust computes them for every
    topic of a group but subscribes only changelog standbys (``kafka_protocol_assignment``).
    faust has no generation; the output carries the highest reported one plus one.
    """
    assignments = prepared.captured["assignments"]
    result: dict[str, Any] = {}
    for member_id in sorted(assignments):
        client = assignments[member_id]
        result[member_id] = {
            "actives": _partition_map(client.actives),
            "standbys": {
                topic: parts
                for topic, parts in _partition_map(client.standbys).items()
                if topic in prepared.changelog_topics
            },
        }
    stats: dict[str, Any] = {"peer": f"faust-streaming {FAUST_VERSION}"}
    if "encode_s" in prepared.captured:
        stats["encode_s"] = prepared.captured["encode_s"]
    return {"assignment": result, "generation": prepared.generation, "stats": stats}


def assign_document(document: Mapping[str, Any], *, encode: bool = False) -> dict[str, Any]:
    """faust's assignment of ``document`` in the shared output format (untimed helper)."""
    prepared = prepare(document, encode=encode)
    run(prepared)
    return to_output(prepared)
