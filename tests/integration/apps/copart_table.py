"""A streamjoin app with a table and a declared co-partition group (no join).

Environment: SJ_TEST_APP_ID names the app and prefixes its topics.
"""

from __future__ import annotations

import os
from typing import Any

import streamjoin

APP_ID = os.environ.get("SJ_TEST_APP_ID", "sj-copart-table")

app = streamjoin.App(APP_ID, topic_partitions=4, web_enabled=False)
orders = app.topic(f"{APP_ID}-orders", partitions=4)
payments = app.topic(f"{APP_ID}-payments", partitions=4)
app.copartitioned_topics = [[orders.get_topic_name(), payments.get_topic_name()]]
seen = app.Table("seen", default=int, partitions=4)


@app.agent(orders)
async def on_order(stream: Any) -> None:
    async for key, _ in stream.items():
        seen[key] += 1


@app.agent(payments)
async def on_payment(stream: Any) -> None:
    async for _ in stream:
        pass
