"""streamjoin:PartitionAssignor as the group leader, in process: faust's sensor calls,
an empty assignment when no subscribed topic exists yet, faust's group_for_topic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import faust
import pytest
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from aiokafka.protocol.metadata import MetadataResponse_v0

import streamjoin
from streamjoin.faust.assignment.assignor import PartitionAssignor
from streamjoin.membership.userdata import decode_assignment


class Recorder(faust.Sensor):
    """A sensor that records faust's assignment calls, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def on_assignment_start(self, assignor: Any) -> dict[str, Any]:
        state = super().on_assignment_start(assignor)
        self.calls.append(("start", dict(state)))
        return state

    def on_assignment_completed(self, assignor: Any, state: dict[str, Any]) -> None:
        self.calls.append(("completed", dict(state)))

    def on_assignment_error(self, assignor: Any, state: dict[str, Any], exc: BaseException) -> None:
        self.calls.append(("error", {"exc": repr(exc)}))


def _cluster(topics: dict[str, int]) -> ClusterMetadata:
    """Cluster metadata as the broker's MetadataResponse describes it."""
    cluster = ClusterMetadata()
    cluster.update_metadata(
        MetadataResponse_v0(
            [(0, "127.0.0.1", 9092)],
            [(0, t, [(0, p, 0, [0], [0]) for p in range(n)]) for t, n in sorted(topics.items())],
        )
    )
    return cluster


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Any]:
    app = streamjoin.App("adapter-test", datadir=str(tmp_path), web_enabled=False)
    app.topic("orders", partitions=4)
    yield app


def _members(assignor: PartitionAssignor, topics: list[str], n: int = 2) -> dict[str, Any]:
    meta = assignor.metadata(topics)
    return {
        f"m{i}": ConsumerProtocolMemberMetadata(1, sorted(topics), meta.user_data) for i in range(n)
    }


def test_sensors_see_start_and_completed_with_the_assignment_stats(app: Any) -> None:
    recorder = Recorder()
    app.sensors.add(recorder)
    app.sensors.add(app.monitor)  # as a started app does
    assignor = PartitionAssignor(app)
    out = assignor.assign(_cluster({"orders": 4}), _members(assignor, ["orders"]))
    assert sorted(out) == ["m0", "m1"]
    assert [c for c, _ in recorder.calls] == ["start", "completed"]
    stats = recorder.calls[1][1]["streamjoin"]
    assert stats["tasks"] == 4 and stats["members"] >= 1 and "moved" in stats
    assert app.monitor.assignments_completed == 1  # faust's own Monitor counted it
    assert len(app.monitor.assignment_latency) == 1


def test_no_subscribed_topic_exists_yet_gives_an_empty_assignment_not_a_crash(
    app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()
    app.sensors.add(recorder)
    assignor = PartitionAssignor(app)
    members = _members(assignor, ["orders", "payments"])
    out = assignor.assign(_cluster({"payments": 0}), members)
    assert sorted(out) == ["m0", "m1"]
    for assignment in out.values():
        assert assignment.assignment == []
        info = decode_assignment(assignment.user_data)
        assert info is not None and info.actives == {} and info.standbys == {}
    lines = [r.getMessage() for r in caplog.records if "nothing to assign" in r.getMessage()]
    assert len(lines) == 1 and "orders, payments" in lines[0]
    assert [c for c, _ in recorder.calls] == ["start", "completed"]
    # once the topics exist, the next rebalance assigns them
    out = assignor.assign(_cluster({"orders": 4, "payments": 4}), members)
    assigned = sorted(
        p for a in out.values() for t, ps in a.assignment if t == "orders" for p in ps
    )
    assert assigned == [0, 1, 2, 3]


def test_group_for_topic_raises_for_a_topic_it_was_not_given_as_faust_does(app: Any) -> None:
    assignor = PartitionAssignor(app)
    out = assignor.assign(_cluster({"orders": 4}), _members(assignor, ["orders"], n=1))
    assignor.on_assignment(out["m0"])
    assert assignor.group_for_topic("orders") == 0
    with pytest.raises(KeyError):
        assignor.group_for_topic("no-such-topic")
