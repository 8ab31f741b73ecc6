"""Bad input on the join's inputs: each kind dead-lettered with its reason, nothing lost.

Between valid events of the example's generator, the clicks and impressions
topics get one record of every kind of bad input docs/joins.rst lists (null
and empty keys, a tombstone, an empty value, invalid UTF-8, invalid JSON, JSON
that is not an object, a missing field, timestamps outside 2000..2100, a
record over ``max_record_bytes``). A real worker dead-letters each of them,
and nothing else, with the reason the matrix gives and the source in the
headers; every decided valid click gets the reference outcome; the worker
runs on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kafka_util import run, wait_until
from test_join_workers import AdRun, _check_against_reference

from streamjoin.ads.generator import generate
from streamjoin.dev.broker import EmbeddedBroker

pytestmark = [pytest.mark.broker]

CLICK = {"auction_id": "bad-a", "click_id": "bad-k", "ts_ms": 1_767_225_600_000}
IMPRESSION = {
    "auction_id": "bad-a",
    "impression_id": "bad-i",
    "ts_ms": 1_767_225_600_000,
    "campaign": "camp-00",
    "cost": 0.5,
}


def _json(doc: dict[str, Any], **changes: Any) -> bytes:
    return json.dumps({**doc, **changes}).encode()


#: (side, key, value, the start of the reason in the dead letter)
MATRIX: list[tuple[str, bytes | None, bytes | None, str]] = [
    ("clicks", None, _json(CLICK), "click: no record key"),
    ("clicks", b"", _json(CLICK), "click: record key b'' is not its auction_id"),
    ("clicks", b"bad-a", None, "click: empty value"),
    ("clicks", b"bad-a", b"", "click: not JSON"),
    ("clicks", b"bad-a", b'{"auction_id": "bad-\xff\xfe"}', "click: not JSON"),
    ("clicks", b"bad-a", b'{"auction_id": "bad-a", "click', "click: not JSON"),
    ("clicks", b"bad-a", b"[1, 2]", "click: expected a JSON object"),
    ("clicks", b"bad-a", _json(CLICK, ts_ms=1_000), "click: ts_ms 1000 is outside 2000..2100"),
    ("clicks", b"bad-a", _json(CLICK, ts_ms=10**16), "click: ts_ms 10000000000000000 is outside"),
    ("clicks", b"bad-a", _json(CLICK, pad="x" * 600_000), "record of 600"),
    ("impressions", None, _json(IMPRESSION), "impression: no record key"),
    ("impressions", b"bad-a", None, "impression: empty value"),
    ("impressions", b"bad-a", b"\xff", "impression: not JSON"),
    ("impressions", b"bad-a", _json(IMPRESSION, cost="x"), "impression: field 'cost' has type"),
    ("impressions", b"bad-a", _json(IMPRESSION, ts_ms=-5), "impression: ts_ms -5 is outside"),
]


def test_every_kind_of_bad_input_is_dead_lettered_with_its_reason_and_nothing_else(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    ads = AdRun(broker, tmp_path, "ads-bad-input-matrix")
    try:
        worker = ads.worker("w1").start()
        worker.wait_for_log(r"Worker\]: Ready", timeout=90)
        events = list(generate(ads.config(malformed_rate=0.0, impressions=600)))
        half = len(events) // 2
        ads.produce(events[:half])
        bad: dict[tuple[str, int], str] = {}
        for side, key, value, reason in MATRIX:
            topic = ads.prefix + side
            offsets = run(_send_one(broker.bootstrap, topic, key, value))
            bad[(topic, offsets)] = reason
        ads.produce(events[half:])
        outcomes = ads.wait_for_outcomes()
        _check_against_reference(outcomes, ads.reference())

        def letters() -> list[Any] | None:
            found = ads.dead_letters()
            return found if len(found) >= len(bad) else None

        found = wait_until(letters, 60, "a dead letter for every bad record")
        seen: dict[tuple[str, int], Any] = {}
        for letter in found:
            headers = dict(letter.headers)
            topic, partition, offset = headers["streamjoin-source"].decode().rsplit(":", 2)
            assert partition == "0"
            seen[(topic, int(offset))] = letter
        assert set(seen) == set(bad)
        for where, reason in bad.items():
            got = dict(seen[where].headers)["streamjoin-reason"].decode()
            assert got.startswith(reason), (where, got, reason)
        big = next(v for k, v in seen.items() if bad[k] == "record of 600")
        assert len(big.value) == 1024
        assert int(dict(big.headers)["streamjoin-size"]) > 600_000
        assert worker.running()
    finally:
        ads.stop_all()


async def _send_one(bootstrap: str, topic: str, key: bytes | None, value: bytes | None) -> int:
    """Send one record to partition 0 of *topic*; its offset."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_request_size=2 * 1024 * 1024)
    await producer.start()
    try:
        meta = await producer.send_and_wait(topic, value, key=key, partition=0)
        return int(meta.offset)
    finally:
        await producer.stop()
