"""Impressions ⋈ clicks → billed clicks: the ad-monetization join, as a user writes it.

Run it::

    streamjoin worker -A examples.ad_monetization.app --broker kafka://127.0.0.1:9092

Every click gets exactly one outcome, keyed by its ``click_id``: billed
(``attributed-clicks``), a repeat click on an impression that already billed
one (``duplicate-clicks``) or a click with no impression in the window
(``unattributed-clicks``). Bad and late records go to ``ads-dead-letters``.

This is the readable version of :mod:`streamjoin.ads.app`, the factory the
demo, the benchmarks and the docker deployment run (it adds the Parquet
archive and settings from ``ADS_*`` variables). Event formats: README.md.
"""

import json

import streamjoin
from streamjoin.ads.policy import AdAttribution
from streamjoin.ads.topics import AdTopics
from streamjoin.join.window import JoinWindow

topics = AdTopics()
app = streamjoin.App("ad-monetization-example", topic_partitions=4, web_enabled=False)

impressions = app.topic(topics.impressions, key_serializer="raw", value_serializer="raw")
clicks = app.topic(topics.clicks, key_serializer="raw", value_serializer="raw")

# a click bills its auction's impression when it comes within 30 minutes after
# it; records may arrive up to 10 s out of event-time order
policy = AdAttribution(JoinWindow(before=0, after=30 * 60 * 1000, grace=10_000))

billing = app.join(
    impressions,
    clicks,
    policy=policy,
    name="billing",
    outputs=topics.outputs,
    dead_letters=topics.dead_letters,
)

#: campaign -> spend of its billed clicks, on the worker that owns the campaign
spend = app.Table("campaign-spend", default=float, partitions=4)


@app.agent(billing.outputs["attributed"])
async def add_spend(stream):
    """Every billed click adds its cost to its campaign's spend."""
    async for value in stream.group_by(lambda v: json.loads(v)["campaign"], name="by-campaign"):
        billed = json.loads(value)
        spend[billed["campaign"]] += billed["cost"]
