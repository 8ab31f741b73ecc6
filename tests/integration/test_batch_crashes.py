"""A crash at every step of a join batch: the restarted worker's state is its
changelog restored, and every click gets the reference outcome, once.

One worker of the ad app crashes (``os._exit``, no cleanup, as ``kill -9``)
at a fault point of its 3rd batch (``STREAMJOIN_FAULT_POINT``, see
:mod:`streamjoin.faust.join.fault_points`): after step 1's records were handed to
the producer, after they were acknowledged, after step 2's were handed over
and acknowledged, and between the RocksDB write and the input acks. It is
restarted on the same data directory with the next point, crashing again at
its 3rd batch, until every point was reached; then it runs without one. Every
decided click then has exactly one distinct outcome (replays are
byte-identical), the reference's, no valid record is late, its RocksDB
equals its changelog restored, and the app's per-campaign table (kept in the
join's state) counts every impression and billed click exactly once. (One
worker crashing at each point in turn costs a fifth of five separate runs, and
each restart also recovers from the crash before it.)
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from paced_ads import assert_local_states_are_their_changelog
from test_join_workers import PARTITIONS, AdRun, _check_against_reference, _joins_page

from streamjoin.ads.generator import generate
from streamjoin.dev.broker import EmbeddedBroker, free_port
from streamjoin.faust.join.fault_points import ENV, EXIT_STATUS

pytestmark = [pytest.mark.broker, pytest.mark.slow]


#: the crash points, in the order the worker reaches them (one crash each)
CRASH_POINTS = (
    "outputs-sent",
    "outputs-acked",
    "positions-sent",
    "positions-acked",
    "rocksdb-written",
)


def test_a_crash_at_each_durability_step_loses_and_doubles_nothing(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    ads = AdRun(broker, tmp_path, "ads-crashes")
    port = free_port()
    try:
        worker = ads.worker("w1", "--with-web", "--web-port", str(port), "--web-bind", "127.0.0.1")
        events = list(generate(ads.config(malformed_rate=0.0, impressions=8_000, seed=5)))
        chunks = [events[i : i + 250] for i in range(0, len(events), 250)]
        for point in CRASH_POINTS:
            worker.env[ENV] = f"{point}:3"
            worker.start().wait_for_log(r"Worker\]: Ready", timeout=90)
            # a batch or more per chunk, until the worker crashed (a restarted
            # worker may reach its 3rd batch on the records it reads again)
            deadline = time.monotonic() + 60
            while worker.returncode() is None and time.monotonic() < deadline:
                if len(chunks) > 2:  # the last two come after every crash
                    ads.produce(chunks.pop(0))
                time.sleep(0.5)
            assert worker.returncode() == EXIT_STATUS, (
                point,
                len(chunks),
                worker.log_text()[-2000:],
            )
            assert f"fault point {point} reached" in worker.log_text(), point

        del worker.env[ENV]
        worker.start().wait_for_log(r"Worker\]: Ready", timeout=90)
        for chunk in chunks:
            ads.produce(chunk)
        outcomes = ads.wait_for_outcomes(timeout=120)
        _check_against_reference(outcomes, ads.reference())
        late = [r for r in ads.dead_letters() if b"late" in dict(r.headers)["streamjoin-reason"]]
        assert late == []
        assert _joins_page(port, "/campaigns/") == ads.campaign_counts()
        assert worker.stop(timeout=30) == 0
        topic = f"{ads.app_id}-billing-state-changelog"
        assert_local_states_are_their_changelog(broker.bootstrap, topic, PARTITIONS, [worker])
    finally:
        ads.stop_all()
