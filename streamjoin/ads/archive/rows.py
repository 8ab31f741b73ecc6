"""The archive's datasets and how a Kafka record becomes a row. Pure.

``impressions`` and ``clicks`` rows come from the example's input topics and
are validated exactly as the join validates them
(:func:`streamjoin.ads.policy.decode_impression` / :func:`~streamjoin.ads.policy.decode_click`):
a record the join rejects is not archived (the join's dead-letter topic has it).
``outcomes`` rows come from the join's three outcome topics. Every row
carries the source record's Kafka ``partition`` and ``offset`` (and, for
outcomes, its ``source_topic``), so a reader can check that each record is
archived exactly once. ``late`` rows come from the join's dead-letter topic:
the input records the stream reported late (with the reason and the input
record's topic, partition and offset), which the batch side leaves out exactly
as the stream did; malformed records there are not archived (they are not in
the input datasets either).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamjoin.ads.archive.layout import HourBucket, hour_bucket
from streamjoin.ads.attribution import Outcome
from streamjoin.ads.policy import MAX_EVENT_TS, MIN_EVENT_TS, decode_click, decode_impression
from streamjoin.join.policy import REASON_HEADER, SOURCE_HEADER, BadRecord

__all__ = [
    "CLICKS",
    "DATASETS",
    "IMPRESSIONS",
    "LATE",
    "OUTCOMES",
    "BadRecord",
    "Column",
    "Dataset",
    "Row",
    "SourceRecord",
    "click_row",
    "header_map",
    "impression_row",
    "late_row",
    "outcome_row",
]

#: one archived row: column name -> value
Row = Mapping[str, str | int | float | None]


@dataclass(frozen=True)
class SourceRecord:
    """A Kafka record as the archive sees it (raw key and value bytes)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    #: header name -> value (the last one of a name)
    headers: Mapping[str, bytes] = field(default_factory=dict)


def header_map(raw: Any) -> dict[str, bytes]:
    """Record headers (a list of pairs or a mapping) as name -> value."""
    items = raw.items() if isinstance(raw, Mapping) else (raw or ())
    return {str(name): bytes(value or b"") for name, value in items}


@dataclass(frozen=True)
class Column:
    """A column of a dataset: ``type`` is ``string``, ``double``, ``int32`` or ``int64``."""

    name: str
    type: str
    nullable: bool = False


@dataclass(frozen=True)
class Dataset:
    """An archived dataset: its directory name, columns, and record-to-row conversion.

    Attributes:
        name: the dataset's directory below the archive root.
        columns: the Parquet columns, in file order.
        time_column: the event-time column (epoch ms) that picks the hour bucket.
        convert: a :class:`SourceRecord` to a :data:`Row`; raises
            :class:`~streamjoin.join.policy.BadRecord` for records not archived.
    """

    name: str
    columns: tuple[Column, ...]
    time_column: str
    convert: Callable[[SourceRecord], Row]

    def bucket(self, row: Row) -> HourBucket:
        """The hour a row of this dataset is filed under."""
        ts = row[self.time_column]
        if not isinstance(ts, int):
            raise TypeError(f"{self.name}: {self.time_column} is {ts!r}, not an int")
        return hour_bucket(ts)

    def bucketed(self, record: SourceRecord) -> tuple[HourBucket, Row] | None:
        """``(hour bucket, row)`` of *record*, ``None`` when it is not archived."""
        try:
            row = self.convert(record)
        except BadRecord:
            return None
        return (self.bucket(row), row)


def impression_row(record: SourceRecord) -> Row:
    """An ``impressions`` row, or :class:`BadRecord` for what the join rejects."""
    imp = decode_impression(record.key, record.value)
    return {
        "auction_id": imp.key,
        "impression_id": imp.impression_id,
        "campaign": imp.campaign,
        "cost": imp.cost,
        "ts_ms": imp.ts,
        "partition": record.partition,
        "offset": record.offset,
    }


def click_row(record: SourceRecord) -> Row:
    """A ``clicks`` row, or :class:`BadRecord` for what the join rejects."""
    click = decode_click(record.key, record.value)
    return {
        "auction_id": click.key,
        "click_id": click.click_id,
        "ts_ms": click.ts,
        "partition": record.partition,
        "offset": record.offset,
    }


_OUTCOMES = frozenset(o.value for o in Outcome)


def _field(doc: Mapping[str, Any], name: str, kind: Any, *, nullable: bool = False) -> Any:
    if name not in doc:
        raise BadRecord(f"outcome: missing field {name!r}")
    value = doc[name]
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, kind):
        raise BadRecord(f"outcome: field {name!r} has type {type(value).__name__}")
    return value


