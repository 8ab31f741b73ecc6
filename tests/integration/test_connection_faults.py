"""The join under cut, stalled and slow connections loses, doubles and mis-bills no click.

The example's run (8 partitions, two workers with a standby each, grace 10
s, the generator producing in real time: event time runs at the wall's pace,
as a live producer's does) with every connection of every client (workers,
generator, restore consumers) through the fault proxy, which meanwhile cuts
all connections every 3 s for a minute, then cuts every connection each time
it has forwarded 64 KiB (in the middle of requests and responses) for 10 s,
stalls the network for 1 s, 5 s and 9 s (longer than the 6 s session: both
workers lose their membership while they keep running) and slows every chunk
by 50 ms for 8 s. Every decided click
gets exactly one distinct outcome, the reference's; no valid record is
dead-lettered; no worker exits; and once the network is healed the outputs
are complete within :data:`SETTLE_S` seconds.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from paced_ads import PacedAds
from test_join_workers import _check_against_reference

from streamjoin.dev.faults import BrokerBehindProxy, FaultProxy

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.faults]

#: seconds from the last heal to every decided click's outcome, at most
SETTLE_S = 120.0
#: cuts of every connection, 3 s apart (a minute)
CUTS = 20
#: bytes a connection forwards before it is cut, in the phase of mid-request cuts
CUT_AFTER_BYTES = 64 * 1024


@pytest.fixture
def behind() -> Iterator[BrokerBehindProxy]:
    with BrokerBehindProxy() as broker:
        yield broker


def _inject(proxy: FaultProxy) -> list[str]:
    """The faults, in order; returns what was done (for the failure message)."""
    done = []
    for _ in range(CUTS):
        done.append(f"cut {proxy.cut()}")
        time.sleep(3.0)
    proxy.cut_after(CUT_AFTER_BYTES)
    done.append(f"cut after {CUT_AFTER_BYTES} bytes")
    time.sleep(10.0)
    proxy.heal()
    for seconds, after in ((1.0, 3.0), (5.0, 4.0)):
        proxy.stall(seconds)
        done.append(f"stall {seconds}")
        time.sleep(seconds + after)
    proxy.slow(latency=0.05)
    done.append("slow 50 ms")
    time.sleep(8.0)
    proxy.heal()
    proxy.stall(9.0)  # past the session timeout: both workers are dropped from the group
    done.append("stall 9.0")
    time.sleep(9.5)
    proxy.heal()
    done.append("heal")
    return done


def test_cut_stalled_and_slow_connections_lose_and_misbill_no_click(
    behind: BrokerBehindProxy, tmp_path: Path
) -> None:
    digest = hashlib.sha1(f"{tmp_path}{time.time()}".encode()).hexdigest()[:8]
    ads = PacedAds(behind, tmp_path, f"ads-faults-{digest}")
    proxy = behind.proxy
    assert proxy is not None
    try:
        ads.start_generator(seed=21, duration=130, rate=80, speed=1)
        workers = ads.start_workers("c1", "c2")
        time.sleep(3)
        done = _inject(proxy)
        healed = time.monotonic()
        ads.wait_generator(timeout=180)
        reference, malformed = ads.reference()
        outcomes = ads.wait_for_outcomes(reference, timeout=SETTLE_S)
        settled = time.monotonic() - healed
        print(f"every decided click's outcome out {settled:.1f} s after the last heal")
        _check_against_reference(outcomes, reference)
        valid_dead_lettered = ads.dead_letter_sources() - malformed
        assert valid_dead_lettered == set(), f"{len(valid_dead_lettered)} valid records"
        assert len(reference) > 500
        assert all(worker.running() for worker in workers), done
        assert proxy.cuts > 0 and settled <= SETTLE_S
        logs = "\n".join(worker.log_text() for worker in workers)
        # the 9 s stall outlived the session: the workers noticed and rejoined
        assert re.search(r"group session lease ran out|coordinator answered", logs), done
        assert "never applied" not in logs
    finally:
        ads.stop()
