"""Archive files on a real filesystem: atomic Parquet writes, listings, idempotent replays."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamjoin.ads.archive import files
from streamjoin.ads.archive.layout import ArchivedFile, HourBucket, hour_bucket
from streamjoin.ads.archive.ledger import FilePlan, Offer, PartitionLedger
from streamjoin.ads.archive.rows import CLICKS, IMPRESSIONS, OUTCOMES, SourceRecord

T0 = 1_767_225_600_000 + 59 * 60_000  # 2026-01-01T00:59:00Z: one minute before an hour ends


def _click(n: int, ts: int, partition: int = 0) -> SourceRecord:
    value = f'{{"auction_id":"a-{n}","click_id":"k-{n}","ts_ms":{ts}}}'.encode()
    return SourceRecord("clicks", partition, n, f"a-{n}".encode(), value)


def _ledger_with(records: list[SourceRecord], archived: Any = None) -> PartitionLedger[int]:
    ledger: PartitionLedger[int] = PartitionLedger("clicks", 0, archived)
    for record in records:
        row = CLICKS.convert(record)
        ledger.offer(record.offset, (CLICKS.bucket(row), row), record.offset)
    return ledger


def test_a_file_has_the_contract_schema_name_and_directory(tmp_path: Path) -> None:
    records = [_click(n, T0 + n * 20_000) for n in range(6)]  # 00:59:00 .. 01:00:40
    plan = _ledger_with(records).plan()
    written = [files.write_file(tmp_path, CLICKS, item) for item in plan.files]
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        "clicks/date=2026-01-01/hour=00/clicks+0+0+2.parquet",
        "clicks/date=2026-01-01/hour=01/clicks+0+3+5.parquet",
    ]
    table = pq.ParquetFile(written[1]).read()
    assert table.schema == pa.schema(
        [
            pa.field("auction_id", pa.string(), nullable=False),
            pa.field("click_id", pa.string(), nullable=False),
            pa.field("ts_ms", pa.int64(), nullable=False),
            pa.field("partition", pa.int32(), nullable=False),
            pa.field("offset", pa.int64(), nullable=False),
        ]
    )
    assert table.to_pylist()[0] == {
        "auction_id": "a-3",
        "click_id": "k-3",
        "ts_ms": T0 + 60_000,
        "partition": 0,
        "offset": 3,
    }
    assert sorted(os.listdir(written[0].parent)) == ["clicks+0+0+2.parquet"]  # no temporary left
    back = files.read_dataset(tmp_path, "clicks")
    assert back.column("offset").to_pylist() == list(range(6))
    assert back.column("hour").to_pylist() == [0, 0, 0, 1, 1, 1]
    assert files.read_dataset(tmp_path, "impressions").num_rows == 0


def test_nullable_outcome_columns_and_every_schema(tmp_path: Path) -> None:
    row = {
        "click_id": "k-1",
        "auction_id": "a-1",
        "click_ts_ms": T0,
        "outcome": "unattributed",
        "impression_id": None,
        "campaign": None,
        "cost": 0.0,
        "source_topic": "unattributed-clicks",
        "partition": 2,
        "offset": 40,
    }
    plan = FilePlan(hour_bucket(T0), ArchivedFile("unattributed-clicks", 2, 40, 40), (row,))
    path = files.write_file(tmp_path, OUTCOMES, plan)
    table = pq.ParquetFile(path).read()
    assert table.to_pylist() == [row]
    assert table.schema.field("impression_id").nullable
    assert not table.schema.field("click_id").nullable
    assert files.arrow_schema(IMPRESSIONS).field("cost").type == pa.float64()


@pytest.mark.parametrize("where", ["write", "fsync", "rename"])
def test_a_failed_write_leaves_no_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    plan = _ledger_with([_click(n, T0) for n in range(3)]).plan().files[0]
    real_write = pq.write_table

    def half_write(table: Any, where_to: Any, **kwargs: Any) -> None:
        real_write(table, where_to, **kwargs)
        where_to.write(b"then the disk filled up")
        raise OSError(28, "No space left on device")

    real_fsync = os.fsync

    def failing_fsync(fd: int) -> None:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # the file, not its directory
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    def failing_rename(*args: Any) -> None:
        raise OSError(5, "Input/output error")

    if where == "write":
        monkeypatch.setattr(pq, "write_table", half_write)
    elif where == "fsync":
        monkeypatch.setattr(files.os, "fsync", failing_fsync)
    else:
        monkeypatch.setattr(files.os, "replace", failing_rename)
    with pytest.raises(OSError):
        files.write_file(tmp_path, CLICKS, plan)
    directory = tmp_path / "clicks" / plan.bucket.path
    assert directory.is_dir() and list(directory.iterdir()) == []
    assert files.scan_dataset(tmp_path, CLICKS).files == 0


def test_listings_give_the_highest_offset_per_partition_and_hour_and_the_temporaries(
    tmp_path: Path,
) -> None:
    h0 = tmp_path / "clicks" / "date=2026-01-01" / "hour=00"
    h1 = tmp_path / "clicks" / "date=2026-01-01" / "hour=01"
    for directory, names in [
        (h0, ["clicks+0+0+10.parquet", "clicks+0+12+30.parquet", "clicks+1+0+7.parquet"]),
        (h1, ["clicks+0+11+40.parquet", ".clicks+0+41+50.parquet.tmp", "_SUCCESS"]),
        (tmp_path / "clicks" / "date=2026-01-01" / "notes", ["clicks+0+0+99.parquet"]),
    ]:
        directory.mkdir(parents=True)
        for name in names:
            (directory / name).write_bytes(b"")
    listing = files.scan_dataset(tmp_path, CLICKS)
    b0, b1 = HourBucket("2026-01-01", 0), HourBucket("2026-01-01", 1)
    assert listing.highest == {("clicks", 0): {b0: 30, b1: 40}, ("clicks", 1): {b0: 7}}
    assert listing.temps == {("clicks", 0): [h1 / ".clicks+0+41+50.parquet.tmp"]}
    assert listing.files == 4
    assert files.scan_hours(
        tmp_path, CLICKS, [b0, b1, HourBucket("2026-01-01", 2)], "clicks", 0
    ) == {
        b0: 30,
        b1: 40,
    }
    assert files.scan_dataset(tmp_path / "missing", CLICKS).highest == {}


def test_archiving_an_already_archived_range_again_writes_nothing(tmp_path: Path) -> None:
    records = [_click(n, T0 + n * 10_000) for n in range(12)]
    first = _ledger_with(records)
    plan = first.plan()
    for item in plan.files:
        files.write_file(tmp_path, CLICKS, item)
    first.commit(plan)
    before = sorted(p.name for p in (tmp_path / "clicks").rglob("*"))

    # a new owner, from the file names alone, is offered the same range again
    listing = files.scan_dataset(tmp_path, CLICKS)
    again: PartitionLedger[int] = PartitionLedger("clicks", 0, listing.highest[("clicks", 0)])
    for record in records:
        row = CLICKS.convert(record)
        offer = again.offer(record.offset, (CLICKS.bucket(row), row), record.offset)
        assert offer is Offer.ALREADY_ARCHIVED
    assert again.plan().files == ()
    assert sorted(p.name for p in (tmp_path / "clicks").rglob("*")) == before
    # the next record starts a file right after the archived range of its hour
    record = _click(12, T0 + 12 * 10_000)
    row = CLICKS.convert(record)
    assert again.offer(12, (CLICKS.bucket(row), row), 12) is Offer.BUFFERED
    assert [f.file.name for f in again.plan().files] == ["clicks+0+12+12.parquet"]
