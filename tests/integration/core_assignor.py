"""A plain aiokafka assignor over streamjoin's pure assignment core, for the
cooperative coordinator's tests: members report their id, generation,
actives and whether they kept them through this rebalance (JSON user data);
the leader assigns with :func:`streamjoin.assignment.assign` (one task per
partition, no state)."""

from __future__ import annotations

import json
from typing import Any

from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from streamjoin.assignment import GroupState, MemberState, assign


class CoreAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """One member's assignor (an instance per consumer)."""

    name = "faust"  # the eager protocol's name, as faust's own assignor

    def __init__(self, member: str) -> None:
        self.member = member
        self.generation: int | None = None
        self.actives: dict[str, list[int]] = {}
        self.cooperative = False
        #: every assignment the leader made here: (generation, stats)
        self.made: list[tuple[int, dict[str, Any]]] = []

    def on_rebalance_prepare(self, kept: bool, lost: bool = False) -> None:
        self.cooperative = kept

    def metadata(self, topics: Any) -> ConsumerProtocolMemberMetadata:
        doc = {
            "id": self.member,
            "generation": self.generation,
            "actives": self.actives,
            "cooperative": self.cooperative,
        }
        return ConsumerProtocolMemberMetadata(0, sorted(topics), json.dumps(doc).encode())

    def assign(self, cluster: Any, members: dict[str, Any]) -> dict[str, Any]:
        docs = {mid: json.loads(meta.user_data) for mid, meta in members.items()}
        topics = sorted({t for meta in members.values() for t in meta.subscription})
        state = GroupState(
            topics={t: len(cluster.partitions_for_topic(t)) for t in topics},
            members=tuple(
                MemberState(
                    id=doc["id"],
                    topics=tuple(sorted(members[mid].subscription)),
                    host=doc["id"],
                    generation=doc["generation"],
                    actives={t: tuple(ps) for t, ps in doc["actives"].items()},
                    cooperative=doc["cooperative"],
                )
                for mid, doc in sorted(docs.items())
            ),
        )
        result = assign(state)
        self.made.append((result.generation, dict(result.stats)))
        user_data = json.dumps({"generation": result.generation}).encode()
        return {
            mid: ConsumerProtocolMemberAssignment(
                0,
                sorted((t, list(ps)) for t, ps in result.members[doc["id"]].actives.items()),
                user_data,
            )
            for mid, doc in docs.items()
        }

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        self.actives = {t: sorted(ps) for t, ps in assignment.assignment if ps}
        self.generation = json.loads(assignment.user_data)["generation"]
