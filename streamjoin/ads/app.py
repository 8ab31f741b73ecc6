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
The join also counts impressions, billed clicks and spend per campaign in its
own state (exact, restored with it); ``GET /campaigns/`` on a worker with the
web server shows its share with the CTR (:class:`CampaignStats`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamjoin._lazy import lazy_attributes
from streamjoin.ads.attribution import CampaignCounts
from streamjoin.ads.errors import AdsConfigError
from streamjoin.ads.policy import ATTRIBUTION_WINDOW_MS, AdAttribution
from streamjoin.ads.topics import AdTopics
from streamjoin.join.window import JoinWindow

__all__ = ["AdsApp", "AdsSettings", "CampaignStats", "create_app", "policy_from_env"]

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
        live_table: the live per-campaign table's page (``GET /campaigns/``);
            ``ADS_LIVE_TABLE=0`` turns it off. The join counts per campaign
            either way: it costs no agent, topic or record of its own.
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
    campaign_stats: CampaignStats | None


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
    stats = _add_live_table(app, billing) if settings.live_table else None
    return AdsApp(app=app, settings=settings, billing=billing, campaign_stats=stats)


class CampaignStats:
    """The live per-campaign table: impressions, billed clicks and spend per campaign,
    summed over this worker's join tasks (its share of the whole).

    The counts are kept by the join itself, in each task's state
    (:meth:`~streamjoin.ads.attribution.TaskAttribution.campaign_counts`): made
    durable with the batch that changed them and restored with the task, so
    they are exact after ``kill -9``. A task's counts are those of every
    impression it stored (each id once, late ones not) and every click it
    billed, since the task began.
    """

    def __init__(self, billing: Any) -> None:
        self.billing = billing

    def counts(self) -> dict[str, CampaignCounts]:
        """Campaign -> this worker's counts (its live tasks'), sorted by campaign."""
        totals: dict[str, list[float]] = {}
        for _, task in sorted(self.billing.tasks.live.items()):
            logic = getattr(task.logic, "logic", None)  # the policy's per-task logic
            if logic is None:
                continue
            for campaign, counts in logic.campaign_counts().items():
                row = totals.setdefault(campaign, [0, 0, 0.0])
                for i, value in enumerate(counts):
                    row[i] += value
        return {
            campaign: CampaignCounts(int(row[0]), int(row[1]), round(row[2], 6))
            for campaign, row in sorted(totals.items())
        }

    def rows(self) -> dict[str, dict[str, float | int | None]]:
        """:meth:`counts` as JSON rows, with the click-through rate (billed / impressions)."""
        return {
            campaign: {
                "impressions": c.impressions,
                "billed_clicks": c.billed_clicks,
                "spend": c.spend,
                "ctr": c.billed_clicks / c.impressions if c.impressions else None,
            }
            for campaign, c in self.counts().items()
        }


def _add_live_table(app: Any, billing: Any) -> CampaignStats:
    """The per-campaign table's page, ``GET /campaigns/`` (this worker's share)."""
    stats = CampaignStats(billing)

    @app.page("/campaigns/")
    async def campaigns_page(web: Any, request: Any) -> Any:
        """This worker's share of the per-campaign counts, with CTR."""
        return web.json(stats.rows())

    return stats


#: ``app`` is built from the environment on first access (``-A streamjoin.ads.app:app``)
__getattr__ = lazy_attributes(__name__, {"app": lambda: create_app().app})
