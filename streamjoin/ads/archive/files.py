"""Archive files on disk: atomic Parquet writes and listings (pyarrow, filesystem I/O).

Everything here is blocking; the faust sink runs it in a worker thread.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamjoin.ads.archive.layout import HourBucket, parse_file_name, parse_temp_name, temp_name
from streamjoin.ads.archive.ledger import FilePlan
from streamjoin.ads.archive.rows import DATASETS, Dataset

__all__ = [
    "Listing",
    "arrow_schema",
    "read_dataset",
    "remove_files",
    "scan_dataset",
    "scan_hours",
    "write_file",
]

#: a source topic-partition
TopicPartition = tuple[str, int]


def _arrow() -> tuple[Any, Any]:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:  # pragma: no cover - depends on the install
        from streamjoin.ads.errors import ArchiveConfigError

        raise ArchiveConfigError(
            "the archive writes Parquet with pyarrow: pip install 'streamjoin[archive]'"
        ) from exc
    return pyarrow, pyarrow.parquet


def arrow_schema(dataset: Dataset) -> Any:
    """The dataset's :class:`pyarrow.Schema` (non-nullable unless the column says so)."""
    pa, _ = _arrow()
    types = {
        "string": pa.string(),
        "double": pa.float64(),
        "int32": pa.int32(),
        "int64": pa.int64(),
    }
    return pa.schema(
        [pa.field(c.name, types[c.type], nullable=c.nullable) for c in dataset.columns]
    )


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_dirs(path: Path) -> None:
    """Create *path* and its missing parents, each made durable in its parent."""
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir()
        _fsync_dir(directory.parent)


def write_file(root: Path, dataset: Dataset, plan: FilePlan) -> Path:
    """Write *plan*'s rows to their Parquet file under *root*, atomically.

    The rows go to ``.<name>.tmp`` in the final directory, which is fsynced and
    then renamed to ``<name>`` (and the directory fsynced): a crash leaves either
    the whole file or none (maybe a temporary, which readers skip). On an error
    the temporary is removed and the error raised. Returns the final path.
    """
    pa, pq = _arrow()
    directory = Path(root) / dataset.name / plan.bucket.path
    _make_dirs(directory)
    final = directory / plan.file.name
    temp = directory / temp_name(plan.file.name)
    columns = {c.name: [row[c.name] for row in plan.rows] for c in dataset.columns}
    try:
        table = pa.Table.from_pydict(columns, schema=arrow_schema(dataset))
        with open(temp, "wb") as handle:
            pq.write_table(table, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        raise
    _fsync_dir(directory)
    return final


@dataclass
class Listing:
    """What a dataset directory holds, per source topic-partition.

    Attributes:
        highest: topic-partition -> hour bucket -> highest archived offset there.
        temps: topic-partition -> temporary files left by an interrupted write.
        files: archive files seen.
    """

    highest: dict[TopicPartition, dict[HourBucket, int]] = field(default_factory=dict)
    temps: dict[TopicPartition, list[Path]] = field(default_factory=dict)
    files: int = 0

    def add(self, bucket: HourBucket, directory: Path, name: str) -> None:
        """Account for the entry *name* of *bucket*'s *directory*."""
        found = parse_file_name(name)
        if found is not None:
            per_bucket = self.highest.setdefault((found.topic, found.partition), {})
            if found.last > per_bucket.get(bucket, -1):
                per_bucket[bucket] = found.last
            self.files += 1
            return
        temp = parse_temp_name(name)
        if temp is not None:
            self.temps.setdefault((temp.topic, temp.partition), []).append(directory / name)


def _subdirs(path: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as entries:
            return sorted((e for e in entries if e.is_dir()), key=lambda e: e.name)
    except FileNotFoundError:
        return []


def _names(path: Path) -> list[str]:
    try:
        with os.scandir(path) as entries:
            return sorted(e.name for e in entries if e.is_file())
    except FileNotFoundError:
        return []


def scan_dataset(root: Path, dataset: Dataset) -> Listing:
    """List every hour directory of *dataset* under *root* (a missing directory is empty)."""
    listing = Listing()
    for date_dir in _subdirs(Path(root) / dataset.name):
        for hour_dir in _subdirs(Path(date_dir.path)):
            bucket = HourBucket.from_dirs(date_dir.name, hour_dir.name)
            if bucket is None:
                continue
            for name in _names(Path(hour_dir.path)):
                listing.add(bucket, Path(hour_dir.path), name)
    return listing


def scan_hours(
    root: Path, dataset: Dataset, buckets: Iterable[HourBucket], topic: str, partition: int
) -> dict[HourBucket, int]:
    """The highest archived offset of *topic*/*partition* in each of *buckets* that has one."""
    found: dict[HourBucket, int] = {}
    for bucket in buckets:
        listing = Listing()
        directory = Path(root) / dataset.name / bucket.path
        for name in _names(directory):
            listing.add(bucket, directory, name)
        high = listing.highest.get((topic, partition), {}).get(bucket)
        if high is not None:
            found[bucket] = high
    return found


def remove_files(paths: Sequence[Path]) -> None:
    """Remove *paths* (already missing ones are fine)."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def read_dataset(root: Path, name: str) -> Any:
    """Read a dataset back as one :class:`pyarrow.Table` (with ``date`` and ``hour`` columns).

    A convenience for checks and tests; batch jobs read the directories directly.
    """
    pa, pq = _arrow()
    dataset = DATASETS[name]
    tables = []
    for date_dir in _subdirs(Path(root) / name):
        for hour_dir in _subdirs(Path(date_dir.path)):
            bucket = HourBucket.from_dirs(date_dir.name, hour_dir.name)
            if bucket is None:
                continue
            for file in _names(Path(hour_dir.path)):
                if parse_file_name(file) is None:
                    continue
                table = pq.ParquetFile(Path(hour_dir.path) / file).read()
                table = table.select([c.name for c in dataset.columns])
                n = table.num_rows
                table = table.append_column("date", pa.array([bucket.date] * n, pa.string()))
                tables.append(table.append_column("hour", pa.array([bucket.hour] * n, pa.int32())))
    if not tables:
        schema = arrow_schema(dataset).append(pa.field("date", pa.string()))
        return schema.append(pa.field("hour", pa.int32())).empty_table()
    return pa.concat_tables(tables)
