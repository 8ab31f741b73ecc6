"""The campaign report: impressions, billed clicks, CTR, spend and CPC.

Figures per campaign and UTC hour, and per campaign over the whole archive:

* ``impressions``: impressions of the campaign, in the hour of the
  impression's event time;
* ``billed_clicks``: ``attributed`` outcomes of the campaign, in the hour of
  the *click's* event time (billing happens when the click does, so an
  impression shown at 10:59 and clicked at 11:01 counts in 10:00 and bills in
  11:00: hourly CTRs are approximate at hour edges, the totals are exact);
* ``ctr`` = billed_clicks / impressions (null without impressions);
* ``spend`` = the sum of the billed clicks' costs (summed as decimals, so the
  result does not depend on the order Spark adds them in);
* ``cpc`` = spend / billed_clicks (null without billed clicks).

Which outcomes count is the caller's choice: the CLI passes the batch
outcomes of the *decided* clicks (those whose outcome is final at the end of
the archive), so spend is what the stream has billed for certain.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamjoin.ads.attribution import Outcome

__all__ = [
    "HOURLY_COLUMNS",
    "HOUR_MS",
    "TOTAL_COLUMNS",
    "CampaignReport",
    "campaign_report",
    "collect_rows",
    "format_table",
    "hour_label",
    "write_report",
]

HOUR_MS = 3_600_000
#: columns of the hourly report (``hour`` is the hour's start, ISO 8601 UTC)
HOURLY_COLUMNS = ("campaign", "hour", "impressions", "billed_clicks", "ctr", "spend", "cpc")
#: columns of the per-campaign totals
TOTAL_COLUMNS = ("campaign", "impressions", "billed_clicks", "ctr", "spend", "cpc")

# spend is summed exactly: costs are money with a few decimals
_MONEY = "decimal(38,9)"


@dataclass(frozen=True)
class CampaignReport:
    """The report's two tables, as lazy DataFrames.

    ``hourly`` has ``campaign``, ``hour_start_ms`` and the figures; ``totals``
    has ``campaign`` and the figures. Both are sorted by campaign (then hour).
    """

    hourly: DataFrame
    totals: DataFrame


def campaign_report(impressions: DataFrame, outcomes: DataFrame) -> CampaignReport:
    """Campaign figures from impressions and click outcomes.

    Args:
        impressions: ``campaign``, ``ts_ms`` (other columns are ignored).
        outcomes: click outcomes as :func:`~streamjoin.ads.spark.attribution.attribute_batch`
            returns them; only ``attributed`` ones count (as billed clicks).
    """
    hour = (F.floor(F.col("ts") / HOUR_MS) * HOUR_MS).cast("long")
    shown = impressions.select(
        F.col("campaign"),
        F.col("ts_ms").alias("ts"),
        F.lit(1).alias("is_impression"),
        F.lit(0).alias("is_billed"),
        F.lit(0).cast(_MONEY).alias("money"),
    )
    billed = outcomes.where(F.col("outcome") == Outcome.ATTRIBUTED.value).select(
        F.col("campaign"),
        F.col("click_ts_ms").alias("ts"),
        F.lit(0).alias("is_impression"),
        F.lit(1).alias("is_billed"),
        F.col("cost").cast(_MONEY).alias("money"),
    )
    events = shown.unionByName(billed).withColumn("hour_start_ms", hour)

    def figures(keys: Sequence[str]) -> DataFrame:
        sums = events.groupBy(*keys).agg(
            F.sum("is_impression").cast("long").alias("impressions"),
            F.sum("is_billed").cast("long").alias("billed_clicks"),
            F.sum("money").cast("double").alias("spend"),
        )
        return sums.select(
            *keys,
            "impressions",
            "billed_clicks",
            F.when(F.col("impressions") > 0, F.col("billed_clicks") / F.col("impressions")).alias(
                "ctr"
            ),
            "spend",
            F.when(F.col("billed_clicks") > 0, F.col("spend") / F.col("billed_clicks")).alias(
                "cpc"
            ),
        ).orderBy(*keys)

    return CampaignReport(figures(["campaign", "hour_start_ms"]), figures(["campaign"]))


def hour_label(hour_start_ms: int) -> str:
    """``2026-01-01T10:00:00Z`` for the hour starting at *hour_start_ms* (UTC)."""
    moment = datetime.fromtimestamp(hour_start_ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def collect_rows(report: CampaignReport) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The report's rows as dicts (hourly with an ISO ``hour``), for writing and printing."""
    hourly = []
    for row in report.hourly.collect():
        values = row.asDict()
        values["hour"] = hour_label(values.pop("hour_start_ms"))
        hourly.append({name: values[name] for name in HOURLY_COLUMNS})
    totals = [{name: row[name] for name in TOTAL_COLUMNS} for row in report.totals.collect()]
    return hourly, totals


def write_report(
    hourly: list[dict[str, Any]],
    totals: list[dict[str, Any]],
    directory: Path,
    meta: dict[str, Any],
) -> list[Path]:
    """Write the report as CSV and JSON under *directory*; return the files written.

    Files: ``campaign_hourly.csv``/``.json``, ``campaign_totals.csv``/``.json``
    (JSON: a list of row objects) and ``summary.json`` (*meta*, the totals
    over all campaigns and the file names).
    """
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, rows, columns in (
        ("campaign_hourly", hourly, HOURLY_COLUMNS),
        ("campaign_totals", totals, TOTAL_COLUMNS),
    ):
        written.append(_write_csv(directory / f"{stem}.csv", rows, columns))
        written.append(_write_json(directory / f"{stem}.json", rows))
    shown = sum(r["impressions"] for r in totals)
    billed = sum(r["billed_clicks"] for r in totals)
    spend = round(sum(r["spend"] for r in totals), 9)
    summary = {
        **meta,
        "campaigns": len(totals),
        "impressions": shown,
        "billed_clicks": billed,
        "ctr": billed / shown if shown else None,
        "spend": spend,
        "cpc": spend / billed if billed else None,
        "files": [p.name for p in written],
    }
    written.append(_write_json(directory / "summary.json", summary))
    return written


def format_table(rows: list[dict[str, Any]], columns: Sequence[str]) -> str:
    """A plain-text table of *rows* (CTR as a percentage, money with 4 decimals)."""
    shown = [[_cell(name, row.get(name)) for name in columns] for row in rows]
    widths = [max([len(name), *(len(r[i]) for r in shown)]) for i, name in enumerate(columns)]
    left = {"campaign", "hour"}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(w) if name in left else cell.rjust(w)
            for cell, w, name in zip(cells, widths, columns, strict=True)
        ).rstrip()

    out = [line(columns), line(["-" * w for w in widths])]
    out.extend(line(cells) for cells in shown)
    return "\n".join(out)


def _cell(name: str, value: Any) -> str:
    if value is None:
        return "-"
    if name == "ctr":
        return f"{100 * value:.2f}%"
    if name in ("spend", "cpc"):
        return f"{value:.4f}"
    return str(value)


def _write_csv(path: Path, rows: list[dict[str, Any]], columns: Sequence[str]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if row[k] is None else row[k] for k in columns})
    return path


def _write_json(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path
