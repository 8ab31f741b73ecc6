"""Where archived rows go: hour buckets, directory names, file names. Pure.

An archive root holds one directory per dataset, hive-partitioned by the UTC
date and hour of each row's event time::

    ROOT/<dataset>/date=YYYY-MM-DD/hour=HH/<topic>+<partition>+<first>+<last>.parquet

``first`` and ``last`` are the Kafka offsets of the first and last source
record the file holds. A file holds records of one source topic-partition and
one hour, and every valid record of that hour whose offset is in
``[first, last]``; files of one topic-partition and one hour never overlap.
A file is written as ``.<name>.tmp`` next to its final name and renamed into
place, so readers (Spark skips names starting with ``.``) never see half a file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta

__all__ = [
    "DAY_MS",
    "HOUR_MS",
    "ArchivedFile",
    "HourBucket",
    "file_name",
    "highest_archived",
    "hour_bucket",
    "parse_file_name",
    "parse_temp_name",
    "temp_name",
]

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
SUFFIX = ".parquet"
TEMP_SUFFIX = ".tmp"

_EPOCH = date(1970, 1, 1)
_DATE_DIR = re.compile(r"date=(\d{4}-\d{2}-\d{2})")
_HOUR_DIR = re.compile(r"hour=(\d{2})")
_DIGITS = re.compile(r"\d+")
#: Kafka's legal topic characters; ``+`` (our separator) is not one of them
_TOPIC = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True, order=True)
class HourBucket:
    """One UTC hour: ``date`` as ``YYYY-MM-DD``, ``hour`` 0..23 (orders by time)."""

    date: str
    hour: int

    @property
    def path(self) -> str:
        """The bucket's directory below a dataset: ``date=YYYY-MM-DD/hour=HH``."""
        return f"date={self.date}/hour={self.hour:02d}"

    @property
    def start_ms(self) -> int:
        """The first millisecond of the hour (since the Unix epoch)."""
        days = (date.fromisoformat(self.date) - _EPOCH).days
        return days * DAY_MS + self.hour * HOUR_MS

    @classmethod
    def from_dirs(cls, date_dir: str, hour_dir: str) -> HourBucket | None:
        """The bucket named by two directory names, ``None`` if they name none."""
        d, h = _DATE_DIR.fullmatch(date_dir), _HOUR_DIR.fullmatch(hour_dir)
        if d is None or h is None or int(h.group(1)) > 23:
            return None
        try:
            date.fromisoformat(d.group(1))
        except ValueError:
            return None
        return cls(d.group(1), int(h.group(1)))


def hour_bucket(ts_ms: int) -> HourBucket:
    """The UTC hour of an event time in epoch milliseconds (integer arithmetic, exact)."""
    days, in_day = divmod(ts_ms, DAY_MS)
    return HourBucket((_EPOCH + timedelta(days=days)).isoformat(), in_day // HOUR_MS)


@dataclass(frozen=True)
class ArchivedFile:
    """The identity of an archive file: source topic-partition and offset range."""

    topic: str
    partition: int
    first: int
    last: int

    def __post_init__(self) -> None:
        if not _TOPIC.fullmatch(self.topic):
            raise ValueError(f"not a Kafka topic name: {self.topic!r}")
        if self.partition < 0 or not 0 <= self.first <= self.last:
            raise ValueError(
                f"need partition >= 0 and 0 <= first <= last, got {self.partition}, "
                f"{self.first}, {self.last}"
            )

    @property
    def name(self) -> str:
        """``<topic>+<partition>+<first>+<last>.parquet``."""
        return file_name(self.topic, self.partition, self.first, self.last)

    def covers(self, offset: int) -> bool:
        """Whether ``first <= offset <= last``."""
        return self.first <= offset <= self.last


def file_name(topic: str, partition: int, first: int, last: int) -> str:
    """The archive file name of a topic-partition's records ``first..last``."""
    return f"{topic}+{partition}+{first}+{last}{SUFFIX}"


def temp_name(name: str) -> str:
    """The name a file is written under before it is renamed to *name*."""
    return f".{name}{TEMP_SUFFIX}"


def parse_file_name(name: str) -> ArchivedFile | None:
    """The :class:`ArchivedFile` a file name stands for, ``None`` for any other name."""
    if name.startswith(".") or not name.endswith(SUFFIX):
        return None
    parts = name[: -len(SUFFIX)].rsplit("+", 3)
    if len(parts) != 4 or not all(_DIGITS.fullmatch(p) for p in parts[1:]):
        return None
    try:
        return ArchivedFile(parts[0], int(parts[1]), int(parts[2]), int(parts[3]))
    except ValueError:
        return None


def parse_temp_name(name: str) -> ArchivedFile | None:
    """The file a temporary name (``.<name>.tmp``) was going to become, else ``None``."""
    if not (name.startswith(".") and name.endswith(TEMP_SUFFIX)):
        return None
    return parse_file_name(name[1 : -len(TEMP_SUFFIX)])


def highest_archived(names: Iterable[str], topic: str, partition: int) -> int | None:
    """The highest offset of *topic*/*partition* the named files hold (``None``: none).

    Names that are not archive files (temporaries, other files) are ignored.
    """
    best: int | None = None
    for name in names:
        found = parse_file_name(name)
        if found is not None and found.topic == topic and found.partition == partition:
            best = found.last if best is None else max(best, found.last)
    return best
