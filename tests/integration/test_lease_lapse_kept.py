"""A worker that took its fenced changelog partitions over anew, in a cooperative
rebalance that keeps its tasks: every click still gets its outcome.

The example's run (8 partitions, two workers with a standby each, the paced
generator), then three rebalances (f3 joins, f4 joins, f3 leaves). Right
after each starts, f1 is frozen for 4.5 s: past its session lease (4 s),
within its 6 s session. When f1 comes back too late for a generation (it
missed one), its next rebalance takes its fenced changelog partitions over
anew (another worker may have written them meanwhile): its join tasks open
only from a state restored and marked after that, while the cooperative
rebalance keeps them on f1. Before 2026-11-27 the restorer took them for
kept and did not restore them, so they never opened again (in the ad demo,
166 clicks of one partition got no outcome). f1 missed a generation in some
runs only (2 of 3 runs with one such rebalance; none in one run with three),
so this test catches that fault in some runs (on a busy machine f1 may
also lose its membership at every freeze and never keep its tasks); every
decided click gets exactly one distinct outcome, the reference's, in all of
them, and the workers that stayed rebalanced cooperatively.
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

import pytest
from paced_ads import PacedAds

from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.dev.process import WorkerProcess

pytestmark = [pytest.mark.broker, pytest.mark.slow]

#: past the worker's session lease (4 s), within its session (6 s)
FROZEN_S = 4.5


def test_tasks_kept_after_a_lease_lapse_are_restored_and_lose_no_click(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    digest = hashlib.sha1(f"{tmp_path}{time.time()}".encode()).hexdigest()[:8]
    ads = PacedAds(broker, tmp_path, f"ads-lapse-{digest}")
    try:
        ads.start_generator(seed=31, duration=1200, rate=4, speed=20)
        first, _ = ads.start_workers("f1", "f2")
        time.sleep(4)
        # three rebalances (f3 joins, f4 joins, f3 leaves), cooperative: f1 keeps
        # its tasks; each time f1 is frozen right after the change starts
        third = ads.worker("f3").start()
        third.wait_for_log(r"\(Re-\)joining group", timeout=90)
        _freeze(first)
        third.wait_for_log(r"Worker\]: Ready", timeout=90)
        fourth = ads.worker("f4").start()
        fourth.wait_for_log(r"\(Re-\)joining group", timeout=90)
        _freeze(first)
        fourth.wait_for_log(r"Worker\]: Ready", timeout=90)
        time.sleep(2)
        # (not its exit status: a worker stopped while it rejoins can hang in
        # aiokafka's fetcher close until it is killed, seen once in make test)
        third.stop(timeout=60)
        _freeze(first)
        ads.check_every_click(timeout=180, at_least=300)
        # which rebalances took partitions over while keeping their tasks (-s shows it)
        print(*re.findall(r".*(?:takes over [1-9]|restored again).*", first.log_text()), sep="\n")
        # the rebalances were cooperative: a worker that stayed kept its partitions
        # running through one (f1 itself may lose its membership at each freeze
        # on a busy machine and rejoin eagerly every time: its log had no such
        # line in a make test run on 2026-11-29)
        stayed = [w for w in ads.workers if w is not third]
        assert any("cooperative rebalance: keeping" in w.log_text() for w in stayed)
        assert all(worker.running() for worker in stayed)
    finally:
        ads.stop()


def _freeze(worker: WorkerProcess) -> None:
    worker.freeze()
    time.sleep(FROZEN_S)
    worker.thaw()
