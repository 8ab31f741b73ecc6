"""The join benchmark's read-only ceiling: a plain faust app that only counts records.

Everything is faust-streaming's own default (assignor, recovery, memory store,
group timeouts, stream acks and commits) except what the benchmark must set:
the app id, the topic names and raw serializers. One agent reads both input
topics of the ad-monetization join and counts what it sees; the count is
served at ``GET /bench/count/`` so the benchmark polls this worker exactly as
it polls the streamjoin worker's ``/streamjoin/joins/``.

Environment:
    SJ_BENCH_APP_ID: app id and consumer group (default ``bench-join-peer``).
    SJ_BENCH_TOPIC_PREFIX: prefix of the topic names (``AdTopics``; default empty).
"""

from __future__ import annotations

import os
from typing import Any

import faust

from streamjoin.ads.topics import AdTopics

APP_ID = os.environ.get("SJ_BENCH_APP_ID", "bench-join-peer")
PREFIX = os.environ.get("SJ_BENCH_TOPIC_PREFIX", "")

app = faust.App(APP_ID)

source = app.topic(*AdTopics(PREFIX).inputs, key_serializer="raw", value_serializer="raw")

#: records seen by the agent since the worker started
counts = {"processed": 0}


@app.agent(source)
async def count(stream: Any) -> Any:
    """Count every record of both topics; nothing else."""
    async for _ in stream:
        counts["processed"] += 1


@app.page("/bench/count/")
async def count_page(web: Any, request: Any) -> Any:
    """This worker's count, as JSON."""
    return web.json(dict(counts))
