"""The batch join equals the pure reference, click by click; decidability equals the stream's."""

from __future__ import annotations

from typing import Any

import pytest

from streamjoin.ads.attribution import Outcome, attribute
from streamjoin.ads.policy import AdAttribution
from streamjoin.join.window import JoinWindow

pytestmark = [
    pytest.mark.spark,
    # pyspark leaves closing collect()'s local socket to the garbage collector
    pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning"),
]

WINDOWS = [
    JoinWindow(before=0, after=1_000, grace=0),
    JoinWindow(before=500, after=1_000, grace=200),
    JoinWindow(before=2_000, after=500, grace=1_000),
    JoinWindow(before=0, after=30 * 60 * 1000, grace=10_000),
]


def _events(kit: Any, window: JoinWindow, seeds: range) -> Any:
    events = kit.Events()
    for seed in seeds:
        part = kit.random_events(seed, window)
        events.impressions.extend(part.impressions)
        events.clicks.extend(part.clicks)
    return events


def _frames(spark: Any, kit: Any, events: Any) -> tuple[Any, Any]:
    from streamjoin.ads.spark.archive import SCHEMAS

    imps = [{**r, "offset": 0} for r in events.impressions]
    clicks = [{**r, "offset": 0} for r in events.clicks]
    return (
        spark.createDataFrame(imps, SCHEMAS["impressions"]),
        spark.createDataFrame(clicks, SCHEMAS["clicks"]),
    )


def _expected(events: Any, window: JoinWindow) -> dict[str, tuple[Any, ...]]:
    reference = attribute(events.reference_impressions(), events.reference_clicks(), window)
    return {
        cid: (
            o.key,
            o.click_ts,
            o.outcome.value,
            o.impression_id,
            o.campaign,
            o.cost if o.outcome is Outcome.ATTRIBUTED else 0.0,
        )
        for cid, o in reference.items()
    }


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"b{w.before}-a{w.after}-g{w.grace}")
def test_batch_join_equals_the_reference(spark: Any, kit: Any, window: JoinWindow) -> None:
    from streamjoin.ads.spark.attribution import OUTCOME_COLUMNS, attribute_batch

    events = _events(kit, window, range(6))
    imps, clicks = _frames(spark, kit, events)
    result = attribute_batch(spark, imps, clicks, AdAttribution(window))
    assert tuple(result.columns) == OUTCOME_COLUMNS
    rows = result.collect()
    got = {
        r["click_id"]: (
            r["auction_id"],
            r["click_ts_ms"],
            r["outcome"],
            r["impression_id"],
            r["campaign"],
            r["cost"],
        )
        for r in rows
    }
    assert len(rows) == len(got) == len(events.clicks)
    expected = _expected(events, window)
    assert got == expected
    # the random sets do exercise every rule
    kinds = {v[2] for v in expected.values()}
    assert kinds == {"attributed", "duplicate", "unattributed"}


def test_ties_and_window_edges(spark: Any, kit: Any) -> None:
    """Hand-made: equal timestamps break ties by id; both window edges are inclusive."""
    from streamjoin.ads.spark.attribution import attribute_batch

    window = JoinWindow(before=100, after=1_000, grace=0)
    t = kit.BASE_TS
    ev = kit.Events()
    ev.impression("a1", "i-b", t, "c1", 1.5)
    ev.impression("a1", "i-a", t, "c2", 0.5)  # same ts, smaller id: wins
    ev.click("a1", "k-2", t + 10)
    ev.click("a1", "k-1", t + 10)  # same ts, smaller id: billed
    ev.click("a1", "k-0", t - 100)  # before = 100: exactly at the lower edge
    ev.click("a1", "k-9", t - 101)  # just outside
    ev.impression("a2", "i-c", t, "c3", 2.0)
    ev.click("a2", "k-5", t + 1_000)  # exactly at the upper edge
    ev.click("a2", "k-6", t + 1_001)  # just outside
    ev.click("a3", "k-7", t)  # no impression at all
    imps, clicks = _frames(spark, kit, ev)
    got = {
        r["click_id"]: (r["outcome"], r["impression_id"], r["cost"])
        for r in attribute_batch(spark, imps, clicks, window).collect()
    }
    assert got == {
        "k-0": ("attributed", "i-a", 0.5),
        "k-1": ("duplicate", "i-a", 0.0),
        "k-2": ("duplicate", "i-a", 0.0),
        "k-9": ("unattributed", None, 0.0),
        "k-5": ("attributed", "i-c", 2.0),
        "k-6": ("unattributed", None, 0.0),
        "k-7": ("unattributed", None, 0.0),
    }
    assert got == {k: (v[2], v[3], v[5]) for k, v in _expected(ev, window).items()}


@pytest.mark.parametrize("window", WINDOWS[1:3], ids=["before500", "before2000"])
def test_decided_clicks_are_what_the_stream_emitted(
    spark: Any, kit: Any, window: JoinWindow
) -> None:
    """The stream's own state machine, fed per partition, emits exactly the decided clicks,
    with exactly the batch's outcomes."""
    from streamjoin.ads.spark.attribution import attribute_batch, decided_clicks, stream_times

    events = _events(kit, window, range(10, 14))
    imps, clicks = _frames(spark, kit, events)
    emitted = {o.click_id: o for o in kit.simulate_stream(events, window)}
    decided = {r["click_id"] for r in decided_clicks(imps, clicks, window).collect()}
    assert decided == set(emitted) == events.decided(window)
    assert 0 < len(decided) < len(events.clicks)  # some clicks are still open

    times = {r["partition"]: r["stream_time_ms"] for r in stream_times(imps, clicks).collect()}
    assert times == events.stream_times()

    batch = {r["click_id"]: r for r in attribute_batch(spark, imps, clicks, window).collect()}
    for cid, outcome in emitted.items():
        row = batch[cid]
        assert row["outcome"] == outcome.outcome.value, cid
        assert row["impression_id"] == outcome.impression_id, cid
        assert row["campaign"] == outcome.campaign, cid


def test_empty_inputs(spark: Any) -> None:
    from streamjoin.ads.spark.archive import SCHEMAS
    from streamjoin.ads.spark.attribution import attribute_batch, decided_clicks

    imps = spark.createDataFrame([], SCHEMAS["impressions"])
    clicks = spark.createDataFrame([], SCHEMAS["clicks"])
    window = JoinWindow(0, 1_000, 0)
    assert attribute_batch(spark, imps, clicks, window).count() == 0
    assert decided_clicks(imps, clicks, window).count() == 0
