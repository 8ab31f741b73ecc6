"""Reading the archive: the contract's columns, missing datasets, bad files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning"),
]


def _small_events(kit: Any) -> Any:
    ev = kit.Events()
    t = kit.BASE_TS
    ev.impression("a1", "i1", t, "camp-a", 0.5)
    ev.impression("a2", "i2", t + kit.HOUR, "camp-b", 1.25)  # next hour: another directory
    ev.click("a1", "k1", t + 10)
    ev.click("a2", "k2", t + kit.HOUR + 10)
    return ev


def test_reads_the_contract_and_drops_partition_columns(
    spark: Any, kit: Any, tmp_path: Path
) -> None:
    from streamjoin.ads.spark.archive import SCHEMAS, read_archive

    ev = _small_events(kit)
    outcome = {
        "click_id": "k1",
        "auction_id": "a1",
        "click_ts_ms": kit.BASE_TS + 10,
        "outcome": "unattributed",
        "impression_id": None,
        "campaign": None,
        "cost": 0.0,
        "source_topic": "unattributed-clicks",
        "partition": 0,
    }
    root = kit.write_archive(tmp_path / "archive", ev, [outcome])
    # an interrupted write leaves a hidden temporary; other files are not data either
    hour_dir = next((root / "clicks").glob("date=*/hour=*"))
    (hour_dir / ".clicks+0+7+9.parquet.tmp").write_bytes(b"half a file")
    (hour_dir / "README.txt").write_text("not data")

    archive = read_archive(spark, str(root))
    assert archive.missing == ()  # no late record at all is not a gap
    assert archive.files == {"impressions": 2, "clicks": 2, "outcomes": 1, "late": 0}
    assert archive.late.count() == 0
    for name in ("impressions", "clicks", "outcomes", "late"):
        frame = getattr(archive, name)
        assert [(f.name, f.dataType) for f in frame.schema.fields] == [
            (f.name, f.dataType) for f in SCHEMAS[name].fields
        ]
    imps = sorted(archive.impressions.collect(), key=lambda r: r["impression_id"])
    assert [(r["auction_id"], r["impression_id"], r["cost"], r["ts_ms"]) for r in imps] == [
        ("a1", "i1", 0.5, kit.BASE_TS),
        ("a2", "i2", 1.25, kit.BASE_TS + kit.HOUR),
    ]
    assert archive.clicks.count() == 2
    (row,) = archive.outcomes.collect()
    assert row["impression_id"] is None and row["outcome"] == "unattributed"


def test_missing_datasets_read_as_empty(spark: Any, kit: Any, tmp_path: Path) -> None:
    from streamjoin.ads.spark.archive import SCHEMAS, read_archive

    root = kit.write_archive(tmp_path / "archive", _small_events(kit), None)
    (root / "empty").mkdir()
    archive = read_archive(spark, str(root))
    assert archive.missing == ("outcomes",)
    assert archive.outcomes.count() == 0
    assert archive.outcomes.schema == SCHEMAS["outcomes"]

    bare = tmp_path / "bare"
    (bare / "clicks").mkdir(parents=True)  # there, but no files yet
    archive = read_archive(spark, str(bare))
    assert archive.missing == ("impressions", "outcomes")
    assert archive.clicks.count() == 0


def test_wider_integer_types_are_accepted(spark: Any, kit: Any, tmp_path: Path) -> None:
    """A writer that stores partition as int64 (or cost as an integer) is still readable."""
    from streamjoin.ads.spark.archive import read_dataset

    schema = kit.pa.schema(
        [
            ("auction_id", kit.pa.string()),
            ("impression_id", kit.pa.string()),
            ("campaign", kit.pa.string()),
            ("cost", kit.pa.int64()),
            ("ts_ms", kit.pa.int64()),
            ("partition", kit.pa.int64()),
            ("offset", kit.pa.int64()),
        ]
    )
    row = {
        "auction_id": "a",
        "impression_id": "i",
        "campaign": "c",
        "cost": 2,
        "ts_ms": kit.BASE_TS,
        "partition": 1,
    }
    kit.write_dataset(tmp_path, "impressions", [row], schema)
    (got,) = read_dataset(spark, str(tmp_path), "impressions").collect()
    assert got["cost"] == 2.0 and got["partition"] == 1


@pytest.mark.parametrize("problem", ["no-root", "root-is-file", "corrupt", "wrong-type", "column"])
def test_bad_archives_raise_archive_error(
    spark: Any, kit: Any, tmp_path: Path, problem: str
) -> None:
    from streamjoin.ads.errors import ArchiveError
    from streamjoin.ads.spark.archive import read_archive

    root = tmp_path / "archive"
    if problem == "no-root":
        expected = "does not exist"
    elif problem == "root-is-file":
        root.write_text("")
        expected = "not a directory"
    else:
        kit.write_archive(root, _small_events(kit), None)
        hour_dir = next((root / "clicks").glob("date=*/hour=*"))
        if problem == "corrupt":
            (hour_dir / "clicks+0+100+101.parquet").write_bytes(b"PAR1 this is not parquet")
            expected = "cannot read clicks"
        elif problem == "wrong-type":
            schema = kit.pa.schema([("auction_id", kit.pa.string()), ("ts_ms", kit.pa.string())])
            table = kit.pa.Table.from_pylist([{"auction_id": "a", "ts_ms": "x"}], schema)
            kit.pq.write_table(table, hour_dir / "clicks+0+100+101.parquet")
            expected = "cannot read clicks"  # the files disagree on ts_ms's type
        else:
            schema = kit.pa.schema([("auction_id", kit.pa.string())])
            for path in (root / "clicks").rglob("*.parquet"):
                path.unlink()
            table = kit.pa.Table.from_pylist([{"auction_id": "a"}], schema)
            kit.pq.write_table(table, hour_dir / "clicks+0+0+0.parquet")
            expected = "has no column 'click_id'"
    with pytest.raises(ArchiveError, match=expected) as caught:
        read_archive(spark, str(root))
    assert "\n" not in str(caught.value)
