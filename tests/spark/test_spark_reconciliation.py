"""Reconciliation: agreeing data passes; each kind of disagreement is found and named."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from streamjoin.join.window import JoinWindow

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning"),
]

WINDOW = JoinWindow(before=300, after=5_000, grace=1_000)


@pytest.fixture(scope="module")
def scenario(kit: Any) -> tuple[Any, list[dict[str, Any]]]:
    """Events, and the outcome rows the stream emitted for them (its own state machine)."""
    events = kit.Events()
    for seed in range(40, 44):
        part = kit.random_events(seed, WINDOW, auctions=10, hours=2)
        events.impressions.extend(part.impressions)
        events.clicks.extend(part.clicks)
    rows = kit.outcome_rows(kit.simulate_stream(events, WINDOW))
    undecided = {c["click_id"] for c in events.clicks} - events.decided(WINDOW)
    assert len(undecided) >= 2 and len(rows) > 50
    return events, rows


def _reconcile(spark: Any, kit: Any, root: Path, events: Any, outcomes: Any) -> Any:
    from streamjoin.ads.spark.archive import read_archive
    from streamjoin.ads.spark.attribution import attribute_batch, decided_clicks
    from streamjoin.ads.spark.reconciliation import reconcile

    archive = read_archive(spark, str(kit.write_archive(root, events, outcomes)))
    batch = attribute_batch(spark, archive.impressions, archive.clicks, WINDOW)
    decided = decided_clicks(archive.impressions, archive.clicks, WINDOW)
    return reconcile(archive.outcomes, batch, archive.clicks, decided)


def _differences(result: Any) -> dict[str, dict[str, Any]]:
    return {r["click_id"]: r.asDict() for r in result.differences.collect()}


def _attributed(rows: list[dict[str, Any]]) -> int:
    return next(i for i, r in enumerate(rows) if r["outcome"] == "attributed")


def test_agreeing_stream_reconciles(spark: Any, kit: Any, scenario: Any, tmp_path: Path) -> None:
    events, rows = scenario
    replayed = [*rows, dict(rows[3]), dict(rows[7])]  # a crash re-emitted two outcomes
    result = _reconcile(spark, kit, tmp_path / "a", events, replayed)
    assert result.total == 0, _differences(result)
    assert result.compared == len(events.decided(WINDOW)) == len(rows)
    assert result.undecided == len(events.clicks) - len(rows)
    assert (result.stream_rows, result.stream_clicks) == (len(rows) + 2, len(rows))
    assert result.summary()["replayed_rows"] == 2


def test_altered_outcome_is_a_field_mismatch(
    spark: Any, kit: Any, scenario: Any, tmp_path: Path
) -> None:
    from streamjoin.ads.spark.reconciliation import write_differences

    events, rows = scenario
    rows = [dict(r) for r in rows]
    i = _attributed(rows)
    rows[i]["outcome"] = "duplicate"
    rows[i]["cost"] = 0.0
    j = next(k for k, r in enumerate(rows) if r["outcome"] == "attributed" and k != i)
    rows[j]["cost"] += 1e-12  # within the tolerance: not a difference
    result = _reconcile(spark, kit, tmp_path / "a", events, rows)
    assert result.counts == {
        "conflicting-duplicate": 0,
        "extra-in-stream": 0,
        "missing-in-stream": 0,
        "field-mismatch": 1,
    }
    (diff,) = _differences(result).values()
    assert diff["click_id"] == rows[i]["click_id"]
    assert diff["fields"] == "outcome;cost"
    assert (diff["stream_outcome"], diff["batch_outcome"]) == ("duplicate", "attributed")

    csv_path, summary_path, first = write_differences(result, tmp_path / "out", {"x": 1})
    with csv_path.open() as handle:
        (row,) = csv.DictReader(handle)
    assert row["click_id"] == rows[i]["click_id"] and row["kind"] == "field-mismatch"
    assert first[0]["click_id"] == rows[i]["click_id"]
    summary = json.loads(summary_path.read_text())
    assert summary["differences"] == 1 and summary["x"] == 1


def test_missing_outcome(spark: Any, kit: Any, scenario: Any, tmp_path: Path) -> None:
    events, rows = scenario
    gone = rows[5]
    result = _reconcile(spark, kit, tmp_path / "a", events, rows[:5] + rows[6:])
    assert result.total == 1 and result.counts["missing-in-stream"] == 1
    diff = _differences(result)[gone["click_id"]]
    assert diff["kind"] == "missing-in-stream"
    assert diff["batch_outcome"] == gone["outcome"] and diff["stream_outcome"] is None


def test_conflicting_duplicate(spark: Any, kit: Any, scenario: Any, tmp_path: Path) -> None:
    events, rows = scenario
    i = _attributed(rows)
    other = {**rows[i], "campaign": "camp-zzz"}
    result = _reconcile(spark, kit, tmp_path / "a", events, [*rows, other])
    assert result.total == 1 and result.counts["conflicting-duplicate"] == 1
    diff = _differences(result)[rows[i]["click_id"]]
    assert diff["kind"] == "conflicting-duplicate"
    assert "camp-zzz" in diff["detail"] and rows[i]["campaign"] in diff["detail"]
    assert diff["detail"].startswith("2 stream rows disagree")


def test_extra_outcomes(spark: Any, kit: Any, scenario: Any, tmp_path: Path) -> None:
    """Outcomes for a click not decided yet, and for a click the archive does not have."""
    events, rows = scenario
    decided = events.decided(WINDOW)
    open_click = next(c for c in events.clicks if c["click_id"] not in decided)
    early = {
        **rows[0],
        "click_id": open_click["click_id"],
        "auction_id": open_click["auction_id"],
        "click_ts_ms": open_click["ts_ms"],
    }
    ghost = {**rows[0], "click_id": "k-ghost"}
    result = _reconcile(spark, kit, tmp_path / "a", events, [*rows, early, ghost])
    assert result.counts["extra-in-stream"] == 2 and result.total == 2
    diffs = _differences(result)
    assert "not decided" in diffs[open_click["click_id"]]["detail"]
    assert "no such click" in diffs["k-ghost"]["detail"]
    assert diffs["k-ghost"]["stream_outcome"] == rows[0]["outcome"]


def test_no_outcomes_yet(spark: Any, kit: Any, scenario: Any, tmp_path: Path) -> None:
    events, rows = scenario
    result = _reconcile(spark, kit, tmp_path / "a", events, None)
    assert result.counts["missing-in-stream"] == result.total == result.compared == len(rows)
