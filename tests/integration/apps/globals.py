"""A global table written by an agent on every worker (``gt[key] = key`` per record of
the writes topic); every 0.2 s each worker writes the keys its copy holds to
``global.json`` under its data directory, and the lag of each followed
changelog partition (``changelog_lags``) to ``lags.json``.

Environment: SJ_TEST_APP_ID names the app and prefixes its topics.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import streamjoin

APP_ID = os.environ.get("SJ_TEST_APP_ID", "sj-globals")

app = streamjoin.App(APP_ID, topic_partitions=4, web_enabled=False)
writes = app.topic(f"{APP_ID}-writes", partitions=4, key_serializer="raw", value_serializer="raw")
table = app.GlobalTable("gt", partitions=4, key_type=str, value_type=str, default=None)


@app.agent(writes)
async def write(stream: Any) -> None:
    async for value in stream:
        key = value.decode()
        table[key] = key


@app.timer(0.2)
async def report() -> None:
    path = Path(app.conf.datadir) / "global.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(sorted(k for k, v in table.items() if v == k)))
    tmp.replace(path)
    # records each followed global partition is behind its changelog's end
    lags = app.tables.recovery.changelog_lags()
    path = Path(app.conf.datadir) / "lags.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([[t, p, lag] for (t, p), lag in lags.items()]))
    tmp.replace(path)
