"""The ad app at its defaults (per-campaign table on) reads a backlog without stalling.

Until 0.2 the app's live table was fed by faust agents that also read the
impressions: the join then took them through faust's per-event path, and on a
backlog it ran in bursts separated by stalls of 20-60 s while faust reported
a stream "stopped processing" (docs/benchmarks.rst, "Joins"). Here one worker
at the defaults reads a backlog of about 75,000 records: no task waits more
than ``MAX_STOP_S`` between two records it processes until the backlog is done,
faust reports no stopped stream, and the per-campaign page counts every
impression once.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kafka_util import wait_until
from test_join_workers import AdRun, _joins_page

from streamjoin.ads.generator import generate
from streamjoin.dev.broker import EmbeddedBroker, free_port

pytestmark = [pytest.mark.broker, pytest.mark.slow]

#: the longest a task may wait between two records it processes, mid-backlog (s)
MAX_STOP_S = 2.0


def test_the_app_at_its_defaults_reads_a_backlog_without_a_stall(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    ads = AdRun(broker, tmp_path, "ads-defaults")
    port = free_port()
    try:
        ads.produce(generate(ads.config(malformed_rate=0.0, impressions=60_000, rate=200.0)))
        produced = len(ads.produced)
        worker = ads.worker("w1", "--with-web", "--web-port", str(port), "--web-bind", "127.0.0.1")
        assert "ADS_LIVE_TABLE" not in worker.env  # the default: the table is on
        started = time.monotonic()
        worker.start()

        def done() -> dict[str, Any] | None:
            page = _joins_page(port)
            if page is None:
                return None
            billing = page["billing"]
            return billing if billing["stats"]["processed"] >= produced else None

        billing = wait_until(done, 180, f"the join to process {produced:,} records")
        took = time.monotonic() - started
        stops = {
            partition: [
                round(end - start, 2) for start, end in task["stops"] if end - start > MAX_STOP_S
            ]
            for partition, task in billing["tasks"].items()
        }
        assert all(not s for s in stops.values()), (stops, worker.log_text()[-3000:])
        assert "Stream stopped processing" not in worker.log_text()
        counts = _joins_page(port, "/campaigns/")
        assert counts is not None
        want = ads.campaign_counts()
        assert {c: r["impressions"] for c, r in counts.items()} == {
            c: r["impressions"] for c, r in want.items()
        }
        print(f"{produced:,} records in {took:.1f} s from the worker's start")
        assert worker.stop(timeout=30) == 0
    finally:
        ads.stop_all()
