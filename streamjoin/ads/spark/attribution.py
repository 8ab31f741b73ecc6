"""Click attribution in batch: the stream's rules, applied to a whole archive at once.

The rules are those of :mod:`streamjoin.ads.attribution` (the stream's
per-task state machine and its pure reference ``attribute()``), configured by
the same :class:`~streamjoin.ads.policy.AdAttribution` object:

* a click matches the impressions of its auction with
  ``imp.ts - before <= click.ts <= imp.ts + after``;
* it is attributed to the earliest of them by ``(ts_ms, impression_id)``;
* each impression bills its earliest attributed click by ``(ts_ms, click_id)``
  (outcome ``attributed``, cost = the impression's cost); its later clicks are
  ``duplicate`` (cost 0.0);
* a click with no matching impression is ``unattributed`` (no impression,
  no campaign, cost 0.0).

Everything is DataFrame operations (a range join, a min over structs, a
window function): no Python UDFs, nothing collected to the driver.

Decidability: the stream emits a click's outcome once its task's stream time
(the largest event time of its partition on both input topics) passes
``click.ts + before + grace``. :func:`decided_clicks` selects the clicks for
which that has happened by the end of the archive; only their outcomes are
final, and only they are compared with the stream.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from streamjoin.ads.attribution import Outcome
from streamjoin.ads.policy import AdAttribution
from streamjoin.join.window import JoinWindow

__all__ = [
    "OUTCOME_COLUMNS",
    "attribute_batch",
    "decided_clicks",
    "stream_times",
    "without_late",
]

#: columns of :func:`attribute_batch`'s result (those of the stream's outcome records)
OUTCOME_COLUMNS = (
    "click_id",
    "auction_id",
    "click_ts_ms",
    "outcome",
    "impression_id",
    "campaign",
    "cost",
)


def _window(policy: AdAttribution | JoinWindow) -> JoinWindow:
    return policy if isinstance(policy, JoinWindow) else policy.window


def attribute_batch(
    spark: SparkSession,
    impressions: DataFrame,
    clicks: DataFrame,
    policy: AdAttribution | JoinWindow,
) -> DataFrame:
    """Every click's outcome, computed from all the events at once.

    Args:
        spark: the session (unused: the result is a lazy plan over the inputs).
        impressions: ``auction_id``, ``impression_id``, ``campaign``, ``cost``,
            ``ts_ms`` (other columns are ignored).
        clicks: ``auction_id``, ``click_id``, ``ts_ms`` (others ignored).
        policy: the stream's policy (or just its window).

    Returns:
        One row per click: ``click_id``, ``auction_id``, ``click_ts_ms``,
        ``outcome`` (``attributed`` | ``duplicate`` | ``unattributed``),
        ``impression_id`` and ``campaign`` (null when unattributed), ``cost``
        (the impression's cost when attributed, else 0.0).
    """
    chosen = _earliest_match(impressions, clicks, _window(policy))
    # per impression (the stream's identity: auction, ts, id), billing order
    billing_order = Window.partitionBy("c_auction", "imp.ts", "imp.id").orderBy(
        "click_ts_ms", "click_id"
    )
    attributed = chosen.where(F.col("imp").isNotNull()).withColumn(
        "outcome",
        F.when(F.row_number().over(billing_order) == 1, F.lit(Outcome.ATTRIBUTED.value)).otherwise(
            F.lit(Outcome.DUPLICATE.value)
        ),
    )
    unattributed = chosen.where(F.col("imp").isNull()).withColumn(
        "outcome", F.lit(Outcome.UNATTRIBUTED.value)
    )
    return attributed.unionByName(unattributed).select(
        F.col("click_id"),
        F.col("c_auction").alias("auction_id"),
        F.col("click_ts_ms"),
        F.col("outcome"),
        F.col("imp.id").alias("impression_id"),
        F.col("imp.campaign").alias("campaign"),
        F.when(F.col("outcome") == Outcome.ATTRIBUTED.value, F.col("imp.cost"))
        .otherwise(F.lit(0.0))
        .alias("cost"),
    )


def _earliest_match(impressions: DataFrame, clicks: DataFrame, window: JoinWindow) -> DataFrame:
    """Every click (``click_id``, ``c_auction``, ``click_ts_ms``) with ``imp``: the
    earliest impression it matches (``ts``, ``id``, ``campaign``, ``cost``), null for none."""
    c = clicks.select(
        F.col("click_id"),
        F.col("auction_id").alias("c_auction"),
        F.col("ts_ms").cast("long").alias("click_ts_ms"),
    )
    i = impressions.select(
        F.col("auction_id").alias("i_auction"),
        F.col("impression_id").alias("i_id"),
        F.col("campaign").alias("i_campaign"),
        F.col("cost").cast("double").alias("i_cost"),
        F.col("ts_ms").cast("long").alias("i_ts"),
    )
    # imp.ts - before <= click.ts <= imp.ts + after
    matches = (
        (c.c_auction == i.i_auction)
        & (c.click_ts_ms >= i.i_ts - F.lit(window.before))
        & (c.click_ts_ms <= i.i_ts + F.lit(window.after))
    )
    # the earliest matching impression by (ts, impression_id): structs compare
    # field by field; a click without a match gets a null struct (min skips it)
    candidate = F.when(
        F.col("i_id").isNotNull(),
        F.struct(
            F.col("i_ts").alias("ts"),
            F.col("i_id").alias("id"),
            F.col("i_campaign").alias("campaign"),
            F.col("i_cost").alias("cost"),
        ),
    )
    return (
        c.join(i, matches, "left")
        .groupBy("click_id", "c_auction", "click_ts_ms")
        .agg(F.min(candidate).alias("imp"))
    )


def stream_times(impressions: DataFrame, clicks: DataFrame) -> DataFrame:
    """Stream time of every partition at the end of the archive.

    Returns ``partition``, ``stream_time_ms``: the largest ``ts_ms`` of the
    impressions and clicks of that (input topic) partition.
    """
    events = impressions.select("partition", "ts_ms").unionByName(
        clicks.select("partition", "ts_ms")
    )
    return events.groupBy("partition").agg(F.max("ts_ms").alias("stream_time_ms"))


def decided_clicks(
    impressions: DataFrame,
    clicks: DataFrame,
    policy: AdAttribution | JoinWindow,
) -> DataFrame:
    """The clicks whose outcome the stream has emitted by the end of the archive.

    A click is decided when the stream time of its partition is past
    ``click.ts + before + grace`` (strictly: the stream emits a click once
    stream time exceeds that). Returns the rows of *clicks* that are decided.
    """
    window = _window(policy)
    times = F.broadcast(stream_times(impressions, clicks))
    # JoinWindow.is_decided, as a column expression
    due = F.col("ts_ms") + F.lit(window.decision_delay)
    return (
        clicks.join(times, "partition", "inner")
        .where(F.col("stream_time_ms") > due)
        .select(*clicks.columns)
    )


def without_late(records: DataFrame, late: DataFrame, dataset: str) -> DataFrame:
    """*records* (the ``impressions`` or ``clicks`` rows) without those the stream
    reported late: the stream never joined them, so neither does the batch.

    A late row names its input record by ``input`` (the dataset), partition and
    offset; *records* keep their columns.
    """
    excluded = late.where(F.col("input") == F.lit(dataset)).select(
        F.col("input_partition").alias("partition"), F.col("input_offset").alias("offset")
    )
    return records.join(excluded, ["partition", "offset"], "left_anti")
