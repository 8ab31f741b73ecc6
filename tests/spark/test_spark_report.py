"""The campaign report's figures equal those computed directly in Python."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from streamjoin.ads.attribution import Outcome, attribute
from streamjoin.join.window import JoinWindow

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning"),
]

WINDOW = JoinWindow(before=500, after=20_000, grace=1_000)


def _python_report(events: Any, window: JoinWindow) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """(campaign, hour start) -> figures, and campaign -> figures, from the rows themselves."""
    decided = events.decided(window)
    outcomes = attribute(events.reference_impressions(), events.reference_clicks(), window)
    hourly: dict[Any, list[float]] = defaultdict(lambda: [0, 0, 0.0])
    totals: dict[Any, list[float]] = defaultdict(lambda: [0, 0, 0.0])
    for imp in events.impressions:
        hour = imp["ts_ms"] // 3_600_000 * 3_600_000
        hourly[(imp["campaign"], hour)][0] += 1
        totals[imp["campaign"]][0] += 1
    for cid, o in outcomes.items():
        if cid in decided and o.outcome is Outcome.ATTRIBUTED:
            hour = o.click_ts // 3_600_000 * 3_600_000
            for bucket in (hourly[(o.campaign, hour)], totals[o.campaign]):
                bucket[1] += 1
                bucket[2] += o.cost or 0.0

    def figures(n_imp: float, billed: float, spend: float) -> dict[str, Any]:
        return {
            "impressions": n_imp,
            "billed_clicks": billed,
            "ctr": billed / n_imp if n_imp else None,
            "spend": spend,
            "cpc": spend / billed if billed else None,
        }

    return (
        {key: figures(*v) for key, v in hourly.items()},
        {key: figures(*v) for key, v in totals.items()},
    )


def _approx(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (pytest.approx(v, abs=1e-9) if isinstance(v, float) else v) for k, v in row.items()}


def test_report_figures_equal_python(spark: Any, kit: Any, tmp_path: Path) -> None:
    from streamjoin.ads.spark.archive import read_archive
    from streamjoin.ads.spark.attribution import attribute_batch, decided_clicks
    from streamjoin.ads.spark.report import campaign_report, collect_rows, hour_label, write_report

    events = kit.Events()
    for seed in range(20, 26):
        part = kit.random_events(seed, WINDOW, auctions=15, hours=4)
        events.impressions.extend(part.impressions)
        events.clicks.extend(part.clicks)
    archive = read_archive(spark, str(kit.write_archive(tmp_path / "archive", events, None)))
    batch = attribute_batch(spark, archive.impressions, archive.clicks, WINDOW)
    decided = decided_clicks(archive.impressions, archive.clicks, WINDOW)
    final = batch.join(decided.select("click_id"), "click_id", "left_semi")
    hourly, totals = collect_rows(campaign_report(archive.impressions, final))

    want_hourly, want_totals = _python_report(events, WINDOW)
    assert len(want_hourly) > 6  # several campaigns and hours, some hours without clicks
    got_hourly = {
        (r["campaign"], r["hour"]): {k: v for k, v in r.items() if k not in ("campaign", "hour")}
        for r in hourly
    }
    assert got_hourly == {
        (campaign, hour_label(hour)): _approx(v) for (campaign, hour), v in want_hourly.items()
    }
    assert [r["campaign"] for r in totals] == sorted(want_totals)
    for row in totals:
        assert {k: v for k, v in row.items() if k != "campaign"} == _approx(
            want_totals[row["campaign"]]
        )
    assert [(r["campaign"], r["hour"]) for r in hourly] == sorted(got_hourly)

    files = write_report(hourly, totals, tmp_path / "report", {"archive": "x"})
    assert {p.name for p in files} == {
        "campaign_hourly.csv",
        "campaign_hourly.json",
        "campaign_totals.csv",
        "campaign_totals.json",
        "summary.json",
    }
    with (tmp_path / "report" / "campaign_totals.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["campaign"] for r in rows] == sorted(want_totals)
    for r in rows:
        want = want_totals[r["campaign"]]
        assert int(r["impressions"]) == want["impressions"]
        assert int(r["billed_clicks"]) == want["billed_clicks"]
        assert float(r["spend"]) == pytest.approx(want["spend"], abs=1e-9)
    assert json.loads((tmp_path / "report" / "campaign_hourly.json").read_text()) == hourly
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["impressions"] == len(events.impressions)
    assert summary["billed_clicks"] == sum(v["billed_clicks"] for v in want_totals.values())


def test_hours_and_empty_figures(spark: Any, kit: Any) -> None:
    """Impressions in one hour, the billed click in the next; CPC null without clicks."""
    from streamjoin.ads.spark.archive import SCHEMAS
    from streamjoin.ads.spark.report import campaign_report, collect_rows, format_table

    t = kit.BASE_TS + kit.HOUR - 1_000  # 00:59:59
    imps = spark.createDataFrame(
        [
            ("a1", "i1", "camp-a", 0.1, t, 0, 0),
            ("a2", "i2", "camp-a", 0.2, t, 0, 1),
            ("a3", "i3", "camp-b", 0.3, t, 0, 2),
        ],
        SCHEMAS["impressions"],
    )
    outcomes = spark.createDataFrame(
        [
            ("k1", "a1", t + 2_000, "attributed", "i1", "camp-a", 0.1),
            ("k2", "a1", t + 3_000, "duplicate", "i1", "camp-a", 0.0),
            ("k3", "a9", t + 3_000, "unattributed", None, None, 0.0),
        ],
        "click_id string, auction_id string, click_ts_ms long, outcome string, "
        "impression_id string, campaign string, cost double",
    )
    hourly, totals = collect_rows(campaign_report(imps, outcomes))
    assert hourly == [
        {
            "campaign": "camp-a",
            "hour": "2026-01-01T00:00:00Z",
            "impressions": 2,
            "billed_clicks": 0,
            "ctr": 0.0,
            "spend": 0.0,
            "cpc": None,
        },
        {
            "campaign": "camp-a",
            "hour": "2026-01-01T01:00:00Z",
            "impressions": 0,
            "billed_clicks": 1,
            "ctr": None,
            "spend": 0.1,
            "cpc": 0.1,
        },
        {
            "campaign": "camp-b",
            "hour": "2026-01-01T00:00:00Z",
            "impressions": 1,
            "billed_clicks": 0,
            "ctr": 0.0,
            "spend": 0.0,
            "cpc": None,
        },
    ]
    assert totals == [
        {
            "campaign": "camp-a",
            "impressions": 2,
            "billed_clicks": 1,
            "ctr": 0.5,
            "spend": 0.1,
            "cpc": 0.1,
        },
        {
            "campaign": "camp-b",
            "impressions": 1,
            "billed_clicks": 0,
            "ctr": 0.0,
            "spend": 0.0,
            "cpc": None,
        },
    ]
    table = format_table(
        totals, ("campaign", "impressions", "billed_clicks", "ctr", "spend", "cpc")
    )
    assert table.splitlines()[2].split() == ["camp-a", "2", "1", "50.00%", "0.1000", "0.1000"]
    assert table.splitlines()[3].split()[-1] == "-"
