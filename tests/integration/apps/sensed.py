"""A plain faust app on streamjoin's assignor with a sensor that records faust's
assignment calls (one JSON line per call, in ``assignments.jsonl`` under the
worker's data directory).

Environment: SJ_TEST_APP_ID names the app and prefixes its topic.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import faust

APP_ID = os.environ.get("SJ_TEST_APP_ID", "sj-sensed")

app = faust.App(
    APP_ID,
    topic_partitions=4,
    web_enabled=False,
    PartitionAssignor="streamjoin:PartitionAssignor",
    # faust's defaults make the embedded broker hold each JoinGroup 30 s
    broker_session_timeout=6.0,
    broker_heartbeat_interval=1.0,
    broker_rebalance_timeout=20.0,
)
orders = app.topic(f"{APP_ID}-orders", partitions=4)


class AssignmentRecorder(faust.Sensor):
    def _write(self, call: str, state: dict[str, Any]) -> None:
        path = Path(app.conf.datadir) / "assignments.jsonl"
        with path.open("a") as out:
            out.write(json.dumps({"call": call, "state": state}, default=str) + "\n")

    def on_assignment_start(self, assignor: Any) -> dict[str, Any]:
        state = super().on_assignment_start(assignor)
        self._write("start", state)
        return state

    def on_assignment_completed(self, assignor: Any, state: dict[str, Any]) -> None:
        self._write("completed", state)

    def on_assignment_error(self, assignor: Any, state: dict[str, Any], exc: BaseException) -> None:
        self._write("error", {"exc": repr(exc)})


app.sensors.add(AssignmentRecorder())


@app.agent(orders)
async def on_order(stream: Any) -> None:
    async for _ in stream:
        pass
