"""streamjoin:PartitionAssignor's decisions around one assignment, in process: the
member counts the rebalance that ends and falls back to what Kafka assigned when it
cannot read the leader's decision; the leader stops its worker on a group the core
cannot assign."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka.protocol.metadata import MetadataResponse_v0
from aiokafka.structs import TopicPartition as TP

import streamjoin
from streamjoin.assignment import AssignmentError
from streamjoin.faust.assignment import leader
from streamjoin.faust.assignment.assignor import PartitionAssignor


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Any]:
    app = streamjoin.App("rebalance-ends-test", datadir=str(tmp_path), web_enabled=False)
    app.topic("orders", partitions=4)
    yield app


def _cluster(topics: dict[str, int]) -> ClusterMetadata:
    cluster = ClusterMetadata()
    cluster.update_metadata(
        MetadataResponse_v0(
            [(0, "127.0.0.1", 9092)],
            [(0, t, [(0, p, 0, [0], [0]) for p in range(n)]) for t, n in sorted(topics.items())],
        )
    )
    return cluster


def test_an_unreadable_assignment_runs_what_kafka_assigned_and_counts_the_rebalance(
    app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    assignor = PartitionAssignor(app)
    assignor.metadata(["orders"])  # the rebalance starts with the JoinGroup
    assignor.on_rebalance_prepare(kept=False, lost=True)
    garbage = ConsumerProtocolMemberAssignment(1, [("orders", [2, 0])], b"not ours")
    with caplog.at_level(logging.ERROR):
        assignor.on_assignment(garbage)
    assert assignor.assigned_actives() == {TP("orders", 0), TP("orders", 2)}
    assert assignor.assigned_standbys() == set()
    assert any("cannot read" in r.getMessage() for r in caplog.records)
    last = assignor.last_rebalance
    assert last["generation"] == 0 and last["actives"]["gained"] == 2
    assert assignor.partition_outcomes == {"gained": 2, "kept": 0, "lost": 0}
    assert assignor.rebalance_kinds["lost"] == 1 and len(assignor.rebalances) == 1
    # the next one is eager unless the consumer says otherwise; kept tasks count as kept
    assignor.on_assignment(garbage)
    assert assignor.rebalance_kinds["eager"] == 1 and len(assignor.rebalances) == 1
    assert assignor.partition_outcomes == {"gained": 2, "kept": 2, "lost": 0}


def test_a_group_the_core_cannot_assign_stops_the_worker_and_raises(
    app: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assignor = PartitionAssignor(app)
    stopped: list[Exception] = []
    monkeypatch.setattr(assignor, "stop_worker", stopped.append)
    problem = AssignmentError("the counts differ")

    def cannot(state: Any) -> Any:
        raise problem

    monkeypatch.setattr(leader, "assign", cannot)
    meta = assignor.metadata(["orders"])
    members = {"m0": ConsumerProtocolMemberMetadata(1, ["orders"], meta.user_data)}
    with pytest.raises(AssignmentError), caplog.at_level(logging.ERROR):
        assignor.assign(_cluster({"orders": 4}), members)
    assert stopped == [problem]
    assert any("stopping this worker" in r.getMessage() for r in caplog.records)
