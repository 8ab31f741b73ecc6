"""The ad-monetization join app, built by a factory: impressions ⋈ clicks → click outcomes.

Run it with ``streamjoin worker -A streamjoin.ads.app:app``: the app is built
from the ``ADS_*`` environment variables on first access of ``app``, so
importing this module has no side effect. Embedding code calls
:func:`create_app` with an :class:`AdsSettings`.

Every click gets exactly one outcome, keyed by its ``click_id`` (topics in
:class:`~streamjoin.ads.topics.AdTopics`):

* ``attributed-clicks``: the earliest click (by event time, ties by click id)
  within 30 minutes after its auction's impression: billed, with campaign and cost;
* ``duplicate-clicks``: later clicks on an impression that already billed one;
* ``unattributed-clicks``: clicks with no impression of their auction in the window.

Undecodable and late records go to ``ads-dead-letters`` with the reason.
``campaign-stats`` is a live per-campaign table (impressions, billed clicks,
spend, CTR); ``GET /campaigns/`` on a worker with the web server shows its
share of it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamjoin._lazy import lazy_attributes
from streamjoin.ads.errors import AdsConfigError
from streamjoin.ads.policy import ATTRIBUTION_WINDOW_MS, AdAttribution, decode_impression
from streamjoin.ads.topics import AdTopics
from streamjoin.join.policy import BadRecord
from streamjoin.join.window import JoinWindow

__all__ = ["AdsApp", "AdsSettings", "create_app", "policy_from_env"]

_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class AdsSettings:
    """What the ad app is built with; :meth:`from_env` reads the ``ADS_*`` variables.

    Attributes:
        app_id: app id and consumer group (``ADS_APP_ID``, default ``ad-monetization``).
        topic_prefix: prefix of every topic name (``ADS_TOPIC_PREFIX``).
        partitions: partitions of the two input topics (``ADS_PARTITIONS``, default 4).
        grace_ms: how far out of event-time order records may arrive
            (``ADS_GRACE_MS``, default 10000).
        max_idle_ms: longest wait for a lagging input (``ADS_MAX_IDLE_MS``, default 2000).
        live_table: the live per-campaign table (two more agents and two
            repartition topics); ``ADS_LIVE_TABLE=0`` turns it off.
        archive_dir: when set, also archive both inputs and the three outcome
            topics as hour-partitioned Parquet under it, exactly once per record
            (``ADS_ARCHIVE_DIR``; needs ``streamjoin[archive]``).
    """

    app_id: str = "ad-monetization"
    topic_prefix: str = ""
    partitions: int = 4
    grace_ms: int = 10_000
    max_idle_ms: int = 2_000
    live_table: bool = True
    archive_dir: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AdsSettings:
        """Settings from ``ADS_*`` variables of *environ* (``os.environ``).

        Raises:
            AdsConfigError: a number is malformed.
        """
        env = os.environ if environ is None else environ
        defaults = cls()

        def number(name: str, default: int) -> int:
            raw = env.get(name)
            if raw is None or raw == "":
                return default
            try:
                return int(raw)
            except ValueError:
                raise AdsConfigError(f"{name}={raw!r}: give a whole number") from None

        return cls(
            app_id=env.get("ADS_APP_ID") or defaults.app_id,
            topic_prefix=env.get("ADS_TOPIC_PREFIX", defaults.topic_prefix),
            partitions=number("ADS_PARTITIONS", defaults.partitions),
            grace_ms=number("ADS_GRACE_MS", defaults.grace_ms),
            max_idle_ms=number("ADS_MAX_IDLE_MS", defaults.max_idle_ms),
            live_table=env.get("ADS_LIVE_TABLE", "1").strip().lower() not in _FALSE,
            archive_dir=env.get("ADS_ARCHIVE_DIR") or None,
        )

    def to_env(self) -> dict[str, str]:
        """The ``ADS_*`` variables that make :meth:`from_env` return these settings."""
        env = {
            "ADS_APP_ID": self.app_id,
            "ADS_TOPIC_PREFIX": self.topic_prefix,
            "ADS_PARTITIONS": str(self.partitions),
            "ADS_GRACE_MS": str(self.grace_ms),
            "ADS_MAX_IDLE_MS": str(self.max_idle_ms),
            "ADS_LIVE_TABLE": "1" if self.live_table else "0",
        }
        if self.archive_dir:
            env["ADS_ARCHIVE_DIR"] = self.archive_dir
        return env

    @property
    def topics(self) -> AdTopics:
        return AdTopics(self.topic_prefix)

    @property
    def policy(self) -> AdAttribution:
        """The attribution policy; the batch side (Spark) uses the same object."""
        return AdAttribution(JoinWindow(before=0, after=ATTRIBUTION_WINDOW_MS, grace=self.grace_ms))


def policy_from_env() -> AdAttribution:
    """The policy the app built from the current ``ADS_*`` variables runs with.

    The Spark side's default ``--policy streamjoin.ads.app:policy_from_env``.
    """
    return AdsSettings.from_env().policy


@dataclass(frozen=True)
class AdsApp:
    """The built app and the parts tests and embedding code reach for."""

    app: Any
    settings: AdsSettings
    billing: Any
    campaign_stats: Any | None


def create_app(settings: AdsSettings | None = None) -> AdsApp:
    """Build the ad-monetization ``streamjoin.App`` (default: :meth:`AdsSettings.from_env`)."""
    import streamjoin

    settings = AdsSettings.from_env() if settings is None else settings
    topics = settings.topics
    app = streamjoin.App(settings.app_id, topic_partitions=settings.partitions, web_enabled=False)
    raw: dict[str, Any] = {"key_serializer": "raw", "value_serializer": "raw"}
    impressions = app.topic(topics.impressions, partitions=settings.partitions, **raw)
    clicks = app.topic(topics.clicks, partitions=settings.partitions, **raw)
    billing = app.join(
        impressions,
        clicks,
        policy=settings.policy,
        name="billing",
        outputs=topics.outputs,
        dead_letters=topics.dead_letters,
        max_idle_ms=settings.max_idle_ms,
    )
    if settings.archive_dir:
        from streamjoin.ads.archive import archive_topics

        archive_topics(
            app,
            settings.archive_dir,
            {
                "impressions": impressions,
                "clicks": clicks,
                "outcomes": [billing.outputs[kind] for kind in billing.outputs],
                "late": billing.dead_letters,
            },
        )
    stats = _add_live_table(app, settings, impressions, billing) if settings.live_table else None
    return AdsApp(app=app, settings=settings, billing=billing, campaign_stats=stats)


def _campaign_of_impression(value: bytes) -> str:
    try:
        return decode_impression(None, value).campaign
    except BadRecord:
        return ""  # counted by the join's dead-letter topic, not here


def _add_live_table(app: Any, settings: AdsSettings, impressions: Any, billing: Any) -> Any:
    """campaign → {impressions, billed_clicks, spend}: a live view, at least once.

    A crash may count an event twice here; billing is exact.
    """
    stats = app.Table(
        f"{settings.topic_prefix}campaign-stats", default=dict, partitions=settings.partitions
    )

    def bump(campaign: str, **delta: float) -> None:
        row = dict(stats[campaign])
        for name, amount in delta.items():
            row[name] = round(row.get(name, 0) + amount, 6)
        stats[campaign] = row

    @app.agent(impressions)
    async def count_impressions(stream: Any) -> Any:
        """Impressions per campaign."""
        async for value in stream.group_by(_campaign_of_impression, name="by-campaign"):
            campaign = _campaign_of_impression(value)
            if campaign:
                bump(campaign, impressions=1)

    @app.agent(billing.outputs["attributed"])
    async def count_billed(stream: Any) -> Any:
        """Billed clicks and spend per campaign."""
        async for value in stream.group_by(
            lambda v: json.loads(v)["campaign"], name="billed-by-campaign"
        ):
            outcome = json.loads(value)
            bump(outcome["campaign"], billed_clicks=1, spend=outcome["cost"])

    @app.page("/campaigns/")
    async def campaigns_page(web: Any, request: Any) -> Any:
        """This worker's share of the per-campaign table, with CTR."""
        rows = {}
        for campaign, row in sorted(stats.items()):
            shown = row.get("impressions", 0)
            rows[campaign] = {**row, "ctr": row.get("billed_clicks", 0) / shown if shown else None}
        return web.json(rows)

    return stats


#: ``app`` is built from the environment on first access (``-A streamjoin.ads.app:app``)
__getattr__ = lazy_attributes(__name__, {"app": lambda: create_app().app})
