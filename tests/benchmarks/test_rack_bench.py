"""Cross-rack metric (benchmarks.metrics.racks) and the assignor benchmark's rack scenarios:
the metric on hand-built outputs, its agreement with streamjoin's own count, and the
rack scenarios' documents (issue 41)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.assignor import churn, faust_peer, report, scenarios  # noqa: E402
from benchmarks.metrics import quality, racks  # noqa: E402
from streamjoin.assignment import assign_document  # noqa: E402


def rack_document() -> dict[str, Any]:
    """Three members (r1, r2, no rack), a 3-partition join of two topics + changelog."""
    topics = ["a", "b", "a-changelog"]
    return {
        "topics": {"a": 3, "b": 3, "a-changelog": 3},
        "copartition": [["a", "b"]],
        "changelogs": ["a-changelog"],
        "standby_replicas": 0,
        "members": [
            {"id": "m1", "topics": topics, "rack": "r1"},
            {"id": "m2", "topics": topics, "rack": "r2"},
            {"id": "m3", "topics": topics},
        ],
        "partition_racks": {
            "a": [["r1"], ["r1", "r2"], ["r2"]],
            "b": [["r1"], [], ["r1"]],  # partition 1's racks are not known
        },
        "partition_weights": {"a": [5, 0, 2]},
    }


def actives(**owned: list[int]) -> dict[str, Any]:
    """All three topics of the join at the given partitions, per member."""
    return {
        "assignment": {
            member: {"actives": {t: parts for t in ("a", "b", "a-changelog")}, "standbys": {}}
            for member, parts in owned.items()
        }
    }


def test_cross_rack_counts_tasks_and_weighted_traffic() -> None:
    document = rack_document()
    # task 0 on m1 (r1): a r1, b r1: local; task 1 on m2 (r2): a (weight 0) local,
    # b unknown: local; task 2 on m3 (no rack): a crosses (weight 2), b crosses (1)
    figures = racks.cross_rack(document, output=actives(m1=[0], m2=[1], m3=[2]))
    assert figures == {
        "cross_rack_tasks": 1, "cross_rack_traffic": 3, "rack_tasks": 2, "no_local_member": 1,
    }
    # task 0 on m2: a (5) and b (1) cross; task 2 on m1: a (2) crosses
    figures = racks.cross_rack(document, output=actives(m2=[0], m1=[1, 2]))
    assert (figures["cross_rack_tasks"], figures["cross_rack_traffic"]) == (2, 8)
    # task 1 has no partition that counts (a's weight is 0, b's racks unknown): not a
    # rack task, and it never crosses, even on m3
    figures = racks.cross_rack(document, output=actives(m3=[0, 1], m1=[2]))
    assert (figures["cross_rack_tasks"], figures["cross_rack_traffic"]) == (2, 8)


def test_quality_adds_the_rack_figures_only_when_the_document_has_racks() -> None:
    document = rack_document()
    output = actives(m1=[0], m2=[1], m3=[2])
    assert quality.evaluate(document, output)["cross_rack_tasks"] == 1
    del document["partition_racks"]
    assert "cross_rack_tasks" not in quality.evaluate(document, output)


def _agrees(document: dict[str, Any], output: dict[str, Any]) -> None:
    figures = racks.cross_rack(document, output=output)
    stats = output["stats"]
    assert (figures["cross_rack_tasks"], figures["cross_rack_traffic"]) == (
        stats["cross_rack_tasks"], stats["cross_rack_traffic"]
    )


def test_the_metric_agrees_with_streamjoins_own_count() -> None:
    document = rack_document()
    _agrees(document, assign_document(document))
    document["rack_traffic_cost"] = 0  # rack-oblivious: some tasks cross
    oblivious = assign_document(document)
    _agrees(document, oblivious)
    assert oblivious["stats"]["cross_rack_tasks"] > 0  # a count, not two zeros
    for name in ("a-join-racks", "a-leave-racks"):
        scenario = scenarios.SCENARIOS[name]
        fresh_document = scenario.fresh_document()
        fresh = json.loads(json.dumps(assign_document(fresh_document)))
        _agrees(fresh_document, fresh)
        rebalance = scenario.rebalance_document(fresh_document, fresh)
        _agrees(rebalance, assign_document(rebalance))
        # faust's fresh result, judged by the metric, as streamjoin would start from it
        peer = faust_peer.assign_document(fresh_document)
        from_peer = scenario.rebalance_document(fresh_document, peer)
        _agrees(from_peer, assign_document(from_peer))


def test_the_metric_agrees_on_churn_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    checked = 0
    original = churn._judge

    def judge(doc: dict[str, Any], out: dict[str, Any], acceptable: int) -> dict[str, int]:
        nonlocal checked
        _agrees(doc, out)
        checked += 1
        return original(doc, out, acceptable)

    monkeypatch.setattr(churn, "_judge", judge)
    churn.run(rounds=15, seed=5, cap=None)
    churn.run(rounds=15, seed=5, cap=0, per_host=2, rack_traffic_cost=0)
    assert checked == 30


def test_rack_scenarios_are_their_plain_scenarios_plus_broker_racks() -> None:
    for name in ("a-join-racks", "a-leave-racks", "b-50-joins-racks"):
        scenario = scenarios.SCENARIOS[name]
        assert scenario.plain is not None
        document = scenario.fresh_document()
        plain = scenarios.SCENARIOS[scenario.plain]
        assert scenarios.without_replica_racks(document) == plain.fresh_document()
        assert (scenario.change, scenario.seed) == (plain.change, plain.seed)
        for topic, count in document["topics"].items():
            rows = document["partition_racks"][topic]
            assert len(rows) == count
            assert all(len(set(row)) == 2 for row in rows)  # replication factor 2
            assert {r for row in rows for r in row} == {"zone-1", "zone-2", "zone-3"}
    f = scenarios.SCENARIOS["f-45-standbys-racks"].fresh_document()
    assert {m["rack"] for m in f["members"]} == {"zone-1", "zone-2", "zone-3"}


def test_report_shows_cross_rack_tasks_and_the_time_ratio() -> None:
    ok = {"status": "ok", "seconds": 0.002, "peak_bytes": 0}
    metrics: dict[str, Any] = {
        "spread_total": 0, "spread_group_max": 0, "active_min": 1, "active_max": 1,
        "standby_spread_total": None, "standby_spread_group_max": None, "violations": {},
        "cross_rack_tasks": 3, "cross_rack_traffic": 4, "rack_tasks": 9, "no_local_member": 1,
    }
    rebalance_metrics = dict(
        metrics, moved=0, min_moves=0, min_moves_exact=True, forced_moves=0, warm=0,
        warm_possible=0, cold=0, cold_with_standby=0,
    )
    entry = {"fresh": dict(ok, metrics=metrics),
             "rebalance": dict(ok, metrics=rebalance_metrics,
                               stats={"target_cross_rack_tasks": 2,
                                      "target_cross_rack_traffic": 2})}
    plain = {"plain": "x", "repeat": 3, "fresh": dict(ok, seconds=0.001),
             "rebalance": dict(ok, seconds=0.0016)}
    figures = {"title": "t", "change": "leave", "streamjoin": entry, "faust": entry,
               "without_racks": plain}
    block = report.render_scenario("x-racks", figures)
    assert "3 / 4 (of 9; 1 cross anywhere)" in block
    assert "2.00× (2.00 ms / 1.00 ms)" in block and "1.25×" in block
    summary = report.render_rack_summary({"x-racks": figures})
    assert "NOT met" in summary  # fresh: 2.0x is over 1.5x
    assert report.render_rack_summary({}) == ""
