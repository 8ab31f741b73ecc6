"""The Parquet archive in a real worker of the ad-monetization app, on the real broker.

A seeded generator run (with malformed records) is produced to the embedded
broker; ``streamjoin.ads.app`` runs in a real worker with
``ADS_ARCHIVE_DIR`` set; the archive is read back with pyarrow and compared
with what was produced: every valid impression and click exactly once (by
topic, partition and offset), no malformed record, and one outcome row per
record on the three outcome topics. The second test kills the worker with
SIGKILL mid-stream and restarts it.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.structs import OffsetAndMetadata
from kafka_util import create_topic, produce_events, read_topics, run, wait_until

from streamjoin.ads.archive.layout import HourBucket, hour_bucket, parse_file_name
from streamjoin.dev.broker import EmbeddedBroker
from streamjoin.dev.process import WorkerProcess
from streamjoin.faust.app import cooperative_from_env
from streamjoin.faust.kafka.cooperative import PROTOCOL

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from streamjoin.ads.generator import Event, GeneratorConfig, generate  # noqa: E402

pytestmark = pytest.mark.broker

PARTITIONS = 4
GRACE_MS = 5_000
OUTCOME_TOPICS = ("attributed-clicks", "duplicate-clicks", "unattributed-clicks")

#: (topic, partition, offset) of a Kafka record
Source = tuple[str, int, int]


@dataclass(frozen=True)
class Sent:
    event: Event
    partition: int
    offset: int

    @property
    def source(self) -> Source:
        return (self.event.topic, self.partition, self.offset)


class ArchiveRun:
    """One test's topics, archive directory, worker and produced records."""

    def __init__(self, broker: EmbeddedBroker, tmp_path: Path, app_id: str) -> None:
        self.broker = broker
        self.tmp_path = tmp_path
        self.app_id = app_id
        self.prefix = f"{app_id}-"
        self.root = tmp_path / "archive"
        self.sent: list[Sent] = []
        self.workers: list[WorkerProcess] = []
        for topic in ("impressions", "clicks", *OUTCOME_TOPICS):
            run(create_topic(broker.bootstrap, self.prefix + topic, PARTITIONS))

    def events(self, **overrides: Any) -> list[Event]:
        values: dict[str, Any] = {
            "seed": 23,
            "impressions": 1_500,
            "rate": 50.0,
            "jitter_ms": 2_000,
            "malformed_rate": 0.02,
            "partitions": PARTITIONS,
            "impressions_topic": self.prefix + "impressions",
            "clicks_topic": self.prefix + "clicks",
            # across an hour boundary, so that flushes write two buckets
            "start_ts_ms": 1_767_225_600_000 - 15_000,
        }
        values.update(overrides)
        return list(generate(GeneratorConfig(**values)))

    def worker(self, name: str) -> WorkerProcess:
        """A worker of the join app with the archive on."""
        return self._worker(
            "streamjoin.ads.app:app",
            name,
            {
                "ADS_APP_ID": self.app_id,
                "ADS_TOPIC_PREFIX": self.prefix,
                "ADS_PARTITIONS": str(PARTITIONS),
                "ADS_GRACE_MS": str(GRACE_MS),
                "ADS_MAX_IDLE_MS": "1000",
                "ADS_ARCHIVE_DIR": str(self.root),
            },
        )

    @property
    def archiver_group(self) -> str:
        return f"{self.app_id}-archiver"

    def archiver(self, name: str, flush_interval: float = 60) -> WorkerProcess:
        """A worker of the archive-only app, in a consumer group of its own."""
        return self._worker(
            "streamjoin.ads.archive.app:app",
            name,
            {
                "ARCHIVE_DIR": str(self.root),
                "ARCHIVE_APP_ID": self.archiver_group,
                "ARCHIVE_TOPIC_PREFIX": self.prefix,
                "ARCHIVE_FLUSH_INTERVAL": str(flush_interval),
            },
        )

    def _worker(self, app: str, name: str, env: dict[str, str]) -> WorkerProcess:
        worker = WorkerProcess(
            app,
            self.broker.url,
            self.tmp_path / name,
            self.tmp_path / f"{name}.log",
            env=env,
            cwd=REPO,
        )
        self.workers.append(worker)
        return worker

    def produce(self, events: Iterable[Event]) -> None:
        sent = run(produce_events(self.broker.bootstrap, list(events)), timeout=60)
        self.sent.extend(Sent(e, p, o) for e, p, o in sent)

    def valid(self, dataset: str) -> set[Source]:
        topic = self.prefix + dataset
        return {s.source for s in self.sent if s.event.topic == topic and not s.event.malformed}

    def rows(self, dataset: str) -> list[dict[str, Any]]:
        """Every archived row of *dataset*, checked against its file's name and directory."""
        out = []
        for path in sorted((self.root / dataset).glob("date=*/hour=*/*.parquet")):
            named = parse_file_name(path.name)
            bucket = HourBucket.from_dirs(path.parent.parent.name, path.parent.name)
            assert named is not None and bucket is not None, path
            rows = pq.ParquetFile(path).read().to_pylist()
            assert rows, f"empty file {path}"
            offsets = [r["offset"] for r in rows]
            assert (named.first, named.last) == (min(offsets), max(offsets)), path
            assert {r["partition"] for r in rows} == {named.partition}, path
            for row in rows:
                row["_topic"] = row.get("source_topic", named.topic)
                assert row["_topic"] == named.topic
                ts = row["click_ts_ms"] if dataset == "outcomes" else row["ts_ms"]
                assert hour_bucket(ts) == bucket, path
            out.extend(rows)
        return out

    def archived(self, dataset: str) -> Counter[Source]:
        return Counter((r["_topic"], r["partition"], r["offset"]) for r in self.rows(dataset))

    def wait_for_inputs(self, timeout: float) -> None:
        want = {d: self.valid(d) for d in ("impressions", "clicks")}

        def complete() -> bool:
            return all(set(self.archived(d)) >= want[d] for d in want)

        try:
            wait_until(complete, timeout, "every valid input record in the archive", 1.0)
        except TimeoutError:
            raise AssertionError(self.diagnosis()) from None

    def diagnosis(self) -> str:
        counts = {d: (len(self.archived(d)), len(self.valid(d))) for d in ("impressions", "clicks")}
        logs = "\n".join(w.log_text(since_start=False)[-4000:] for w in self.workers)
        return f"archived/valid: {counts}; worker logs:\n{logs}"

    def stop_all(self) -> None:
        for worker in self.workers:
            worker.kill()


