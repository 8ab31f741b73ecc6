"""Workers started before their topics exist (first deploy, topics created by another
service, auto-creation off) stay up, and get the topics once they are created."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kafka_util import create_topic, produce, read_status, run, wait_until

pytestmark = pytest.mark.broker


def test_workers_started_before_their_topics_get_them_once_created(
    workers: Any, tmp_path: Path
) -> None:
    app_id = workers.app_id
    names = ["w1", "w2"]
    procs = {name: workers.spawn(name, app="apps.late_topics:app") for name in names}
    # the leader assigns nothing and says which topics are missing; nobody crashes
    wait_until(
        lambda: any("nothing to assign" in p.log_text() for p in procs.values()),
        90,
        "the leader's 'nothing to assign' line",
    )
    line = next(
        ln for p in procs.values() for ln in p.log_text().splitlines() if "nothing to assign" in ln
    )
    assert f"{app_id}-events" in line
    time.sleep(3)
    assert all(p.running() for p in procs.values()), "a worker stopped without its topics"
    # another service creates the topics: the group rebalances and assigns them
    run(create_topic(workers.broker.bootstrap, f"{app_id}-events", 4))
    run(create_topic(workers.broker.bootstrap, f"{app_id}-counts-changelog", 4))

    def assigned() -> bool:
        owned: list[int] = []
        for name in names:
            status = read_status(tmp_path / name) or {}
            owned += status.get("actives", {}).get(f"{app_id}-events", [])
        return sorted(owned) == [0, 1, 2, 3]

    wait_until(assigned, 90, "the new topics assigned across both workers")
    records = [(f"k{i}".encode(), f"v{i % 7}".encode(), None) for i in range(200)]
    run(produce(workers.broker.bootstrap, f"{app_id}-events", records))

    def counted() -> int:
        return sum((read_status(tmp_path / n) or {}).get("records", 0) for n in names)

    wait_until(lambda: counted() >= 200, 60, "every record counted")
    assert counted() == 200
