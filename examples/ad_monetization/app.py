"""The ad-monetization join app: impressions ⋈ clicks → billed, duplicate, unattributed clicks.

Run it with ``streamjoin worker -A examples.ad_monetization.app``. Every click
gets exactly one outcome, keyed by its ``click_id``:

* ``attributed-clicks``: the earliest click (by event time, ties by click id)
  within 30 minutes after its auction's impression: billed, with campaign and cost;
* ``duplicate-clicks``: later clicks on an impression that already billed one;
* ``unattributed-clicks``: clicks with no impression of their auction in the window.

Undecodable and late records go to ``ads-dead-letters`` with the reason.
``campaign-stats`` is a live per-campaign table (impressions, billed clicks,
spend, CTR); ``GET /campaigns/`` on a worker with the web server shows its
share of it.

Environment (all optional):
    ADS_APP_ID: app id and consumer group (default ``ad-monetization``).
    ADS_TOPIC_PREFIX: prefix of every topic name (default empty).
    ADS_PARTITIONS: partitions of the two input topics (default 4).
    ADS_GRACE_MS: how far out of event-time order records may arrive (default 10000).
    ADS_MAX_IDLE_MS: longest wait for a lagging input (default 2000).
    ADS_LIVE_TABLE: ``0`` turns the live per-campaign table (two more agents
        and two repartition topics) off; the join benchmark measures the join alone.
    ADS_ARCHIVE_DIR: when set, also archive both inputs and the three outcome
        topics as hour-partitioned Parquet under this directory, exactly once
        per record (``streamjoin.archive``; needs ``streamjoin[archive]``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import streamjoin
from streamjoin.join.ads import AdAttribution, decode_impression
from streamjoin.join.policy import BadRecord
from streamjoin.join.window import JoinWindow

APP_ID = os.environ.get("ADS_APP_ID", "ad-monetization")
PREFIX = os.environ.get("ADS_TOPIC_PREFIX", "")
PARTITIONS = int(os.environ.get("ADS_PARTITIONS", "4"))
GRACE_MS = int(os.environ.get("ADS_GRACE_MS", "10000"))
MAX_IDLE_MS = int(os.environ.get("ADS_MAX_IDLE_MS", "2000"))
LIVE_TABLE = os.environ.get("ADS_LIVE_TABLE", "1") not in ("0", "false", "no")

#: the attribution policy; the batch side (Spark) uses the same object
POLICY = AdAttribution(JoinWindow(before=0, after=30 * 60 * 1000, grace=GRACE_MS))

app = streamjoin.App(APP_ID, topic_partitions=PARTITIONS, web_enabled=False)

raw: dict[str, Any] = {"key_serializer": "raw", "value_serializer": "raw"}
impressions = app.topic(f"{PREFIX}impressions", partitions=PARTITIONS, **raw)
clicks = app.topic(f"{PREFIX}clicks", partitions=PARTITIONS, **raw)

billing = app.join(
    impressions,
    clicks,
    policy=POLICY,
    name="billing",
    outputs={
        "attributed": f"{PREFIX}attributed-clicks",
        "duplicate": f"{PREFIX}duplicate-clicks",
        "unattributed": f"{PREFIX}unattributed-clicks",
    },
    dead_letters=f"{PREFIX}ads-dead-letters",
    max_idle_ms=MAX_IDLE_MS,
)

#: campaign -> {"impressions", "billed_clicks", "spend"}; a live view,
#: at least once (a crash may count an event twice here; billing is exact)
campaign_stats = app.Table(f"{PREFIX}campaign-stats", default=dict, partitions=PARTITIONS)


def _bump(campaign: str, **delta: float) -> None:
    row = dict(campaign_stats[campaign])
    for name, amount in delta.items():
        row[name] = round(row.get(name, 0) + amount, 6)
    campaign_stats[campaign] = row


def _campaign_of_impression(value: bytes) -> str:
    try:
        return decode_impression(None, value).campaign
    except BadRecord:
        return ""  # counted by the join's dead-letter topic, not here


async def count_impressions(stream: Any) -> Any:
    """Impressions per campaign."""
    async for value in stream.group_by(_campaign_of_impression, name="by-campaign"):
        campaign = _campaign_of_impression(value)
        if campaign:
            _bump(campaign, impressions=1)


async def count_billed(stream: Any) -> Any:
    """Billed clicks and spend per campaign."""
    async for value in stream.group_by(
        lambda v: json.loads(v)["campaign"], name="billed-by-campaign"
    ):
        outcome = json.loads(value)
        _bump(outcome["campaign"], billed_clicks=1, spend=outcome["cost"])


async def campaigns_page(web: Any, request: Any) -> Any:
    """This worker's share of the per-campaign table, with CTR."""
    rows = {}
    for campaign, row in sorted(campaign_stats.items()):
        shown = row.get("impressions", 0)
        rows[campaign] = {**row, "ctr": row.get("billed_clicks", 0) / shown if shown else None}
    return web.json(rows)


#: the Parquet archive of the inputs and outcomes, when ADS_ARCHIVE_DIR is set
ARCHIVE_DIR = os.environ.get("ADS_ARCHIVE_DIR")
if ARCHIVE_DIR:
    from streamjoin.archive import archive_topics

    archive = archive_topics(
        app,
        ARCHIVE_DIR,
        {
            "impressions": impressions,
            "clicks": clicks,
            "outcomes": [billing.outputs[o] for o in ("attributed", "duplicate", "unattributed")],
        },
    )


if LIVE_TABLE:
    app.agent(impressions)(count_impressions)
    app.agent(billing.outputs["attributed"])(count_billed)
    app.page("/campaigns/")(campaigns_page)
