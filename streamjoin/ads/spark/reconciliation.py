"""Reconciliation: the stream's click outcomes against the batch join's.

The stream's outcomes (the archive's ``outcomes`` dataset) are first deduped
by ``click_id``: a replay after a crash writes byte-identical rows again,
which is fine; rows of one click that disagree are a
``conflicting-duplicate``. Then, click by click, over the *decided* clicks
(whose outcome is final at the end of the archive):

* ``missing-in-stream``: the batch has an outcome, the stream none;
* ``extra-in-stream``: the stream has an outcome for a click that is not
  decided (undecided at the end of the archive, or absent from its clicks);
* ``field-mismatch``: both have one and ``outcome``, ``impression_id``,
  ``campaign``, ``auction_id``, ``click_ts_ms`` or ``cost`` (within
  ``tolerance``) differ;
* ``conflicting-duplicate``: the stream's rows for the click disagree (counted
  whether the click is decided or not: the stream must never do that).

Each differing click is one difference, of one kind (the first that applies
in the order conflicting-duplicate, extra-in-stream, missing-in-stream,
field-mismatch).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = [
    "COMPARED_FIELDS",
    "DIFFERENCE_COLUMNS",
    "KINDS",
    "Reconciliation",
    "reconcile",
    "write_differences",
]

CONFLICTING = "conflicting-duplicate"
EXTRA = "extra-in-stream"
MISSING = "missing-in-stream"
MISMATCH = "field-mismatch"
#: the kinds of difference, in the order they are reported
KINDS = (CONFLICTING, EXTRA, MISSING, MISMATCH)

#: fields compared exactly (``cost`` is compared within the tolerance)
COMPARED_FIELDS = ("outcome", "impression_id", "campaign", "auction_id", "click_ts_ms")
_VALUES = ("outcome", "impression_id", "campaign", "cost")

#: columns of ``differences.csv``
DIFFERENCE_COLUMNS = (
    "kind",
    "click_id",
    "auction_id",
    "click_ts_ms",
    "fields",
    "stream_outcome",
    "batch_outcome",
    "stream_impression_id",
    "batch_impression_id",
    "stream_campaign",
    "batch_campaign",
    "stream_cost",
    "batch_cost",
    "detail",
)


@dataclass(frozen=True)
class Reconciliation:
    """What :func:`reconcile` found (``differences`` is a lazy DataFrame)."""

    #: decided clicks compared
    compared: int
    #: archived clicks left out because their outcome is not final yet
    undecided: int
    #: rows in the stream's outcomes, and distinct clicks among them
    stream_rows: int
    stream_clicks: int
    #: differences per kind (every kind present, 0 when none)
    counts: dict[str, int]
    #: one row per differing click, columns :data:`DIFFERENCE_COLUMNS`
    differences: DataFrame

    @property
    def total(self) -> int:
        """The number of differences (differing clicks)."""
        return sum(self.counts.values())

    def summary(self) -> dict[str, Any]:
        """The figures as a JSON-able dict."""
        return {
            "compared_clicks": self.compared,
            "undecided_clicks": self.undecided,
            "stream_rows": self.stream_rows,
            "stream_clicks": self.stream_clicks,
            "replayed_rows": self.stream_rows - self.stream_clicks,
            "differences": self.total,
            "by_kind": dict(self.counts),
        }


def reconcile(
    stream: DataFrame,
    batch: DataFrame,
    clicks: DataFrame,
    decided: DataFrame,
    tolerance: float = 1e-9,
) -> Reconciliation:
    """Compare the stream's outcomes with the batch's, over the decided clicks.

    Args:
        stream: the stream's outcome rows (archive ``outcomes``: ``click_id``,
            ``auction_id``, ``click_ts_ms``, ``outcome``, ``impression_id``,
            ``campaign``, ``cost``), possibly with replayed rows.
        batch: :func:`~streamjoin.ads.spark.attribution.attribute_batch` of all clicks.
        clicks: all archived clicks (``click_id``).
        decided: the decided clicks (``click_id``), from
            :func:`~streamjoin.ads.spark.attribution.decided_clicks`.
        tolerance: largest cost difference that is not a difference.

    Runs one Spark job for the figures; ``differences`` is returned lazy (a
    DataFrame sorted by kind and click id, computed when read).
    """
    conflicting = _conflicting(tolerance)
    mismatched = _mismatched_fields(tolerance)
    compared = _compare(_dedupe_stream(stream), _batch_side(batch), clicks, decided)
    classified = compared.withColumn("kind", _kind(conflicting, mismatched))
    differences = _differences(classified, conflicting, mismatched)
    return _summarize(classified, differences)


def _dedupe_stream(stream: DataFrame) -> DataFrame:
    """One row per stream click: its row count, how many distinct variants its
    rows have, their cost spread, all variants, and ``s_``-prefixed values.

    ``first()`` of a group is arbitrary; it only matters for groups without
    conflicts (whose rows agree).
    """
    s = stream.select("click_id", "auction_id", "click_ts_ms", *_VALUES)
    return s.groupBy("click_id").agg(
        F.count(F.lit(1)).alias("s_rows"),
        F.size(F.collect_set(F.struct(*COMPARED_FIELDS))).alias("s_variants"),
        (F.max("cost") - F.min("cost")).alias("s_cost_spread"),
        F.sort_array(F.collect_set(F.struct(*COMPARED_FIELDS, "cost"))).alias("s_all"),
        *[F.first(c).alias(f"s_{c}") for c in ("auction_id", "click_ts_ms", *_VALUES)],
    )


def _conflicting(tolerance: float) -> Column:
    """True for a deduped stream click whose rows disagree (fields, or cost beyond
    ``tolerance``)."""
    return (F.col("s_variants") > 1) | (F.col("s_cost_spread") > F.lit(tolerance))


def _batch_side(batch: DataFrame) -> DataFrame:
    """The batch's outcomes with their values ``b_``-prefixed."""
    return batch.select(
        "click_id",
        *[F.col(c).alias(f"b_{c}") for c in ("auction_id", "click_ts_ms", *_VALUES)],
    )


