"""A small streamjoin app for the broker tests: ``latest[key] = value`` per event.

Environment:
    SJ_TEST_APP_ID: app id (so each test gets its own topics and group).
    SJ_TEST_PARTITIONS: partitions of the source topic and the table.
    SJ_TEST_RESTORE_FETCH_BYTES: shrink the restore consumer's fetches (slow restore).
    SJ_TEST_PLAIN_FAUST: use faust.App with TableManager="streamjoin:TableManager".
    SJ_TEST_FENCED: make the table fenced as a join's state table is (owner
        markers and tokens in its changelog, see streamjoin.restore.owner_tokens).

It records, under its data directory:
    first_processed.jsonl: per partition, the first record processed by this
        process and the time its task's tables were restored.
    status.json: every 0.3 s, standby/persisted offsets and restore counts.
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path
from typing import Any

import faust

import streamjoin
from streamjoin.faust.app import GROUP_TIMEOUTS
from streamjoin.faust.restore.restorer import Restorer, RestoreSettings

APP_ID = os.environ.get("SJ_TEST_APP_ID", "sj-counter")
PARTITIONS = int(os.environ.get("SJ_TEST_PARTITIONS", "4"))
FETCH_BYTES = os.environ.get("SJ_TEST_RESTORE_FETCH_BYTES")

if FETCH_BYTES:
    # Small fetches make a restore last long enough to be interrupted on purpose.

    class _SmallFetches(RestoreSettings):
        max_partition_fetch_bytes = int(FETCH_BYTES)
        standby_max_partition_fetch_bytes = int(FETCH_BYTES)
        fetch_max_bytes = int(FETCH_BYTES)

    Restorer.settings = _SmallFetches

# SJ_TEST_PLAIN_FAUST=1: a plain faust.App that adopts streamjoin's restoration
# with the one setting a faust user would add.
if os.environ.get("SJ_TEST_PLAIN_FAUST"):
    _App: Any = functools.partial(
        faust.App,
        store="rocksdb://",
        TableManager="streamjoin:TableManager",
        **GROUP_TIMEOUTS,  # so that the group settles as fast as streamjoin.App's
    )
else:
    _App = streamjoin.App

app = _App(
    APP_ID,
    topic_partitions=PARTITIONS,
    topic_replication_factor=1,
    broker_commit_every=50,
    broker_commit_interval=0.5,
    web_enabled=False,
    key_serializer="json",
    value_serializer="json",
)

events = app.topic(
    f"{APP_ID}-events",
    key_type=str,
    value_type=int,
    key_serializer="json",
    value_serializer="json",
    partitions=PARTITIONS,
)
latest = app.Table(
    "latest",
    default=int,
    partitions=PARTITIONS,
    key_type=str,
    value_type=int,
)

if os.environ.get("SJ_TEST_FENCED"):
    latest.streamjoin_fenced = True  # type: ignore[attr-defined]

_first_seen: set[int] = set()


def _datadir() -> Path:
    return Path(app.conf.datadir)


def _write_json_atomic(path: Path, doc: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, sort_keys=True))
    tmp.replace(path)


@app.agent(events)
async def track(stream: Any) -> None:
    """Remember the latest value of every key; log the first record of each partition."""
    async for event in stream.events():
        partition = event.message.partition
        if partition not in _first_seen:
            _first_seen.add(partition)
            restored_at = app.tables.restored_at().get(partition)
            line = {
                "pid": os.getpid(),
                "partition": partition,
                "offset": event.message.offset,
                "processed_at": time.time(),
                "restored_at": restored_at,
            }
            with open(_datadir() / "first_processed.jsonl", "a") as out:
                out.write(json.dumps(line) + "\n")
        latest[event.key] = event.value


def _changelog_partitions(tps: Any) -> list[int]:
    return sorted(tp.partition for tp in tps if tp.topic.endswith("-changelog"))


@app.timer(0.3)
async def write_status() -> None:
    """Publish restore state for the test to read."""
    tables = app.tables
    doc = {
        "pid": os.getpid(),
        "time": time.time(),
        "standby_offsets": [[t, p, o] for (t, p), o in tables.standby_offsets().items()],
        "persisted_offsets": [[t, p, o] for (t, p), o in tables.persisted_offsets().items()],
        "restore_counts": [[t, p, n] for (t, p), n in tables.restore_counts().items()],
        "standby_pacing": tables.standby_pacing(),
        "actives": _changelog_partitions(app.assignor.assigned_actives()),
        "standbys": _changelog_partitions(app.assignor.assigned_standbys()),
    }
    _write_json_atomic(_datadir() / "status.json", doc)
