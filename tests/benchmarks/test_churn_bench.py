"""The churn benchmark's judge on a short run: warm-ups never start a task cold
while a caught-up copy lives; without them some tasks do."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.assignor.churn import run  # noqa: E402


def test_a_short_churn_run_is_judged_for_both_variants() -> None:
    warm = run(rounds=40, seed=3, cap=None)
    cold = run(rounds=40, seed=3, cap=0)
    assert warm["stateful"] == cold["stateful"] == 40 * 32
    assert warm["avoidable"] == 0 and warm["rack_unsafe"] == 0
    assert cold["avoidable"] > 0  # the same churn moves tasks cold without warm-ups


def test_a_short_churn_run_with_two_workers_per_host_holds_nothing_back() -> None:
    """Several workers per host (issue 29): warm-ups may share the active's host, so
    no task is held back, no round stays unbalanced and no standby is missing."""
    shared = run(rounds=40, seed=7, cap=None, per_host=2)
    assert shared["avoidable"] == 0 and shared["rack_unsafe"] == 0
    assert shared["held_back"] == 0 and shared["unbalanced"] == 0
    assert shared["short_of_standbys"] == 0


def test_rack_aware_placement_cuts_cross_rack_task_rounds() -> None:
    """Broker racks on the churn (issue 41): the default places fewer tasks off their
    partitions' racks than rack_traffic_cost 0 (the assignor before racks) and than
    faust's assignor replaying its own outputs; all are judged by the same metric."""
    aware = run(rounds=30, seed=7, cap=None)
    oblivious = run(rounds=30, seed=7, cap=None, rack_traffic_cost=0)
    peer = run(rounds=30, seed=7, cap=None, assignor="faust")
    assert aware["stateful"] == oblivious["stateful"] == peer["stateful"] == 30 * 32
    assert aware["cross_anyway"] == oblivious["cross_anyway"] == peer["cross_anyway"]
    assert aware["cross_anyway"] <= aware["cross_rack"] < oblivious["cross_rack"]
    assert aware["cross_rack"] < peer["cross_rack"]
    assert aware["avoidable"] == 0
