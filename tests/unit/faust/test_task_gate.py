"""The restorer's TaskGate: which tasks' inputs resume, and when each task restored
in a session becomes ready. A fake stands for faust's consumer (the gate only
calls its ``resume_partitions``)."""

from __future__ import annotations

from typing import Any

from faust.types import TP

from streamjoin.faust.restore.book import TaskGate


class _Consumer:
    def __init__(self) -> None:
        self.resumed: list[set[TP]] = []

    def resume_partitions(self, tps: set[TP]) -> None:
        self.resumed.append(set(tps))


def _gate(streams: set[TP], global_partitions: set[int], restored: dict[int, float]) -> Any:
    consumer = _Consumer()
    return consumer, TaskGate(consumer, streams, global_partitions, restored)  # type: ignore[arg-type]


def test_a_task_restored_without_inputs_waiting_gets_its_ready_time() -> None:
    """A join task kept through a cooperative rebalance and restored again may
    have no input on the gate; it is noted ready once its changelogs are."""
    restored: dict[int, float] = {7: 1.0}
    consumer, gate = _gate(set(), set(), restored)
    gate.update(pending={0, 3})
    assert restored == {7: 1.0}
    gate.update(pending={3})
    assert sorted(restored) == [0, 7]
    gate.update(pending=set())
    assert sorted(restored) == [0, 3, 7]
    assert restored[7] == 1.0  # a task ready before keeps its time
    assert consumer.resumed == []


def test_inputs_resume_task_by_task_and_a_global_table_holds_them_all() -> None:
    a, b = TP("clicks", 0), TP("clicks", 2)
    restored: dict[int, float] = {}
    consumer, gate = _gate({a, b}, {2}, restored)
    gate.update(pending={0, 2})
    gate.update(pending={2})  # a global table's partition 2 still restoring
    assert consumer.resumed == [] and restored == {}
    gate.update(pending=set())
    assert consumer.resumed == [{a, b}] and sorted(restored) == [0, 2]