def _compare(
    deduped: DataFrame, batch_side: DataFrame, clicks: DataFrame, decided: DataFrame
) -> DataFrame:
    """Stream and batch side by side, one row per click in either, with the flags
    ``in_stream``, ``is_decided`` and ``is_known`` (in the archive's clicks)."""
    decided_ids = decided.select("click_id").distinct().withColumn("is_decided", F.lit(True))
    known_ids = clicks.select("click_id").distinct().withColumn("is_known", F.lit(True))
    return (
        deduped.withColumn("in_stream", F.lit(True))
        .join(batch_side, "click_id", "full_outer")
        .join(decided_ids, "click_id", "left")
        .join(known_ids, "click_id", "left")
        .fillna(False, subset=["in_stream", "is_decided", "is_known"])
    )


def _mismatched_fields(tolerance: float) -> Column:
    """The compared fields that differ between stream and batch, ``;``-separated
    (``""`` when none)."""
    return F.concat_ws(
        ";",
        *[F.when(~F.col(f"s_{c}").eqNullSafe(F.col(f"b_{c}")), F.lit(c)) for c in COMPARED_FIELDS],
        F.when(_cost_differs(F.col("s_cost"), F.col("b_cost"), tolerance), F.lit("cost")),
    )


def _kind(conflicting: Column, mismatched: Column) -> Column:
    """A click's kind of difference, the first that applies in :data:`KINDS`
    order; null when the click does not differ."""
    return (
        F.when(F.col("in_stream") & conflicting, F.lit(CONFLICTING))
        .when(F.col("in_stream") & ~F.col("is_decided"), F.lit(EXTRA))
        .when(F.col("is_decided") & ~F.col("in_stream"), F.lit(MISSING))
        .when(F.col("is_decided") & (mismatched != ""), F.lit(MISMATCH))
    )


