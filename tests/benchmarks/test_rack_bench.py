"""Cross-rack metric (benchmarks.metrics.racks): the metric on hand-built outputs and its
agreement with streamjoin's own count (issue 41)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

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
