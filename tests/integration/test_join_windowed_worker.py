"""A generic LEFT windowed join (``WindowedJoinPolicy``) in a real worker."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from kafka_util import create_topic, read_topics, run, wait_until

from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.dev.process import WorkerProcess

APPS_DIR = Path(__file__).resolve().parent  # apps/ lives beside the tests

pytestmark = pytest.mark.broker

APP_ID = "sj-windowed-left"
BASE = 1_767_225_600_000


async def _send(bootstrap: str, records: list[tuple[str, str, int, str]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for topic, key, ts, value in records:
            await producer.send_and_wait(
                f"{APP_ID}-{topic}", value.encode(), key=key.encode(), timestamp_ms=ts
            )
    finally:
        await producer.stop()


def test_left_join_pairs_matches_and_emits_the_unmatched_only_after_the_window(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    for topic in ("orders", "payments"):
        run(create_topic(broker.bootstrap, f"{APP_ID}-{topic}", 2))
    worker = WorkerProcess(
        "apps.windowed:app",
        broker.url,
        tmp_path / "w",
        tmp_path / "w.log",
        env={"SJ_TEST_APP_ID": APP_ID, "SJ_TEST_PARTITIONS": "2"},
        cwd=APPS_DIR,
    ).start()
    try:
        worker.wait_for_log(r"Worker\]: Ready", timeout=90)
        run(
            _send(
                broker.bootstrap,
                [
                    ("payments", "o1", BASE + 300, "pay-1"),  # before its order: waits
                    ("orders", "o1", BASE + 100, "order-1"),
                    ("orders", "o2", BASE + 200, "order-2"),  # never paid
                    ("payments", "o3", BASE + 5_000, "pay-3"),  # no order
                    # outside o2's window; moves stream time of o2's task past it
                    ("payments", "o2", BASE + 5_000, "pay-2-too-late"),
                ],
            )
        )
        paid = f"{APP_ID}-paid"

        def results() -> list[dict[str, object]] | None:
            found = [json.loads(r.value) for _, r in run(read_topics(broker.bootstrap, [paid]))]
            return found if len(found) >= 2 else None

        found = wait_until(results, 60, "the join's results")
        asyncio.run(asyncio.sleep(1.0))  # nothing more may come
        found = results() or []
    finally:
        worker.kill()
    by_key = {(d["left"] or {}).get("value"): d for d in found}
    assert sorted(by_key) == ["order-1", "order-2"], found
    assert by_key["order-1"]["right"]["value"] == "pay-1"  # type: ignore[index]
    assert by_key["order-2"]["right"] is None  # unmatched, emitted once the window closed
    # o2's unmatched result needs stream time > 200 + 1000 + 200 on o2's task;
    # a LEFT join never emits unmatched right records (pay-3, pay-2-too-late)
    assert len(found) == 2
