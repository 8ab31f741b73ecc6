"""Test app for the assignor-in-workers tests: a table fed by an events topic.

Environment:
    SJ_TEST_APP_ID: app id (each test gets its own topics and group).
    SJ_TEST_PARTITIONS: partitions of the events topic and the table.
    SJ_TEST_KIND: "streamjoin" (streamjoin.App, the default) or "faust" (a plain
        faust.App switched over with the two documented settings).

Every 0.3 s it writes ``status.json`` under its data directory: the
assignor's view (member id, generation, actives, standbys), the table's
standby and persisted offsets, and the records applied by its restores.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import faust

import streamjoin

APP_ID = os.environ.get("SJ_TEST_APP_ID", "sj-assigned")
PARTITIONS = int(os.environ.get("SJ_TEST_PARTITIONS", "6"))
KIND = os.environ.get("SJ_TEST_KIND", "streamjoin")

settings: dict[str, Any] = {
    "topic_partitions": PARTITIONS,
    "topic_replication_factor": 1,
    "broker_commit_every": 20,
    "broker_commit_interval": 0.3,
    "web_enabled": False,
    "table_standby_replicas": 1,
}
if KIND == "faust":
    app = faust.App(
        APP_ID,
        PartitionAssignor="streamjoin:PartitionAssignor",
        TableManager="streamjoin:TableManager",
        store="rocksdb://",
        broker_session_timeout=6.0,
        broker_heartbeat_interval=1.0,
        broker_rebalance_timeout=20.0,
        **settings,
    )
else:
    app = streamjoin.App(APP_ID, **settings)

events = app.topic(
    f"{APP_ID}-events",
    key_type=str,
    value_type=int,
    partitions=PARTITIONS,
    key_serializer="json",
    value_serializer="json",
)
totals = app.Table("totals", default=int, partitions=PARTITIONS, key_type=str, value_type=int)


@app.agent(events)
async def add(stream: Any) -> None:
    """totals[key] += value."""
    async for key, value in stream.items():
        totals[key] += value


@app.timer(0.3)
async def write_status() -> None:
    """Publish the assignor's view and the restore counts for the test."""
    tables = app.tables
    doc = {
        "pid": os.getpid(),
        "time": time.time(),
        "assignor": app.assignor.describe(),
        "standby_offsets": [[t, p, o] for (t, p), o in tables.standby_offsets().items()],
        "restore_counts": [[t, p, n] for (t, p), n in tables.restore_counts().items()],
    }
    path = Path(app.conf.datadir) / "status.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, sort_keys=True))
    tmp.replace(path)