def _detail(conflicting: Column) -> Column:
    """A sentence on why a click differs (``""`` for a field mismatch: ``fields``
    says which)."""
    return (
        F.when(
            F.col("in_stream") & conflicting,
            F.concat(
                F.col("s_rows").cast("string"),
                F.lit(" stream rows disagree: "),
                F.to_json(F.col("s_all")),
            ),
        )
        .when(
            F.col("in_stream") & ~F.col("is_decided") & F.col("is_known"),
            F.lit("the click is not decided at the end of the archive"),
        )
        .when(
            F.col("in_stream") & ~F.col("is_known"),
            F.lit("no such click in the archive's clicks"),
        )
        .when(~F.col("in_stream"), F.lit("no stream outcome for a decided click"))
        .otherwise(F.lit(""))
    )


def _differences(classified: DataFrame, conflicting: Column, mismatched: Column) -> DataFrame:
    """The differing clicks, columns :data:`DIFFERENCE_COLUMNS`, sorted by kind and
    click id (lazy). Stream values are left out for conflicting clicks."""
    stream_side = F.col("in_stream") & ~conflicting
    return (
        classified.where(F.col("kind").isNotNull())
        .select(
            "kind",
            "click_id",
            F.coalesce("b_auction_id", "s_auction_id").alias("auction_id"),
            F.coalesce("b_click_ts_ms", "s_click_ts_ms").alias("click_ts_ms"),
            F.when(F.col("kind") == MISMATCH, mismatched).otherwise(F.lit("")).alias("fields"),
            *[
                col
                for name in _VALUES
                for col in (
                    F.when(stream_side, F.col(f"s_{name}")).alias(f"stream_{name}"),
                    F.col(f"b_{name}").alias(f"batch_{name}"),
                )
            ],
            _detail(conflicting).alias("detail"),
        )
        .select(*DIFFERENCE_COLUMNS)
        .orderBy("kind", "click_id")
    )


def _summarize(classified: DataFrame, differences: DataFrame) -> Reconciliation:
    """Every figure in one Spark job (one pass over the comparison)."""
    figures = classified.agg(
        F.count(F.when(F.col("is_decided"), True)).alias("compared"),
        F.count(F.when(F.col("is_known"), True)).alias("known"),
        F.count(F.when(F.col("in_stream"), True)).alias("stream_clicks"),
        F.coalesce(F.sum("s_rows"), F.lit(0)).alias("stream_rows"),
        *[F.count(F.when(F.col("kind") == k, True)).alias(k) for k in KINDS],
    ).first()
    return Reconciliation(
        compared=int(figures["compared"]),
        undecided=int(figures["known"]) - int(figures["compared"]),
        stream_rows=int(figures["stream_rows"]),
        stream_clicks=int(figures["stream_clicks"]),
        counts={k: int(figures[k]) for k in KINDS},
        differences=differences,
    )


def _cost_differs(stream_cost: Column, batch_cost: Column, tolerance: float) -> Column:
    """True when exactly one cost is null, or they differ by more than ``tolerance``."""
    one_null = stream_cost.isNull() != batch_cost.isNull()
    return one_null | (F.abs(stream_cost - batch_cost) > F.lit(tolerance))


def write_differences(
    result: Reconciliation, directory: Path, meta: dict[str, Any]
) -> tuple[Path, Path, list[dict[str, Any]]]:
    """Write ``differences.csv`` (every differing click) and ``summary.json``.

    Rows are streamed from Spark to the CSV (no full collect). Returns the two
    paths and the first 20 differences (for printing).
    """
    directory.mkdir(parents=True, exist_ok=True)
    csv_path = directory / "differences.csv"
    first: list[dict[str, Any]] = []
    with csv_path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(DIFFERENCE_COLUMNS))
        writer.writeheader()
        rows: Iterable[Any] = result.differences.toLocalIterator() if result.total else ()
        for row in rows:
            values = row.asDict()
            writer.writerow({k: "" if values[k] is None else values[k] for k in DIFFERENCE_COLUMNS})
            if len(first) < 20:
                first.append(values)
    summary_path = directory / "summary.json"
    doc = {**meta, **result.summary(), "differences_file": csv_path.name}
    summary_path.write_text(json.dumps(doc, indent=2) + "\n")
    return csv_path, summary_path, first
