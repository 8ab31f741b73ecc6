"""The app both restore benchmarks run: one RocksDB table, nothing else.

``SJ_BENCH_MANAGER=streamjoin`` adopts streamjoin's restoration with the one
faust setting ``TableManager="streamjoin:TableManager"``; ``faust`` keeps
faust's own recovery. Everything else is identical.
"""

from __future__ import annotations

import os

import faust

APP_ID = os.environ.get("SJ_BENCH_APP_ID", "bench-restore")
PARTITIONS = int(os.environ.get("SJ_BENCH_PARTITIONS", "8"))
MANAGER = os.environ.get("SJ_BENCH_MANAGER", "streamjoin")

_managers = {
    "streamjoin": "streamjoin:TableManager",
    "faust": "faust.tables:TableManager",
}

app = faust.App(
    APP_ID,
    store="rocksdb://",
    TableManager=_managers[MANAGER],
    topic_partitions=PARTITIONS,
    topic_replication_factor=1,
    broker_session_timeout=6.0,
    broker_heartbeat_interval=1.0,
    broker_rebalance_timeout=20.0,
    web_enabled=False,
)

table = app.Table("state", default=str, partitions=PARTITIONS)
