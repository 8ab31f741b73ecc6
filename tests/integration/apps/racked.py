"""A co-partitioned windowed join (changelogged state) whose workers publish what
their assignor did, for the rack-placement test.

Environment: SJ_TEST_APP_ID (app id and topic prefix), SJ_TEST_PARTITIONS.

Every 0.3 s each worker writes ``status.json`` under its data directory: the
assignor's view (``describe()``: member, generation, actives, standbys,
warm-ups) and, under ``"leader"``, the stats of the last assignment it made as
the group's leader (``cross_rack_tasks`` and the rest; ``{}`` if it never led).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import streamjoin
from streamjoin.join.window import JoinWindow
from streamjoin.join.windowed import JoinKind, WindowedJoinPolicy

APP_ID = os.environ.get("SJ_TEST_APP_ID", "sj-racked")
PARTITIONS = int(os.environ.get("SJ_TEST_PARTITIONS", "6"))

app = streamjoin.App(APP_ID, topic_partitions=PARTITIONS, web_enabled=False)
raw = {"key_serializer": "raw", "value_serializer": "raw"}
orders = app.topic(f"{APP_ID}-orders", partitions=PARTITIONS, **raw)
payments = app.topic(f"{APP_ID}-payments", partitions=PARTITIONS, **raw)
joined = app.join(
    orders,
    payments,
    name="paid",
    policy=WindowedJoinPolicy(JoinKind.INNER, JoinWindow(before=0, after=1_000, grace=200)),
    outputs={"joined": f"{APP_ID}-paid"},
    max_idle_ms=200,
)


@app.timer(0.3)
async def write_status() -> None:
    """Publish the assignor's view and, on the leader, its last assignment's stats."""
    doc = {
        "pid": os.getpid(),
        "time": time.time(),
        "assignor": app.assignor.describe(),
        "leader": dict(getattr(app.assignor, "last_assignment", {}) or {}),
    }
    path = Path(app.conf.datadir) / "status.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, sort_keys=True, default=str))
    tmp.replace(path)
