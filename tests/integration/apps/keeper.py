"""Test app for cooperative rebalancing: a table fed by an events topic, every
processed record logged.

Each record an agent processes is appended to ``processed.jsonl`` under the
worker's data directory as ``[partition, offset, time.time()]`` (flushed at
once), so a test sees which worker processed which offset and when. Fetches
wait at most 50 ms on the broker (as a join's do), so a task that runs
progresses every few tens of milliseconds under steady input.

Environment:
    SJ_TEST_APP_ID: app id (each test gets its own topics and group).
    SJ_TEST_PARTITIONS: partitions of the events topic and the table.
    STREAMJOIN_COOPERATIVE: ``0`` rebalances eagerly (streamjoin.App's switch).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import streamjoin
from streamjoin.faust.kafka.consumer import shorten_fetch_wait

APP_ID = os.environ.get("SJ_TEST_APP_ID", "sj-keeper")
PARTITIONS = int(os.environ.get("SJ_TEST_PARTITIONS", "6"))

app = streamjoin.App(
    APP_ID,
    topic_partitions=PARTITIONS,
    topic_replication_factor=1,
    broker_commit_every=20,
    broker_commit_interval=0.3,
    web_enabled=False,
    table_standby_replicas=1,
)

events = app.topic(
    f"{APP_ID}-events",
    key_type=str,
    value_type=int,
    partitions=PARTITIONS,
    key_serializer="json",
    value_serializer="json",
)
totals = app.Table("totals", default=int, partitions=PARTITIONS, key_type=str, value_type=int)
_log: Any = None


def _processed(partition: int, offset: int) -> None:
    global _log
    if _log is None:
        path = Path(app.conf.datadir) / "processed.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        _log = path.open("a", buffering=1)
    _log.write(json.dumps([partition, offset, time.time()]) + "\n")


@app.agent(events)
async def add(stream: Any) -> None:
    """totals[key] += value, and the record logged."""
    async for event in stream.events():
        totals[event.key] += event.value
        _processed(event.message.partition, event.message.offset)


@app.on_partitions_assigned.connect
async def short_fetch_wait(sender: Any, *args: Any, **kwargs: Any) -> None:
    """Fetches wait at most 50 ms on the broker."""
    shorten_fetch_wait(app.consumer, 50)
