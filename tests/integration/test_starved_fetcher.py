"""Idleness under a starved fetcher: an input whose partition the consumer stops
fetching (its high watermark and fetch time frozen while the broker's log moves
on) is not declared idle on that stale information.

One worker of the example's join (one partition, grace 1 s, ``max_idle_ms``
1 s) whose fetcher is held off ``impressions[0]`` on demand
(``apps/starved.py``). While it is held, impressions and the clicks on them
are produced: the clicks arrive, the impressions do not, for four times
``max_idle_ms``. Were impressions declared idle, the clicks' watermark alone
would decide those clicks, without their impressions, as unattributed. Every
click's outcome must be the reference's.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest
from kafka_util import create_topic, produce_events, read_topics, run, wait_until
from paced_ads import outcomes_by_click
from test_join_workers import _check_against_reference, _valid

from streamjoin.ads.attribution import attribute
from streamjoin.ads.generator import GeneratorConfig, generate
from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.dev.process import WorkerProcess
from streamjoin.join.window import JoinWindow

pytestmark = [pytest.mark.broker, pytest.mark.slow]

APPS_DIR = Path(__file__).resolve().parent
GRACE_MS = 1_000
MAX_IDLE_MS = 1_000
#: wall seconds the fetcher is held off impressions[0]
HOLD_S = 4 * MAX_IDLE_MS / 1000
WINDOW = JoinWindow(before=0, after=30 * 60 * 1000, grace=GRACE_MS)


def test_a_starved_input_is_not_declared_idle_on_its_stale_high_watermark(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    app_id = "ads-starved-" + hashlib.sha1(str(tmp_path).encode()).hexdigest()[:8]
    prefix = app_id + "-"
    for topic in ("impressions", "clicks"):
        run(create_topic(broker.bootstrap, prefix + topic, 1))
    events = list(
        generate(
            GeneratorConfig(
                seed=5,
                impressions=1_000,
                rate=100.0,
                ctr=0.4,
                jitter_ms=0,
                malformed_rate=0.0,
                late_click_rate=0.0,
                partitions=1,
                impressions_topic=prefix + "impressions",
                clicks_topic=prefix + "clicks",
            )
        )
    )
    start = min(e.timestamp_ms for e in events)
    # before the hold, while held (5 s of event time, far beyond the grace), after
    phases = [
        [e for e in events if e.timestamp_ms < start + 3_000],
        [e for e in events if start + 3_000 <= e.timestamp_ms < start + 8_000],
        [e for e in events if e.timestamp_ms >= start + 8_000],
    ]
    held_clicks = [e for e in phases[1] if e.topic.endswith("clicks")]
    assert len(held_clicks) > 30 and all(phases)

    hold_file = tmp_path / "hold"
    worker = WorkerProcess(
        "apps.starved:app",
        broker.url,
        tmp_path / "w1",
        tmp_path / "w1.log",
        env={
            "ADS_APP_ID": app_id,
            "ADS_TOPIC_PREFIX": prefix,
            "ADS_PARTITIONS": "1",
            "ADS_GRACE_MS": str(GRACE_MS),
            "ADS_MAX_IDLE_MS": str(MAX_IDLE_MS),
            "SJ_HOLD_FILE": str(hold_file),
        },
        cwd=APPS_DIR,
    )
    try:
        worker.start()
        worker.wait_for_log(r"Worker\]: Ready", timeout=90)
        run(produce_events(broker.bootstrap, phases[0]), timeout=60)
        # the worker has read everything before the hold: the high watermark it
        # keeps while held equals its position, so only its age tells
        wait_until(
            lambda: outcomes_by_click(broker.bootstrap, prefix) or None,
            60,
            "the first outcomes",
        )
        time.sleep(2 * MAX_IDLE_MS / 1000)
        hold_file.touch()
        worker.wait_for_log("fetches held", timeout=30)
        # a fetch in flight when the hold began (a long poll waits up to
        # fetch_max_wait_ms, 500) answers before anything is produced: the
        # high watermark the consumer keeps is then the one from before
        time.sleep(1.5)
        run(produce_events(broker.bootstrap, phases[1]), timeout=60)
        time.sleep(HOLD_S)
        hold_file.unlink()
        worker.wait_for_log("fetches released", timeout=30)
        run(produce_events(broker.bootstrap, phases[2]), timeout=60)

        impressions, clicks = _valid(events)
        final = max(e.timestamp_ms for e in events)
        everything = attribute(impressions, clicks, WINDOW)
        reference = {
            c.click_id: everything[c.click_id] for c in clicks if WINDOW.decided_after(c.ts) < final
        }
        held_ids = {json.loads(e.value)["click_id"] for e in held_clicks}
        assert sum(reference[c].outcome.value == "attributed" for c in held_ids) > 10

        def complete() -> dict | None:
            got = outcomes_by_click(broker.bootstrap, prefix)
            return got if set(got) >= set(reference) else None

        outcomes = wait_until(complete, 90, "an outcome for every decided click", interval=2.0)
        _check_against_reference(outcomes, reference)
        dead = list(run(read_topics(broker.bootstrap, [prefix + "ads-dead-letters"])))
        assert dead == [], f"{len(dead)} valid records dead-lettered"
        assert worker.running()
    finally:
        worker.kill()
