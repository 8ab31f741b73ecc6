"""Reading the Parquet archive of the ad-monetization topics.

The archive contract (written by the archive sink, read here)::

    ARCHIVE/impressions/date=YYYY-MM-DD/hour=HH/<topic>+<partition>+<first>+<last>.parquet
    ARCHIVE/clicks/...    (same layout)
    ARCHIVE/outcomes/...  (date and hour of the click's event time)

Columns are those of :data:`SCHEMAS`. ``partition`` is the Kafka partition of
the input topics (an auction's impressions and clicks share it). Impressions
and clicks appear once each; an outcome may appear more than once (replayed
after a crash). A dataset directory that does not exist (e.g. no outcomes yet)
reads as an empty DataFrame with the contract's schema.

Paths may be local directories or any URI the Hadoop file system of the
session understands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from streamjoin.ads.errors import ArchiveError
from streamjoin.ads.spark.session import describe

__all__ = [
    "CLICKS",
    "DATASETS",
    "IMPRESSIONS",
    "LATE",
    "OUTCOMES",
    "SCHEMAS",
    "Archive",
    "read_archive",
    "read_dataset",
]

IMPRESSIONS = "impressions"
CLICKS = "clicks"
OUTCOMES = "outcomes"
LATE = "late"
DATASETS = (IMPRESSIONS, CLICKS, OUTCOMES, LATE)


def _schema(*fields: tuple[str, DataType, bool]) -> StructType:
    return StructType([StructField(name, kind, nullable) for name, kind, nullable in fields])


#: the contract's columns of each dataset (partition columns ``date``/``hour`` are dropped)
SCHEMAS: dict[str, StructType] = {
    IMPRESSIONS: _schema(
        ("auction_id", StringType(), False),
        ("impression_id", StringType(), False),
        ("campaign", StringType(), False),
        ("cost", DoubleType(), False),
        ("ts_ms", LongType(), False),
        ("partition", IntegerType(), False),
        ("offset", LongType(), False),
    ),
    CLICKS: _schema(
        ("auction_id", StringType(), False),
        ("click_id", StringType(), False),
        ("ts_ms", LongType(), False),
        ("partition", IntegerType(), False),
        ("offset", LongType(), False),
    ),
    OUTCOMES: _schema(
        ("click_id", StringType(), False),
        ("auction_id", StringType(), False),
        ("click_ts_ms", LongType(), False),
        ("outcome", StringType(), False),
        ("impression_id", StringType(), True),
        ("campaign", StringType(), True),
        ("cost", DoubleType(), False),
        ("source_topic", StringType(), False),
        ("partition", IntegerType(), False),
        ("offset", LongType(), False),
    ),
    LATE: _schema(
        ("input", StringType(), False),
        ("ts_ms", LongType(), False),
        ("input_topic", StringType(), False),
        ("input_partition", IntegerType(), False),
        ("input_offset", LongType(), False),
        ("reason", StringType(), False),
        ("partition", IntegerType(), False),
        ("offset", LongType(), False),
    ),
}

_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)
_NUMERIC = (*_INTEGRAL, FloatType, DoubleType, DecimalType)


@dataclass(frozen=True)
class Archive:
    """The datasets of an archive, with the contract's columns and types.

    ``late`` holds the input records the stream reported late (the batch side
    leaves them out as the stream did); an archive written before it existed
    reads it as empty.
    """

    root: str
    impressions: DataFrame
    clicks: DataFrame
    outcomes: DataFrame
    late: DataFrame
    #: parquet files found per dataset (0 for a missing dataset directory)
    files: dict[str, int]
    #: datasets whose directory does not exist (read as empty)
    missing: tuple[str, ...]


def read_archive(spark: SparkSession, root: str) -> Archive:
    """Read the archive under *root*.

    Raises:
        ArchiveError: *root* is not a directory, or a dataset cannot be read or
            lacks a contract column (or has one of an incompatible type).
    """
    fs, path = _hadoop_path(spark, root)
    if not fs.exists(path):
        raise ArchiveError(f"archive directory {root} does not exist")
    if not fs.getFileStatus(path).isDirectory():
        raise ArchiveError(f"archive {root} is not a directory")
    frames: dict[str, DataFrame] = {}
    files: dict[str, int] = {}
    missing: list[str] = []
    for name in DATASETS:
        frame, count = _read(spark, root, name)
        frames[name] = frame
        files[name] = count
        if count < 0:
            if name != LATE:  # no late record at all: the usual case, not a gap
                missing.append(name)
            files[name] = 0
    return Archive(
        root,
        frames[IMPRESSIONS],
        frames[CLICKS],
        frames[OUTCOMES],
        frames[LATE],
        files,
        tuple(missing),
    )


def read_dataset(spark: SparkSession, root: str, name: str) -> DataFrame:
    """One dataset (``impressions``, ``clicks``, ``outcomes`` or ``late``) of the archive."""
    if name not in SCHEMAS:
        raise ValueError(f"unknown dataset {name!r}; expected one of {', '.join(DATASETS)}")
    return _read(spark, root, name)[0]


def _read(spark: SparkSession, root: str, name: str) -> tuple[DataFrame, int]:
    """The dataset and its Parquet file count (-1 when its directory is missing)."""
    schema = SCHEMAS[name]
    location = root.rstrip("/") + "/" + name
    fs, path = _hadoop_path(spark, location)
    if not fs.exists(path):
        return spark.createDataFrame([], schema), -1
    if not fs.getFileStatus(path).isDirectory():
        raise ArchiveError(f"{location} is not a directory")
    count = _count_parquet_files(fs, path)
    if count == 0:
        return spark.createDataFrame([], schema), 0
    try:
        # merging the footers of every file checks that each one is readable
        # Parquet and that they agree on their columns' types
        reader = (
            spark.read.option("mergeSchema", "true")
            .option("basePath", location)
            .option("pathGlobFilter", "*.parquet")
        )
        frame = reader.parquet(location)
    except Exception as exc:  # AnalysisException, Py4JJavaError, ...
        raise ArchiveError(f"cannot read {name} under {location}: {describe(exc)}") from None
    present = {field.name: field.dataType for field in frame.schema.fields}
    columns = []
    for field in schema.fields:
        found = present.get(field.name)
        if found is None:
            raise ArchiveError(
                f"{name} under {location} has no column {field.name!r} "
                f"(columns: {', '.join(sorted(present))})"
            )
        if not _compatible(found, field.dataType):
            raise ArchiveError(
                f"{name} under {location}: column {field.name!r} is "
                f"{found.simpleString()}, expected {field.dataType.simpleString()}"
            )
        columns.append(F.col(field.name).cast(field.dataType).alias(field.name))
    return frame.select(*columns), count


def _compatible(found: DataType, wanted: DataType) -> bool:
    if isinstance(wanted, StringType):
        return isinstance(found, StringType)
    if isinstance(wanted, IntegerType | LongType):
        return isinstance(found, _INTEGRAL)
    if isinstance(wanted, DoubleType):
        return isinstance(found, _NUMERIC)
    return found == wanted


def _hadoop_path(spark: SparkSession, location: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(location)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def _count_parquet_files(fs: Any, path: Any) -> int:
    """Data files Spark will read: ``*.parquet`` not hidden by a ``_`` or ``.`` prefix."""
    count = 0
    found = fs.listFiles(path, True)
    while found.hasNext():
        name = found.next().getPath().getName()
        if name.endswith(".parquet") and not name.startswith(("_", ".")):
            count += 1
    return count