def outcome_row(record: SourceRecord) -> Row:
    """An ``outcomes`` row from a join outcome record (``encode_outcome``'s JSON).

    Raises :class:`BadRecord` for a record that is not an outcome (the join
    never writes one; such a record is counted and not archived).
    """
    if record.value is None:
        raise BadRecord("outcome: empty value")
    try:
        doc = json.loads(record.value)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRecord(f"outcome: not JSON ({exc.__class__.__name__})") from None
    if not isinstance(doc, dict):
        raise BadRecord(f"outcome: expected a JSON object, got {type(doc).__name__}")
    click_id = _field(doc, "click_id", str)
    outcome = _field(doc, "outcome", str)
    ts = _field(doc, "click_ts_ms", int)
    if outcome not in _OUTCOMES:
        raise BadRecord(f"outcome: unknown outcome {outcome!r}")
    if not MIN_EVENT_TS <= ts < MAX_EVENT_TS:
        raise BadRecord(f"outcome: click_ts_ms {ts} is outside 2000..2100")
    if record.key is not None and record.key != click_id.encode():
        raise BadRecord(f"outcome: record key {record.key!r} is not its click_id {click_id!r}")
    return {
        "click_id": click_id,
        "auction_id": _field(doc, "auction_id", str),
        "click_ts_ms": ts,
        "outcome": outcome,
        "impression_id": _field(doc, "impression_id", str, nullable=True),
        "campaign": _field(doc, "campaign", str, nullable=True),
        "cost": float(_field(doc, "cost", (int, float))),
        "source_topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
    }


#: ``late: <side> record ts_ms <ts> ...`` (streamjoin.join.policy.Late.emission)
_LATE_REASON = re.compile(r"late: (impression|click) record ts_ms (\d+) ")
#: the ad policy's side names -> the archive's input datasets
_LATE_INPUTS = {"impression": "impressions", "click": "clicks"}


def late_row(record: SourceRecord) -> Row:
    """A ``late`` row from a dead-letter record the join reported late.

    Raises :class:`BadRecord` for other dead letters (malformed input records:
    the input datasets leave them out already).
    """
    reason = record.headers.get(REASON_HEADER, b"").decode("utf-8", "replace")
    found = _LATE_REASON.match(reason)
    if found is None:
        raise BadRecord("dead letter: not a late record")
    source = record.headers.get(SOURCE_HEADER, b"").decode("utf-8", "replace")
    topic, _, where = source.partition(":")
    partition, _, offset = where.partition(":")
    if not topic or not partition.isdigit() or not offset.isdigit():
        raise BadRecord(f"dead letter: unreadable source {source!r}")
    return {
        "input": _LATE_INPUTS[found.group(1)],
        "ts_ms": int(found.group(2)),
        "input_topic": topic,
        "input_partition": int(partition),
        "input_offset": int(offset),
        "reason": reason,
        "partition": record.partition,
        "offset": record.offset,
    }


_SOURCE = (Column("partition", "int32"), Column("offset", "int64"))

IMPRESSIONS = Dataset(
    "impressions",
    (
        Column("auction_id", "string"),
        Column("impression_id", "string"),
        Column("campaign", "string"),
        Column("cost", "double"),
        Column("ts_ms", "int64"),
        *_SOURCE,
    ),
    "ts_ms",
    impression_row,
)

CLICKS = Dataset(
    "clicks",
    (
        Column("auction_id", "string"),
        Column("click_id", "string"),
        Column("ts_ms", "int64"),
        *_SOURCE,
    ),
    "ts_ms",
    click_row,
)

OUTCOMES = Dataset(
    "outcomes",
    (
        Column("click_id", "string"),
        Column("auction_id", "string"),
        Column("click_ts_ms", "int64"),
        Column("outcome", "string"),
        Column("impression_id", "string", nullable=True),
        Column("campaign", "string", nullable=True),
        Column("cost", "double"),
        Column("source_topic", "string"),
        *_SOURCE,
    ),
    "click_ts_ms",
    outcome_row,
)

LATE = Dataset(
    "late",
    (
        Column("input", "string"),
        Column("ts_ms", "int64"),
        Column("input_topic", "string"),
        Column("input_partition", "int32"),
        Column("input_offset", "int64"),
        Column("reason", "string"),
        *_SOURCE,
    ),
    "ts_ms",
    late_row,
)

#: dataset name -> dataset
DATASETS: Mapping[str, Dataset] = {d.name: d for d in (IMPRESSIONS, CLICKS, OUTCOMES, LATE)}
