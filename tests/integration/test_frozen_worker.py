"""A worker frozen past its session and thawed loses, doubles and mis-bills no click.

The example's run (8 partitions, two workers with a standby each, the paced
generator, grace 10 s) while the workers' process groups are SIGSTOPped and
SIGCONTed: past the session timeout (6 s: the group gives the frozen worker's
tasks to the other one, and the thawed worker is a zombie until it rejoins),
shorter than it but past the worker's session lease (its high watermarks are
stale when it thaws, and it abandons the batch it had in flight), and one worker
right after the other (during the rebalance the first thaw starts). Every
decided click gets exactly one distinct outcome, the reference's; no valid
record is dead-lettered; both workers run on; and every worker's RocksDB copy
of every task is its changelog restored through the fence.

``SJ_FREEZE_SEED`` draws another schedule of freezes (lengths, workers,
gaps) from that seed: ``make test-faults`` loops over seeds.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import time
from pathlib import Path

import pytest
from paced_ads import PacedAds, assert_local_states_are_their_changelog

from streamjoin.dev.broker import EmbeddedBroker

pytestmark = [pytest.mark.broker, pytest.mark.slow]

#: seconds of traffic the freezes fall into (the generator runs about 60 s)
SPAN = 48.0
#: (worker, seconds before, seconds frozen) of the default schedule
#: (4.5 s: past the worker's session lease of 4 s, within its 6 s session: it
#: stays in the group, and a batch it had in flight is abandoned; its tasks
#: stay with it and are opened again from a state restored after that)
DEFAULT = [(1, 4.0, 12.0), (0, 4.0, 4.5), (0, 3.0, 9.0), (1, 0.5, 7.0), (0, 4.0, 15.0)]


def schedule(seed: int) -> list[tuple[int, float, float]]:
    """The freezes of run *seed* (seed 0: the default schedule)."""
    if seed == 0:
        return DEFAULT
    rng = random.Random(seed)
    out, spent = [], 0.0
    while spent < SPAN:
        step = (
            rng.randrange(2),
            rng.choice([0.3, 1.0, 2.5, 4.0]),
            rng.choice([2, 3, 5, 8, 12, 15]),
        )
        out.append((step[0], step[1], float(step[2])))
        spent += step[1] + step[2]
    return out


def test_workers_frozen_past_their_session_and_thawed_lose_and_misbill_no_click(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    seed = int(os.environ.get("SJ_FREEZE_SEED", "0"))
    digest = hashlib.sha1(f"{tmp_path}{time.time()}".encode()).hexdigest()[:8]
    ads = PacedAds(broker, tmp_path, f"ads-frozen-{seed}-{digest}")
    try:
        # the generator creates the topics (8 partitions) before any worker starts
        ads.start_generator(seed=12 + seed, duration=1200, rate=4, speed=20)
        workers = ads.start_workers("f1", "f2")
        time.sleep(3)
        for who, before, frozen in schedule(seed):
            time.sleep(before)
            workers[who].freeze()
            time.sleep(frozen)
            workers[who].thaw()
        ads.check_every_click(timeout=240, at_least=500)
        assert all(worker.running() for worker in workers)
        logs = "\n".join(worker.log_text() for worker in workers)
        # the fence was tried: a thawed worker found its lease run out
        assert re.search(r"group session lease ran out|batch abandoned", logs)
        assert "never applied" not in logs
        for worker in workers:
            assert worker.stop(timeout=60) == 0
        topic = f"{ads.env['ADS_APP_ID']}-billing-state-changelog"
        assert_local_states_are_their_changelog(
            ads.broker.bootstrap, topic, ads.partitions, workers
        )
    finally:
        ads.stop()
