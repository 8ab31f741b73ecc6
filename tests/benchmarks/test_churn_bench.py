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
