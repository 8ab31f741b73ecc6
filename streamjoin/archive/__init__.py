"""The archive: Kafka topics to hour-partitioned Parquet files, exactly once per record.

Layout (see :mod:`streamjoin.archive.layout`)::

    ROOT/impressions/date=YYYY-MM-DD/hour=HH/<topic>+<partition>+<first>+<last>.parquet
    ROOT/clicks/...      ROOT/outcomes/...

The pure part (no faust, no pyarrow, no I/O): :mod:`~streamjoin.archive.layout`
(hour buckets, file names), :mod:`~streamjoin.archive.rows` (datasets, record to
row) and :mod:`~streamjoin.archive.ledger` (per-partition skip/buffer/flush
decisions). The I/O part: :mod:`~streamjoin.archive.files` (atomic Parquet
writes and listings, pyarrow) and :mod:`~streamjoin.archive.sink` (the faust
agent, :func:`archive_topics`). :mod:`streamjoin.archive.app` is an app that
only archives (``streamjoin worker -A streamjoin.archive.app:app``).

The I/O names are resolved lazily, so importing the pure part needs neither
faust nor pyarrow (``pip install 'streamjoin[archive]'`` brings pyarrow).
"""

from __future__ import annotations

import importlib
from typing import Any

from streamjoin.archive.errors import ArchiveConfigError, ArchiveError
from streamjoin.archive.layout import (
    ArchivedFile,
    HourBucket,
    file_name,
    highest_archived,
    hour_bucket,
    parse_file_name,
)
from streamjoin.archive.ledger import FilePlan, FlushPlan, Offer, PartitionLedger
from streamjoin.archive.rows import CLICKS, DATASETS, IMPRESSIONS, OUTCOMES, Dataset, SourceRecord

# public name -> "module:attribute", imported on first access
_LAZY: dict[str, str] = {
    "ArchiveSink": "streamjoin.archive.sink:ArchiveSink",
    "ArchiveStats": "streamjoin.archive.sink:ArchiveStats",
    "archive_topics": "streamjoin.archive.sink:archive_topics",
    "read_dataset": "streamjoin.archive.files:read_dataset",
    "write_file": "streamjoin.archive.files:write_file",
}

__all__ = [
    "CLICKS",
    "DATASETS",
    "IMPRESSIONS",
    "OUTCOMES",
    "ArchiveConfigError",
    "ArchiveError",
    "ArchivedFile",
    "Dataset",
    "FilePlan",
    "FlushPlan",
    "HourBucket",
    "Offer",
    "PartitionLedger",
    "SourceRecord",
    "file_name",
    "highest_archived",
    "hour_bucket",
    "parse_file_name",
    *sorted(_LAZY),
]


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'streamjoin.archive' has no attribute {name!r}")
    module_name, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value
