"""The join's outputs are byte-identical to those of the code before the speed work (issue 38).

``golden/join_outputs.json`` holds, per case, the outputs the join's runtime
gave at commit 27f15f3 (``python -m benchmarks.join.replay --golden``): the
generator's seeded run replayed through real tasks on real RocksDB (see
``benchmarks/join/replay.py``), for the ad policy (the app's window, and a
short one under which most state expires within the run) and the generic
inner, left and outer joins, in fetch order and with one input fetched
entirely before the other. Any change to a record's topic, key, value or
headers, or to the number of records, changes a digest.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.join.replay import CASES, golden_digest, replay  # noqa: E402

GOLDEN = json.loads((Path(__file__).parent / "golden" / "join_outputs.json").read_text())


@pytest.mark.parametrize(("policy", "seed", "impressions", "rate", "order"), CASES)
def test_the_same_seeded_input_gives_the_outputs_of_the_code_before(
    policy: str, seed: int, impressions: int, rate: float, order: str, tmp_path: Path
) -> None:
    got = golden_digest(
        replay(policy, seed, impressions, order, rate=rate, workdir=tmp_path).outputs
    )
    assert got == GOLDEN[f"{policy}-{seed}-{impressions}-{order}"]


def test_every_golden_case_is_run() -> None:
    assert sorted(GOLDEN) == sorted(f"{p}-{s}-{n}-{o}" for p, s, n, _, o in CASES)
