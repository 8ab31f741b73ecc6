"""Archive layout (pure): hour buckets at boundaries, file names, highest archived offset."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.ads.archive.layout import (
    HOUR_MS,
    ArchivedFile,
    HourBucket,
    file_name,
    highest_archived,
    hour_bucket,
    parse_file_name,
    parse_temp_name,
    temp_name,
)

NEW_YEAR_2026 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def test_hour_bucket_at_the_boundaries_of_an_hour_a_day_and_a_year() -> None:
    assert hour_bucket(NEW_YEAR_2026) == HourBucket("2026-01-01", 0)
    assert hour_bucket(NEW_YEAR_2026 - 1) == HourBucket("2025-12-31", 23)
    assert hour_bucket(NEW_YEAR_2026 + HOUR_MS - 1) == HourBucket("2026-01-01", 0)
    assert hour_bucket(NEW_YEAR_2026 + HOUR_MS) == HourBucket("2026-01-01", 1)
    assert hour_bucket(NEW_YEAR_2026 + 24 * HOUR_MS - 1) == HourBucket("2026-01-01", 23)
    assert hour_bucket(NEW_YEAR_2026 + 24 * HOUR_MS) == HourBucket("2026-01-02", 0)
    # a leap day
    feb_29 = int(datetime(2028, 2, 29, 13, 59, 59, 999_000, tzinfo=UTC).timestamp() * 1000)
    assert hour_bucket(feb_29) == HourBucket("2028-02-29", 13)
    assert hour_bucket(feb_29 + 1) == HourBucket("2028-02-29", 14)


@given(st.integers(min_value=946_684_800_000, max_value=4_102_444_799_999))
def test_hour_bucket_agrees_with_datetime_and_contains_its_timestamp(ts: int) -> None:
    bucket = hour_bucket(ts)
    when = datetime.fromtimestamp(ts // 1000, tz=UTC)
    assert (bucket.date, bucket.hour) == (when.date().isoformat(), when.hour)
    assert bucket.start_ms <= ts < bucket.start_ms + HOUR_MS
    assert bucket.path == f"date={when:%Y-%m-%d}/hour={when:%H}"


def test_buckets_order_by_time_and_parse_from_their_directory_names() -> None:
    a, b, c = HourBucket("2025-12-31", 23), HourBucket("2026-01-01", 0), HourBucket("2026-01-01", 9)
    assert sorted([c, a, b]) == [a, b, c]
    assert HourBucket.from_dirs("date=2026-01-01", "hour=09") == c
    assert c.path == "date=2026-01-01/hour=09"
    for date_dir, hour_dir in [
        ("date=2026-01-01", "hour=24"),
        ("date=2026-13-01", "hour=01"),
        ("date=2026-1-01", "hour=01"),
        ("date=2026-01-01", "hour=1"),
        ("dt=2026-01-01", "hour=01"),
    ]:
        assert HourBucket.from_dirs(date_dir, hour_dir) is None


def test_file_names_round_trip_and_other_names_are_not_archive_files() -> None:
    name = file_name("ads-impressions", 3, 120, 4999)
    assert name == "ads-impressions+3+120+4999.parquet"
    assert parse_file_name(name) == ArchivedFile("ads-impressions", 3, 120, 4999)
    assert ArchivedFile("ads-impressions", 3, 120, 4999).name == name
    assert temp_name(name) == ".ads-impressions+3+120+4999.parquet.tmp"
    assert parse_temp_name(temp_name(name)) == ArchivedFile("ads-impressions", 3, 120, 4999)
    assert parse_temp_name(name) is None
    for other in [
        temp_name(name),
        "ads-impressions+3+120+4999.parquet.crc",
        "_SUCCESS",
        "ads-impressions+3+120.parquet",
        "ads-impressions+3+-1+4.parquet",
        "ads-impressions+3+9+4.parquet",  # first > last
        "a b+3+1+4.parquet",
        "+3+1+4.parquet",
    ]:
        assert parse_file_name(other) is None, other


@given(
    st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True).filter(lambda t: not t.startswith(".")),
    st.integers(0, 10_000),
    st.integers(0, 2**62),
    st.integers(0, 2**40),
)
def test_any_topic_and_range_round_trips(topic: str, partition: int, first: int, n: int) -> None:
    name = file_name(topic, partition, first, first + n)
    assert parse_file_name(name) == ArchivedFile(topic, partition, first, first + n)


def test_invalid_files_are_refused() -> None:
    with pytest.raises(ValueError):
        ArchivedFile("t+x", 0, 1, 2)
    with pytest.raises(ValueError):
        ArchivedFile("t", 0, 3, 2)
    with pytest.raises(ValueError):
        ArchivedFile("t", -1, 0, 0)


def test_highest_archived_offset_is_parsed_per_topic_partition() -> None:
    names = [
        "clicks+0+0+99.parquet",
        "clicks+0+100+250.parquet",
        "clicks+0+101+180.parquet",
        "clicks+1+0+900.parquet",
        "impressions+0+0+5000.parquet",
        ".clicks+0+251+9999.parquet.tmp",  # an interrupted write does not count
        "notes.txt",
    ]
    assert highest_archived(names, "clicks", 0) == 250
    assert highest_archived(names, "clicks", 1) == 900
    assert highest_archived(names, "impressions", 0) == 5000
    assert highest_archived(names, "clicks", 2) is None
    assert highest_archived([], "clicks", 0) is None
