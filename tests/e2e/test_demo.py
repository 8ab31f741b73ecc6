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
    for chart in ("campaigns.png", "tasks.png", "lag.png"):
        assert (out / "report" / chart).stat().st_size > 10_000
    # the lag chart's figures come from real scrapes of each worker's /metrics,
    # at the address the demo printed for it (issue 40)
    scraped = json.loads((out / "report" / "metrics.json").read_text())
    assert scraped["metric"] == "streamjoin_consumer_lag_records"
    assert set(scraped["workers"]) == {"w1", "w2", "w3", "w4"}, scraped["workers"].keys()
    for name, worker in scraped["workers"].items():
        assert f"scrape {name} at {worker['url']}" in done.stdout, (name, worker["url"])
        assert worker["url"].startswith("http://127.0.0.1:") and worker["url"].endswith("/metrics")
        samples = worker["samples"]
        assert samples, name
        assert all(s["lag"] >= 0 and s["input_records"] >= 0 for s in samples), name
        assert [s["t"] for s in samples] == sorted(s["t"] for s in samples), name
    # the workers' joins counted what they read: the pages were real workers' pages
    assert max(s["input_records"] for s in scraped["workers"]["w1"]["samples"]) > 0
    assert "Consumer lag, scraped from /metrics" in report
    # cooperative rebalancing (on by default): every task that kept its worker
    # through a rebalance processed records while that worker rebalanced (in
    # an eager rebalance none would); w4's join and w2's kill each rebalance
    rebalances = json.loads((out / "report" / "rebalances.json").read_text())
    seen = [r for r in rebalances if r["through"]]
    assert seen, rebalances
    stopped = [
        (r["cause"], r["generations"], r["through"], r["rebalancing"], r["kept"])
        for r in seen
        if not all(r["through"].values())
    ]
    assert not stopped, stopped
