"""The ad-monetization generator's command line against the embedded broker."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from kafka_util import create_topic, run

from streamjoin.dev.broker import EmbeddedBroker, free_port

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from streamjoin.ads.generator import (  # noqa: E402
    GeneratorConfig,
    generate,
    partition_for_key,
    read_record,
    record_row,
    row_value,
)

pytestmark = [pytest.mark.broker]

Stored = tuple[bytes | None, bytes | None, int]


def generator(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the generator's CLI from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "streamjoin.ads.generator", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


async def partition_counts(bootstrap: str, topics: list[str]) -> dict[str, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return {d["topic"]: len(d["partitions"]) for d in await admin.describe_topics(topics)}
    finally:
        await admin.close()


async def read_all(
    bootstrap: str, topics: list[str], partitions: int, timeout: float = 60.0
) -> dict[tuple[str, int, int], Stored]:
    """Every record of ``topics``, up to each partition's fetch high watermark.

    Uses the fetch high watermark, not ``ListOffsets``, which the embedded
    broker may under-report (see DESIGN.md).
    """
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    found: dict[tuple[str, int, int], Stored] = {}
    try:
        tps = [TopicPartition(t, p) for t in topics for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        done: set[TopicPartition] = set()
        deadline = time.monotonic() + timeout
        while len(done) < len(tps):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topics} incomplete: {sorted(map(str, done))}")
            fetched = await consumer.getmany(timeout_ms=200)
            for tp, records in fetched.items():
                for r in records:
                    found[(tp.topic, tp.partition, r.offset)] = (r.key, r.value, r.timestamp)
            for tp in tps:
                hw = consumer.highwater(tp)
                if hw is not None and await consumer.position(tp) >= hw:
                    done.add(tp)
        return found
    finally:
        await consumer.stop()


def test_create_topics_and_record_match_what_the_broker_holds(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    imp_topic, click_topic = "sjgen-impressions", "sjgen-clicks"
    record = tmp_path / "run.jsonl"
    result = generator(
        "--bootstrap",
        broker.bootstrap,
        "--create-topics",
        "--record",
        str(record),
        "--seed",
        "5",
        "--impressions",
        "3000",
        "--rate",
        "20",
        "--partitions",
        "3",
        "--malformed-rate",
        "0.02",
        "--impressions-topic",
        imp_topic,
        "--clicks-topic",
        click_topic,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[-1].startswith("generator: done: ") and "Traceback" not in result.stderr
    assert run(partition_counts(broker.bootstrap, [imp_topic, click_topic])) == {
        imp_topic: 3,
        click_topic: 3,
    }

    rows = read_record(record)
    assert [f.name for f in tmp_path.iterdir()] == ["run.jsonl"]
    # the CLI produced exactly the pure core's events, in its order
    config = GeneratorConfig(
        seed=5,
        impressions=3000,
        rate=20,
        partitions=3,
        malformed_rate=0.02,
        impressions_topic=imp_topic,
        clicks_topic=click_topic,
    )
    events = list(generate(config))
    assert len(rows) == len(events) > 3_500
    strip = ("partition", "offset")
    for row, event in zip(rows, events, strict=True):
        expected = record_row(event, -1, -1)
        assert {k: v for k, v in row.items() if k not in strip} == {
            k: v for k, v in expected.items() if k not in strip
        }
        assert row["partition"] == partition_for_key(event.key, 3)
    assert any(r["malformed"] for r in rows) and any(r["value_encoding"] == "base64" for r in rows)

    # ... and the broker holds exactly the recorded records, where the file says
    on_broker = run(read_all(broker.bootstrap, [imp_topic, click_topic], 3))
    recorded: dict[tuple[str, int, int], Stored] = {
        (r["topic"], r["partition"], r["offset"]): (
            r["key"].encode(),
            row_value(r),
            r["ts_ms"],
        )
        for r in rows
    }
    assert len(recorded) == len(rows)
    assert on_broker == recorded
    tails: dict[str, set[int]] = {}
    for r in rows:
        if r["label"].startswith("tail-"):
            tails.setdefault(r["topic"], set()).add(r["partition"])
    assert tails == {imp_topic: {0, 1, 2}, click_topic: {0, 1, 2}}


def test_topics_with_another_partition_count_exit_2_naming_both_counts(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    run(create_topic(broker.bootstrap, "sjgen-six-impressions", 6))
    run(create_topic(broker.bootstrap, "sjgen-six-clicks", 6))
    record = tmp_path / "run.jsonl"
    result = generator(
        "--bootstrap",
        f"kafka://{broker.bootstrap}",
        "--create-topics",
        "--partitions",
        "4",
        "--record",
        str(record),
        "--impressions-topic",
        "sjgen-six-impressions",
        "--clicks-topic",
        "sjgen-six-clicks",
    )
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "'sjgen-six-clicks' has 6 partitions" in lines[0] and "--partitions is 4" in lines[0]
    assert not record.exists() and list(tmp_path.iterdir()) == []


def test_missing_topics_without_create_topics_exit_2(broker: EmbeddedBroker) -> None:
    result = generator(
        "--bootstrap",
        broker.bootstrap,
        "--impressions-topic",
        "sjgen-absent-impressions",
        "--clicks-topic",
        "sjgen-absent-clicks",
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"generator: error: topic 'sjgen-absent-clicks' does not exist on {broker.bootstrap}; "
        "create it or pass --create-topics"
    ]
    # the check lists topics before describing them: nothing was auto-created
    assert "sjgen-absent-clicks" not in run(_list_topics(broker.bootstrap))


async def _list_topics(bootstrap: str) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return list(await admin.list_topics())
    finally:
        await admin.close()


def test_speed_paces_event_time_against_the_wall_clock(broker: EmbeddedBroker) -> None:
    """Four seconds of event time at speed 2 take about two wall-clock seconds.

    ``--bootstrap`` takes a comma-separated list, ``kafka://`` optional on each entry.
    """
    started = time.monotonic()
    result = generator(
        "--bootstrap",
        f"kafka://{broker.bootstrap},{broker.bootstrap}",
        "--create-topics",
        "--duration",
        "4",
        "--speed",
        "2",
        "--impressions-topic",
        "sjgen-paced-impressions",
        "--clicks-topic",
        "sjgen-paced-clicks",
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert 1.5 <= elapsed < 30, elapsed


def test_an_unreachable_bootstrap_exits_2_with_one_line(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    result = generator("--bootstrap", address, "--record", str(tmp_path / "run.jsonl"), timeout=60)
    assert result.returncode == 2
    assert time.monotonic() - started < 30
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"generator: error: cannot reach a Kafka broker at {address}")
    assert list(tmp_path.iterdir()) == []
