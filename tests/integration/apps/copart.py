"""An app declaring a join of two topics, for ``streamjoin topics check`` tests.

Environment: SJ_TEST_APP_ID names the app and prefixes its topics.
"""

from __future__ import annotations

import os
from typing import Any

import faust

APP_ID = os.environ.get("SJ_TEST_APP_ID", "sj-copart")

app = faust.App(APP_ID, topic_partitions=4, web_enabled=False)
impressions = app.topic(f"{APP_ID}-impressions", partitions=4)
clicks = app.topic(f"{APP_ID}-clicks", partitions=4)
app.copartitioned_topics = [[impressions.get_topic_name(), clicks.get_topic_name()]]


@app.agent(impressions)
async def on_impression(stream: Any) -> None:
    async for _ in stream:
        pass


@app.agent(clicks)
async def on_click(stream: Any) -> None:
    async for _ in stream:
        pass
