"""The app the rebalance benchmark runs: one RocksDB table fed by one input topic.

Every input record is written to the table, so every task (partition) that
processes records writes its changelog partition: the benchmark reads the
changelog records' timestamps (set by the worker's producer when it sends
them) as each task's progress.

``SJ_BENCH_KIND=streamjoin`` runs it as a ``streamjoin.App`` (streamjoin's
assignor and table restoration; ``STREAMJOIN_MAX_WARMUP_REPLICAS`` from the
environment reaches the assignor); ``faust`` as a plain ``faust.App`` with
faust's own assignor and recovery. Everything else is identical: RocksDB
store, one standby per task, the same group timeouts. faust's variant's
producer sends one record per batch (``SJ_BENCH_ONE_RECORD_BATCHES=1``):
faust's recovery trusts ``ListOffsets``, which the embedded broker answers
wrongly after a multi-record batch. The benchmark sets it for the other
variants too when asked (``--one-record-batches all``).

Every variant's consumer waits at most 50 ms for a fetch on the broker (as a
streamjoin join's does): the embedded broker holds a fetch for most of faust's
1.5 s ``fetch_max_wait_ms`` (measured: a record every ~0.75 s per task at 300
records/s), which would hide any pause shorter than that.

``GET /bench/tasks/`` lists the input partitions this worker runs now, how many
rebalances it went through (faust's ``rebalancing_count``) and, with
streamjoin's restoration, how its standby follower kept to its share of the time.

Environment:
    SJ_BENCH_KIND: ``streamjoin`` (default) or ``faust``.
    SJ_BENCH_APP_ID: app id, consumer group and topic prefix.
    SJ_BENCH_PARTITIONS: partitions of the input topic and the table (default 6).
    SJ_BENCH_SESSION_TIMEOUT: ``broker_session_timeout`` in seconds (default 6).
    SJ_BENCH_ONE_RECORD_BATCHES: ``1``: the producer sends one record per
        batch (``producer_max_batch_size=1``); otherwise faust's default.
"""

from __future__ import annotations

import os
from typing import Any

import faust

import streamjoin
from streamjoin.faust.kafka.consumer import shorten_fetch_wait

#: the longest a fetch waits on the broker, every variant (ms)
FETCH_MAX_WAIT_MS = 50

KIND = os.environ.get("SJ_BENCH_KIND", "streamjoin")
APP_ID = os.environ.get("SJ_BENCH_APP_ID", "bench-rebalance")
PARTITIONS = int(os.environ.get("SJ_BENCH_PARTITIONS", "6"))
#: the embedded broker holds each JoinGroup for about half the session timeout
SESSION_TIMEOUT = float(os.environ.get("SJ_BENCH_SESSION_TIMEOUT", "6.0"))

settings: dict[str, Any] = {
    "store": "rocksdb://",
    "topic_partitions": PARTITIONS,
    "topic_replication_factor": 1,
    "table_standby_replicas": 1,
    "broker_session_timeout": SESSION_TIMEOUT,
    "broker_heartbeat_interval": min(1.0, SESSION_TIMEOUT / 4),
    "broker_rebalance_timeout": 20.0,
}
if os.environ.get("SJ_BENCH_ONE_RECORD_BATCHES") == "1":
    settings["producer_max_batch_size"] = 1

if KIND == "faust":
    app = faust.App(APP_ID, **settings)
else:
    app = streamjoin.App(APP_ID, **settings)

source = app.topic(f"{APP_ID}-input", partitions=PARTITIONS)
state = app.Table("state", default=str, partitions=PARTITIONS)


@app.agent(source)
async def keep(stream: Any) -> Any:
    """state[key] = value, for every input record."""
    async for key, value in stream.items():
        state[key] = value


@app.on_partitions_assigned.connect
async def short_fetch_wait(sender: Any, *args: Any, **kwargs: Any) -> None:
    """Every variant's fetches wait at most FETCH_MAX_WAIT_MS on the broker."""
    shorten_fetch_wait(app.consumer, FETCH_MAX_WAIT_MS)


@app.page("/bench/tasks/")
async def tasks(web: Any, request: Any) -> Any:
    """The input partitions this worker runs now."""
    mine = sorted(
        tp.partition for tp in app.assignor.assigned_actives() if tp.topic == source.topics[0]
    )
    pacing = getattr(app.tables, "standby_pacing", None)  # streamjoin's TableManager only
    return web.json(
        {
            "tasks": mine,
            "rebalances": app.rebalancing_count,
            "standby_pacing": pacing() if pacing else None,
        }
    )
