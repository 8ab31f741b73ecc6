"""faust's sensors see streamjoin's assignments in real workers: a start and a
completed call per rebalance the leader makes, with the assignment's stats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kafka_util import wait_until

from streamjoin.dev.process import WorkerProcess

pytestmark = pytest.mark.broker



def _calls(datadirs: list[Path]) -> list[dict[str, Any]]:
    found = []
    for datadir in datadirs:
        path = datadir / "assignments.jsonl"
        if path.exists():
            found += [json.loads(line) for line in path.read_text().splitlines() if line]
    return found


def test_a_recording_sensor_sees_start_and_completed_per_rebalance(
    workers: Any, tmp_path: Path
) -> None:
    def spawn(name: str) -> WorkerProcess:
        return workers.spawn(name, app="apps.sensed:app")

    first = spawn("w1")
    first.wait_for_log(r"streamjoin: rebalance generation", timeout=90)
    dirs = [tmp_path / "w1", tmp_path / "w2"]

    def completed(n: int) -> list[dict[str, Any]] | None:
        calls = _calls(dirs)
        return calls if sum(c["call"] == "completed" for c in calls) >= n else None

    calls = wait_until(lambda: completed(1), 30, "a completed assignment call")
    second = spawn("w2")
    second.wait_for_log(r"streamjoin: rebalance generation", timeout=90)
    calls = wait_until(lambda: completed(2), 60, "a second completed assignment call")
    kinds = [c["call"] for c in calls]
    assert "error" not in kinds
    # every completed call follows its own start
    assert kinds[: 2 * kinds.count("completed")] == ["start", "completed"] * kinds.count(
        "completed"
    )
    last = [c for c in calls if c["call"] == "completed"][-1]["state"]
    # 4 partitions of orders and the one of faust's leader topic
    assert last["streamjoin"]["members"] == 2 and last["streamjoin"]["tasks"] == 5
    assert "time_start" in last
    assert first.running() and second.running()
