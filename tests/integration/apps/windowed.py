"""A generic LEFT windowed join for the broker tests (``streamjoin.join.windowed``).

Environment: SJ_TEST_APP_ID (app id and topic prefix), SJ_TEST_PARTITIONS,
SJ_TEST_BATCH_MAX (the join's ``batch_max``).
"""

from __future__ import annotations

import os

import streamjoin
from streamjoin.join.window import JoinWindow
from streamjoin.join.windowed import JoinKind, WindowedJoinPolicy

APP_ID = os.environ.get("SJ_TEST_APP_ID", "sj-windowed")
PARTITIONS = int(os.environ.get("SJ_TEST_PARTITIONS", "2"))
BATCH_MAX = int(os.environ.get("SJ_TEST_BATCH_MAX", "2000"))

app = streamjoin.App(APP_ID, topic_partitions=PARTITIONS, web_enabled=False)
raw = {"key_serializer": "raw", "value_serializer": "raw"}
orders = app.topic(f"{APP_ID}-orders", partitions=PARTITIONS, **raw)
payments = app.topic(f"{APP_ID}-payments", partitions=PARTITIONS, **raw)
joined = app.join(
    orders,
    payments,
    name="paid",
    policy=WindowedJoinPolicy(JoinKind.LEFT, JoinWindow(before=0, after=1_000, grace=200)),
    outputs={"joined": f"{APP_ID}-paid"},
    max_idle_ms=200,
    batch_max=BATCH_MAX,
)