async def _read(bootstrap: str, topics: list[str]) -> list[tuple[Source, bytes, bytes]]:
    """Every record of *topics*, read to the end."""
    return [
        ((topic, r.partition, r.offset), r.key, r.value)
        for topic, r in await read_topics(bootstrap, topics)
    ]


@pytest.fixture
def archive_run(
    broker: EmbeddedBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[ArchiveRun]:
    name = request.node.name
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    app_id = "arch-" + re.sub(r"[^a-z0-9]+", "-", name.lower())[:24] + "-" + digest
    pool = ArchiveRun(broker, tmp_path, app_id)
    try:
        yield pool
    finally:
        pool.stop_all()


class _SameProtocol(RoundRobinPartitionAssignor):
    """Round robin under the workers' eager protocol name (the broker keeps an
    empty group's protocol: a member naming another one is refused)."""

    name = "streamjoin"


class _SameCooperativeProtocol(RoundRobinPartitionAssignor):
    """Round robin under the name cooperative workers offer first (offered
    only when the workers are cooperative: the group keeps the protocol its
    first member chose, and eager workers offer only ``streamjoin``)."""

    name = PROTOCOL


async def _commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Join *group* alone and commit *offsets* ((topic, partition) -> next offset)."""
    offered: tuple[type, ...] = (_SameProtocol,)
    if cooperative_from_env():
        offered = (_SameCooperativeProtocol, _SameProtocol)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        partition_assignment_strategy=offered,
    )
    await consumer.start()
    try:
        tps = {TopicPartition(t, p): OffsetAndMetadata(o, "") for (t, p), o in offsets.items()}
        consumer.subscribe(sorted({tp.topic for tp in tps}))
        while not set(tps) <= consumer.assignment():
            await consumer.getmany(timeout_ms=200)
        await consumer.commit(tps)
    finally:
        await consumer.stop()


def _no_duplicates(counts: Counter[Source]) -> None:
    twice = {s: n for s, n in counts.items() if n > 1}
    assert twice == {}, f"{len(twice)} records archived more than once, e.g. {list(twice)[:5]}"


def test_a_worker_archives_every_valid_record_and_every_outcome_exactly_once(
    archive_run: ArchiveRun,
) -> None:
    worker = archive_run.worker("w1").start()
    worker.wait_for_log(r"Worker\]: Ready", timeout=60)
    events = archive_run.events()
    assert any(e.malformed for e in events)
    archive_run.produce(events)
    archive_run.wait_for_inputs(timeout=40)
    for dataset in ("impressions", "clicks"):
        counts = archive_run.archived(dataset)
        _no_duplicates(counts)
        assert set(counts) == archive_run.valid(dataset)
    buckets = {p.parent.name for p in archive_run.root.glob("impressions/date=*/hour=*/*")}
    assert buckets == {"hour=23", "hour=00"}  # the run crosses midnight

    # outcomes: one row per record on the three outcome topics, with its content
    topics = [archive_run.prefix + t for t in OUTCOME_TOPICS]
    clicks = len(archive_run.valid("clicks"))

    def outcomes_archived() -> dict[Source, bytes] | None:
        records = run(_read(archive_run.broker.bootstrap, topics))
        if len(records) < clicks - PARTITIONS:  # all but the tail clicks (undecided)
            return None
        on_topics = {source: value for source, _, value in records}
        return on_topics if set(archive_run.archived("outcomes")) == set(on_topics) else None

    try:
        on_topics = wait_until(outcomes_archived, 30, "every outcome record archived", 2.0)
    except TimeoutError:
        raise AssertionError(archive_run.diagnosis()) from None
    rows = archive_run.rows("outcomes")
    _no_duplicates(archive_run.archived("outcomes"))
    kinds = Counter(r["outcome"] for r in rows)
    assert set(kinds) == {"attributed", "duplicate", "unattributed"}
    for row in rows:
        source = (row["_topic"], row["partition"], row["offset"])
        doc = json.loads(on_topics[source])
        assert row["_topic"].endswith(f"{row['outcome']}-clicks")
        assert {k: row[k] for k in doc} == doc
    assert worker.running()
    # the progress line counts what was written and what was refused
    bad = sum(1 for e in events if e.malformed)
    line = worker.wait_for_log(rf"archive: .* {bad} bad", timeout=15)[-1]
    assert "0 skipped replays" in line


def test_kill_9_mid_stream_and_restart_still_archives_each_record_once(
    archive_run: ArchiveRun,
) -> None:
    events = archive_run.events(impressions=3_000, seed=29)
    chunks = [events[i : i + 500] for i in range(0, len(events), 500)]
    worker = archive_run.worker("w1").start()
    worker.wait_for_log(r"Worker\]: Ready", timeout=60)
    for chunk in chunks[:3]:
        archive_run.produce(chunk)
        time.sleep(0.3)
    # both datasets flushed once: the restart below then resumes after archived offsets
    wait_until(
        lambda: archive_run.archived("clicks") and archive_run.archived("impressions"),
        30,
        "a first flush of both datasets",
        interval=0.2,
    )
    # produce more; kill the worker just after its next flush: the records of that
    # flush are archived but (likely) not yet committed, newer ones only buffered
    archive_run.produce(chunks[3])
    files_before = sorted(archive_run.root.rglob("*.parquet"))
    wait_until(
        lambda: len(list(archive_run.root.rglob("*.parquet"))) > len(files_before),
        15,
        "the next flush",
        interval=0.05,
    )
    worker.kill()
    files_before = sorted(archive_run.root.rglob("*.parquet"))
    for chunk in chunks[4:]:
        archive_run.produce(chunk)
    worker.start()
    archive_run.wait_for_inputs(timeout=45)
    for dataset in ("impressions", "clicks"):
        counts = archive_run.archived(dataset)
        _no_duplicates(counts)
        assert set(counts) == archive_run.valid(dataset)
    # files written before the crash are still there, unchanged; none is left half written
    assert set(files_before) <= set(archive_run.root.rglob("*.parquet"))
    for dataset in ("impressions", "clicks"):
        assert list((archive_run.root / dataset).rglob(".*.tmp")) == []
    # the restarted worker resumed after the archived offsets
    worker.wait_for_log(r"archive: \S+impressions\[\d+\] taken: up to offset", timeout=5)
    progress = worker.wait_for_log(r"archive: [1-9]\d* files", timeout=15)[-1]
    print("after the restart:", progress.split("archive: ", 1)[1])  # how many replays skipped
    assert worker.running()


def test_the_archive_only_app_archives_in_its_own_group_and_flushes_when_stopped(
    archive_run: ArchiveRun,
) -> None:
    archiver = archive_run.archiver("a1").start()
    archiver.wait_for_log(r"Worker\]: Ready", timeout=60)
    archive_run.produce(archive_run.events(impressions=600, seed=31))
    # everything is read and buffered (a flush would wait 60 s): a graceful stop writes it
    archiver.wait_for_log(r"archive: 0 files, .* [1-9]\d* buffered", timeout=20)
    assert archive_run.archived("impressions") == Counter()
    assert archiver.stop(timeout=20) == 0
    for dataset in ("impressions", "clicks"):
        counts = archive_run.archived(dataset)
        _no_duplicates(counts)
        assert set(counts) == archive_run.valid(dataset)
    assert archive_run.archived("outcomes") == Counter()  # no join runs here


def test_records_the_join_reports_late_are_archived_with_their_reason(
    archive_run: ArchiveRun,
) -> None:
    """The impressions input stays silent past max_idle_ms while clicks flow: it is
    idle, decisions follow the clicks, and its records that then arrive older than
    what was decided are late. Each is dead-lettered and archived in ``late``,
    naming the input record, so the batch side can leave it out as the stream did."""
    events = archive_run.events(malformed_rate=0.0, impressions=600)
    worker = archive_run.worker("w1").start()
    worker.wait_for_log(r"Worker\]: Ready", timeout=60)
    clicks = [e for e in events if e.topic.endswith("clicks")]
    impressions = [e for e in events if e.topic.endswith("impressions")]
    archive_run.produce(clicks)
    worker.wait_for_log(r"join .*records processed", timeout=60)
    time.sleep(4)  # impressions caught up (empty) and silent > max_idle_ms: idle
    archive_run.produce(impressions)
    archive_run.wait_for_inputs(60)
    dead_letters = archive_run.prefix + "ads-dead-letters"
    letters = run(read_topics(archive_run.broker.bootstrap, [dead_letters]))
    late_sources = set()
    for _, letter in letters:
        headers = dict(letter.headers)
        assert headers["streamjoin-reason"].startswith(b"late: impression record ts_ms ")
        topic, part, offset = headers["streamjoin-source"].decode().rsplit(":", 2)
        late_sources.add((topic, int(part), int(offset)))
    assert late_sources, "no impression arrived late: the input never went idle"
    assert late_sources <= archive_run.valid("impressions")

    def archived_late() -> list[dict[str, Any]] | None:
        rows = archive_run.rows("late")
        return rows if len(rows) >= len(late_sources) else None

    rows = wait_until(archived_late, 30, "every late record in the archive", 1.0)
    assert {(r["input_topic"], r["input_partition"], r["input_offset"]) for r in rows} == (
        late_sources
    )
    assert {r["input"] for r in rows} == {"impressions"}
    assert all(r["reason"].startswith("late: impression record") for r in rows)
    _no_duplicates(archive_run.archived("late"))


def test_a_committed_offset_past_the_archive_does_not_lose_the_records_in_between(
    archive_run: ArchiveRun,
) -> None:
    """faust may commit over records no stream saw (it acks what a stream skips in a
    rebalance, and commits over a jump in offsets): the CI once lost 11 outcomes
    that way. Here the group's offsets are committed past records the archive never
    saw, as that does; the worker that takes the partitions next reads them from
    the brokers: every record is archived once."""
    events = archive_run.events(impressions=900, seed=37)
    third = len(events) // 3
    archiver = archive_run.archiver("a1").start()
    archiver.wait_for_log(r"Worker\]: Ready", timeout=60)
    archive_run.produce(events[:third])
    archiver.wait_for_log(r"archive: 0 files, .* [1-9]\d* buffered", timeout=20)
    assert archiver.stop(timeout=20) == 0  # flushed: the first third is archived
    archived = {d: set(archive_run.archived(d)) for d in ("impressions", "clicks")}
    assert archived["clicks"] and archived["impressions"]

    skipped_from = len(archive_run.sent)
    archive_run.produce(events[third : 2 * third])
    skipped = archive_run.sent[skipped_from:]
    ends = {}
    for sent in skipped:
        key = (sent.event.topic, sent.partition)
        ends[key] = max(ends.get(key, 0), sent.offset + 1)
    run(_commit(archive_run.broker.bootstrap, archive_run.archiver_group, ends))
    archive_run.produce(events[2 * third :])

    again = archive_run.archiver("a2", flush_interval=1).start()
    archive_run.wait_for_inputs(timeout=60)
    for dataset in ("impressions", "clicks"):
        counts = archive_run.archived(dataset)
        _no_duplicates(counts)
        assert set(counts) == archive_run.valid(dataset)
    lines = again.wait_for_log(r"taken at offset \d+ but archived up to \d+: read", timeout=5)
    assert any(not line.rstrip().endswith(" 0 to archive") for line in lines), lines
    assert again.running()


def test_a_partition_with_no_file_yet_is_archived_from_the_topics_start(
    archive_run: ArchiveRun,
) -> None:
    """A clean-clone CI run once lost 161 of 3,004 impressions: a worker killed
    before a partition's first flush, and its successor started the partition
    at the group's committed offset, which faust had moved past records no
    stream saw. Here the group's offsets are committed halfway through every
    partition before any file exists: the worker archives every partition from
    the topic's start, each record once."""
    events = archive_run.events(impressions=600, seed=41)
    archive_run.produce(events)
    by_partition: dict[tuple[str, int], list[int]] = {}
    for sent in archive_run.sent:
        by_partition.setdefault((sent.event.topic, sent.partition), []).append(sent.offset)
    halfway = {key: sorted(offsets)[len(offsets) // 2] for key, offsets in by_partition.items()}
    run(_commit(archive_run.broker.bootstrap, archive_run.archiver_group, halfway))

    archiver = archive_run.archiver("a1", flush_interval=1).start()
    archive_run.wait_for_inputs(timeout=60)
    for dataset in ("impressions", "clicks"):
        counts = archive_run.archived(dataset)
        _no_duplicates(counts)
        assert set(counts) == archive_run.valid(dataset)
    lines = archiver.wait_for_log(r"archived up to nothing \(from the topic's start\)", timeout=5)
    assert len(lines) >= len(halfway) // 2, lines
    assert archiver.running()
