"""A table app whose topics are created by someone else, after its workers started.

The Kafka client is told never to create topics as a side effect of asking for
metadata (``allow_auto_topic_creation`` false, as on a cluster with
``auto.create.topics.enable=false``; the embedded broker honours the flag), and
the app does not declare topics (``topic_allow_declare`` off). Every 0.3 s each
worker writes ``status.json`` under its data directory: its actives and the
number of records its agent counted.

Environment: SJ_TEST_APP_ID names the app and prefixes its topics.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import aiokafka.protocol.metadata as metadata

import streamjoin

_plain_request = metadata.MetadataRequest.__init__


def _without_auto_creation(
    self: Any, topics: list[str] | None = None, allow_auto_topic_creation: bool | None = None
) -> None:
    _plain_request(self, topics, False)


metadata.MetadataRequest.__init__ = _without_auto_creation  # type: ignore[method-assign]

APP_ID = os.environ.get("SJ_TEST_APP_ID", "sj-late")

# the consumer looks for the new topics every 2 s (faust's default: 5 minutes)
app = streamjoin.App(
    APP_ID,
    topic_partitions=4,
    topic_allow_declare=False,
    web_enabled=False,
    consumer_metadata_max_age_ms=2000,
)
events = app.topic(f"{APP_ID}-events", partitions=4, key_serializer="raw", value_serializer="raw")
counts = app.Table("counts", partitions=4, key_type=str, value_type=int, default=int)
seen = {"records": 0}


@app.agent(events)
async def count(stream: Any) -> None:
    async for value in stream:
        counts[value.decode()] += 1
        seen["records"] += 1


@app.timer(0.3)
async def report() -> None:
    path = Path(app.conf.datadir) / "status.json"
    tmp = path.with_suffix(".tmp")
    doc = {"actives": app.assignor.describe()["actives"], "records": seen["records"]}
    tmp.write_text(json.dumps(doc))
    tmp.replace(path)
