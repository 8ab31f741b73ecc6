"""The archive sink's record handling in-process (fake faust events, real files, no broker)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from faust.types import TP

import streamjoin
from streamjoin.ads.archive import files
from streamjoin.ads.archive.app import create_app
from streamjoin.ads.archive.declare import archive_topics
from streamjoin.ads.archive.ledger import FilePlan
from streamjoin.ads.archive.rows import Dataset
from streamjoin.ads.archive.sink import ArchiveSink
from streamjoin.ads.errors import ArchiveConfigError

T0 = 1_767_225_600_000


@dataclass
class Message:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass
class Event:
    message: Message
    acks: int = 0

    def ack(self) -> None:
        self.acks += 1


@dataclass
class Feed:
    sink: ArchiveSink
    events: list[Event] = field(default_factory=list)

    async def click(
        self, offset: int, ts: int = T0, partition: int = 0, bad: bool = False
    ) -> Event:
        n = f"{partition}-{offset}"
        value = (
            b"{" if bad else f'{{"auction_id":"a-{n}","click_id":"k-{n}","ts_ms":{ts}}}'.encode()
        )
        event = Event(Message("clicks", partition, offset, f"a-{n}".encode(), value))
        self.events.append(event)
        await self.sink._receive(event)
        return event


def _sink(root: Path, **options: Any) -> ArchiveSink:
    app = streamjoin.App("archive-unit", web_enabled=False)
    return archive_topics(app, root, {"clicks": "clicks"}, **options)


def _names(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*") if p.is_file())


async def test_records_are_acked_only_after_their_file_is_renamed_into_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    feed = Feed(_sink(tmp_path, max_records=3))
    real_write = files.write_file
    unacked_at_write: list[bool] = []

    def watching_write(root: Path, dataset: Dataset, plan: FilePlan) -> Path:
        held = [e for e in feed.events if e.message.offset in {r["offset"] for r in plan.rows}]
        unacked_at_write.append(all(e.acks == 0 for e in held))
        path = real_write(root, dataset, plan)
        assert all(e.acks == 0 for e in held)  # renamed, not yet acknowledged
        return path

    monkeypatch.setattr(files, "write_file", watching_write)
    first = await feed.click(0)
    bad = await feed.click(1, bad=True)
    assert (first.acks, bad.acks) == (0, 1)  # a malformed record is acked at once
    await feed.click(2)
    assert _names(tmp_path) == [] and feed.sink.buffered == 2
    await feed.click(3, ts=T0 + 3_600_000)  # the third row: flush, two hours
    assert _names(tmp_path) == ["clicks+0+0+2.parquet", "clicks+0+3+3.parquet"]
    assert unacked_at_write == [True, True]
    assert [e.acks for e in feed.events] == [1, 1, 1, 1]
    stats = feed.sink.stats
    assert (stats.rows, stats.files, stats.bad) == ({"clicks": 3}, {"clicks": 2}, 1)


async def test_the_timer_flushes_what_waited_long_enough_and_everything_in_a_rebalance(
    tmp_path: Path,
) -> None:
    feed = Feed(_sink(tmp_path, flush_interval=60.0))
    await feed.click(0)
    await feed.sink._on_timer()
    assert _names(tmp_path) == []  # not due yet
    feed.sink.app.rebalancing = True
    await feed.sink._on_timer()
    assert _names(tmp_path) == ["clicks+0+0+0.parquet"] and feed.events[0].acks == 1


async def test_after_a_revocation_or_a_crash_a_replay_writes_nothing_new(tmp_path: Path) -> None:
    feed = Feed(_sink(tmp_path))
    for offset in range(5):
        await feed.click(offset, ts=T0 + offset * 1_000_000)
    await feed.sink._on_revoked(feed.sink.app, {TP("clicks", 0)})  # flushes and forgets
    written = _names(tmp_path)
    assert written == ["clicks+0+0+3.parquet", "clicks+0+4+4.parquet"]
    assert feed.sink.describe()["partitions"] == {}

    # the partition comes back (same worker, or a new one after a crash): the
    # consumer replays from an older committed offset
    for sink in (feed.sink, _sink(tmp_path)):
        again = Feed(sink)
        for offset in range(2, 5):
            event = await again.click(offset, ts=T0 + offset * 1_000_000)
            assert event.acks == 1
        assert sink.buffered == 0 and sink.stats.skipped_replays == 3
        await sink.flush()
        assert _names(tmp_path) == written
    # new records go on after the archived range of their hour
    await again.click(5, ts=T0 + 5_000_000)
    await again.sink.flush()
    assert "clicks+0+5+5.parquet" in _names(tmp_path)


async def test_a_replay_of_a_buffered_record_is_acked_with_its_original(tmp_path: Path) -> None:
    feed = Feed(_sink(tmp_path))
    original = await feed.click(0)
    replay = await feed.click(0)  # the shared consumer was moved back
    assert (original.acks, replay.acks) == (0, 0)
    await feed.sink.flush()
    assert (original.acks, replay.acks) == (1, 1)
    assert _names(tmp_path) == ["clicks+0+0+0.parquet"]


async def test_a_stale_temporary_of_a_taken_partition_is_removed(tmp_path: Path) -> None:
    hour = tmp_path / "clicks" / "date=2026-01-01" / "hour=00"
    hour.mkdir(parents=True)
    (hour / ".clicks+0+0+9.parquet.tmp").write_bytes(b"PAR1 half")
    (hour / ".clicks+1+0+9.parquet.tmp").write_bytes(b"PAR1 half")  # not ours
    feed = Feed(_sink(tmp_path))
    await feed.click(0)
    assert sorted(os.listdir(hour)) == [".clicks+1+0+9.parquet.tmp"]


def test_bad_declarations_are_refused(tmp_path: Path) -> None:
    app = streamjoin.App("archive-unit-bad", web_enabled=False)
    with pytest.raises(ArchiveConfigError, match="unknown datasets"):
        archive_topics(app, tmp_path, {"views": "views"})
    with pytest.raises(ArchiveConfigError, match="given twice"):
        archive_topics(app, tmp_path, {"clicks": "x", "outcomes": ["x"]})
    with pytest.raises(ArchiveConfigError, match="at least one"):
        archive_topics(app, tmp_path, {})
    with pytest.raises(ArchiveConfigError, match="max_records"):
        archive_topics(app, tmp_path, {"clicks": "clicks"}, max_records=0)


def test_the_archive_only_app_is_configured_by_the_environment(tmp_path: Path) -> None:
    with pytest.raises(ArchiveConfigError, match="ARCHIVE_DIR"):
        create_app({})
    app = create_app(
        {"ARCHIVE_DIR": str(tmp_path), "ARCHIVE_APP_ID": "arch-1", "ARCHIVE_TOPIC_PREFIX": "p-"}
    )
    assert app.conf.id == "arch-1"
    (agent,) = app.agents.values()
    assert sorted(agent.channel.topics) == [
        "p-ads-dead-letters",
        "p-attributed-clicks",
        "p-clicks",
        "p-duplicate-clicks",
        "p-impressions",
        "p-unattributed-clicks",
    ]
