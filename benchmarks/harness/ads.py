"""The ad-monetization worker the join benchmarks run, and its join's figures over HTTP.

The worker runs ``streamjoin.ads.app:app`` configured by the ``ADS_*`` variables of
an :class:`~streamjoin.ads.app.AdsSettings`; its join is read on
``GET /streamjoin/joins/``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from benchmarks.harness.workers import http_json, worker
from streamjoin.ads.app import AdsSettings
from streamjoin.dev.broker import LOOPBACK, EmbeddedBroker
from streamjoin.dev.process import WorkerProcess

APP = "streamjoin.ads.app:app"
#: the name of the app's join on ``/streamjoin/joins/``
JOIN_NAME = "billing"


def settings(
    app_id: str, prefix: str, partitions: int, grace_ms: int, *, live_table: bool = False
) -> AdsSettings:
    """The app as the benchmarks run it: by default the join alone.

    The example's live campaign table is two more agents that repartition every
    impression, so it is off unless *live_table* (the app's own default: on).
    """
    return AdsSettings(
        app_id=app_id,
        topic_prefix=prefix,
        partitions=partitions,
        grace_ms=grace_ms,
        live_table=live_table,
    )


def paced_traffic(
    config: AdsSettings, seed: int, start_ms: int, duration_ms: int, rate: float, jitter_ms: int
) -> Any:
    """The generator's events for the app *config*, *rate* impressions/s from
    *start_ms* for *duration_ms* (event time = the wall clock they are to be
    produced at), no malformed record, no tail."""
    from streamjoin.ads import generator

    topics = config.topics
    return generator.GeneratorConfig(
        seed=seed,
        duration_ms=duration_ms,
        rate=rate,
        jitter_ms=jitter_ms,
        malformed_rate=0.0,
        start_ts_ms=start_ms,
        tail=False,
        partitions=config.partitions,
        impressions_topic=topics.impressions,
        clicks_topic=topics.clicks,
    )


def changelog_topic(app_id: str) -> str:
    """The changelog topic of the join's state table on the app *app_id*
    (faust's ``<app id>-<table>-changelog``; the table is ``<join name>-state``)."""
    return f"{app_id}-{JOIN_NAME}-state-changelog"


def ads_worker(
    broker: EmbeddedBroker, workdir: Path, name: str, config: AdsSettings, port: int
) -> WorkerProcess:
    """One worker of the ad-monetization app with *config*, web server on *port* (not started)."""
    return worker(APP, broker, workdir, name, env=config.to_env(), web_port=port)


def join_doc(port: int) -> Any | None:
    """``GET /streamjoin/joins/`` of the worker at *port* (``None``: no answer)."""
    return http_json(f"http://{LOOPBACK}:{port}/streamjoin/joins/")


def join_processed(port: int) -> int | None:
    """The join's ``stats.processed`` on the worker at *port*."""
    doc = join_doc(port)
    try:
        return int(doc[JOIN_NAME]["stats"]["processed"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return None


def join_stats(port: int) -> dict[str, Any]:
    """The join's counters on the worker at *port* (empty when it does not answer)."""
    doc = join_doc(port) or {}
    return dict(doc.get(JOIN_NAME, {}).get("stats", {}))


def stats_line(stats: dict[str, Any]) -> str:
    """The join's counters in one line."""
    emitted = ", ".join(f"{k} {v:,}" for k, v in sorted(stats.get("emitted", {}).items()))
    batches = int(stats.get("batches", 0))
    processed = int(stats.get("processed", 0))
    per_batch = processed / batches if batches else math.nan
    return (
        f"streamjoin: {processed:,} processed in {batches:,} batches ({per_batch:,.1f} per "
        f"batch), {stats.get('bad', 0)} bad, {stats.get('late', 0):,} late, "
        f"{stats.get('idle_inputs', 0):,} inputs went idle; emitted {emitted or 'nothing'}"
    )
