"""``streamjoin demo`` end to end: broker, workers with a kill -9, archive, Spark.

It runs the installed wheel (``installed``: a fresh virtualenv outside the
checkout), from a directory outside the checkout: the main job needs nothing
but the package.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.slow]


def test_a_short_seeded_demo_reconciles_and_archives_every_event_once(
    installed: Any, tmp_path: Path
) -> None:
    out = tmp_path / "demo"
    done = subprocess.run(
        [str(installed.streamjoin), "demo", "--out", str(out), "--duration", "24"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=installed.env(),
        timeout=600,
        check=False,
    )
    tail = (done.stdout + done.stderr)[-3000:]
    assert done.returncode == 0, tail
    assert "kill -9 w2" in done.stdout, tail
    verdicts = [line for line in done.stdout.splitlines() if line.startswith("reconciled: ")]
    assert verdicts and verdicts[-1].endswith(" clicks, 0 differences"), tail
    assert int(verdicts[-1].split()[1].replace(",", "")) > 1000
    # every valid event the generator produced is in the archive exactly once
    produced = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    want = sorted(
        (row["topic"], row["partition"], row["offset"])
        for row in produced
        if row["malformed"] is None
    )
    got = []
    for dataset, topic in (("impressions", "impressions"), ("clicks", "clicks")):
        table = ds.dataset(out / "archive" / dataset, format="parquet").to_table(
            columns=["partition", "offset"]
        )
        got += [(topic, p, o) for p, o in zip(*table.to_pydict().values(), strict=True)]
    assert sorted(got) == want
    report = (out / "report" / "index.html").read_text()
    assert "0 differences" in report
    for chart in ("campaigns.png", "tasks.png"):
        assert (out / "report" / chart).stat().st_size > 10_000
    # cooperative rebalancing (on by default): every task that kept its worker
    # through a rebalance processed records while that worker rebalanced (in
    # an eager rebalance none would); w4's join and w2's kill each rebalance
    rebalances = json.loads((out / "report" / "rebalances.json").read_text())
    seen = [r for r in rebalances if r["through"]]
    assert seen, rebalances
    assert all(all(r["through"].values()) for r in seen), rebalances
