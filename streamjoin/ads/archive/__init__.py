"""The archive: Kafka topics to hour-partitioned Parquet files, exactly once per record.

Layout (see :mod:`streamjoin.ads.archive.layout`)::

    ROOT/impressions/date=YYYY-MM-DD/hour=HH/<topic>+<partition>+<first>+<last>.parquet
    ROOT/clicks/...      ROOT/outcomes/...      ROOT/late/...

The pure part (no faust, no pyarrow, no I/O): :mod:`~streamjoin.ads.archive.layout`
(hour buckets, file names), :mod:`~streamjoin.ads.archive.rows` (datasets, record to
row) and :mod:`~streamjoin.ads.archive.ledger` (per-partition skip/buffer/flush
decisions). The I/O part: :mod:`~streamjoin.ads.archive.files` (atomic Parquet
writes and listings, pyarrow), :mod:`~streamjoin.ads.archive.sink` (the faust
agent) and :mod:`~streamjoin.ads.archive.declare` (:func:`archive_topics`).
:mod:`streamjoin.ads.archive.app` is an app that
only archives (``streamjoin worker -A streamjoin.ads.archive.app:app``).

The I/O names are resolved lazily, so importing the pure part needs neither
faust nor pyarrow (``pip install 'streamjoin[archive]'`` brings pyarrow).
"""

from __future__ import annotations

from streamjoin._lazy import lazy_attributes
from streamjoin.ads.archive.layout import (
    ArchivedFile,
    HourBucket,
    file_name,
    highest_archived,
    hour_bucket,
    parse_file_name,
)
from streamjoin.ads.archive.ledger import FilePlan, FlushPlan, Offer, PartitionLedger
from streamjoin.ads.archive.rows import (
    CLICKS,
    DATASETS,
    IMPRESSIONS,
    OUTCOMES,
    Dataset,
    SourceRecord,
)
from streamjoin.ads.errors import ArchiveConfigError, ArchiveError

# public name -> "module:attribute", imported on first access
_LAZY: dict[str, str] = {
    "ArchiveSink": "streamjoin.ads.archive.sink:ArchiveSink",
    "ArchiveStats": "streamjoin.ads.archive.stats:ArchiveStats",
    "archive_topics": "streamjoin.ads.archive.declare:archive_topics",
    "read_dataset": "streamjoin.ads.archive.files:read_dataset",
    "write_file": "streamjoin.ads.archive.files:write_file",
}

__all__ = [
    "CLICKS",
    "DATASETS",
    "IMPRESSIONS",
    "LATE",
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


__getattr__ = lazy_attributes(__name__, _LAZY)
